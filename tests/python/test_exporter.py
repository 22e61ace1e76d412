"""The exporter: Hugging Face checkpoints (single and sharded safetensors) and random weights to packages,
and the errors it gives for what it cannot export."""
import contextlib
import io
import json
import os
import tempfile
import unittest

import torch

import paged_scenario  # noqa: F401  (puts tools/ on sys.path)
import export_model
from llmc_export.config import ModelConfig
from llmc_export.model import CausalLM, hf_state_dict, random_weights
from llmc_export.safetensors import read_safetensors, write_safetensors
from paged_scenario import run_scenario

HF_CONFIG = {
    "model_type": "qwen2", "vocab_size": 384, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "tie_word_embeddings": True, "max_position_embeddings": 1024, "bos_token_id": 1, "eos_token_id": [2, 3],
}


def make_checkpoint(folder, hf_config=HF_CONFIG, shards=1, drop=None, seed=5):
    """A Hugging Face style checkpoint folder with random weights; returns the source model."""
    config = ModelConfig.from_hf_config_dict(hf_config)
    model = CausalLM(config)
    random_weights(model, seed)
    tensors = hf_state_dict(model, config)
    if config.tie_word_embeddings:
        tensors.pop("lm_head.weight", None)
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
        self.assertEqual(manifest["format_version"], 4)
        self.assertEqual(manifest["name"], "tiny-qwen")
        self.assertEqual(manifest["chat_template"], "chatml")
        self.assertEqual(manifest["eos_token_ids"], [2, 3])
        self.assertEqual(manifest["num_kv_heads"], 2)
        loaded = torch.jit.load(os.path.join(out, "model.pt"))
        graph = str(loaded.inlined_graph)  # each layer is four fused operators and the attention (version 3 on)
        self.assertEqual(graph.count("aten::linear("), 0)
        self.assertEqual(graph.count("llmc::rms_norm_qkv_rope("), config.num_layers)
        self.assertEqual(graph.count("llmc::linear_residual("), config.num_layers * 2)
        self.assertEqual(graph.count("llmc::rms_norm_gate_up_silu("), config.num_layers)
        self.assertEqual(graph.count("llmc::rms_norm_lm_head("), 1)
        expected = scenario_logits(model, model, config, torch.float32)
        actual = scenario_logits(loaded, model, config, torch.float32)
        self.assertTrue(torch.allclose(actual, expected, atol=1e-5), (actual - expected).abs().max())
        self.check_forward_top_k(loaded, config)

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
        self.assertTrue(torch.equal(full, logits[1:]))
        self.assertEqual(tuple(ids.shape), (2, 3))
        self.assertTrue(torch.equal(ids[:, 0], logits.argmax(-1)))
        self.assertTrue(torch.equal(values, logits.gather(1, ids)))
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
        expected = scenario_logits(model, model, config, torch.float32)
        actual = scenario_logits(loaded, model, config, torch.bfloat16)
        # bfloat16 keeps 8 mantissa bits: logits of this model (|logit| < 1) agree to about 1e-2.
        self.assertLess((actual - expected).abs().max().item(), 3e-2)

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

    def test_safetensors_round_trip_keeps_dtypes(self):
        tensors = {"a": torch.randn(3, 4), "b": torch.randn(5).to(torch.bfloat16), "c": torch.arange(6).reshape(2, 3)}
        write_safetensors(self.path("t.safetensors"), tensors)
        back = read_safetensors(self.path("t.safetensors"))
        for name, tensor in tensors.items():
            self.assertEqual(back[name].dtype, tensor.dtype)
            self.assertTrue(torch.equal(back[name], tensor), name)


if __name__ == "__main__":
    unittest.main()
