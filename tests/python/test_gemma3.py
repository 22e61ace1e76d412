"""Gemma 3 (model_type gemma3_text, and the text tower of gemma3 multimodal checkpoints): the independent reference's
own consistency (gemma3_reference.py, written from Hugging Face's semantics), packages exported from checkpoints in
Hugging Face's layouts (gemma3_text; gemma3 as older and newer transformers save it, its vision tensors ignored)
that match that reference over the paged cache (sliding layers with a window of 8 among full ones, two RoPE bases,
linear scaling, query_pre_attn_scalar, the (1 + w) norms, the final softcap), and refusals that name what they
refuse."""
import json
import os
import random
import tempfile
import unittest

import torch

import paged_scenario  # noqa: F401  (puts tools/ on sys.path)
from gemma3_reference import (GEMMA3_CONFIG, Gemma3Reference, layer_types, load_safetensors, multimodal_config,
                              rope_settings, text_config, write_checkpoint)
from test_qwen3 import compare_scenario, export


def random_tokens(count, seed=5, vocab=GEMMA3_CONFIG["vocab_size"]):
    rng = random.Random(seed)
    return [rng.randrange(vocab) for _ in range(count)]


def largest_difference(first, second, tokens):
    return float((first.logits(tokens) - second.logits(tokens)).abs().max())


