"""Per-layer attention windows: how Mistral and Qwen2 configs give them, the format version of packages that use
them, and an exported Mistral checkpoint with a sliding window that matches an independent forward of the same
folder (mistral_reference.py) over the paged cache, past the window, with a prompt prefilled in chunks across
the window's edge."""
import contextlib
import io
import json
import os
import tempfile
import unittest

import torch

import paged_scenario  # noqa: F401  (puts tools/ on sys.path)
import export_model
from llmc_export.config import ExportError, ModelConfig
from llmc_export.ops import paged_attention_reference
from mistral_reference import MISTRAL_CONFIG, MistralReference, write_checkpoint
from test_qwen3 import compare_scenario

QWEN2_CONFIG = {
    "model_type": "qwen2", "vocab_size": 320, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "max_position_embeddings": 1024, "sliding_window": 128, "use_sliding_window": False, "max_window_layers": 1,
}


class WindowConfigTest(unittest.TestCase):
    def test_mistral_windows_every_layer_and_keeps_its_context(self):
        config = ModelConfig.from_hf_config_dict(MISTRAL_CONFIG)
        self.assertEqual((config.layer_windows, config.sliding_window, config.max_context_length), ((24, 24), 24, 256))
        # A window that covers max_position_embeddings is no window (the package stays an unwindowed one).
        wide = ModelConfig.from_hf_config_dict(dict(MISTRAL_CONFIG, sliding_window=256))
        self.assertEqual((wide.layer_windows, wide.max_context_length), ((), 256))
        unset = ModelConfig.from_hf_config_dict(dict(MISTRAL_CONFIG, sliding_window=None))
        self.assertEqual((unset.layer_windows, unset.sliding_window), ((), 0))

    def test_qwen2_windows_follow_use_sliding_window_and_max_window_layers(self):
        ignored = ModelConfig.from_hf_config_dict(QWEN2_CONFIG)
        self.assertEqual((ignored.layer_windows, ignored.sliding_window, ignored.max_context_length), ((), 0, 1024))
        used = ModelConfig.from_hf_config_dict(dict(QWEN2_CONFIG, use_sliding_window=True))
        self.assertEqual((used.layer_windows, used.max_context_length), ((0, 128, 128), 1024))
        typed = ModelConfig.from_hf_config_dict(dict(QWEN2_CONFIG, use_sliding_window=True, layer_types=[
            "sliding_attention", "full_attention", "sliding_attention"]))
        self.assertEqual(typed.layer_windows, (128, 0, 128))
        with self.assertRaisesRegex(ExportError, "layer_types"):
            ModelConfig.from_hf_config_dict(dict(QWEN2_CONFIG, use_sliding_window=True,
                                                 layer_types=["chunked_attention"] * 3))

    def test_reference_operator_masks_keys_before_the_window(self):
        torch.manual_seed(0)
        keys, values = torch.randn(4, 16, 1, 8), torch.randn(4, 16, 1, 8)
        query = torch.randn(3, 2, 8)
        tables = torch.tensor([[2, 0, 3, 1]], dtype=torch.int32)
        args = (query, keys, values, tables, torch.tensor([50], dtype=torch.int32),
                torch.tensor([0, 3], dtype=torch.int32), 0.3)
        windowed = paged_attention_reference(*args, window=5)
        # Row 2 (position 49) sees positions 45..49 only: the same as a context cut to those five keys.
        context = keys[tables[0].long()].reshape(-1, 1, 8)[45:50].repeat_interleave(2, 1)
        weights = torch.softmax(torch.einsum("hd,khd->hk", query[2], context) * 0.3, dim=-1)
        expected = torch.einsum("hk,khd->hd", weights, values[tables[0].long()].reshape(-1, 1, 8)[45:50]
                                .repeat_interleave(2, 1))
        self.assertTrue(torch.allclose(windowed[2], expected, atol=1e-6))
        self.assertFalse(torch.allclose(windowed, paged_attention_reference(*args), atol=1e-3))


class MistralWindowPackageTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_float32_package_matches_the_windowed_reference_past_the_window(self):
        checkpoint = write_checkpoint(os.path.join(self.tmp.name, "checkpoint"))
        out = os.path.join(self.tmp.name, "package")
        with contextlib.redirect_stderr(io.StringIO()) as stderr, contextlib.redirect_stdout(io.StringIO()):
            code = export_model.main(["--checkpoint", checkpoint, "--out", out, "--dtype", "float32"])
        self.assertEqual(code, 0, stderr.getvalue())
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        self.assertEqual((manifest["format_version"], manifest["max_context_length"], manifest["sliding_window"],
                          manifest["layer_windows"]), (8, 256, 24, [24, 24]))
        loaded = torch.jit.load(os.path.join(out, "model.pt"))
        self.assertIn("attention_window", getattr(loaded.model.layers, "0").code)
        reference = MistralReference(checkpoint)
        # The window matters for these weights: without it the last logits of a 40-token prompt differ.
        prompt = list(range(3, 43))
        unwindowed = MistralReference(checkpoint)
        unwindowed.config = dict(unwindowed.config, sliding_window=None)
        self.assertGreater(float((reference.logits(prompt)[-1] - unwindowed.logits(prompt)[-1]).abs().max()), 1e-2)
        # Prompts of 5, 17, 33 and 40 tokens (the last in chunks of 20 across the window's edge), then decode
        # well past the window.
        difference = compare_scenario(self, loaded, manifest, reference, torch.float32, 1e-4, steps=12)
        print(f"mistral sliding window 24 float32: largest logit difference {difference:.2e}")


if __name__ == "__main__":
    unittest.main()
