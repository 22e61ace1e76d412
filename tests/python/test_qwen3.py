"""Qwen3 (dense): config reading and refusals, and packages exported from checkpoints in Hugging Face's layout
(untied and tied heads, head_dim apart from hidden_size / heads, QK-norm) that match an independent forward of
the same folder (qwen3_reference.py) over the paged cache, also with int8 weights."""
import contextlib
import io
import json
import os
import tempfile
import types
import unittest

import torch

import paged_scenario  # noqa: F401  (puts tools/ on sys.path)
import export_model
from int8_checkpoint import make_int8_checkpoint
from llmc_export.config import ExportError, ModelConfig
from llmc_export.ops import dequantize
from paged_scenario import run_scenario
from qwen3_reference import QWEN3_CONFIG, Qwen3Reference, load_safetensors, save_safetensors, write_checkpoint


def export(*argv):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = export_model.main(list(argv))
    return code, stderr.getvalue()


def scenario_config(manifest):
    """What the paged scenario needs of a package's shape, from its manifest."""
    return types.SimpleNamespace(**{key: manifest[key] for key in ("vocab_size", "num_layers", "num_kv_heads",
                                                                    "head_dim")})


def compare_scenario(test, loaded, manifest, reference, dtype, tolerance, steps=8, relative=False):
    """Runs the package over the paged cache (prefill together, decode, a late sequence in chunks) and compares
    every logits row with the reference's for the same tokens; returns the largest difference (`relative`: as
    a fraction of the row's largest logit magnitude)."""
    differences = []

    def check(name, tokens, logits):
        expected = reference.logits(tokens)[-1]
        difference = float((logits.float() - expected).abs().max())
        differences.append(difference / float(expected.abs().max()) if relative else difference)
        if dtype == torch.float32:  # greedy choices identical
            test.assertEqual(int(torch.argmax(logits)), int(torch.argmax(expected)), (name, len(tokens)))

    with torch.no_grad():
        run_scenario(loaded, None, scenario_config(manifest), dtype, steps=steps, on_logits=check)
    test.assertLess(max(differences), tolerance)
    return max(differences)


class Qwen3ConfigTest(unittest.TestCase):
    def test_fields(self):
        config = ModelConfig.from_hf_config_dict(QWEN3_CONFIG)
        self.assertEqual((config.architecture, config.head_dim, config.hidden_size, config.num_heads),
                         ("qwen3", 32, 64, 4))
        self.assertTrue(config.qk_norm)
        self.assertFalse(config.qkv_bias)
        self.assertFalse(config.tie_word_embeddings)
        self.assertEqual((config.rope_theta, config.rms_norm_eps), (1e6, 1e-6))
        # sliding_window is ignored while use_sliding_window is false, as Hugging Face ignores it.
        windowed = ModelConfig.from_hf_config_dict(dict(QWEN3_CONFIG, sliding_window=256))
        self.assertEqual((windowed.sliding_window, windowed.max_context_length), (0, 1024))
        full = ModelConfig.from_hf_config_dict(dict(QWEN3_CONFIG, layer_types=["full_attention"] * 2))
        self.assertTrue(full.qk_norm)
        # Llama, Mistral and Qwen2 have no QK-norm.
        self.assertFalse(ModelConfig.from_hf_config_dict(dict(QWEN3_CONFIG, model_type="qwen2")).qk_norm)

    def test_refusals_name_what(self):
        for change, words in (({"use_sliding_window": True, "sliding_window": 256}, "use_sliding_window"),
                              ({"layer_types": ["sliding_attention", "full_attention"]}, "layer_types"),
                              ({"attention_bias": True}, "attention_bias"),
                              ({"model_type": "gemma2"}, "unsupported architecture 'gemma2'"),
                              ({"model_type": "qwen2_moe"}, "unsupported architecture 'qwen2_moe'")):
            with self.assertRaises(ExportError) as caught:
                ModelConfig.from_hf_config_dict(dict(QWEN3_CONFIG, **change))
            self.assertIn(words, str(caught.exception))
        self.assertIn("qwen3", str(caught.exception))  # the supported list names it


