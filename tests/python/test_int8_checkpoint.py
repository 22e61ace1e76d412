"""Checkpoints already quantized to int8 in the compressed-tensors format (llm-compressor's W8A8 and W8A16,
which vLLM serves): the package keeps their int8 weights and scales bit for bit, and what it cannot keep
exactly is refused with a message that says why."""
import json
import os
import tempfile
import unittest

import torch

import test_exporter
from int8_checkpoint import make_int8_checkpoint
from test_exporter import dequantized_copy, export, scenario_logits


class Int8CheckpointTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def folder(self, name):
        path = os.path.join(self.tmp.name, name)
        os.makedirs(path, exist_ok=True)
        return path

    def export_checkpoint(self, *extra, **checkpoint_args):
        checkpoint = self.folder("ckpt")
        quantized, config = make_int8_checkpoint(checkpoint, **checkpoint_args)
        out = self.folder("pkg")
        code, error = export("--checkpoint", checkpoint, "--out", out, "--dtype", "float32", *extra)
        return code, error, out, quantized, config

    def check_keeps_checkpoint_weights(self, group_size, **checkpoint_args):
        code, error, out, quantized, config = self.export_checkpoint(group_size=group_size, **checkpoint_args)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        self.assertEqual((manifest["quantization"], manifest["quantization_group_size"]), ("int8", group_size))
        loaded = torch.jit.load(os.path.join(out, "model.pt"))
        self.assertTrue(any(bool((q == -128).any()) for q, _ in quantized.values()), "the checkpoint holds -128")
        for layer_index in range(config.num_layers):
            layer = getattr(loaded.model.layers, str(layer_index))
            prefix = f"model.layers.{layer_index}."

            def exact(*parts):
                """The stacked int8 matrix and its scales per package group (a tensor's one scale per row)."""
                pieces = [quantized[prefix + part + ".weight"] for part in parts]
                scales = [scale.reshape(1, 1).expand(q.shape[0], 1) if scale.numel() == 1 else scale
                          for q, scale in pieces]
                return torch.cat([q for q, _ in pieces]), torch.cat(scales)

            for module, parts in ((layer.self_attn.qkv_proj, ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
                                  (layer.self_attn.o_proj, ("self_attn.o_proj",)),
                                  (layer.mlp.gate_up_proj, ("mlp.gate_proj", "mlp.up_proj")),
                                  (layer.mlp.down_proj, ("mlp.down_proj",))):
                q, scale = exact(*parts)
                self.assertTrue(torch.equal(module.weight, q), parts)
                self.assertEqual(module.weight_scale.dtype, torch.float32)
                self.assertTrue(torch.equal(module.weight_scale, scale), parts)
        # The LM head, left in float by the checkpoint, is quantized by the exporter; the tied embedding shares it.
        self.assertEqual(loaded.lm_head.weight.dtype, torch.int8)
        self.assertIs(loaded.model.embed_tokens.weight, loaded.lm_head.weight)
        # The package computes what its int8 weights stand for.
        dequantized = dequantized_copy(loaded, config)
        actual = scenario_logits(loaded, dequantized, config, torch.float32)
        expected = scenario_logits(dequantized, dequantized, config, torch.float32)
        self.assertTrue(torch.allclose(actual, expected, atol=1e-5), (actual - expected).abs().max())
        test_exporter.ExporterTest.check_forward_top_k(self, loaded, config)

    def test_w8a8_per_channel(self):
        self.check_keeps_checkpoint_weights(0, strategy="channel")

    def test_w8a16_packed_in_groups_of_32(self):
        self.check_keeps_checkpoint_weights(32, strategy="group", packed=True, activations=False)

    def test_one_scale_per_tensor_becomes_one_per_row(self):
        self.check_keeps_checkpoint_weights(0, strategy="tensor")

    def check_refused(self, message, *extra, **checkpoint_args):
        code, error, _, _, _ = self.export_checkpoint(*extra, **checkpoint_args)
        self.assertEqual(code, 2, error)
        self.assertIn(message, error)

    def test_what_cannot_be_kept_exactly_is_refused(self):
        def config_edit(change):
            return lambda hf, tensors: change(hf["quantization_config"])

        def weights_edit(**fields):
            return config_edit(lambda q: q["config_groups"]["group_0"]["weights"].update(fields))

        cases = [
            ("checkpoints quantized with 'gptq' are not supported", config_edit(lambda q: q.update(quant_method="gptq"))),
            ("4-bit int weights are not supported", weights_edit(num_bits=4)),
            ("8-bit float weights are not supported", weights_edit(type="float")),
            ("asymmetric weights (zero points) are not supported", weights_edit(symmetric=False)),
            ("weight strategy 'block' is not supported", weights_edit(strategy="block")),
            ("compressed-tensors format float-quantized is not supported", config_edit(lambda q: q.update(format="float-quantized"))),
            ("a quantized KV cache (kv_cache_scheme) is not supported",
             config_edit(lambda q: q.update(kv_cache_scheme={"num_bits": 8, "type": "float"}))),
            ("only a compressed checkpoint holds its int8 weights", config_edit(lambda q: q.update(quantization_status="frozen"))),
            ("model.layers.0.mlp.down_proj.weight_zero_point is not zero",
             lambda hf, tensors: tensors["model.layers.0.mlp.down_proj.weight_zero_point"].fill_(3)),
            ("model.layers.1.mlp.gate_proj.weight is torch.float32 (128, 64), but",
             lambda hf, tensors: tensors.update({"model.layers.1.mlp.gate_proj.weight":
                                                 tensors["model.layers.1.mlp.gate_proj.weight"].float()})),
            ("model.layers.0.self_attn.k_proj.weight is not int8 in the checkpoint",
             lambda hf, tensors: [tensors.pop("model.layers.0.self_attn.k_proj" + suffix)
                                  for suffix in (".weight_scale", ".weight_zero_point", ".input_scale")] and
             tensors.update({"model.layers.0.self_attn.k_proj.weight":
                             tensors["model.layers.0.self_attn.k_proj.weight"].float()})),
            ("holds a NaN or infinite scale",
             lambda hf, tensors: tensors["model.layers.1.mlp.up_proj.weight_scale"].fill_(float("inf"))),
        ]
        for message, edit in cases:
            with self.subTest(message=message):
                self.check_refused(message, edit=edit)
        with self.subTest("regrouping"):
            self.check_refused("the checkpoint's int8 weights have one scale per row; --group-size 32 cannot regroup",
                               "--group-size", "32")
        with self.subTest("activation order"):
            self.check_refused("reorders the input columns (activation order)", strategy="group", group_size=32,
                               edit=lambda hf, tensors: tensors.update({"model.layers.1.self_attn.o_proj.weight_g_idx":
                                                                        torch.arange(64, dtype=torch.int32) % 2}))
        with self.subTest("packed shape"):
            self.check_refused("does not hold a [64, 64] weight", packed=True, edit=lambda hf, tensors: tensors.update(
                {"model.layers.0.self_attn.o_proj.weight_shape": torch.tensor([64, 64], dtype=torch.int32),
                 "model.layers.0.self_attn.o_proj.weight_packed": torch.zeros(64, 8, dtype=torch.int32)}))


if __name__ == "__main__":
    unittest.main()
