"""GPT-OSS: config reading and refusals, YaRN against its definition, MXFP4 decoding against the format's, and
packages exported from checkpoints in Hugging Face's layout (dense experts and MXFP4 ones) that match an independent
forward of the same folder (gpt_oss_reference.py) over the paged cache: float32, bfloat16 and int8."""
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
from gpt_oss_reference import (GPT_OSS_CONFIG, GptOssReference, check_mxfp4_against_definition, checkpoint_tensors,
                               rope_inv_freq, write_checkpoint)
from llmc_export.config import ExportError, ModelConfig
from llmc_export.gpt_oss import mxfp4_to_float, yarn_inverse_frequencies
from llmc_export.ops import dequantize
from qwen3_reference import load_safetensors
from paged_scenario import run_scenario
from test_qwen3 import compare_scenario, scenario_config


def export(*argv):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = export_model.main(list(argv))
    return code, stderr.getvalue()


class GptOssConfigTest(unittest.TestCase):
    def test_fields(self):
        config = ModelConfig.from_hf_config_dict(GPT_OSS_CONFIG)
        self.assertEqual((config.architecture, config.num_experts, config.experts_per_token, config.moe_variant,
                          config.moe_layers, config.layer_windows, config.swiglu_limit),
                         ("gpt_oss", 8, 2, "clamped_swiglu", (0, 1), (8, 0), 7.0))
        self.assertTrue(config.qkv_bias and config.o_proj_bias and config.attention_sinks)
        self.assertAlmostEqual(config.rope_attention_factor, 0.1 * math.log(32) + 1)

    def test_yarn_against_the_reference_definition(self):
        for truncate in (False, True):
            for original in (64, 512):
                hf = dict(GPT_OSS_CONFIG, rope_scaling=dict(GPT_OSS_CONFIG["rope_scaling"], truncate=truncate,
                                                            original_max_position_embeddings=original))
                ours, factor = yarn_inverse_frequencies(16, 150000.0, hf["rope_scaling"], 2048)
                theirs, their_factor = rope_inv_freq(hf)
                self.assertTrue(torch.allclose(torch.tensor(ours), theirs.double().float(), rtol=1e-6), (truncate,
                                                                                                       original))
                self.assertAlmostEqual(factor, their_factor)

    def test_mxfp4_against_the_format(self):
        self.assertTrue(check_mxfp4_against_definition())
        # A byte 0xF1: first value code 1 (+0.5), second code 15 (-6); scale 128: times 2.
        blocks = torch.zeros(1, 1, 16, dtype=torch.uint8)
        blocks[0, 0, 0] = 0xF1
        values = mxfp4_to_float(blocks, torch.full((1, 1), 128, dtype=torch.uint8))
        self.assertEqual(values[0, :4].tolist(), [1.0, -12.0, 0.0, 0.0])

    def test_refusals_name_what(self):
        for change, words in (({"num_experts_per_tok": 9}, "num_experts_per_tok 9"),
                              ({"layer_types": ["sliding_attention", "global"]}, "layer_types"),
                              ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "'dynamic'")):
            with self.assertRaises(ExportError) as caught:
                ModelConfig.from_hf_config_dict(dict(GPT_OSS_CONFIG, **change))
            self.assertIn(words, str(caught.exception))


class GptOssExportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def export(self, checkpoint, *flags, name="package"):
        out = os.path.join(self.tmp.name, name)
        code, error = export("--checkpoint", checkpoint, "--out", out, "--name", "tiny-gpt-oss", *flags)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        return torch.jit.load(os.path.join(out, "model.pt")), manifest

    def test_float32_dense_and_mxfp4_checkpoints_match_reference(self):
        for mxfp4 in (False, True):
            checkpoint = write_checkpoint(os.path.join(self.tmp.name, f"checkpoint-{mxfp4}"), GPT_OSS_CONFIG,
                                          mxfp4=mxfp4)
            if mxfp4:
                names = load_safetensors(os.path.join(checkpoint, "model.safetensors"))
                self.assertEqual(names["model.layers.0.mlp.experts.gate_up_proj_blocks"].dtype, torch.uint8)
            loaded, manifest = self.export(checkpoint, "--dtype", "float32", name=f"package-{mxfp4}")
            self.assertEqual((manifest["architecture"], manifest["format_version"], manifest["moe_variant"],
                              manifest["layer_windows"], manifest["chat_template"]),
                             ("gpt_oss", 12, "clamped_swiglu", [8, 0], "raw"))
            graph = str(loaded.inlined_graph)
            self.assertEqual(graph.count("llmc::moe_rms_norm_clamped_swiglu("), 2)
            difference = compare_scenario(self, loaded, manifest, GptOssReference(checkpoint), torch.float32, 1e-4)
            print(f"gpt_oss float32 ({'MXFP4' if mxfp4 else 'dense'} experts): largest logit difference "
                  f"{difference:.2e}")

    def test_sinks_and_window_change_the_answer(self):
        # The reference's own sensitivity: the checkpoint's sinks and the sliding window matter to these logits.
        tensors = checkpoint_tensors(GPT_OSS_CONFIG, 7)
        plain = write_checkpoint(os.path.join(self.tmp.name, "plain"), GPT_OSS_CONFIG, tensors=dict(tensors))
        tokens = list(range(3, 40))
        base = GptOssReference(plain).logits(tokens)
        shifted = dict(tensors)
        for layer in range(2):
            shifted[f"model.layers.{layer}.self_attn.sinks"] = tensors[f"model.layers.{layer}.self_attn.sinks"] + 5
        sinks = write_checkpoint(os.path.join(self.tmp.name, "sinks"), GPT_OSS_CONFIG, tensors=shifted)
        self.assertGreater(float((GptOssReference(sinks).logits(tokens) - base).abs().max()), 0.1)
        unwindowed = write_checkpoint(os.path.join(self.tmp.name, "full"), dict(GPT_OSS_CONFIG, sliding_window=4096),
                                      tensors=dict(tensors))
        self.assertGreater(float((GptOssReference(unwindowed).logits(tokens) - base).abs().max()), 0.1)

    def test_bfloat16_within_tolerance(self):
        # Hugging Face's GPT-OSS runs its attention softmax (sinks included) in bfloat16 and scales cos and sin by
        # YaRN's factor before rounding them, where the package folds the factor into the bfloat16 q and k rows and
        # the kernels keep the softmax in float32: every row within 8 % of the largest logit (most within 3 %).
        checkpoint = write_checkpoint(os.path.join(self.tmp.name, "bf16"), GPT_OSS_CONFIG, mxfp4=True)
        loaded, manifest = self.export(checkpoint, "--dtype", "bfloat16")
        reference = GptOssReference(checkpoint, torch.bfloat16)
        differences = []

        def check(name, tokens, logits):
            expected = reference.logits(tokens)[-1]
            differences.append(float((logits.float() - expected).abs().max()) / float(expected.abs().max()))

        with torch.no_grad():
            run_scenario(loaded, None, scenario_config(manifest), torch.bfloat16, steps=8, on_logits=check)
        within = sum(d < 3e-2 for d in differences)
        print(f"gpt_oss bfloat16: {within} of {len(differences)} rows within 3 % of the largest logit, the largest "
              f"{max(differences):.2e}")
        self.assertGreaterEqual(within, 0.6 * len(differences))
        self.assertLess(max(differences), 0.08)

    def test_int8_package_matches_its_dequantized_weights(self):
        config = GPT_OSS_CONFIG
        checkpoint = write_checkpoint(os.path.join(self.tmp.name, "int8"), config)
        loaded, manifest = self.export(checkpoint, "--dtype", "float32", "--quantize", "int8", "--group-size", "32",
                                       name="int8-package")
        self.assertEqual(manifest["quantization"], "int8")
        state = loaded.state_dict()
        self.assertEqual(state["model.layers.0.mlp.experts.3.down_proj.weight"].dtype, torch.int8)
        self.assertEqual(state["model.layers.0.mlp.gate.weight"].dtype, torch.float32)  # the router stays float
        # The checkpoint in Hugging Face's dense layout with every quantized matrix replaced by what it stands for.
        tensors = checkpoint_tensors(dict(config), 7)
        h, d = config["hidden_size"], config["head_dim"]
        q, kv, factor = config["num_attention_heads"] * d, config["num_key_value_heads"] * d, \
            ModelConfig.from_hf_config_dict(config).rope_attention_factor
        for layer in range(config["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            matrix = lambda name: dequantize(state[p + name + ".weight"], state[p + name + ".weight_scale"],  # noqa
                                             torch.float32)
            wq, wk, wv = matrix("self_attn.qkv_proj").split([q, kv, kv])
            tensors[p + "self_attn.q_proj.weight"] = wq / factor  # the export folded YaRN's factor into q and k
            tensors[p + "self_attn.k_proj.weight"] = wk / factor
            tensors[p + "self_attn.v_proj.weight"] = wv
            tensors[p + "self_attn.o_proj.weight"] = matrix("self_attn.o_proj")
            gate_up, down = [], []
            for e in range(config["num_local_experts"]):
                gate, up = matrix(f"mlp.experts.{e}.gate_up_proj").chunk(2)
                interleaved = torch.stack((gate, up), dim=1).reshape(-1, h)  # rows gate, up, gate, ...
                gate_up.append(interleaved.t())
                down.append(matrix(f"mlp.experts.{e}.down_proj").t())
            tensors[p + "mlp.experts.gate_up_proj"] = torch.stack(gate_up)
            tensors[p + "mlp.experts.down_proj"] = torch.stack(down)
        tensors["lm_head.weight"] = dequantize(state["lm_head.weight"], state["lm_head.weight_scale"], torch.float32)
        dequantized = write_checkpoint(os.path.join(self.tmp.name, "int8-dequantized"), config, tensors=tensors)
        difference = compare_scenario(self, loaded, manifest, GptOssReference(dequantized), torch.float32, 1e-4,
                                      steps=4)
        print(f"gpt_oss int8 g32: largest logit difference {difference:.2e}")


if __name__ == "__main__":
    unittest.main()
