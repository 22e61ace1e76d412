"""Granite 3: config reading (the four multipliers, Hugging Face's defaults) and refusals, and packages exported
from checkpoints in Hugging Face's layout (non-trivial multipliers; tied and untied heads) that match an
independent forward of the same folder (granite_reference.py) over the paged cache, in float32, bfloat16 and
int8."""
import json
import os
import tempfile
import unittest

import torch

import paged_scenario  # noqa: F401  (puts tools/ on sys.path)
from llmc_export.config import ExportError, ModelConfig
from llmc_export.ops import dequantize
from granite_reference import GRANITE_CONFIG, GraniteReference, load_safetensors, write_checkpoint
from paged_scenario import PagedRunner
from test_qwen3 import compare_scenario, export, scenario_config


class GraniteConfigTest(unittest.TestCase):
    def test_fields(self):
        config = ModelConfig.from_hf_config_dict(GRANITE_CONFIG)
        self.assertEqual((config.architecture, config.head_dim, config.num_layers, config.tie_word_embeddings),
                         ("granite", 16, 2, True))
        self.assertEqual((config.embedding_multiplier, config.residual_multiplier, config.attention_scale,
                          config.logits_scaling), (12.0, 0.22, 0.0078125, 8.0))
        self.assertFalse(config.qkv_bias or config.qk_norm or config.nope_layers)
        # Hugging Face's defaults: every multiplier 1.0 (attention_multiplier too, not head_dim ** -0.5), untied.
        bare = {key: value for key, value in GRANITE_CONFIG.items()
                if key not in ("embedding_multiplier", "residual_multiplier", "attention_multiplier",
                               "logits_scaling", "tie_word_embeddings")}
        plain = ModelConfig.from_hf_config_dict(bare)
        self.assertEqual((plain.embedding_multiplier, plain.residual_multiplier, plain.attention_scale,
                          plain.logits_scaling, plain.tie_word_embeddings), (1.0, 1.0, 1.0, 1.0, False))
        # Other architectures keep head_dim ** -0.5 and no multipliers.
        llama = ModelConfig.from_hf_config_dict(dict(GRANITE_CONFIG, model_type="llama"))
        self.assertEqual((llama.attention_scale, llama.embedding_multiplier, llama.logits_scaling), (0.0, 1.0, 1.0))

    def test_refusals_name_what(self):
        for change, words in (({"attention_bias": True}, "attention_bias"),
                              ({"mlp_bias": True}, "mlp_bias"),
                              ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
                              ({"logits_scaling": 0}, "logits_scaling"),
                              ({"embedding_multiplier": "12"}, "embedding_multiplier"),
                              ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "'yarn'"),
                              ({"model_type": "granitemoe"}, "unsupported architecture 'granitemoe'")):
            with self.assertRaises(ExportError) as caught:
                ModelConfig.from_hf_config_dict(dict(GRANITE_CONFIG, **change))
            self.assertIn(words, str(caught.exception))
        self.assertIn("granite", str(caught.exception))  # the supported list names it


class GraniteExportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def checkpoint(self, **changes):
        return write_checkpoint(os.path.join(self.tmp.name, "checkpoint"), dict(GRANITE_CONFIG, **changes))

    def export(self, checkpoint, *flags):
        out = os.path.join(self.tmp.name, "package")
        code, error = export("--checkpoint", checkpoint, "--out", out, "--name", "tiny-granite", *flags)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        return torch.jit.load(os.path.join(out, "model.pt")), manifest

    def check_float32(self, tied, steps):
        checkpoint = self.checkpoint(tie_word_embeddings=tied)
        self.assertEqual("lm_head.weight" in load_safetensors(os.path.join(checkpoint, "model.safetensors")),
                         not tied)
        loaded, manifest = self.export(checkpoint, "--dtype", "float32")
        # Only weights and the attention scale change: a Llama package's graph, format version 6.
        self.assertEqual((manifest["architecture"], manifest["format_version"], manifest["tie_word_embeddings"],
                          manifest["chat_template"]), ("granite", 6, tied, "raw"))
        self.assertEqual(getattr(loaded.model.layers, "0").self_attn.scale, 0.0078125)
        difference = compare_scenario(self, loaded, manifest, GraniteReference(checkpoint), torch.float32, 1e-4,
                                      steps=steps)
        print(f"granite float32 {'tied' if tied else 'untied'}: largest logit difference {difference:.2e}")
        return checkpoint

    def test_float32_tied_matches_reference_greedy_32_steps(self):
        checkpoint = self.check_float32(tied=True, steps=32)
        # Each multiplier matters: the reference with any one of them at 1.0 gives other logits.
        tokens = list(range(5, 45))
        expected = GraniteReference(checkpoint).logits(tokens)
        for key in ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling"):
            changed = GraniteReference(checkpoint, multipliers={key: 1.0}).logits(tokens)
            self.assertGreater(float((changed - expected).abs().max() / expected.abs().max()), 0.05, key)

    def test_float32_untied_matches_reference(self):
        self.check_float32(tied=False, steps=8)

    def test_top_k_and_pooled_rows_of_the_other_entry_points(self):
        """forward_top_k's values are the scaled logits the sampler must see (the top-k order is the logits'), and
        forward_with_hidden's pooled rows, whose norm weight carries the folded 1 / (logits_scaling *
        embedding_multiplier), point where the reference's final hidden states point (pooling L2-normalizes)."""
        checkpoint = self.checkpoint()
        loaded, manifest = self.export(checkpoint, "--dtype", "float32")
        reference = GraniteReference(checkpoint)
        tokens = list(range(7, 30))
        captured = []
        empty = torch.empty(0, dtype=torch.long)

        def forward(*args):
            rows = torch.arange(args[0].shape[0], dtype=torch.long)
            full, values, ids, pooled = loaded.forward_with_hidden(*args[:7], args[7], empty, 5, rows)
            top_values, top_ids = loaded.forward_top_k(*args[:7], args[7], empty, 5)[1:]
            self.assertTrue(torch.equal(values, top_values) and torch.equal(ids, top_ids))
            captured.append((top_values, top_ids, pooled))
            return loaded.forward(*args)

        with torch.no_grad():
            runner = PagedRunner(forward, scenario_config(manifest), torch.float32)
            logits = runner.step([("a", tokens[:10])])["a"]
            logits = torch.cat([logits[None], runner.step([("a", tokens[10:])])["a"][None]])
            expected = reference.logits(tokens)
            hidden = torch.nn.functional.normalize(reference.final_hidden(tokens), dim=-1)
        for step, row in ((0, 9), (1, len(tokens) - 1)):
            top_values, top_ids, pooled = captured[step]
            want_values, want_ids = expected[row].topk(5)
            self.assertLess(float((top_values[0] - want_values).abs().max()), 1e-4)
            self.assertTrue(torch.equal(top_ids[0], want_ids))
            self.assertLess(float((logits[step] - expected[row]).abs().max()), 1e-4)
            pooled_rows = torch.nn.functional.normalize(pooled, dim=-1)
            first = 0 if step == 0 else 10
            self.assertLess(float((pooled_rows - hidden[first:first + pooled.shape[0]]).abs().max()), 1e-5)

    def test_bfloat16_within_tolerance(self):
        checkpoint = self.checkpoint()
        loaded, manifest = self.export(checkpoint, "--dtype", "bfloat16")
        reference = GraniteReference(checkpoint, torch.bfloat16)
        difference = compare_scenario(self, loaded, manifest, reference, torch.bfloat16, 3e-2, steps=4, relative=True)
        print(f"granite bfloat16: largest logit difference {difference:.2e} of the largest logit")

    def test_int8_quantizes_the_folded_weights(self):
        """int8 comes after the fold: the package's o_proj and down_proj dequantize to residual_multiplier times
        the checkpoint's, and its logits stay within 5% of the largest float32 reference logit."""
        checkpoint = self.checkpoint()
        loaded, manifest = self.export(checkpoint, "--dtype", "float32", "--quantize", "int8", "--group-size", "32")
        self.assertEqual((manifest["quantization"], manifest["format_version"]), ("int8", 6))
        state = loaded.state_dict()
        tensors = load_safetensors(os.path.join(checkpoint, "model.safetensors"))
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            p = "model.layers.1." + name
            stored = dequantize(state[p + ".weight"], state[p + ".weight_scale"], torch.float32)
            folded = tensors[p + ".weight"] * GRANITE_CONFIG["residual_multiplier"]
            self.assertLess(float((stored - folded).abs().max()), 0.01 * float(folded.abs().max()), name)
        # Relative to the largest logit, and without the greedy check (passing a dtype other than float32):
        # int8's rounding may flip near ties.
        difference = compare_scenario(self, loaded, manifest, GraniteReference(checkpoint), torch.bfloat16, 5e-2,
                                      steps=4, relative=True)
        print(f"granite int8: largest logit difference {difference:.2e} of the largest logit")

    def test_refused_checkpoint_exits_2_naming_it(self):
        checkpoint = self.checkpoint(mlp_bias=True)
        code, error = export("--checkpoint", checkpoint, "--out", os.path.join(self.tmp.name, "bad"))
        self.assertEqual(code, 2)
        self.assertIn("mlp_bias", error)


if __name__ == "__main__":
    unittest.main()
