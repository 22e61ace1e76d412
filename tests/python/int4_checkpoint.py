#!/usr/bin/env python3
"""4-bit checkpoints as GPTQ (AutoGPTQ / GPTQModel), AWQ (AutoAWQ, GEMM) and compressed-tensors (llm-compressor's
pack-quantized W4A16) write them, made from random nibbles, scales and zero points: for the exporter's tests
(test_int4_checkpoint.py) and the C++ loader's (tests/worker/int4_checkpoint_model_test.cc). The packing here is
written from each format's documented layout (see tools/llmc_export/prequantized_int4.py), independently of the
exporter's reader.

  int4_checkpoint.py --out DIR [--format gptq|gptq_v2|awq|compressed-tensors] [--asymmetric] [--group-size N]
                     [--act-order] [--shape tiny|small|qwen2-0.5b] [--seed N]

--act-order (GPTQ, compressed-tensors): groups made of scattered inputs, as GPTQ's activation order quantizes them
(desc_act true; compressed-tensors actorder "group"): g_idx names each input's group. Inputs that one matrix of
llmc's shares (q/k/v, gate/up) share an order, as they share a Hessian in GPTQ. --shape: as int8_checkpoint.py's.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import paged_scenario  # noqa: F401,E402  (puts tools/ on sys.path)
from llmc_export.safetensors import write_safetensors  # noqa: E402
from int8_checkpoint import SHAPES  # noqa: E402
from test_exporter import HF_CONFIG, random_hf_tensors  # noqa: E402

LINEAR_PARTS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                "mlp.up_proj", "mlp.down_proj")
FORMATS = ("gptq", "gptq_v2", "awq", "compressed-tensors", "gptq8")
AWQ_PACK_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # nibble p of a word holds column 8w + AWQ_PACK_ORDER[p]
# The projections that read one input (and so share GPTQ's activation order): the part of the name after "mlp."
# or "self_attn." that names the input.
SHARED_INPUT = {"q_proj": "attention input", "k_proj": "attention input", "v_proj": "attention input",
                "o_proj": "attention output", "gate_proj": "mlp input", "up_proj": "mlp input",
                "down_proj": "mlp activation"}


def int32_words(nibbles):
    """int32 words from [..., 8 * W] values 0..15: value 8w + p in bits 4p of word w (wrapped to int32)."""
    grouped = nibbles.long().reshape(*nibbles.shape[:-1], -1, 8)
    words = sum(grouped[..., p] << (4 * p) for p in range(8))
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)


def int32_bytes(values):
    """int32 words from [..., 4 * W] values 0..255: value 4w + p in bits 8p of word w (wrapped to int32)."""
    grouped = values.long().reshape(*values.shape[:-1], -1, 4)
    words = sum(grouped[..., p] << (8 * p) for p in range(4))
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)


def write_gptq8(tensors, base, rows, columns, group_size, generator, asymmetric):
    """Symmetric (or not) 8-bit GPTQ v1: qweight [K / 4, N], qzeros [G, N / 4] holding z - 1. Returns the matrix."""
    groups = 1 if group_size <= 0 else columns // group_size
    u = torch.randint(0, 256, (rows, columns), generator=generator)
    scale = (torch.rand(rows, groups, generator=generator) * 0.002 + 0.0002).half()
    zero = torch.full((rows, groups), 128)
    if asymmetric:
        zero[0, 0] = 100
    tensors[base + ".qweight"] = int32_bytes(u.t().reshape(columns // 4, 4, rows).transpose(1, 2).reshape(
        columns // 4, rows * 4))
    tensors[base + ".qzeros"] = int32_bytes((zero - 1).t().contiguous())
    tensors[base + ".scales"] = scale.t().contiguous()
    return dequantize(u, scale, zero)


def random_group_weights(rows, columns, group_size, asymmetric, generator, zero_range=(0, 16)):
    """(u [N, K] 0..15, scales [N, G] float16, zero points [N, G] integers): symmetric ones have z = 8."""
    groups = 1 if group_size <= 0 else columns // group_size
    u = torch.randint(0, 16, (rows, columns), generator=generator)
    scale = (torch.rand(rows, groups, generator=generator) * 0.02 + 0.002).half()
    if asymmetric:
        zero = torch.randint(zero_range[0], zero_range[1], (rows, groups), generator=generator)
    else:
        zero = torch.full((rows, groups), 8)
    return u, scale, zero


def dequantize(u, scale, zero, group_index=None):
    """The checkpoint's matrix in float32: (u - z) * scale per group; input k in group group_index[k] (act-order),
    or in group k // width."""
    if group_index is None:
        width = u.shape[1] // scale.shape[1]
        group_index = torch.arange(u.shape[1]) // width
    return (u.float() - zero.float()[:, group_index]) * scale.float()[:, group_index]


