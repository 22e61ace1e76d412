#!/usr/bin/env python3
"""Checkpoints quantized to int8 in the compressed-tensors format, as llm-compressor writes them for vLLM, made
from random weights: for the exporter's tests (test_int8_checkpoint.py) and the C++ loader's
(tests/worker/int8_model_test.cc).

  int8_checkpoint.py --out DIR [--strategy channel|group|tensor] [--group-size N] [--packed] [--w8a16]
                     [--shape tiny|small|qwen2-0.5b] [--seed N] [--plain DIR2]

--shape: the exporter tests' tiny network (default), the end-to-end tests' small one with the Qwen
vocabulary (export_model.py's "small" preset), or the benchmark model's. --plain also writes the same random
weights unquantized, as the bfloat16 reference for llmc_quantization_bench.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import paged_scenario  # noqa: F401,E402  (puts tools/ on sys.path)
from llmc_export.safetensors import write_safetensors  # noqa: E402
from test_exporter import HF_CONFIG, make_checkpoint, random_hf_tensors  # noqa: E402

SHAPES = {
    "tiny": {},
    "small": {"vocab_size": 151936, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
              "num_attention_heads": 4, "num_key_value_heads": 2, "rope_theta": 1000000.0,
              "max_position_embeddings": 4096, "eos_token_id": 151645},
    "qwen2-0.5b": {"vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
                   "num_attention_heads": 14, "num_key_value_heads": 2, "rope_theta": 1000000.0,
                   "max_position_embeddings": 32768},
}

LINEAR_PARTS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                "mlp.up_proj", "mlp.down_proj")


def compressed_int8(weight, strategy, group_size=0):
    """(int8, scale) as llm-compressor's symmetric 8-bit quantization makes them: scale = max |w| / 127.5 over
    the tensor, row or group, values rounded and clamped to [-128, 127] (so a row whose largest magnitude
    is negative holds -128)."""
    rows, columns = weight.shape
    if strategy == "tensor":
        amax = weight.abs().amax().reshape(1)
        scale, expanded = amax / 127.5, (amax / 127.5).expand(rows, columns)
    elif strategy == "channel":
        scale = weight.abs().amax(1, keepdim=True) / 127.5
        expanded = scale.expand(rows, columns)
    else:
        scale = weight.reshape(rows, columns // group_size, group_size).abs().amax(-1) / 127.5
        expanded = scale.repeat_interleave(group_size, dim=1)
    q = torch.round(weight / expanded).clamp(-128, 127).to(torch.int8)
    return q, scale


def pack_int8(q):
    """pack-quantized words: four weights plus 128 to an int32, the first in the lowest byte."""
    rows, columns = q.shape
    padded = torch.zeros(rows, (columns + 3) // 4 * 4, dtype=torch.int64)
    padded[:, :columns] = q.long() + 128
    words = sum(padded[:, i::4] << (8 * i) for i in range(4))
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)


def make_int8_checkpoint(folder, strategy="channel", group_size=0, packed=False, activations=True, seed=3,
                         hf_overrides=None, edit=None, quantize_lm_head=False):
    """A compressed-tensors checkpoint of the test architecture: every layer's projections int8, the LM head
    (ignored, as llm-compressor's recipes do, unless quantize_lm_head with untied embeddings) and embeddings
    in float. Returns ({weight name: (int8, scale)}, ModelConfig)."""
    hf_config = dict(HF_CONFIG, **(hf_overrides or {}))
    _, config, tensors = random_hf_tensors(hf_config, seed)
    quantized = {}
    for name in sorted(tensors):
        lm_head = quantize_lm_head and name == "lm_head.weight"
        if not name.endswith(".weight") or not (lm_head or any(part in name for part in LINEAR_PARTS)):
            continue
        q, scale = compressed_int8(tensors[name].float(), strategy, group_size)
        quantized[name] = (q, scale)
        base = name[:-len(".weight")]
        if packed:
            del tensors[name]
            tensors[base + ".weight_packed"] = pack_int8(q)
            tensors[base + ".weight_shape"] = torch.tensor(list(q.shape))  # int64, as compressed-tensors saves it
        else:
            tensors[name] = q
        tensors[base + ".weight_scale"] = scale.to(torch.bfloat16)
        tensors[base + ".weight_zero_point"] = torch.zeros(scale.shape, dtype=torch.int8)
        if activations:
            tensors[base + ".input_scale"] = torch.tensor([0.01])
    weights = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": strategy, "dynamic": False,
               "group_size": group_size or None, "actorder": None}
    inputs = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token", "dynamic": True}
    hf_config["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "pack-quantized" if packed else "int-quantized",
        "quantization_status": "compressed", "ignore": [] if quantize_lm_head else ["lm_head"],
        "kv_cache_scheme": None,
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                      "input_activations": inputs if activations else None,
                                      "output_activations": None}}}
    if edit:
        edit(hf_config, tensors)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf_config, f)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0"}')
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    # The scales as the checkpoint stores them (bfloat16), in float32.
    return {name: (q, scale.to(torch.bfloat16).float()) for name, (q, scale) in quantized.items()}, config


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--strategy", default="channel", choices=("channel", "group", "tensor"))
    parser.add_argument("--group-size", type=int, default=0)
    parser.add_argument("--packed", action="store_true", help="pack-quantized (W8A16) instead of int-quantized")
    parser.add_argument("--w8a16", action="store_true", help="no activation quantization in the config")
    parser.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--plain", help="also write the same weights unquantized into this folder")
    args = parser.parse_args(argv)
    shape = SHAPES[args.shape]
    os.makedirs(args.out, exist_ok=True)
    quantized, _ = make_int8_checkpoint(args.out, args.strategy, args.group_size, args.packed, not args.w8a16,
                                        seed=args.seed, hf_overrides=shape)
    if args.plain:
        os.makedirs(args.plain, exist_ok=True)
        make_checkpoint(args.plain, hf_config=dict(HF_CONFIG, **shape), seed=args.seed)
    lowest = sum(int((q == -128).sum()) for q, _ in quantized.values())
    print(f"wrote {args.out}: {len(quantized)} int8 matrices, {lowest} weights at -128")
    return 0


if __name__ == "__main__":
    sys.exit(main())
