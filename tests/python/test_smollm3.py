"""SmolLM3: config reading (the NoPE layers from no_rope_layers or no_rope_layer_interval, Hugging Face's
defaults) and refusals, and packages exported from checkpoints in Hugging Face's layout (a NoPE layer between
two RoPE layers; tied and untied heads) that match an independent forward of the same folder
(smollm3_reference.py) over the paged cache."""
import json
import os
import tempfile
import unittest

import torch

import paged_scenario  # noqa: F401  (puts tools/ on sys.path)
from llmc_export.config import ExportError, ModelConfig
from llmc_export.ops import rms_norm_qkv_rope_reference
from smollm3_reference import SMOLLM3_CONFIG, SmolLM3Reference, load_safetensors, write_checkpoint
from test_qwen3 import compare_scenario, export


class SmolLM3ConfigTest(unittest.TestCase):
    def test_fields(self):
        config = ModelConfig.from_hf_config_dict(SMOLLM3_CONFIG)
        self.assertEqual((config.architecture, config.head_dim, config.num_layers, config.nope_layers),
                         ("smollm3", 16, 3, (1,)))
        self.assertFalse(config.qk_norm or config.qkv_bias)
        self.assertTrue(config.tie_word_embeddings)
        self.assertEqual((config.rope_theta, config.sliding_window, config.max_context_length), (5e6, 0, 1024))
        # Without no_rope_layers every no_rope_layer_interval-th layer (default 4) skips RoPE, as in Hugging Face.
        bare = {key: value for key, value in SMOLLM3_CONFIG.items()
                if key not in ("no_rope_layers", "no_rope_layer_interval", "rope_theta", "tie_word_embeddings",
                               "layer_types")}
        eight = ModelConfig.from_hf_config_dict(dict(bare, num_hidden_layers=8))
        self.assertEqual(eight.nope_layers, (3, 7))
        # Hugging Face's defaults: rope_theta 2e6 and a tied head.
        self.assertEqual((eight.rope_theta, eight.tie_word_embeddings), (2e6, True))
        self.assertEqual(ModelConfig.from_hf_config_dict(dict(bare, no_rope_layer_interval=2)).nope_layers, (1,))
        # A longer list than the layers (Hugging Face reads the first num_hidden_layers entries).
        self.assertEqual(ModelConfig.from_hf_config_dict(dict(SMOLLM3_CONFIG, no_rope_layers=[0, 1, 1, 0]))
                         .nope_layers, (0,))
        # Newer configs write rope_parameters instead of rope_theta.
        parameters = dict(bare, rope_parameters={"rope_type": "default", "rope_theta": 5e6})
        self.assertEqual(ModelConfig.from_hf_config_dict(parameters).rope_theta, 5e6)
        # sliding_window is ignored while use_sliding_window is false.
        windowed = ModelConfig.from_hf_config_dict(dict(SMOLLM3_CONFIG, sliding_window=256))
        self.assertEqual((windowed.sliding_window, windowed.max_context_length), (0, 1024))
        # Other architectures have no NoPE layers.
        self.assertEqual(ModelConfig.from_hf_config_dict(dict(SMOLLM3_CONFIG, model_type="llama")).nope_layers, ())

    def test_refusals_name_what(self):
        for change, words in (({"use_sliding_window": True, "sliding_window": 256}, "use_sliding_window"),
                              ({"layer_types": ["full_attention", "sliding_attention", "full_attention"]},
                               "layer_types"),
                              ({"attention_bias": True}, "attention_bias"),
                              ({"mlp_bias": True}, "mlp_bias"),
                              ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
                              ({"no_rope_layers": [1, 0]}, "no_rope_layers"),
                              ({"no_rope_layers": [1, 2, 1]}, "no_rope_layers"),
                              ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0,
                                                 "original_max_position_embeddings": 512}}, "'yarn'"),
                              ({"model_type": "smollm2"}, "unsupported architecture 'smollm2'")):
            with self.assertRaises(ExportError) as caught:
                ModelConfig.from_hf_config_dict(dict(SMOLLM3_CONFIG, **change))
            self.assertIn(words, str(caught.exception))
        self.assertIn("smollm3", str(caught.exception))  # the supported list names it

    def test_identity_rotation_leaves_q_and_k_unchanged(self):
        """The operator a NoPE layer calls: cos 1 and sin 0 give back the projected q and k bit for bit."""
        generator = torch.Generator().manual_seed(3)
        for dtype in (torch.float32, torch.bfloat16):
            hidden = torch.randn(5, 32, generator=generator).to(dtype)
            weight = torch.randn((2 + 2 * 1) * 16, 32, generator=generator).to(dtype)
            norm = torch.ones(32, dtype=dtype)
            cos, sin = torch.ones(5, 8), torch.zeros(5, 8)
            keys, values = torch.zeros(8, 1, 16, dtype=dtype), torch.zeros(8, 1, 16, dtype=dtype)
            q = rms_norm_qkv_rope_reference(hidden, norm, 1e-6, weight, torch.empty(0), None, cos, sin, keys,
                                            values, torch.arange(5), 2, 1)
            normalized = (hidden.float() * torch.rsqrt(hidden.float().pow(2).mean(-1, keepdim=True) + 1e-6))
            qkv = torch.nn.functional.linear(normalized.to(dtype) * norm, weight)
            self.assertTrue(torch.equal(q.reshape(5, 32), qkv[:, :32]))
            self.assertTrue(torch.equal(keys[:5].reshape(5, 16), qkv[:, 32:48]))


