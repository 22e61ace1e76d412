"""Mixtures of experts (Qwen3-MoE, Mixtral): config reading and refusals, the routing operator's rules (ties,
every expert chosen, one expert taking every row), and packages exported from checkpoints in Hugging Face's layout
that match an independent forward of the same folder (moe_reference.py) over the paged cache, in float32,
bfloat16, int8, int4 and MXFP4 experts (from a checkpoint and random)."""
import contextlib
import io
import json
import os
import tempfile
import unittest

import torch
import torch.nn.functional as F

import paged_scenario  # noqa: F401  (puts tools/ on sys.path)
import export_model
from llmc_export.config import ExportError, ModelConfig
from llmc_export.ops import dequantize, moe_rms_norm_swiglu_reference, route_reference
from moe_reference import MIXTRAL_CONFIG, QWEN3_MOE_CONFIG, MoeReference, checkpoint_tensors, write_checkpoint
from qwen3_reference import load_safetensors
from test_qwen3 import compare_scenario


def export(*argv):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = export_model.main(list(argv))
    return code, stderr.getvalue()


class MoeConfigTest(unittest.TestCase):
    def test_qwen3_moe_fields(self):
        config = ModelConfig.from_hf_config_dict(QWEN3_MOE_CONFIG)
        self.assertEqual((config.architecture, config.num_experts, config.experts_per_token,
                          config.moe_intermediate_size, config.normalize_top_k, config.moe_layers),
                         ("qwen3_moe", 8, 3, 48, True, (0, 2)))
        self.assertTrue(config.qk_norm)
        self.assertFalse(config.qkv_bias)
        # Hugging Face's defaults: every layer sparse (decoder_sparse_step 1), no renormalization.
        plain = dict(QWEN3_MOE_CONFIG)
        for key in ("decoder_sparse_step", "mlp_only_layers", "norm_topk_prob"):
            del plain[key]
        config = ModelConfig.from_hf_config_dict(plain)
        self.assertEqual((config.moe_layers, config.normalize_top_k), ((0, 1, 2), False))
        stepped = ModelConfig.from_hf_config_dict(dict(QWEN3_MOE_CONFIG, decoder_sparse_step=2, mlp_only_layers=[]))
        self.assertEqual(stepped.moe_layers, (1,))

    def test_mixtral_fields(self):
        config = ModelConfig.from_hf_config_dict(MIXTRAL_CONFIG)
        self.assertEqual((config.architecture, config.num_experts, config.experts_per_token,
                          config.moe_intermediate_size, config.normalize_top_k, config.moe_layers, config.qk_norm),
                         ("mixtral", 8, 2, 80, True, (0, 1), False))
        # A sliding window is served per layer, as Mistral's.
        windowed = ModelConfig.from_hf_config_dict(dict(MIXTRAL_CONFIG, sliding_window=256))
        self.assertEqual((windowed.layer_windows, windowed.max_context_length), ((256, 256), 1024))

    def test_refusals_name_what(self):
        for base, change, words in (
                (QWEN3_MOE_CONFIG, {"num_experts_per_tok": 9}, "num_experts_per_tok 9"),
                (QWEN3_MOE_CONFIG, {"num_experts": 0}, "num_experts must be a positive integer"),
                (QWEN3_MOE_CONFIG, {"moe_intermediate_size": None}, "moe_intermediate_size"),
                (QWEN3_MOE_CONFIG, {"hidden_act": "gelu"}, "hidden_act 'gelu'"),
                (QWEN3_MOE_CONFIG, {"use_sliding_window": True}, "use_sliding_window"),
                (QWEN3_MOE_CONFIG, {"shared_expert_intermediate_size": 512}, "shared expert"),
                (QWEN3_MOE_CONFIG, {"mlp_only_layers": "1"}, "mlp_only_layers"),
                (MIXTRAL_CONFIG, {"num_local_experts": 1024}, "1024 experts"),
                (MIXTRAL_CONFIG, {"model_type": "qwen2_moe"}, "unsupported architecture 'qwen2_moe'")):
            with self.assertRaises(ExportError, msg=change) as caught:
                ModelConfig.from_hf_config_dict(dict(base, **change))
            self.assertIn(words, str(caught.exception))


