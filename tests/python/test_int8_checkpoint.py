"""Checkpoints already quantized to int8 in the compressed-tensors format (llm-compressor's W8A8 and W8A16,
which vLLM serves): the package keeps their int8 weights and scales bit for bit, and what it cannot keep
exactly is refused with a message that says why."""
import json
import os
import tempfile
import unittest

import torch

import test_exporter
from int8_checkpoint import compressed_int8, make_int8_checkpoint, pack_int8
from llmc_export.config import ExportError
from llmc_export.prequantized import Int8Scheme, _unpack, take_int8_weights
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
        # A W8A16 checkpoint asks to be served with 16-bit activations; W8A8 leaves the worker its default.
        w8a16 = checkpoint_args.get("activations") is False
        self.assertEqual(manifest.get("served_quantization"), "w8a16" if w8a16 else None)
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

    def test_untied_lm_head_quantized_by_the_checkpoint_is_kept(self):
        code, error, out, quantized, config = self.export_checkpoint(
            hf_overrides={"tie_word_embeddings": False}, quantize_lm_head=True)
        self.assertEqual(code, 0, error)
        loaded = torch.jit.load(os.path.join(out, "model.pt"))
        q, scale = quantized["lm_head.weight"]
        self.assertTrue(torch.equal(loaded.lm_head.weight, q))
        self.assertTrue(torch.equal(loaded.lm_head.weight_scale, scale))
        self.assertEqual(loaded.model.embed_tokens.weight.dtype, torch.float32)

    def test_config_groups_of_two_sizes_keep_the_finer_one(self):
        """A second config group with groups of 64 (here the down projections): its scales repeat over the
        package's groups of 32, and a trivial weight_g_idx is accepted."""
        coarse = {}

        def edit(hf, tensors):
            hf["quantization_config"]["config_groups"]["group_1"] = {
                "targets": ["re:.*down_proj"], "weights": {"num_bits": 8, "type": "int", "symmetric": True,
                                                          "strategy": "group", "group_size": 64}}
            for layer in range(2):
                base = f"model.layers.{layer}.mlp.down_proj"
                q, scale = compressed_int8(torch.randn(64, 128, generator=torch.Generator().manual_seed(layer)),
                                           "group", 64)
                coarse[base] = (q, scale.to(torch.bfloat16))
                tensors[base + ".weight"], tensors[base + ".weight_scale"] = q, scale.to(torch.bfloat16)
                tensors[base + ".weight_g_idx"] = torch.arange(128, dtype=torch.int32) // 64

        code, error, out, _, _ = self.export_checkpoint(strategy="group", group_size=32, edit=edit)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            self.assertEqual(json.load(f)["quantization_group_size"], 32)
        loaded = torch.jit.load(os.path.join(out, "model.pt"))
        for layer in range(2):
            q, scale = coarse[f"model.layers.{layer}.mlp.down_proj"]
            down = getattr(loaded.model.layers, str(layer)).mlp.down_proj
            self.assertTrue(torch.equal(down.weight, q))
            self.assertTrue(torch.equal(down.weight_scale, scale.float().repeat_interleave(2, dim=1)))

    def test_packed_rows_of_any_width_unpack(self):
        q = torch.tensor([[-128, 127, 0, -1, 5, -7, 100], [1, 2, 3, 4, -128, -128, 127], [0] * 7], dtype=torch.int8)
        for shape in (torch.tensor([3, 7]), torch.tensor([[3, 7]], dtype=torch.int32)):
            self.assertTrue(torch.equal(_unpack(pack_int8(q), shape, "w"), q))
        with self.assertRaisesRegex(ExportError, "beside two integers"):
            _unpack(pack_int8(q), torch.tensor([3.0, 7.0]), "w")
        tensors = {"w.weight_packed": pack_int8(q), "w.weight_shape": torch.tensor([3, 7]),
                   "w.weight_scale": torch.ones(3, 1)}
        exact = take_int8_weights(tensors, Int8Scheme(group_size=0, packed=True, activations="none"))
        self.assertTrue(torch.equal(exact["w.weight"][0], q))
        self.assertEqual(sorted(tensors), ["w.weight"])  # only the placeholder the model loads is left

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
            ("checkpoints quantized with 'bitsandbytes' are not supported",
             config_edit(lambda q: q.update(quant_method="bitsandbytes"))),
            # 4-bit weights are read only as pack-quantized (test_int4_checkpoint.py).
            ("4-bit format 'int-quantized' is not supported", weights_edit(num_bits=4)),
            ("3-bit int weights are not supported", weights_edit(num_bits=3)),
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
            ("input_activations True is not an object",
             config_edit(lambda q: q["config_groups"]["group_0"].update(input_activations=True))),
            ("format ['int-quantized'] is not a name", config_edit(lambda q: q.update(format=["int-quantized"]))),
            ("sparse checkpoints (dense) are not supported", config_edit(lambda q: q.update(sparsity_config="dense"))),
            ("weight group size 32.0 is not supported", weights_edit(strategy="group", group_size=32.0)),
            ("model.layers.0.mlp.up_proj.weight_scale is torch.float64; scales must be",
             lambda hf, tensors: tensors.update({"model.layers.0.mlp.up_proj.weight_scale":
                                                 tensors["model.layers.0.mlp.up_proj.weight_scale"].double()})),
            ("model.layers.0.mlp.up_proj.weight_scale has shape (128, 0), which is not one scale per tensor",
             lambda hf, tensors: tensors.update({"model.layers.0.mlp.up_proj.weight_scale": torch.zeros(128, 0)})),
            ("checkpoint tensors model.layers.1.self_attn.o_proj.weight are torch.int8 without a quantization scale",
             lambda hf, tensors: [tensors.pop("model.layers.1.self_attn.o_proj" + suffix)
                                  for suffix in (".weight_scale", ".weight_zero_point", ".input_scale")]),
        ]
        for message, edit in cases:
            with self.subTest(message=message):
                self.check_refused(message, edit=edit)
        with self.subTest("regrouping"):
            self.check_refused("--group-size 32 does not match the checkpoint's int8 weights, which have one scale "
                               "per row: leave --group-size out", "--group-size", "32")
        with self.subTest("not int8"):
            self.check_refused("the checkpoint's weights are int8 (compressed-tensors), so its package is int8: leave "
                               "out --quantize none", "--quantize", "none")
        with self.subTest("a scale on columns no declared group covers"):
            # 4 scales over 64 columns: groups of 16, which the config (groups of 32) never declared.
            self.check_refused("has shape (64, 4), which is not one scale per tensor, per row or per group of 32 whole "
                               "columns", strategy="group", group_size=32,
                               edit=lambda hf, tensors: tensors.update(
                                   {"model.layers.0.self_attn.o_proj.weight_scale": torch.ones(64, 4)}))
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
