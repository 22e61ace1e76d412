"""Phi-3 / Phi-4-mini (model_type phi3): config reading and refusals, the partial-rotary permutation, and packages
exported from checkpoints in Hugging Face's layout (fused qkv_proj and gate_up_proj, partial rotary 0.75,
LongRoPE with its attention factor) that match an independent forward of the same folder (phi3_reference.py)
over the paged cache."""
import json
import os
import tempfile
import unittest

import torch

import paged_scenario  # noqa: F401  (puts tools/ on sys.path)
from llmc_export.config import ExportError, ModelConfig
from llmc_export.phi3 import rotary_permutation, rotated_dims
from phi3_reference import PHI3_CONFIG, Phi3Reference, load_safetensors, save_safetensors, write_checkpoint
from test_qwen3 import compare_scenario, export


class Phi3ConfigTest(unittest.TestCase):
    def test_fields(self):
        config = ModelConfig.from_hf_config_dict(PHI3_CONFIG)
        self.assertEqual((config.architecture, config.head_dim, config.rotary_dim, config.qkv_bias, config.qk_norm),
                         ("phi3", 32, 24, False, False))
        # sqrt(1 + ln(1024 / 128) / ln(128)); the context stops at original_max_position_embeddings.
        self.assertAlmostEqual(config.rope_attention_factor, (1 + 3 / 7) ** 0.5)
        self.assertEqual((config.max_context_length, config.sliding_window), (128, 2048))
        inv_freq = config.inverse_frequencies()
        self.assertEqual(len(inv_freq), 16)
        self.assertEqual(inv_freq[12:], [0.0] * 4)  # the pass-through pairs
        self.assertAlmostEqual(inv_freq[1], 1 / (1.25 * 10000 ** (2 / 24)))  # short factors over rotary_dim
        given = ModelConfig.from_hf_config_dict(dict(PHI3_CONFIG, rope_scaling=dict(
            PHI3_CONFIG["rope_scaling"], type="su", attention_factor=1.5)))
        self.assertEqual(given.rope_attention_factor, 1.5)
        # Newer Hugging Face configs keep the rope settings in rope_parameters.
        newer = {key: value for key, value in PHI3_CONFIG.items() if key not in (
            "rope_scaling", "rope_theta", "partial_rotary_factor", "original_max_position_embeddings")}
        newer["rope_parameters"] = dict(PHI3_CONFIG["rope_scaling"], rope_theta=10000.0, partial_rotary_factor=0.75,
                                        original_max_position_embeddings=128)
        read = ModelConfig.from_hf_config_dict(newer)
        self.assertEqual((read.rotary_dim, read.max_context_length, read.inverse_frequencies()),
                         (24, 128, inv_freq))
        self.assertAlmostEqual(read.rope_attention_factor, config.rope_attention_factor)
        # Phi-3-mini-4k: no rope scaling, full rotary, its 2047-token window in every layer over the whole context
        # (as Mistral's).
        plain = ModelConfig.from_hf_config_dict(dict(PHI3_CONFIG, rope_scaling=None, partial_rotary_factor=1.0,
                                                     max_position_embeddings=4096, sliding_window=2047))
        self.assertEqual((plain.rotary_dim, plain.rope_attention_factor, plain.max_context_length), (32, 1.0, 4096))
        self.assertEqual(plain.layer_windows, (2047,) * plain.num_layers)

    def test_refusals_name_what(self):
        scaling = PHI3_CONFIG["rope_scaling"]
        for change, words in (({"rope_scaling": dict(scaling, type="yarn")}, "rope_scaling type 'yarn'"),
                              ({"rope_scaling": dict(scaling, short_factor=[1.0] * 16)}, "short_factor"),
                              ({"partial_rotary_factor": 0.3}, "partial_rotary_factor"),
                              ({"attention_bias": True}, "attention_bias"),
                              ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
                              ({"model_type": "phi3small"}, "unsupported architecture 'phi3small'")):
            with self.assertRaises(ExportError) as caught:
                ModelConfig.from_hf_config_dict(dict(PHI3_CONFIG, **change))
            self.assertIn(words, str(caught.exception))
        self.assertIn("phi3", str(caught.exception))  # the supported list names it

    def test_permutation_pairs_rotary_dims_like_hugging_face(self):
        order = rotary_permutation(32, 24)
        self.assertEqual(sorted(order), list(range(32)))
        # The kernel's pair (j, j + 16) holds Hugging Face's pair (j, j + 12) for j < 12; the rest pass through.
        self.assertEqual([(order[j], order[j + 16]) for j in range(12)], [(j, j + 12) for j in range(12)])
        self.assertEqual(sorted(order[12:16] + order[28:]), list(range(24, 32)))
        self.assertEqual(rotated_dims(32, 24), list(range(12)) + list(range(16, 28)))
        self.assertEqual(rotary_permutation(8, 8), list(range(8)))