class RoutingTest(unittest.TestCase):
    """The operator's routing and mixing, as its reference implements them (the C++ kernels are checked against
    the same rules in tests/worker/moe_ops_test.cc)."""

    def setUp(self):
        self.generator = torch.Generator().manual_seed(3)

    def experts(self, count, hidden, width):
        def matrix(rows, columns):
            return torch.randn(rows, columns, generator=self.generator) * columns ** -0.5
        gate_up = [matrix(2 * width, hidden) for _ in range(count)]
        down = [matrix(hidden, width) for _ in range(count)]
        empty = [torch.empty(0) for _ in range(count)]
        return gate_up, empty, down, list(empty)

    def test_ties_choose_the_lower_expert(self):
        x = torch.randn(5, 16, generator=self.generator)
        router = torch.randn(1, 16, generator=self.generator).repeat(6, 1)  # six identical rows: all tied
        experts, weights = route_reference(x, router, 2, False)
        self.assertTrue(torch.equal(experts, torch.tensor([[0, 1]] * 5)))
        self.assertTrue(torch.allclose(weights, torch.full((5, 2), 1 / 6)))
        experts, weights = route_reference(x, router, 2, True)
        self.assertTrue(torch.allclose(weights, torch.full((5, 2), 0.5)))

    def test_every_expert_chosen_and_one_expert_takes_every_row(self):
        hidden, width, count = 16, 8, 4
        weights = self.experts(count, hidden, width)
        norm = torch.ones(hidden)
        x = torch.randn(4, hidden, generator=self.generator)
        # Router rows aimed at one row each: row r's top choice is expert r.
        normalized = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        router = 10.0 * F.normalize(normalized, dim=-1)
        experts, _ = route_reference(normalized, router, 1, True)
        self.assertEqual(experts[:, 0].tolist(), [0, 1, 2, 3])
        out = moe_rms_norm_swiglu_reference(x, norm, 1e-6, router, *weights, 1, True, width)
        for row in range(4):  # top-1 renormalized: each row is its own expert's output
            gate_up = F.linear(normalized[row:row + 1], weights[0][row])
            expected = F.linear(F.silu(gate_up[:, :width]) * gate_up[:, width:], weights[2][row])
            self.assertTrue(torch.allclose(out[row] - x[row], expected[0], atol=1e-6))
        # A router that prefers expert 2 for every row: it takes all four, with the whole weight.
        router = torch.zeros(count, hidden)
        router[2] = 1e3 * torch.sign(normalized).sum(0).sign()
        experts, chosen_weights = route_reference(normalized, router, 2, True)
        self.assertTrue(bool((experts[:, 0] == 2).all()))
        self.assertTrue(bool((chosen_weights[:, 0] > 0.99).all()))


class MoeExportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def export(self, checkpoint, *flags, name="package"):
        out = os.path.join(self.tmp.name, name)
        code, error = export("--checkpoint", checkpoint, "--out", out, "--name", "tiny-moe", *flags)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        return torch.jit.load(os.path.join(out, "model.pt")), manifest

    def check_float32(self, config, label):
        checkpoint = write_checkpoint(os.path.join(self.tmp.name, label), config)
        loaded, manifest = self.export(checkpoint, "--dtype", "float32")
        sparse = [layer for layer in range(config["num_hidden_layers"])
                  if config["model_type"] == "mixtral" or layer not in config.get("mlp_only_layers", [])]
        self.assertEqual((manifest["architecture"], manifest["format_version"], manifest["moe_layers"],
                          manifest["num_experts"], manifest["normalize_top_k"]),
                         (config["model_type"], 12, sparse, 8, True))
        self.assertEqual(str(loaded.inlined_graph).count("llmc::moe_rms_norm_swiglu("), len(sparse))
        reference = MoeReference(checkpoint)
        difference = compare_scenario(self, loaded, manifest, reference, torch.float32, 1e-4)
        print(f"{label} float32: largest logit difference {difference:.2e}")
        return checkpoint

    def test_qwen3_moe_float32_matches_reference(self):
        self.check_float32(QWEN3_MOE_CONFIG, "qwen3_moe")

    def test_mixtral_float32_matches_reference(self):
        checkpoint = self.check_float32(MIXTRAL_CONFIG, "mixtral")
        names = load_safetensors(os.path.join(checkpoint, "model.safetensors"))
        self.assertIn("model.layers.1.block_sparse_moe.experts.7.w2.weight", names)

    def test_bfloat16_within_tolerance(self):
        checkpoint = write_checkpoint(os.path.join(self.tmp.name, "bf16"), QWEN3_MOE_CONFIG)
        loaded, manifest = self.export(checkpoint, "--dtype", "bfloat16")
        difference = compare_scenario(self, loaded, manifest, MoeReference(checkpoint, torch.bfloat16),
                                      torch.bfloat16, 3e-2, steps=4, relative=True)
        print(f"qwen3_moe bfloat16: largest logit difference {difference:.2e} of the largest logit")

    def check_quantized(self, method, group_size):
        config = dict(QWEN3_MOE_CONFIG, moe_intermediate_size=64)  # groups of 32 dividing the experts' width
        checkpoint = write_checkpoint(os.path.join(self.tmp.name, method), config)
        loaded, manifest = self.export(checkpoint, "--dtype", "float32", "--quantize", method, "--group-size",
                                       str(group_size), name=method + "-package")
        self.assertEqual((manifest["quantization"], manifest["quantization_group_size"], manifest["format_version"]),
                         (method, group_size, 13 if method == "mxfp4" else 12))
        state = loaded.state_dict()
        expert = "model.layers.0.mlp.experts.5."
        self.assertEqual(state[expert + "gate_up_proj.weight"].dtype, torch.int8 if method == "int8" else torch.uint8)
        self.assertEqual(state["model.layers.0.mlp.gate.weight"].dtype, torch.float32)  # the router stays float
        if method == "mxfp4":  # only the experts: attention, the dense layer's MLP and the LM head stay float
            self.assertEqual((state[expert + "gate_up_proj.weight"].shape,
                              state[expert + "gate_up_proj.weight_scale"].shape,
                              state[expert + "down_proj.weight_scale"].dtype), ((128, 32), (128, 2), torch.uint8))
            for name in ("model.layers.0.self_attn.qkv_proj", "model.layers.1.mlp.gate_up_proj", "lm_head"):
                self.assertEqual((state[name + ".weight"].dtype, state[name + ".weight_scale"].numel()),
                                 (torch.float32, 0), name)
        # The checkpoint with every matrix the package holds quantized replaced by what it stands for.
        tensors = checkpoint_tensors(dict(config), 7)
        q, kv = config["num_attention_heads"] * config["head_dim"], config["num_key_value_heads"] * config["head_dim"]
        for name, weight in state.items():
            if not name.endswith(".weight") or weight.is_floating_point():
                continue
            matrix = dequantize(weight, state[name + "_scale"], torch.float32)
            if ".qkv_proj." in name:
                for part, piece in zip(("q_proj", "k_proj", "v_proj"), matrix.split([q, kv, kv])):
                    tensors[name.replace("qkv_proj", part)] = piece
            elif ".gate_up_proj." in name:
                for part, piece in zip(("gate_proj", "up_proj"), matrix.chunk(2)):
                    tensors[name.replace("gate_up_proj", part)] = piece
            else:
                tensors[name] = matrix
        dequantized = write_checkpoint(os.path.join(self.tmp.name, method + "-dequantized"), config, tensors=tensors)
        difference = compare_scenario(self, loaded, manifest, MoeReference(dequantized), torch.float32, 1e-4,
                                      steps=4)
        print(f"qwen3_moe {method} g{group_size}: largest logit difference {difference:.2e}")

    def test_int8_experts(self):
        self.check_quantized("int8", 32)

    def test_int4_experts(self):
        self.check_quantized("int4", 32)

    def test_mxfp4_experts(self):
        self.check_quantized("mxfp4", 32)

    def test_random_mxfp4_experts_and_dense_refusal(self):
        tokenizer = os.path.join(self.tmp.name, "tokenizer.json")
        with open(tokenizer, "w") as f:
            f.write("{}")
        out = os.path.join(self.tmp.name, "random-mxfp4")
        code, error = export("--random", "--preset", "small-moe", "--vocab-size", "512", "--num-layers", "2",
                             "--dtype", "float32", "--quantize", "mxfp4", "--tokenizer", tokenizer, "--out", out)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json")) as f:
            manifest = json.load(f)
        self.assertEqual((manifest["quantization"], manifest["quantization_group_size"], manifest["format_version"]),
                         ("mxfp4", 32, 13))
        state = torch.jit.load(os.path.join(out, "model.pt")).state_dict()
        for layer in range(2):
            for e in range(8):  # hidden 256, experts of 128
                p = f"model.layers.{layer}.mlp.experts.{e}."
                self.assertEqual([(state[p + m + part].dtype, tuple(state[p + m + part].shape))
                                  for m in ("gate_up_proj", "down_proj") for part in (".weight", ".weight_scale")],
                                 [(torch.uint8, (256, 128)), (torch.uint8, (256, 8)),
                                  (torch.uint8, (256, 64)), (torch.uint8, (256, 4))])
        self.assertEqual(state["model.layers.1.self_attn.qkv_proj.weight_scale"].numel(), 0)
        # An expert's matrix stands for draws of about N(0, 0.02): MXFP4 keeps them within a block's step.
        weight = dequantize(state["model.layers.1.mlp.experts.7.down_proj.weight"],
                            state["model.layers.1.mlp.experts.7.down_proj.weight_scale"], torch.float32)
        self.assertTrue(0.012 < float(weight.std()) < 0.03, float(weight.std()))
        for flags, words in ((("--preset", "tiny"), "this qwen2 model has none"),
                             (("--preset", "small-moe", "--group-size", "64"), "blocks of 32 inputs, not 64"),
                             (("--preset", "small-moe", "--hidden-size", "208"),
                              "model.layers.0.mlp.experts.0.gate_up_proj.weight has 208 input columns")):
            out = os.path.join(self.tmp.name, "refused")
            code, error = export("--random", *flags, "--vocab-size", "512", "--num-layers", "1", "--quantize", "mxfp4",
                                 "--tokenizer", tokenizer, "--out", out)
            self.assertEqual(code, 2, flags)
            self.assertIn(words, error)
            self.assertFalse(os.path.exists(out))

    def test_missing_expert_is_named(self):
        checkpoint = write_checkpoint(os.path.join(self.tmp.name, "missing"), MIXTRAL_CONFIG)
        tensors = load_safetensors(os.path.join(checkpoint, "model.safetensors"))
        del tensors["model.layers.1.block_sparse_moe.experts.3.w3.weight"]
        write_checkpoint(checkpoint, MIXTRAL_CONFIG, tensors=tensors)
        code, error = export("--checkpoint", checkpoint, "--out", os.path.join(self.tmp.name, "bad"))
        self.assertEqual(code, 2)
        self.assertIn("model.layers.1.mlp.experts.3.up_proj.weight", error)


if __name__ == "__main__":
    unittest.main()