class Qwen3ExportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def checkpoint(self, **changes):
        return write_checkpoint(os.path.join(self.tmp.name, "checkpoint"), dict(QWEN3_CONFIG, **changes))

    def export(self, checkpoint, *flags):
        out = os.path.join(self.tmp.name, "package")
        code, error = export("--checkpoint", checkpoint, "--out", out, "--name", "tiny-qwen3", *flags)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        return torch.jit.load(os.path.join(out, "model.pt")), manifest

    def check_float32(self, tied):
        checkpoint = self.checkpoint(tie_word_embeddings=tied)
        if tied:
            self.assertNotIn("lm_head.weight", load_safetensors(os.path.join(checkpoint, "model.safetensors")))
        loaded, manifest = self.export(checkpoint, "--dtype", "float32")
        self.assertEqual((manifest["architecture"], manifest["format_version"], manifest["head_dim"],
                          manifest["tie_word_embeddings"], manifest["chat_template"], manifest["eos_token_ids"]),
                         ("qwen3", 7, 32, tied, "chatml", [2]))
        parameters = dict(loaded.named_parameters())
        self.assertEqual(tuple(parameters["model.layers.1.self_attn.q_norm.weight"].shape), (32,))
        self.assertEqual(tuple(parameters["model.layers.1.self_attn.qkv_proj.weight"].shape), ((4 + 2 * 2) * 32, 64))
        self.assertNotIn("model.layers.0.self_attn.qkv_proj.bias", parameters)
        # Each layer's fused operator gets the layer's q/k norm weights.
        self.assertEqual(str(loaded.inlined_graph).count("llmc::rms_norm_qkv_rope("), 2)
        self.assertIn("q_norm", getattr(loaded.model.layers, "0").code)
        difference = compare_scenario(self, loaded, manifest, Qwen3Reference(checkpoint), torch.float32, 1e-4)
        print(f"qwen3 float32 {'tied' if tied else 'untied'}: largest logit difference {difference:.2e}")

    def test_float32_untied_matches_reference(self):
        self.check_float32(tied=False)

    def test_float32_tied_matches_reference(self):
        self.check_float32(tied=True)

    def test_bfloat16_within_tolerance(self):
        checkpoint = self.checkpoint()
        loaded, manifest = self.export(checkpoint, "--dtype", "bfloat16")
        self.assertEqual(getattr(loaded.model.layers, "0").self_attn.q_norm.weight.dtype, torch.bfloat16)
        reference = Qwen3Reference(checkpoint, torch.bfloat16)
        # Logits reach about 20 here; bfloat16 keeps 8 bits of mantissa.
        difference = compare_scenario(self, loaded, manifest, reference, torch.bfloat16, 3e-2, steps=4, relative=True)
        print(f"qwen3 bfloat16: largest logit difference {difference:.2e} of the largest logit")

    def test_int8_package_matches_its_dequantized_weights(self):
        checkpoint = self.checkpoint()
        loaded, manifest = self.export(checkpoint, "--dtype", "float32", "--quantize", "int8", "--group-size", "32")
        self.assertEqual((manifest["quantization"], manifest["format_version"]), ("int8", 7))
        state = loaded.state_dict()
        self.assertEqual(state["model.layers.0.self_attn.qkv_proj.weight"].dtype, torch.int8)
        self.assertEqual(state["model.layers.0.self_attn.k_norm.weight"].dtype, torch.float32)
        # The checkpoint's tensors with every matrix the package holds as int8 replaced by what it stands for.
        tensors = load_safetensors(os.path.join(checkpoint, "model.safetensors"))
        q, kv, i = 4 * 32, 2 * 32, QWEN3_CONFIG["intermediate_size"]
        for layer in range(2):
            p = f"model.layers.{layer}."
            matrix = lambda name: dequantize(state[p + name + ".weight"], state[p + name + ".weight_scale"],  # noqa
                                             torch.float32)
            for part, piece in zip(("q_proj", "k_proj", "v_proj"), matrix("self_attn.qkv_proj").split([q, kv, kv])):
                tensors[p + "self_attn." + part + ".weight"] = piece
            for part, piece in zip(("gate_proj", "up_proj"), matrix("mlp.gate_up_proj").split([i, i])):
                tensors[p + "mlp." + part + ".weight"] = piece
            tensors[p + "self_attn.o_proj.weight"] = matrix("self_attn.o_proj")
            tensors[p + "mlp.down_proj.weight"] = matrix("mlp.down_proj")
        tensors["lm_head.weight"] = dequantize(state["lm_head.weight"], state["lm_head.weight_scale"], torch.float32)
        reference = Qwen3Reference(checkpoint, tensors=tensors)
        compare_scenario(self, loaded, manifest, reference, torch.float32, 1e-4, steps=4)

    def test_compressed_tensors_int8_checkpoint(self):
        folder = os.path.join(self.tmp.name, "w8a8")
        os.makedirs(folder)
        overrides = {key: QWEN3_CONFIG[key] for key in ("model_type", "head_dim", "attention_bias", "rope_theta")}
        quantized, _ = make_int8_checkpoint(folder, "group", 32, hf_overrides=overrides)
        loaded, manifest = self.export(folder, "--dtype", "float32")
        self.assertEqual((manifest["quantization"], manifest["quantization_group_size"], manifest["format_version"]),
                         ("int8", 32, 7))
        state = loaded.state_dict()
        p = "model.layers.1."
        self.assertTrue(torch.equal(state[p + "self_attn.qkv_proj.weight"], torch.cat(
            [quantized[p + f"self_attn.{part}.weight"][0] for part in ("q_proj", "k_proj", "v_proj")])))
        self.assertEqual(state[p + "self_attn.q_norm.weight"].dtype, torch.float32)
        # The checkpoint's own forward: its int8 matrices times their scales, and the tied head (left in float
        # by the checkpoint) as the exporter quantized it.
        tensors = load_safetensors(os.path.join(folder, "model.safetensors"))
        for name, (q, scale) in quantized.items():
            tensors[name] = q.float() * scale.repeat_interleave(q.shape[1] // scale.shape[1], dim=1)
        self.assertTrue(manifest["tie_word_embeddings"])
        tensors["model.embed_tokens.weight"] = dequantize(state["lm_head.weight"], state["lm_head.weight_scale"],
                                                          torch.float32)
        compare_scenario(self, loaded, manifest, Qwen3Reference(folder, tensors=tensors), torch.float32, 1e-4,
                         steps=4)

    def test_missing_norm_and_qwen2_packages_without_it(self):
        checkpoint = self.checkpoint()
        tensors = load_safetensors(os.path.join(checkpoint, "model.safetensors"))
        del tensors["model.layers.1.self_attn.k_norm.weight"]
        save_safetensors(os.path.join(checkpoint, "model.safetensors"), tensors)
        code, error = export("--checkpoint", checkpoint, "--out", os.path.join(self.tmp.name, "bad"))
        self.assertEqual(code, 2)
        self.assertIn("model.layers.1.self_attn.k_norm.weight", error)
        # A Qwen2 package's layers call the operator as before QK-norm, and stay format version 6.
        out = os.path.join(self.tmp.name, "qwen2")
        code, error = export("--random", "--preset", "tiny", "--dtype", "float32", "--tokenizer",
                             os.path.join(checkpoint, "tokenizer.json"), "--out", out)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            self.assertEqual(json.load(f)["format_version"], 6)
        code_text = getattr(torch.jit.load(os.path.join(out, "model.pt")).model.layers, "0").code
        self.assertNotIn("q_norm", code_text)
        self.assertIn("slot_mapping, num_heads, num_kv_heads)", code_text)


if __name__ == "__main__":
    unittest.main()