class Phi3ExportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def checkpoint(self, **changes):
        return write_checkpoint(os.path.join(self.tmp.name, "checkpoint"), dict(PHI3_CONFIG, **changes))

    def export(self, checkpoint, *flags):
        out = os.path.join(self.tmp.name, "package")
        code, error = export("--checkpoint", checkpoint, "--out", out, "--name", "tiny-phi3", *flags)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        return torch.jit.load(os.path.join(out, "model.pt")), manifest

    def check_float32(self, tied):
        checkpoint = self.checkpoint(tie_word_embeddings=tied)
        loaded, manifest = self.export(checkpoint, "--dtype", "float32")
        self.assertEqual((manifest["architecture"], manifest["format_version"], manifest["head_dim"],
                          manifest["max_context_length"], manifest["tie_word_embeddings"], manifest["eos_token_ids"],
                          manifest["chat_template"]), ("phi3", 6, 32, 128, tied, [2, 7], "raw"))
        self.assertIn("original_max_position_embeddings", manifest["context_note"])
        parameters = dict(loaded.named_parameters())
        self.assertEqual(tuple(parameters["model.layers.1.self_attn.qkv_proj.weight"].shape), ((4 + 2 * 2) * 32, 128))
        # v rows are the checkpoint's, unpermuted and unscaled.
        name = "model.layers.1.self_attn.qkv_proj.weight"
        fused = load_safetensors(os.path.join(checkpoint, "model.safetensors"))[name]
        self.assertTrue(torch.equal(parameters[name][192:], fused[192:]))
        self.assertFalse(torch.equal(parameters[name][:192], fused[:192]))  # q and k rows permuted and scaled
        difference = compare_scenario(self, loaded, manifest, Phi3Reference(checkpoint), torch.float32, 1e-4)
        print(f"phi3 float32 {'tied' if tied else 'untied'}: largest logit difference {difference:.2e}")

    def test_float32_untied_matches_reference(self):
        self.check_float32(tied=False)

    def test_float32_tied_matches_reference(self):
        self.check_float32(tied=True)

    def test_bfloat16_within_tolerance(self):
        checkpoint = self.checkpoint()
        loaded, manifest = self.export(checkpoint, "--dtype", "bfloat16")
        reference = Phi3Reference(checkpoint, torch.bfloat16)
        difference = compare_scenario(self, loaded, manifest, reference, torch.bfloat16, 3e-2, steps=4, relative=True)
        print(f"phi3 bfloat16: largest logit difference {difference:.2e} of the largest logit")

    def test_reference_depends_on_what_the_export_reproduces(self):
        """The scenario would not notice a wrong rotary layout or attention factor if they changed nothing."""
        checkpoint = self.checkpoint()
        tokens = list(range(3, 40))
        logits = Phi3Reference(checkpoint).logits(tokens)
        full = Phi3Reference(checkpoint)
        full.rotary_dim = 32
        full.scaling = dict(full.scaling, short_factor=full.scaling["short_factor"] + [1.0] * 4)
        unscaled = Phi3Reference(checkpoint)
        unscaled.attention_factor = 1.0
        for other in (full, unscaled):
            self.assertGreater(float((other.logits(tokens) - logits).abs().max()), 1e-2)

    def test_long_factors_serve_the_whole_context(self):
        """--rope-factors long: with an original context of 4, Hugging Face rotates every scenario sequence (5
        tokens and more) with the long factors, as the package does at every position."""
        checkpoint = self.checkpoint(original_max_position_embeddings=4,
                                     rope_scaling=dict(PHI3_CONFIG["rope_scaling"], attention_factor=1.19))
        loaded, manifest = self.export(checkpoint, "--dtype", "float32", "--rope-factors", "long")
        self.assertEqual(manifest["max_context_length"], 1024)
        self.assertIn("long factors", manifest["context_note"])
        self.assertAlmostEqual(loaded.inv_freq[0].item(), 1.0 / PHI3_CONFIG["rope_scaling"]["long_factor"][0], 6)
        reference = Phi3Reference(checkpoint)
        difference = compare_scenario(self, loaded, manifest, reference, torch.float32, 1e-4)
        print(f"phi3 float32, long factors: largest logit difference {difference:.2e}")
        # The factors matter: the same sequence under the short factors is another forward.
        short = Phi3Reference(checkpoint)
        short.scaling = dict(short.scaling, long_factor=short.scaling["short_factor"])
        tokens = list(range(3, 40))
        self.assertGreater(float((short.logits(tokens) - reference.logits(tokens)).abs().max()), 1e-2)
        # By default the same checkpoint is capped at its original context.
        _, capped = self.export(checkpoint, "--dtype", "float32")
        self.assertEqual(capped["max_context_length"], 4)
        self.assertIn("--rope-factors long", capped["context_note"])

    def test_long_factors_refused_without_longrope(self):
        checkpoint = self.checkpoint(rope_scaling=None)
        out = os.path.join(self.tmp.name, "package")
        code, error = export("--checkpoint", checkpoint, "--out", out, "--rope-factors", "long")
        self.assertNotEqual(code, 0)
        self.assertIn("--rope-factors long applies to LongRoPE models", error)
        code, error = export("--random", "--preset", "qwen3-0.6b", "--num-layers", "1", "--out", out,
                             "--rope-factors", "long")
        self.assertNotEqual(code, 0)
        self.assertIn("--rope-factors long applies to LongRoPE models", error)

    def test_missing_fused_tensor_and_int8_export(self):
        checkpoint = self.checkpoint()
        tensors = load_safetensors(os.path.join(checkpoint, "model.safetensors"))
        fused = tensors.pop("model.layers.1.mlp.gate_up_proj.weight")
        save_safetensors(os.path.join(checkpoint, "model.safetensors"), tensors)
        code, error = export("--checkpoint", checkpoint, "--out", os.path.join(self.tmp.name, "bad"))
        self.assertEqual(code, 2)
        self.assertIn("model.layers.1.mlp.gate_up_proj.weight", error)
        tensors["model.layers.1.mlp.gate_up_proj.weight"] = fused
        save_safetensors(os.path.join(checkpoint, "model.safetensors"), tensors)
        loaded, manifest = self.export(checkpoint, "--dtype", "float32", "--quantize", "int8", "--group-size", "32")
        self.assertEqual(manifest["quantization"], "int8")
        self.assertEqual(loaded.state_dict()["model.layers.0.self_attn.qkv_proj.weight"].dtype, torch.int8)


if __name__ == "__main__":
    unittest.main()
