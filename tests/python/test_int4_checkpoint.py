"""4-bit checkpoints (GPTQ, AWQ, compressed-tensors pack-quantized) exported as they are: the package's dequantized
matrices are the checkpoint's bit for bit, its logits those of a float model holding them, symmetric checkpoints
give symmetric packages (version 9) and asymmetric ones keep their zero points (version 11); the exporter's own
asymmetric int4 (--int4-zero-point); and what cannot be kept exactly is refused by name."""
import json
import os
import tempfile
import unittest

import torch

import test_exporter
from int4_checkpoint import make_int4_checkpoint
from llmc_export.ops import dequantize
from llmc_export.quantize import dequantize_int4, quantize_int4
from llmc_export.safetensors import read_checkpoint
from test_exporter import dequantized_copy, export, scenario_logits


def input_order(stored, base):
    """The order an act-order weight's inputs take in the package: sorted by the checkpoint's g_idx, stably."""
    group_index = stored.get(base + ".g_idx", stored.get(base + ".weight_g_idx"))
    return torch.sort(group_index.long(), stable=True).indices

STACKS = (("self_attn.qkv_proj", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
          ("self_attn.o_proj", ("self_attn.o_proj",)),
          ("mlp.gate_up_proj", ("mlp.gate_proj", "mlp.up_proj")),
          ("mlp.down_proj", ("mlp.down_proj",)))


class Int4CheckpointTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def folder(self, name):
        path = os.path.join(self.tmp.name, name)
        os.makedirs(path, exist_ok=True)
        return path

    def export_checkpoint(self, *extra, **checkpoint_args):
        checkpoint = self.folder("ckpt")
        dequantized, config = make_int4_checkpoint(checkpoint, **checkpoint_args)
        out = self.folder("pkg")
        code, error = export("--checkpoint", checkpoint, "--out", out, "--dtype", "float32", *extra)
        return code, error, out, dequantized, config

    def check_exact(self, fmt, group_size, asymmetric, package_group_size=None, hf_overrides=None, act_order=False,
                    config_edit=None):
        def edit(hf_config, tensors):
            hf_config["quantization_config"].update(config_edit)
        code, error, out, checkpoint, config = self.export_checkpoint(
            fmt=fmt, group_size=group_size, asymmetric=asymmetric, hf_overrides=hf_overrides, act_order=act_order,
            edit=edit if config_edit else None)
        self.assertEqual(code, 0, error)
        stored = read_checkpoint(self.folder("ckpt"))
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["quantization"], "int4")
        self.assertEqual(manifest["quantization_group_size"], package_group_size or group_size)
        self.assertEqual(manifest["format_version"], 11 if asymmetric else 9)
        loaded = torch.jit.load(os.path.join(out, "model.pt"))
        gathered = 0
        for layer_index in range(config.num_layers):
            layer = getattr(loaded.model.layers, str(layer_index))
            # Act-order: down_proj's inputs sorted by group, and gate/up's rows with them (input_order.py).
            down_order = input_order(stored, f"model.layers.{layer_index}.mlp.down_proj") if act_order else None
            for module_name, parts in STACKS:
                module = layer
                for attribute in module_name.split("."):
                    module = getattr(module, attribute)
                self.assertEqual(module.weight.dtype, torch.uint8)
                self.assertEqual(module.weight_scale.dim(), 3 if asymmetric else 2)
                want = torch.cat([checkpoint[f"model.layers.{layer_index}.{part}.weight"] for part in parts])
                if hasattr(module, "input_order"):
                    gathered += 1
                    self.assertEqual(module.input_order.tolist(),
                                     input_order(stored, f"model.layers.{layer_index}.{parts[0]}").tolist())
                    want = want[:, module.input_order]
                if down_order is not None and module_name == "mlp.down_proj":
                    want = want[:, down_order]
                if down_order is not None and module_name == "mlp.gate_up_proj":
                    want = want[torch.cat([down_order, config.intermediate_size + down_order])]
                got = dequantize(module.weight, module.weight_scale, torch.float32)
                self.assertTrue(torch.equal(got, want), (fmt, module_name, (got - want).abs().max()))
            self.assertFalse(hasattr(layer.mlp.down_proj, "input_order"))  # absorbed into gate/up's rows
            # The norms before q/k/v and gate/up hold their weights in those matrices' input order.
            for norm, module in (("input_layernorm", layer.self_attn.qkv_proj),
                                 ("post_attention_layernorm", layer.mlp.gate_up_proj)):
                want = stored[f"model.layers.{layer_index}.{norm}.weight"].float()
                if act_order:
                    want = want[module.input_order]
                self.assertTrue(torch.equal(getattr(layer, norm).weight, want), (fmt, layer_index, norm))
        # qkv, o and gate/up of every layer gather their input: act-order, or not at all.
        self.assertEqual(gathered, 3 * config.num_layers if act_order else 0)
        # The LM head, in float in the checkpoint, is quantized by the exporter (symmetric); the tied embedding
        # shares it.
        self.assertEqual(loaded.lm_head.weight.dtype, torch.uint8)
        self.assertEqual(loaded.lm_head.weight_scale.dim(), 2)
        self.assertIs(loaded.model.embed_tokens.weight, loaded.lm_head.weight)
        # The reference knows nothing of orders: the checkpoint's matrices and norms as they are, the LM head as
        # the package quantized it.
        reference = dequantized_copy(loaded, config)
        with torch.no_grad():
            for layer_index, layer in enumerate(reference.model.layers):
                for module_name, parts in STACKS:
                    layer.get_submodule(module_name).weight.copy_(
                        torch.cat([checkpoint[f"model.layers.{layer_index}.{part}.weight"] for part in parts]))
                for norm in ("input_layernorm", "post_attention_layernorm"):
                    getattr(layer, norm).weight.copy_(stored[f"model.layers.{layer_index}.{norm}.weight"].float())
        actual = scenario_logits(loaded, reference, config, torch.float32)
        expected = scenario_logits(reference, reference, config, torch.float32)
        self.assertTrue(torch.allclose(actual, expected, atol=1e-4), (actual - expected).abs().max())
        test_exporter.ExporterTest.check_forward_top_k(self, loaded, config)

    def test_gptq_act_order(self):
        self.check_exact("gptq", 32, asymmetric=True, act_order=True)
        self.check_exact("gptq_v2", 32, asymmetric=False, act_order=True)

    def test_compressed_tensors_act_order_group(self):
        self.check_exact("compressed-tensors", 32, asymmetric=True, act_order=True)

    def test_gptq_symmetric(self):
        self.check_exact("gptq", 32, asymmetric=False)

    def test_gptq_asymmetric_v1_zeros_minus_one(self):
        self.check_exact("gptq", 64, asymmetric=True)

    def test_gptq_v2_asymmetric(self):
        self.check_exact("gptq_v2", 32, asymmetric=True)

    def test_gptq_zero_biases_the_architecture_lacks_are_dropped(self):
        def zero_biases(hf_config, tensors):
            tensors["model.layers.0.self_attn.o_proj.bias"] = torch.zeros(64, dtype=torch.float16)
            tensors["model.layers.1.mlp.down_proj.bias"] = torch.zeros(64, dtype=torch.float16)
        code, error, *_ = self.export_checkpoint(fmt="gptq", group_size=32, edit=zero_biases)
        self.assertEqual(code, 0, error)

        def nonzero_bias(hf_config, tensors):
            tensors["model.layers.0.self_attn.o_proj.bias"] = torch.ones(64, dtype=torch.float16)
        code, error, *_ = self.export_checkpoint(fmt="gptq", group_size=32, edit=nonzero_bias)
        self.assertEqual(code, 2)
        self.assertIn("model.layers.0.self_attn.o_proj.bias", error)

    def test_gptq_per_channel_repeats_over_groups_of_128(self):
        self.check_exact("gptq", -1, asymmetric=True, package_group_size=128,
                         hf_overrides={"hidden_size": 128, "intermediate_size": 256})

    def test_awq(self):
        self.check_exact("awq", 32, asymmetric=True)

    def test_compressed_tensors_symmetric(self):
        self.check_exact("compressed-tensors", 64, asymmetric=False)

    def test_compressed_tensors_asymmetric(self):
        self.check_exact("compressed-tensors", 32, asymmetric=True)

    def test_gptq_8bit_symmetric_is_an_int8_package(self):
        for group_size in (64, -1):
            code, error, out, checkpoint, config = self.export_checkpoint(fmt="gptq8", group_size=group_size)
            self.assertEqual(code, 0, error)
            with open(os.path.join(out, "llmc-model.json")) as f:
                manifest = json.load(f)
            self.assertEqual((manifest["quantization"], manifest["quantization_group_size"],
                              manifest.get("served_quantization")), ("int8", max(group_size, 0), "w8a16"))
            loaded = torch.jit.load(os.path.join(out, "model.pt"))
            layer = getattr(loaded.model.layers, "0")
            self.assertEqual(layer.mlp.down_proj.weight.dtype, torch.int8)
            got = dequantize(layer.mlp.down_proj.weight, layer.mlp.down_proj.weight_scale, torch.float32)
            self.assertTrue(torch.equal(got, checkpoint["model.layers.0.mlp.down_proj.weight"]))
            reference = dequantized_copy(loaded, config)
            actual = scenario_logits(loaded, reference, config, torch.float32)
            expected = scenario_logits(reference, reference, config, torch.float32)
            self.assertTrue(torch.allclose(actual, expected, atol=1e-4), (actual - expected).abs().max())
        code, error, *_ = self.export_checkpoint(fmt="gptq8", group_size=64, asymmetric=True)
        self.assertEqual(code, 2)
        self.assertIn("asymmetric 8-bit GPTQ (zero points other than 128) is not supported", error)

    def check_refused(self, message, *extra, **checkpoint_args):
        code, error, *_ = self.export_checkpoint(*extra, **checkpoint_args)
        self.assertEqual(code, 2, error)
        self.assertIn(message, error)

    def test_refusals_by_name(self):
        def config_edit(**fields):
            return lambda hf_config, tensors: hf_config["quantization_config"].update(fields)

        self.check_refused("GPTQ 3-bit weights are not supported", fmt="gptq", edit=config_edit(bits=3))
        self.check_refused("GPTQ 2-bit weights are not supported", fmt="gptq", edit=config_edit(bits=2))
        self.check_refused("checkpoint_format 'marlin'", fmt="gptq", edit=config_edit(checkpoint_format="marlin"))
        self.check_refused("group size 48 is not supported", fmt="gptq", edit=config_edit(group_size=48))
        self.check_refused("AWQ version 'gemv'", fmt="awq", edit=config_edit(version="gemv"))
        self.check_refused("zero_point false", fmt="awq", edit=config_edit(zero_point=False))
        self.check_refused("'bitsandbytes' are not supported", fmt="awq", edit=config_edit(quant_method="bitsandbytes"))

        def drop_g_idx(hf_config, tensors):
            del tensors["model.layers.1.self_attn.o_proj.g_idx"]
        self.check_refused("model.layers.1.self_attn.o_proj.g_idx is missing: an act-order checkpoint", fmt="gptq",
                           act_order=True, edit=drop_g_idx)

        def uneven_groups(hf_config, tensors):
            name = "model.layers.0.mlp.down_proj.g_idx"
            tensors[name] = tensors[name].clone()
            tensors[name][tensors[name] == 1] = 0
        self.check_refused("model.layers.0.mlp.down_proj.g_idx gives group 0 64 inputs, not 32", fmt="gptq",
                           act_order=True, edit=uneven_groups)

        def k_order_of_its_own(hf_config, tensors):
            name = "model.layers.0.self_attn.k_proj.g_idx"
            tensors[name] = tensors[name].flip(0).contiguous()
        self.check_refused("read one input but the checkpoint orders it differently", fmt="gptq", act_order=True,
                           edit=k_order_of_its_own)
        self.check_refused("8-bit GPTQ with act-order", fmt="gptq8", edit=config_edit(desc_act=True))

        def actorder(value):
            def edit(hf_config, tensors):
                hf_config["quantization_config"]["config_groups"]["group_0"]["weights"]["actorder"] = value
            return edit
        self.check_refused("actorder 'dynamic' is not supported", fmt="compressed-tensors", edit=actorder("dynamic"))

    def test_act_order_without_groups_to_order(self):
        # GPTQ desc_act with one scale per channel: every input in group 0, nothing to reorder.
        self.check_exact("gptq", -1, asymmetric=True, package_group_size=128, act_order=False,
                         hf_overrides={"hidden_size": 128, "intermediate_size": 256},
                         config_edit={"desc_act": True})

        def w4a8(hf_config, tensors):
            group = hf_config["quantization_config"]["config_groups"]["group_0"]
            group["input_activations"] = {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True}
        self.check_refused("(W4A8) are not supported", fmt="compressed-tensors", edit=w4a8)
        self.check_refused("its package is int4: leave out --quantize int8", "--quantize", "int8", fmt="awq")
        self.check_refused("does not match the checkpoint's 4-bit weights", "--group-size", "128", fmt="gptq")