class SmolLM3ExportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def checkpoint(self, **changes):
        return write_checkpoint(os.path.join(self.tmp.name, "checkpoint"), dict(SMOLLM3_CONFIG, **changes))

    def export(self, checkpoint, *flags):
        out = os.path.join(self.tmp.name, "package")
        code, error = export("--checkpoint", checkpoint, "--out", out, "--name", "tiny-smollm3", *flags)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        return torch.jit.load(os.path.join(out, "model.pt")), manifest

    def check_float32(self, tied, steps):
        checkpoint = self.checkpoint(tie_word_embeddings=tied)
        self.assertEqual("lm_head.weight" in load_safetensors(os.path.join(checkpoint, "model.safetensors")),
                         not tied)
        loaded, manifest = self.export(checkpoint, "--dtype", "float32")
        # The same operators as a Llama package: format version 6, which older workers read as they should.
        self.assertEqual((manifest["architecture"], manifest["format_version"], manifest["head_dim"],
                          manifest["tie_word_embeddings"], manifest["chat_template"], manifest["rope_theta"]),
                         ("smollm3", 6, 16, tied, "chatml", 5e6))
        # Layer 1 (NoPE) gets the identity tables, layers 0 and 2 the rotation.
        code = loaded.layers_output.code
        self.assertIn("identity_cos = torch.ones_like(cos)", code)
        self.assertEqual(code.count("(hidden0, identity_cos, identity_sin,"), 1)
        self.assertEqual(code.count(", cos, sin,"), 2)
        difference = compare_scenario(self, loaded, manifest, SmolLM3Reference(checkpoint), torch.float32, 1e-4,
                                      steps=steps)
        print(f"smollm3 float32 {'tied' if tied else 'untied'}: largest logit difference {difference:.2e}")
        return loaded, manifest, checkpoint

    def test_float32_tied_matches_reference_greedy_32_steps(self):
        loaded, manifest, checkpoint = self.check_float32(tied=True, steps=32)
        # The NoPE layer matters: the same weights with RoPE on every layer give other logits.
        with_rope = SmolLM3Reference(checkpoint, rope_everywhere=True)
        tokens = list(range(5, 45))
        self.assertGreater(float((with_rope.logits(tokens) - SmolLM3Reference(checkpoint).logits(tokens))
                                 .abs().max()), 0.1)

    def test_float32_untied_matches_reference(self):
        self.check_float32(tied=False, steps=8)

    def test_bfloat16_within_tolerance(self):
        checkpoint = self.checkpoint()
        loaded, manifest = self.export(checkpoint, "--dtype", "bfloat16")
        reference = SmolLM3Reference(checkpoint, torch.bfloat16)
        difference = compare_scenario(self, loaded, manifest, reference, torch.bfloat16, 3e-2, steps=4, relative=True)
        print(f"smollm3 bfloat16: largest logit difference {difference:.2e} of the largest logit")

    def test_refused_checkpoint_exits_2_naming_it(self):
        checkpoint = self.checkpoint(attention_bias=True)
        code, error = export("--checkpoint", checkpoint, "--out", os.path.join(self.tmp.name, "bad"))
        self.assertEqual(code, 2)
        self.assertIn("attention_bias", error)


if __name__ == "__main__":
    unittest.main()