def act_order_groups(columns, group_size, generator):
    """g_idx of an activation-order quantization: the inputs taken in a random order, each run of group_size of
    them one group (GPTQ's g_idx[perm[i]] = i // group_size)."""
    order = torch.randperm(columns, generator=generator)
    group_index = torch.empty(columns, dtype=torch.int32)
    group_index[order] = (torch.arange(columns) // group_size).to(torch.int32)
    return group_index


def write_module(tensors, base, u, scale, zero, fmt, group_size, group_index=None):
    rows, columns = u.shape
    if fmt in ("gptq", "gptq_v2"):
        stored = zero - 1 if fmt == "gptq" else zero  # v1 stores z - 1
        tensors[base + ".qweight"] = int32_words(u.t().reshape(columns // 8, 8, rows).transpose(1, 2).reshape(
            columns // 8, rows * 8))
        tensors[base + ".qzeros"] = int32_words(stored.t().contiguous())
        tensors[base + ".scales"] = scale.t().contiguous()
        width = columns if group_size <= 0 else group_size
        tensors[base + ".g_idx"] = (torch.arange(columns) // width).to(torch.int32) if group_index is None \
            else group_index
    elif fmt == "awq":
        def interleaved(values):  # [X, N] -> [X, N] with each 8 columns in AWQ's packing order
            return values.reshape(values.shape[0], rows // 8, 8)[..., list(AWQ_PACK_ORDER)].reshape(values.shape[0], rows)
        tensors[base + ".qweight"] = int32_words(interleaved(u.t()))
        tensors[base + ".qzeros"] = int32_words(interleaved(zero.t()))
        tensors[base + ".scales"] = scale.t().contiguous()
    else:  # compressed-tensors: q + 8 stored, q = u - 8
        tensors[base + ".weight_packed"] = int32_words(u)
        tensors[base + ".weight_shape"] = torch.tensor([rows, columns])
        tensors[base + ".weight_scale"] = scale
        if group_index is not None:
            tensors[base + ".weight_g_idx"] = group_index
        if not bool((zero == 8).all()):
            # zero point q_z = z - 8, stored + 8 and packed along the rows: row 8i + j in bits 4j of word [i, g].
            tensors[base + ".weight_zero_point"] = int32_words(zero.t().contiguous()).t().contiguous()


def quantization_config(fmt, group_size, asymmetric, act_order=False):
    if fmt == "gptq8":
        return {"quant_method": "gptq", "bits": 8, "group_size": group_size, "desc_act": False,
                "sym": not asymmetric, "checkpoint_format": "gptq"}
    if fmt in ("gptq", "gptq_v2"):
        return {"quant_method": "gptq", "bits": 4, "group_size": group_size, "desc_act": act_order,
                "sym": not asymmetric, "checkpoint_format": fmt, "static_groups": False, "true_sequential": True,
                "damp_percent": 0.01}
    if fmt == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": group_size, "version": "gemm", "zero_point": True}
    weights = {"num_bits": 4, "type": "int", "symmetric": not asymmetric,
               "strategy": "channel" if group_size <= 0 else "group", "group_size": None if group_size <= 0
               else group_size, "dynamic": False, "actorder": "group" if act_order else None}
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
            "ignore": ["lm_head"], "kv_cache_scheme": None,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": None,
                                          "output_activations": None}}}


def make_int4_checkpoint(folder, fmt="gptq", group_size=32, asymmetric=False, seed=3, hf_overrides=None, edit=None,
                         act_order=False):
    """A checkpoint of the test architecture with every layer's projections 4-bit in `fmt` and the (tied) LM head
    and embeddings in float. Returns ({weight name: dequantized float32 [N, K]}, ModelConfig)."""
    if act_order and (fmt not in ("gptq", "gptq_v2", "compressed-tensors") or group_size <= 0):
        raise ValueError("act-order groups are GPTQ's and compressed-tensors', in groups of a given size")
    hf_config = dict(HF_CONFIG, **(hf_overrides or {}))
    _, config, tensors = random_hf_tensors(hf_config, seed)
    generator = torch.Generator().manual_seed(seed)
    # Norm weights other than 1, so that a norm left in the wrong order (act-order packages reorder the norms
    # before q/k/v and gate/up) changes the logits.
    for name in sorted(tensors):
        if name.endswith("norm.weight"):
            tensors[name] = 1 + 0.2 * torch.randn(tensors[name].shape, generator=generator)
    orders = {}  # (layer, input) -> g_idx
    # GPTQ v1 stores z - 1 in a nibble: its zero points run 1..16; AWQ and compressed-tensors store 0..15.
    zero_range = (1, 17) if fmt == "gptq" else (0, 16)
    dequantized = {}
    for name in sorted(tensors):
        if not name.endswith(".weight") or not any(part in name for part in LINEAR_PARTS):
            continue
        rows, columns = tensors.pop(name).shape
        if fmt == "gptq8":
            dequantized[name] = write_gptq8(tensors, name[:-len(".weight")], rows, columns, group_size, generator,
                                            asymmetric)
            continue
        u, scale, zero = random_group_weights(rows, columns, group_size, asymmetric, generator, zero_range)
        if asymmetric:  # the extremes of the range, in every matrix
            zero[0, 0], zero[-1, -1] = zero_range[0], zero_range[1] - 1
        group_index = None
        if act_order:
            layer, _, part = name[:-len(".weight")].rpartition(".")
            key = (layer.rpartition(".")[0], SHARED_INPUT[part])
            if key not in orders:
                orders[key] = act_order_groups(columns, group_size, generator)
            group_index = orders[key]
        write_module(tensors, name[:-len(".weight")], u, scale, zero, fmt, group_size, group_index)
        dequantized[name] = dequantize(u, scale, zero, None if group_index is None else group_index.long())
    hf_config["quantization_config"] = quantization_config(fmt, group_size, asymmetric, act_order)
    if edit:
        edit(hf_config, tensors)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf_config, f)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0"}')
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    return dequantized, config


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--format", default="gptq", choices=FORMATS)
    parser.add_argument("--asymmetric", action="store_true")
    parser.add_argument("--group-size", type=int, default=32)
    parser.add_argument("--act-order", action="store_true")
    parser.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    dequantized, _ = make_int4_checkpoint(args.out, args.format, args.group_size, args.asymmetric, args.seed,
                                          hf_overrides=SHAPES[args.shape], act_order=args.act_order)
    print(f"wrote {args.out}: {len(dequantized)} 4-bit matrices ({args.format})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