class Int4ZeroPointExportTest(unittest.TestCase):
    def test_asymmetric_quantizer_round_trip(self):
        torch.manual_seed(7)
        weight = torch.randn(70, 256) * 0.05 + 0.02  # off-centre groups, where zero points pay
        weight[3].zero_()
        weight[4] = 0.5  # one value everywhere: the range widens to hold 0
        packed, scales = quantize_int4(weight, 64, zero_point=True)
        self.assertEqual((packed.dtype, tuple(packed.shape), tuple(scales.shape)), (torch.uint8, (70, 128), (70, 4, 2)))
        zero = scales[..., 1]
        self.assertTrue(bool((zero == zero.round()).all()) and bool((zero >= 0).all()) and bool((zero <= 15).all()))
        self.assertTrue(bool((scales[3, :, 0] == 1).all()) and bool((zero[3] == 8).all()))
        back = dequantize_int4(packed, scales)
        self.assertTrue(torch.equal(back, dequantize(packed, scales, torch.float32)))
        # Every group errs no more than under the plain rule (the range, widened to hold 0, in 15 steps), and the
        # search does move groups, to less error in all.
        grouped = weight.double().reshape(70, 4, 64)
        low, high = grouped.amin(-1, keepdim=True).clamp(max=0), grouped.amax(-1, keepdim=True).clamp(min=0)
        plain_scale = torch.where(high == low, torch.ones_like(low), ((high - low) / 15).float().double())
        plain_zero = torch.where(high == low, torch.full_like(low, 8), torch.round(-low / plain_scale).clamp(0, 15))
        plain = ((torch.round(grouped / plain_scale) + plain_zero).clamp(0, 15) - plain_zero) * plain_scale
        plain_error = ((plain.float().double() - grouped) ** 2).sum(-1)
        searched_error = ((back.double().reshape(70, 4, 64) - grouped) ** 2).sum(-1)
        self.assertTrue(bool((searched_error <= plain_error * (1 + 1e-6)).all()))
        self.assertLess(float(searched_error.sum()), 0.95 * float(plain_error.sum()))
        # Nearer than the symmetric quantizer on off-centre weights.
        symmetric = dequantize_int4(*quantize_int4(weight, 64))
        self.assertLess(float((back - weight).abs().mean()), float((symmetric - weight).abs().mean()))

    def test_export_int4_zero_point(self):
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint, out = os.path.join(tmp, "ckpt"), os.path.join(tmp, "pkg")
            os.makedirs(checkpoint)
            _, config = test_exporter.make_checkpoint(checkpoint)
            code, error = export("--checkpoint", checkpoint, "--out", out, "--dtype", "float32", "--quantize", "int4",
                                 "--group-size", "32", "--int4-zero-point")
            self.assertEqual(code, 0, error)
            with open(os.path.join(out, "llmc-model.json")) as f:
                manifest = json.load(f)
            self.assertEqual((manifest["quantization"], manifest["format_version"]), ("int4", 11))
            loaded = torch.jit.load(os.path.join(out, "model.pt"))
            self.assertEqual(tuple(loaded.lm_head.weight_scale.shape[-1:]), (2,))
            reference = dequantized_copy(loaded, config)
            actual = scenario_logits(loaded, reference, config, torch.float32)
            expected = scenario_logits(reference, reference, config, torch.float32)
            self.assertTrue(torch.allclose(actual, expected, atol=1e-4), (actual - expected).abs().max())
            code, error = export("--checkpoint", checkpoint, "--out", out, "--int4-zero-point")
            self.assertEqual(code, 2)
            self.assertIn("--int4-zero-point needs --quantize int4", error)


if __name__ == "__main__":
    unittest.main()