class Gemma3ReferenceTest(unittest.TestCase):
    """The reference on its own: what it reads from config.json, and that each Gemma 3 setting changes its logits
    (so that the package comparisons below would notice an exporter that got it wrong)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def checkpoint(self, name="checkpoint", layout="text", sparse=False, **changes):
        return write_checkpoint(os.path.join(self.tmp.name, name), dict(GEMMA3_CONFIG, **changes), layout=layout,
                                sparse=sparse)

    def test_config_reading(self):
        text = text_config(GEMMA3_CONFIG)
        self.assertEqual(layer_types(text), ["sliding_attention", "sliding_attention", "full_attention"] * 2
                         + ["sliding_attention"] * 2)
        self.assertEqual(rope_settings(text), {"full_attention": (1e6, 8.0), "sliding_attention": (1e4, 1.0)})
        # Hugging Face's default pattern (6): five sliding layers, then a full one.
        bare = {key: value for key, value in GEMMA3_CONFIG.items() if key != "sliding_window_pattern"}
        self.assertEqual(layer_types(text_config(bare)).index("full_attention"), 5)
        # layer_types wins over the pattern.
        given = ["full_attention"] + ["sliding_attention"] * 7
        self.assertEqual(layer_types(text_config(dict(GEMMA3_CONFIG, layer_types=given))), given)
        # Newer configs: rope_parameters per layer kind.
        newer = {key: value for key, value in GEMMA3_CONFIG.items()
                 if key not in ("rope_theta", "rope_local_base_freq", "rope_scaling")}
        newer["rope_parameters"] = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                                    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
        self.assertEqual(rope_settings(text_config(newer)), rope_settings(text))
        # The older "type" key, and no scaling.
        self.assertEqual(rope_settings(text_config(dict(GEMMA3_CONFIG, rope_scaling={"type": "linear", "factor": 2})))
                         ["full_attention"], (1e6, 2.0))
        self.assertEqual(rope_settings(text_config(dict(GEMMA3_CONFIG, rope_scaling=None)))["full_attention"],
                         (1e6, 1.0))
        # A sparse multimodal config takes Gemma3TextConfig's defaults and its top-level tie_word_embeddings.
        sparse = text_config(multimodal_config(dict(GEMMA3_CONFIG, tie_word_embeddings=False), sparse=True))
        self.assertNotIn("rms_norm_eps", multimodal_config(GEMMA3_CONFIG, sparse=True)["text_config"])
        self.assertEqual((sparse["rms_norm_eps"], sparse["rope_local_base_freq"], sparse["hidden_activation"],
                          sparse["tie_word_embeddings"], sparse["head_dim"]),
                         (1e-6, 1e4, "gelu_pytorch_tanh", False, 32))

    def test_greedy_rows_are_one_causal_forward(self):
        """The greedy loop recomputes the sequence at every step; its rows equal one forward of the whole
        continued sequence (the masks are causal, the rotary tables positional)."""
        reference = Gemma3Reference(self.checkpoint())
        prompt = random_tokens(17)
        continuation, rows = reference.greedy(prompt, 32)
        whole = reference.logits(prompt + continuation)
        self.assertLess(float((whole[len(prompt) - 1:-1] - rows).abs().max()), 1e-4)
        self.assertGreater(len(set(continuation)), 4)  # not stuck repeating a token

    def test_sliding_layers_ignore_keys_outside_their_window(self):
        reference = Gemma3Reference(self.checkpoint())
        tokens = random_tokens(70)
        # Every layer sliding: position 69 sees back to 69 - 8 * (8 - 1) = 13 at most.
        reference.layer_types = ["sliding_attention"] * 8
        last = reference.logits(tokens)[-1]

        def changed_at(position):
            changed = list(tokens)
            changed[position] = (tokens[position] + 1) % 512
            return reference.logits(changed)[-1]

        self.assertTrue(torch.equal(changed_at(12), last))
        self.assertFalse(torch.equal(changed_at(13), last))  # the edge of the reach: one faint path
        self.assertGreater(float((changed_at(40) - last).abs().max()), 1e-2)
        # One layer: the window counts the query itself (keys q - 7 .. q).
        one = Gemma3Reference(self.checkpoint("one", num_hidden_layers=1, layer_types=["sliding_attention"]))
        short = random_tokens(12)
        last = one.logits(short)[-1]
        for position, seen in ((3, False), (4, True)):
            changed = list(short)
            changed[position] = (short[position] + 1) % 512
            self.assertEqual(not torch.equal(one.logits(changed)[-1], last), seen, position)

    def test_window_matters_and_only_the_rope_base_tells_kinds_apart_without_it(self):
        reference = Gemma3Reference(self.checkpoint())
        tokens = random_tokens(40)
        unwindowed = Gemma3Reference(self.checkpoint())
        unwindowed.sliding_window = 4096
        self.assertGreater(largest_difference(reference, unwindowed, tokens), 1e-2)
        # With a window wider than the sequence, the same base and no scaling, a sliding layer is a full one.
        plain = self.checkpoint("plain", rope_scaling=None, rope_local_base_freq=1e6, sliding_window=64)
        all_full = Gemma3Reference(plain)
        all_full.layer_types = ["full_attention"] * 8
        self.assertLess(largest_difference(Gemma3Reference(plain), all_full, tokens), 1e-5)
        # ... and the two bases alone tell them apart.
        bases = self.checkpoint("bases", rope_scaling=None, sliding_window=64)
        all_full = Gemma3Reference(bases)
        all_full.layer_types = ["full_attention"] * 8
        self.assertGreater(largest_difference(Gemma3Reference(bases), all_full, tokens), 1e-2)

    def test_each_gemma_setting_changes_the_logits(self):
        checkpoint = self.checkpoint()
        reference = Gemma3Reference(checkpoint)
        tokens = random_tokens(40)
        variants = []
        head_dim_scale = Gemma3Reference(checkpoint)
        head_dim_scale.scaling = 32 ** -0.5  # query_pre_attn_scalar 24, not head_dim
        variants.append(("query_pre_attn_scalar", head_dim_scale))
        unscaled = Gemma3Reference(checkpoint)
        unscaled.rope = dict(unscaled.rope, full_attention=(1e6, 1.0))
        variants.append(("linear rope scaling", unscaled))
        one_base = Gemma3Reference(checkpoint)
        one_base.rope = dict(one_base.rope, sliding_attention=(1e6, 8.0))
        variants.append(("rope_local_base_freq", one_base))
        uncapped = Gemma3Reference(checkpoint)
        uncapped.softcap = None
        variants.append(("final_logit_softcapping", uncapped))
        for name, variant in variants:
            self.assertGreater(largest_difference(reference, variant, tokens), 1e-2, name)

    def test_multimodal_layouts_hold_the_same_text_model(self):
        tokens = random_tokens(33)
        for tied in (True, False):
            text = Gemma3Reference(self.checkpoint(f"text{tied}", tie_word_embeddings=tied)).logits(tokens)
            for layout in ("old", "new"):
                for sparse in (False, True):
                    folder = self.checkpoint(f"{layout}{sparse}{tied}", layout=layout, sparse=sparse,
                                             tie_word_embeddings=tied)
                    names = set(load_safetensors(os.path.join(folder, "model.safetensors")))
                    body = "language_model.model." if layout == "old" else "model.language_model."
                    self.assertIn(body + "layers.7.self_attn.k_norm.weight", names)
                    self.assertEqual(any("lm_head" in name for name in names), not tied)
                    self.assertTrue(any("vision_tower" in name for name in names))
                    self.assertTrue(torch.equal(Gemma3Reference(folder).logits(tokens), text),
                                    (layout, sparse, tied))


class Gemma3ExportTest(unittest.TestCase):
    """Packages exported by tools/export_model.py against the reference over the paged cache."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def checkpoint(self, layout="text", sparse=False, dtype=torch.float32, **changes):
        return write_checkpoint(os.path.join(self.tmp.name, "checkpoint"), dict(GEMMA3_CONFIG, **changes),
                                dtype=dtype, layout=layout, sparse=sparse)

    def export(self, checkpoint, *flags):
        out = os.path.join(self.tmp.name, "package")
        code, error = export("--checkpoint", checkpoint, "--out", out, "--name", "tiny-gemma3", *flags)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        return torch.jit.load(os.path.join(out, "model.pt")), manifest

    def check_float32(self, label, checkpoint, tied, steps):
        loaded, manifest = self.export(checkpoint, "--dtype", "float32")
        self.assertEqual((manifest["architecture"], manifest["num_layers"], manifest["head_dim"],
                          manifest["vocab_size"], manifest["tie_word_embeddings"]), ("gemma3", 8, 32, 512, tied))
        parameters = dict(loaded.named_parameters())
        self.assertFalse(any("vision" in name or "multi_modal" in name for name in parameters), list(parameters))
        difference = compare_scenario(self, loaded, manifest, Gemma3Reference(checkpoint), torch.float32, 1e-4,
                                      steps=steps)
        print(f"gemma3 float32 {label}: largest logit difference {difference:.2e}")
        return manifest

    def test_float32_tied_matches_reference_greedy_32_steps(self):
        self.check_float32("gemma3_text tied", self.checkpoint(), True, steps=32)

    def test_float32_untied_matches_reference(self):
        checkpoint = self.checkpoint(tie_word_embeddings=False)
        self.assertIn("lm_head.weight", load_safetensors(os.path.join(checkpoint, "model.safetensors")))
        self.check_float32("gemma3_text untied", checkpoint, False, steps=32)

    def test_float32_multimodal_older_layout_matches_reference(self):
        """language_model.model.* and language_model.lm_head.weight (transformers before 4.52)."""
        self.check_float32("gemma3 language_model.model.* untied",
                           self.checkpoint(layout="old", tie_word_embeddings=False), False, steps=8)

    def test_float32_multimodal_newer_sparse_layout_matches_reference(self):
        """model.language_model.*, a text_config that leaves Gemma3TextConfig's defaults out."""
        self.check_float32("gemma3 model.language_model.* tied, sparse text_config",
                           self.checkpoint(layout="new", sparse=True), True, steps=8)

    def test_float32_layer_types_and_rope_parameters_match_reference(self):
        """Newer config.json: layer_types (here not the pattern's) and rope_parameters per layer kind."""
        config = {key: value for key, value in GEMMA3_CONFIG.items()
                  if key not in ("rope_theta", "rope_local_base_freq", "rope_scaling", "sliding_window_pattern")}
        config["layer_types"] = ["full_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                                 "full_attention", "sliding_attention", "sliding_attention", "full_attention"]
        config["rope_parameters"] = {"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 5e5},
                                     "sliding_attention": {"rope_type": "default", "rope_theta": 2e4}}
        checkpoint = write_checkpoint(os.path.join(self.tmp.name, "checkpoint"), config)
        reference = Gemma3Reference(checkpoint)
        self.assertEqual(reference.rope, {"full_attention": (5e5, 4.0), "sliding_attention": (2e4, 1.0)})
        self.check_float32("layer_types + rope_parameters", checkpoint, True, steps=8)

    def test_bfloat16_within_tolerance(self):
        """Looser than the two- and three-layer families' 3e-2: eight layers of six norms each round in bfloat16
        (the reference's own bfloat16 logits are up to about 4e-2 of the largest logit from its float32 ones)."""
        checkpoint = self.checkpoint(dtype=torch.bfloat16, tie_word_embeddings=False)
        loaded, manifest = self.export(checkpoint, "--dtype", "bfloat16")
        reference = Gemma3Reference(checkpoint, torch.bfloat16)
        difference = compare_scenario(self, loaded, manifest, reference, torch.bfloat16, 8e-2, steps=4, relative=True)
        print(f"gemma3 bfloat16: largest logit difference {difference:.2e} of the largest logit")

    def test_float32_package_of_a_bfloat16_checkpoint_scales_the_embedding_exactly(self):
        """Hugging Face multiplies the embedding by sqrt(hidden_size) cast to the dtype the model runs in: loaded
        in float32 (what a float32 package stands for), the scale is float32's sqrt(48) = 6.9282, even when
        the checkpoint's tensors are bfloat16 (whose rounding of the scale, 6.9375, belongs to a bfloat16 run).
        hidden_size 48 is one whose square root bfloat16 does not hold (64's, 8, it does)."""
        checkpoint = self.checkpoint(dtype=torch.bfloat16, hidden_size=48, tie_word_embeddings=False)
        loaded, manifest = self.export(checkpoint, "--dtype", "float32")
        difference = compare_scenario(self, loaded, manifest, Gemma3Reference(checkpoint, torch.float32),
                                      torch.float32, 1e-4, steps=4)
        print(f"gemma3 float32 package of a bfloat16 checkpoint: largest logit difference {difference:.2e}")

    def test_refusals_name_what(self):
        for change, words in (({"attn_logit_softcapping": 50.0}, "attn_logit_softcapping"),
                              ({"hidden_activation": "gelu"}, "hidden_activation"),
                              ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic")):
            checkpoint = self.checkpoint(**change)
            code, error = export("--checkpoint", checkpoint, "--out", os.path.join(self.tmp.name, "bad"))
            self.assertEqual(code, 2, (change, error))
            self.assertIn(words, error)


if __name__ == "__main__":
    unittest.main()
