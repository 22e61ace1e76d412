"""Llama 3.2 (model_type llama): a tied head (no lm_head tensor in the checkpoint) and llama3 rope scaling,
exported from a checkpoint in Hugging Face's layout and matched against an independent forward of the same folder
over the paged cache. Granite is Llama with four multipliers, so granite_reference.py with them at Llama's values
(attention scaled by head_dim ** -0.5, the others 1) is Llama's forward."""
import json
import os
import tempfile
import unittest

import torch

import paged_scenario  # noqa: F401  (puts tools/ on sys.path)
from granite_reference import GRANITE_CONFIG, GraniteReference, load_safetensors, write_checkpoint
from test_qwen3 import compare_scenario, export

# Llama 3.2's rope scaling, with an original context short enough that the test's positions reach the scaled
# frequencies (head_dim 16 and rope_theta 500000 put wavelengths in all three of its bands).
LLAMA32_CONFIG = dict(
    {key: value for key, value in GRANITE_CONFIG.items()
     if key not in ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling")},
    architectures=["LlamaForCausalLM"], model_type="llama", rope_theta=500000.0, tie_word_embeddings=True,
    rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 64})
# What write_checkpoint needs to draw the embedding at Granite's scale; Llama's forward ignores it.
WRITE_CONFIG = dict(LLAMA32_CONFIG, embedding_multiplier=1.0)
LLAMA_MULTIPLIERS = {"embedding_multiplier": 1.0, "residual_multiplier": 1.0, "logits_scaling": 1.0,
                     "attention_multiplier": 16 ** -0.5}


class Llama32TiedExportTest(unittest.TestCase):
    def test_tied_head_and_llama3_scaling_match_reference_greedy_32_steps(self):
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = write_checkpoint(os.path.join(tmp, "checkpoint"), WRITE_CONFIG)
            with open(os.path.join(checkpoint, "config.json"), "w") as f:
                json.dump(LLAMA32_CONFIG, f)
            self.assertNotIn("lm_head.weight", load_safetensors(os.path.join(checkpoint, "model.safetensors")))
            out = os.path.join(tmp, "package")
            code, error = export("--checkpoint", checkpoint, "--out", out, "--dtype", "float32")
            self.assertEqual(code, 0, error)
            with open(os.path.join(out, "llmc-model.json")) as f:
                manifest = json.load(f)
            self.assertEqual((manifest["architecture"], manifest["tie_word_embeddings"], manifest["format_version"]),
                             ("llama", True, 6))
            loaded = torch.jit.load(os.path.join(out, "model.pt"))
            reference = GraniteReference(checkpoint, multipliers=LLAMA_MULTIPLIERS)
            difference = compare_scenario(self, loaded, manifest, reference, torch.float32, 1e-4, steps=32)
            print(f"llama 3.2 tied, llama3 rope scaling: largest logit difference {difference:.2e}")
            # The scaling matters at these positions: without it the reference's logits differ.
            tokens = list(range(5, 75))
            unscaled = GraniteReference(checkpoint, multipliers=dict(LLAMA_MULTIPLIERS, rope_scaling=None))
            self.assertGreater(float((unscaled.logits(tokens) - reference.logits(tokens)).abs().max()), 1e-2)


if __name__ == "__main__":
    unittest.main()
