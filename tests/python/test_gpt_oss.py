"""GPT-OSS: config reading and refusals, YaRN against its definition, MXFP4 decoding and quantizing against the
format's definition, and packages exported from checkpoints in Hugging Face's layout (dense experts and MXFP4 ones)
that match an independent forward of the same folder (gpt_oss_reference.py) over the paged cache: float32, bfloat16,
int8, and mxfp4 packages that keep the checkpoint's expert bytes."""
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
                               expert_prefix, rope_inv_freq, write_checkpoint)
from llmc_export.config import ExportError, ModelConfig
from llmc_export.gpt_oss import mxfp4_to_float, yarn_inverse_frequencies
from llmc_export.ops import dequantize
from llmc_export.quantize import dequantize_int4, quantize_mxfp4
from qwen3_reference import load_safetensors
from paged_scenario import run_scenario
from test_qwen3 import compare_scenario, scenario_config


# E2M1 as the OCP Microscaling spec tabulates it: codes 0-7 and, with the sign bit 3, their negatives.
E2M1_TABLE = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def mxfp4_by_definition(codes, exponents):
    """W [N, K] float32 one element at a time: input k's code is the low nibble of byte k // 2 for even k and the
    high one for odd k, times 2 ** (exponent of block k // 32 - 127)."""
    rows, half = codes.shape
    out = torch.empty(rows, 2 * half)
    for n in range(rows):
        for k in range(2 * half):
            byte, e = int(codes[n, k // 2]), int(exponents[n, k // 32])
            out[n, k] = E2M1_TABLE[byte & 15 if k % 2 == 0 else byte >> 4] * 2.0 ** (e - 127)
    return out


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


class Mxfp4Test(unittest.TestCase):
    def setUp(self):
        self.generator = torch.Generator().manual_seed(5)

    def grid_codes(self, rows, k, largest):
        """Random E2M1 codes [rows, k] without -0 (code 8); with `largest`, each block of 32 holds a +-6."""
        codes = torch.randint(0, 15, (rows, k), generator=self.generator)
        codes = codes + (codes >= 8).long()  # 0..7, 9..15
        if largest:
            blocks = codes.view(rows, k // 32, 32)
            where = torch.randint(0, 32, (rows, k // 32, 1), generator=self.generator)
            blocks.scatter_(2, where, torch.where(torch.rand(rows, k // 32, 1, generator=self.generator) < 0.5, 7, 15))
        return codes

    @staticmethod
    def pack(codes):
        return (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8)

    def test_dequantize_against_the_definition(self):
        codes = torch.randint(0, 256, (3, 48), dtype=torch.uint8, generator=self.generator)  # K = 96
        exponents = torch.randint(0, 255, (3, 3), dtype=torch.uint8, generator=self.generator)
        exponents[0, 0], exponents[1, 1], exponents[2, 2] = 0, 254, 127  # 2 ** -127 (subnormal) and 2 ** 127
        codes[1, 16:32] = 0x33  # block 1 of row 1 at 2 ** 127: 1.5 * 2 ** 127, still finite
        expected = mxfp4_by_definition(codes, exponents)
        self.assertTrue(torch.equal(dequantize(codes, exponents, torch.float32), expected))
        self.assertTrue(torch.equal(dequantize(codes, exponents, torch.bfloat16), expected.to(torch.bfloat16)))
        exponents[2, 0] = 255  # NaN in the spec
        self.assertTrue(bool(torch.isnan(dequantize(codes, exponents, torch.float32)[2, :32]).all()))
        # A uint8 weight with float scales stays int4.
        scales = torch.rand(3, 3, generator=self.generator)
        self.assertTrue(torch.equal(dequantize(codes, scales, torch.float32), dequantize_int4(codes, scales)))

    def test_quantize_keeps_values_on_the_grid(self):
        # Blocks holding a +-6 come back byte for byte; any block of grid values comes back as the same values.
        codes = self.grid_codes(6, 128, largest=True)
        exponents = torch.randint(1, 252, (6, 4), generator=self.generator)
        exponents[0], exponents[1, 0], exponents[2, 3] = 0, 252, 127
        packed = self.pack(codes)
        weight = mxfp4_by_definition(packed, exponents.to(torch.uint8))
        q, e = quantize_mxfp4(weight)
        self.assertTrue(torch.equal(q, packed) and torch.equal(e, exponents.to(torch.uint8)))
        loose = mxfp4_by_definition(self.pack(self.grid_codes(6, 128, largest=False)), exponents.to(torch.uint8))
        self.assertTrue(torch.equal(dequantize(*quantize_mxfp4(loose), torch.float32), loose))
        self.assertTrue(torch.equal(dequantize(*quantize_mxfp4(loose.bfloat16()), torch.float32), loose))

    def test_quantize_rounds_ties_to_even_and_saturates(self):
        weight = torch.zeros(2, 64)
        # Block 0: the largest value 4 gives X = 0 (scale 1); ties go to the even code.
        ties = [4.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -5.0, 0.2500001, 0.1, -0.1, 4.9, 5.1]
        weight[0, :16] = torch.tensor(ties)
        # Block 1: the largest magnitude 7.9 also gives X = 0, and 7.5 and -7.9 saturate at +-6.
        weight[0, 32:36] = torch.tensor([7.5, -7.9, 1.0, -3.0])
        # Row 1: block 0 all zeros, block 1 values far below 2 ** -127 (exponent clamped at 0) that round to 0.
        weight[1, 32:34] = torch.tensor([2.0 ** -140, -(2.0 ** -141)])
        q, e = quantize_mxfp4(weight, "w")
        self.assertEqual(e.tolist(), [[127, 127], [127, 0]])
        values = dequantize(q, e, torch.float32)
        self.assertEqual(values[0, :16].tolist(),
                         [4.0, 0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 0.0, -1.0, -4.0, 0.5, 0.0, 0.0, 4.0, 6.0])
        self.assertEqual(values[0, 32:36].tolist(), [6.0, -6.0, 1.0, -3.0])
        self.assertEqual(q[1].tolist(), [0] * 32)  # zeros are code 0, never -0 (code 8)
        self.assertEqual(quantize_mxfp4(torch.full((1, 32), 9.0))[1].tolist(), [[128]])  # X = 3 - 2: 9 / 2 -> 4
        for bad, words in ((torch.zeros(2, 48), "w has 48 input columns, not a multiple of MXFP4's blocks of 32"),
                           (torch.full((1, 32), float("nan")), "w holds NaN"),
                           (torch.full((1, 32), float("inf")), "w holds NaN or infinite")):
            with self.assertRaises(ExportError) as caught:
                quantize_mxfp4(bad, "w")
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
        for mxfp4 in (False, True):  # the MXFP4 experts decoded to float (--quantize none)
            checkpoint = write_checkpoint(os.path.join(self.tmp.name, f"checkpoint-{mxfp4}"), GPT_OSS_CONFIG,
                                          mxfp4=mxfp4)
            if mxfp4:
                names = load_safetensors(os.path.join(checkpoint, "model.safetensors"))
                self.assertEqual(names["model.layers.0.mlp.experts.gate_up_proj_blocks"].dtype, torch.uint8)
            loaded, manifest = self.export(checkpoint, "--dtype", "float32", "--quantize", "none",
                                           name=f"package-{mxfp4}")
            self.assertEqual((manifest["architecture"], manifest["format_version"], manifest["moe_variant"],
                              manifest["layer_windows"], manifest["chat_template"], manifest["quantization"]),
                             ("gpt_oss", 12, "clamped_swiglu", [8, 0], "raw", "none"))
            graph = str(loaded.inlined_graph)
            self.assertEqual(graph.count("llmc::moe_rms_norm_clamped_swiglu("), 2)
            difference = compare_scenario(self, loaded, manifest, GptOssReference(checkpoint), torch.float32, 1e-4)
            print(f"gpt_oss float32 ({'MXFP4' if mxfp4 else 'dense'} experts): largest logit difference "
                  f"{difference:.2e}")

    def test_mxfp4_package_keeps_the_checkpoint_experts(self):
        config = GPT_OSS_CONFIG
        checkpoint = write_checkpoint(os.path.join(self.tmp.name, "mxfp4"), config, mxfp4=True)
        stored = load_safetensors(os.path.join(checkpoint, "model.safetensors"))
        loaded, manifest = self.export(checkpoint, "--dtype", "float32", name="mxfp4-package")  # mxfp4 by default
        self.assertEqual((manifest["quantization"], manifest["quantization_group_size"], manifest["format_version"],
                          manifest["moe_variant"]), ("mxfp4", 32, 13, "clamped_swiglu"))
        state = loaded.state_dict()
        for layer in range(config["num_hidden_layers"]):
            p = expert_prefix(layer)
            for matrix in ("gate_up_proj", "down_proj"):
                codes, exponents = stored[p + matrix + "_blocks"].flatten(-2), stored[p + matrix + "_scales"]
                if matrix == "gate_up_proj":  # the checkpoint interleaves gate and up rows; the package stacks them
                    codes = torch.cat([codes[:, 0::2], codes[:, 1::2]], dim=1)
                    exponents = torch.cat([exponents[:, 0::2], exponents[:, 1::2]], dim=1)
                for e in range(config["num_local_experts"]):
                    weight, scale = state[f"{p}{e}.{matrix}.weight"], state[f"{p}{e}.{matrix}.weight_scale"]
                    self.assertTrue(torch.equal(weight, codes[e]) and torch.equal(scale, exponents[e]), (layer, e))
                    self.assertEqual(weight.storage().size(), weight.numel())  # its own bytes, not the layer's
            for name in ("self_attn.qkv_proj", "self_attn.o_proj"):
                self.assertEqual((state[f"model.layers.{layer}.{name}.weight"].dtype,
                                  state[f"model.layers.{layer}.{name}.weight_scale"].numel()), (torch.float32, 0))
            self.assertEqual(state[f"model.layers.{layer}.mlp.gate.weight"].dtype, torch.float32)
            self.assertEqual(state[f"{p}3.gate_up_proj.bias"].dtype, torch.float32)
        self.assertEqual((state["lm_head.weight"].dtype, state["lm_head.weight_scale"].numel()), (torch.float32, 0))
        difference = compare_scenario(self, loaded, manifest, GptOssReference(checkpoint), torch.float32, 1e-4,
                                      steps=32)
        print(f"gpt_oss float32 mxfp4 package: largest logit difference {difference:.2e}")
        # The dense checkpoint of the same seed quantized to mxfp4 stands for the same experts (they are on the grid).
        dense = write_checkpoint(os.path.join(self.tmp.name, "dense"), config)
        requantized = self.export(dense, "--dtype", "float32", "--quantize", "mxfp4", name="requantized")[0]
        other = requantized.state_dict()
        for name in state:
            if name.endswith("proj.weight") and ".experts." in name:
                self.assertTrue(torch.equal(dequantize(other[name], other[name + "_scale"], torch.float32),
                                            dequantize(state[name], state[name + "_scale"], torch.float32)), name)
        # Other quantizations decode the MXFP4 experts first.
        int8 = self.export(checkpoint, "--dtype", "float32", "--quantize", "int8", "--group-size", "32",
                           name="int8-from-mxfp4")
        self.assertEqual((int8[1]["quantization"], int8[0].state_dict()[p + "0.down_proj.weight"].dtype),
                         ("int8", torch.int8))

    def test_nan_scale_is_refused(self):
        tensors = checkpoint_tensors(GPT_OSS_CONFIG, 7, mxfp4=True)
        tensors["model.layers.1.mlp.experts.down_proj_scales"][3, 5, 0] = 255
        checkpoint = write_checkpoint(os.path.join(self.tmp.name, "nan"), GPT_OSS_CONFIG, tensors=tensors)
        for flags in ((), ("--quantize", "none")):
            code, error = export("--checkpoint", checkpoint, "--out", os.path.join(self.tmp.name, "bad"), *flags)
            self.assertEqual(code, 2)
            self.assertIn("model.layers.1.mlp.experts.down_proj_scales holds the E8M0 exponent 255 (NaN)", error)

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
