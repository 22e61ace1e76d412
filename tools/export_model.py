#!/usr/bin/env python3
"""Exports an llmc model package from a Hugging Face checkpoint folder, or with random weights.

  tools/export_model.py --checkpoint ~/models/Qwen2.5-0.5B-Instruct --out packages/qwen2.5-0.5b --dtype bfloat16
  tools/export_model.py --random --preset qwen2-0.5b --tokenizer path/to/tokenizer.json --out packages/random
  tools/export_model.py --checkpoint ... --out packages/qwen2.5-0.5b-int8 --dtype bfloat16 --quantize int8
  tools/export_model.py --checkpoint ~/models/Qwen2.5-0.5B-Instruct-W8A8 --out packages/qwen2.5-0.5b-w8a8

A checkpoint already quantized to int8 (compressed-tensors, as llm-compressor writes for vLLM) gives an int8
package holding its own int8 weights and scales (llmc_export/prequantized.py); a 4-bit GPTQ, AWQ or
compressed-tensors pack-quantized one an int4 package with its own nibbles, scales and zero points
(llmc_export/prequantized_int4.py); a GPT-OSS checkpoint with MXFP4 experts an mxfp4 package with its own codes
and exponents (llmc_export/gpt_oss.py).

Runs on Debian's python3-torch with no other packages. See docs/model-package.md.
"""
import argparse
import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from llmc_export.config import ExportError, ModelConfig, gemma3_model_config, read_hf_config  # noqa: E402
from llmc_export.package import (DTYPES, EMBEDDING_POOLINGS, MANIFEST, QUANTIZATIONS, build_model,  # noqa: E402
                                 build_random_quantized_moe, check_mxfp4_fits, load_checkpoint, write_package)
from llmc_export.output_formats import REASONING_MARKERS, TOOL_CALL_FORMATS  # noqa: E402
from llmc_export.prequantized import read_scheme  # noqa: E402
from llmc_export.prequantized_int4 import Int4Scheme, read_int4_scheme  # noqa: E402
from llmc_export.ops import MXFP4_GROUP_SIZE  # noqa: E402
from llmc_export.quantize import INT4_DEFAULT_GROUP_SIZE  # noqa: E402

PRESETS = {
    # Qwen2-0.5B's shape: the benchmark model.
    "qwen2-0.5b": ModelConfig(),
    # Qwen2-1.5B's shape: where the weights, not the process's fixed memory, dominate a worker's footprint.
    "qwen2-1.5b": ModelConfig(hidden_size=1536, intermediate_size=8960, num_layers=28, num_heads=12, num_kv_heads=2,
                              head_dim=128),
    # The full Qwen2/Qwen3 vocabulary on a small network: the local cluster's default model, and end-to-end
    # tests that send real text.
    "small": ModelConfig(hidden_size=256, intermediate_size=512, num_layers=4, num_heads=4, num_kv_heads=2,
                         head_dim=64, max_context_length=4096),
    # Qwen3-0.6B's shape (QK-norm, head_dim 128 independent of the hidden size): a benchmark model.
    "qwen3-0.6b": ModelConfig(architecture="qwen3", vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                              num_layers=28, num_heads=16, num_kv_heads=8, head_dim=128, qkv_bias=False, qk_norm=True,
                              max_context_length=40960),
    # Gemma-3-1B's shape (five local layers of window 512 to each global one, 262k vocabulary): a benchmark model.
    "gemma3-1b": gemma3_model_config({
        "model_type": "gemma3_text", "vocab_size": 262144, "hidden_size": 1152, "intermediate_size": 6912,
        "num_hidden_layers": 26, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
        "sliding_window": 512, "max_position_embeddings": 32768, "query_pre_attn_scalar": 256}),
    # Qwen3-30B-A3B's shape (128 experts of 768, 8 per token, renormalized; every layer sparse): the mixture-of-
    # experts benchmark model, exported with fewer layers (--num-layers) where memory demands.
    "qwen3-30b-a3b": ModelConfig(architecture="qwen3_moe", vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                                 num_layers=48, num_heads=32, num_kv_heads=4, head_dim=128, qkv_bias=False,
                                 qk_norm=True, tie_word_embeddings=False, max_context_length=40960,
                                 moe_layers=tuple(range(48)), num_experts=128,
                                 experts_per_token=8, moe_intermediate_size=768, normalize_top_k=True),
    # The "small" shape as a Qwen3-MoE (8 experts of 128, 2 per token): end-to-end tests of a mixture of experts.
    "small-moe": ModelConfig(architecture="qwen3_moe", hidden_size=256, intermediate_size=512, num_layers=4,
                             num_heads=4, num_kv_heads=2, head_dim=64, qkv_bias=False, qk_norm=True,
                             max_context_length=4096, moe_layers=tuple(range(4)), num_experts=8, experts_per_token=2,
                             moe_intermediate_size=128, normalize_top_k=True),
    # The "small" shape as a GPT-OSS (8 experts of 128, 2 per token, sliding layers of window 128 between full ones,
    # sinks, biases, YaRN as gpt-oss-20b's): end-to-end tests of its attention and clamped experts.
    "small-gpt-oss": ModelConfig(architecture="gpt_oss", vocab_size=201088, hidden_size=256, intermediate_size=128,
                                 num_layers=4, num_heads=4, num_kv_heads=2, head_dim=64, rms_norm_eps=1e-5,
                                 rope_theta=150000.0, qkv_bias=True, o_proj_bias=True, attention_sinks=True,
                                 tie_word_embeddings=False, max_context_length=4096, layer_windows=(128, 0, 128, 0),
                                 rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                               "beta_slow": 1.0, "truncate": False,
                                               "original_max_position_embeddings": 4096},
                                 moe_layers=tuple(range(4)),
                                 num_experts=8, experts_per_token=2, moe_intermediate_size=128,
                                 moe_variant="clamped_swiglu"),
    # gpt-oss-20b's shape (24 layers alternating windows of 128 and full attention, 64 heads of 64 with 8 KV heads
    # and sinks, 32 experts of 2880, 4 per token; its 201,088 vocabulary): the MXFP4 benchmark model.
    "gpt-oss-20b": ModelConfig(architecture="gpt_oss", vocab_size=201088, hidden_size=2880, intermediate_size=2880,
                               num_layers=24, num_heads=64, num_kv_heads=8, head_dim=64, rms_norm_eps=1e-5,
                               rope_theta=150000.0, qkv_bias=True, o_proj_bias=True, attention_sinks=True,
                               tie_word_embeddings=False, max_context_length=131072, layer_windows=(128, 0) * 12,
                               rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                             "beta_slow": 1.0, "truncate": False,
                                             "original_max_position_embeddings": 4096},
                               moe_layers=tuple(range(24)), num_experts=32, experts_per_token=4,
                               moe_intermediate_size=2880, moe_variant="clamped_swiglu"),
    # Small enough for tests to export and run in seconds.
    "tiny": ModelConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_layers=2, num_heads=4,
                        num_kv_heads=2, head_dim=32, max_context_length=2048),
}
SIZE_FLAGS = ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
              "head_dim", "max_context_length")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="Hugging Face folder with config.json, *.safetensors, tokenizer.json")
    source.add_argument("--random", action="store_true", help="random weights (tests and benchmarks)")
    parser.add_argument("--out", required=True, help="package folder to write")
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES), help="weights and activations")
    parser.add_argument("--quantize", choices=QUANTIZATIONS,
                        help="int8: projection weights as int8 with float32 scales, activations in --dtype; int4: "
                        "4-bit weights two a byte with float32 scales per group (W4A16; CPU workers); mxfp4: a "
                        "mixture of experts' experts as MXFP4, everything else in --dtype (default: none, or the "
                        "checkpoint's own int8, int4 or MXFP4)")
    parser.add_argument("--group-size", type=int, default=0,
                        help="input columns per scale: int8 32, 64, 128, 256, 512 (default 0: one per output row); "
                        "int4 32, 64, 128 (default 0: 128)")
    parser.add_argument("--int4-zero-point", action="store_true",
                        help="int4: asymmetric groups (a scale and a zero point per group, format version 11) "
                        "instead of symmetric ones")
    parser.add_argument("--rope-factors", default="short", choices=("short", "long"),
                        help="LongRoPE models (Phi-3.5-mini, Phi-4-mini): short (default) serves up to "
                        "original_max_position_embeddings, as Hugging Face computes every such sequence; long serves "
                        "the whole max_position_embeddings with the long factors at every position (as llama.cpp "
                        "does beyond the original context): exact for longer sequences, a different rotation for "
                        "shorter ones")
    parser.add_argument("--name", help="model name clients use (default: the output folder's name)")
    parser.add_argument("--tokenizer", help="tokenizer.json (default: the checkpoint's)")
    parser.add_argument("--chat-template", help="built-in chat template name; without it the package carries the model's own "
                        "Jinja template from tokenizer_config.json (or chat_template.jinja) beside tokenizer.json "
                        "(gpt_oss without one: llmc's harmony template), and the built-in one chosen by "
                        "architecture serves as the fallback")
    parser.add_argument("--embedding-pooling", default="last", choices=EMBEDDING_POOLINGS,
                        help="how /v1/embeddings pools the final normalized hidden states of a prompt before L2 "
                        "normalization: the last token's (default), the mean of all, or none (no embeddings)")
    parser.add_argument("--tool-call-format", default="auto", choices=("auto",) + TOOL_CALL_FORMATS,
                        help="how the model writes tool calls (the manifest's tool_call_format, which picks the "
                        "worker's parser); auto (default) detects it from the chat template beside tokenizer.json")
    parser.add_argument("--reasoning-markers", default="auto", choices=("auto",) + tuple(REASONING_MARKERS),
                        help="the markers around the model's reasoning: think (<think>...</think>) or none; auto "
                        "(default) detects them from the chat template and the tokenizer's added tokens")
    parser.add_argument("--preset", default="qwen2-0.5b", choices=sorted(PRESETS), help="shape for --random")
    parser.add_argument("--seed", type=int, default=0, help="seed for --random")
    parser.add_argument("--eos-token-id", type=int, action="append", help="EOS ids for --random")
    for flag in SIZE_FLAGS:
        parser.add_argument("--" + flag.replace("_", "-"), type=int, help=f"override {flag} for --random")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        exact, scheme = None, None
        if args.checkpoint:
            hf_config = read_hf_config(os.path.join(args.checkpoint, "config.json"))
            config = ModelConfig.from_hf_config_dict(hf_config)
            config.add_generation_eos(os.path.join(args.checkpoint, "generation_config.json"))
            if args.rope_factors == "long":
                config.serve_long_rope_factors()
            tokenizer = args.tokenizer or os.path.join(args.checkpoint, "tokenizer.json")
            # GPT-OSS's MXFP4 experts make an mxfp4 package with the checkpoint's bytes, or are decoded exactly for
            # another --quantize (llmc_export/gpt_oss.py).
            mxfp4 = (hf_config.get("model_type") == "gpt_oss"
                     and (hf_config.get("quantization_config") or {}).get("quant_method") == "mxfp4")
            if mxfp4 and args.quantize is None:
                args.quantize = "mxfp4"
            if args.quantize == "mxfp4":
                check_mxfp4_fits(config, args.group_size)
            scheme = None if mxfp4 else read_int4_scheme(hf_config) or read_scheme(hf_config)
            if isinstance(scheme, Int4Scheme):
                # A 4-bit checkpoint makes an int4 package with its own nibbles, scales and zero points.
                if args.quantize not in (None, "int4"):
                    raise ExportError(f"the checkpoint's weights are 4-bit ({scheme.method}), so its package is "
                                      f"int4: leave out --quantize {args.quantize}")
                args.quantize = "int4"
                if args.group_size not in (0, scheme.group_size):
                    raise ExportError(f"--group-size {args.group_size} does not match the checkpoint's 4-bit weights, "
                                      f"kept in groups of {scheme.group_size}: leave --group-size out")
                args.group_size = scheme.group_size
            elif scheme is not None:
                # An int8 checkpoint makes an int8 package with its own groups (vLLM reads the scheme the same way).
                if args.quantize == "none":
                    raise ExportError("the checkpoint's weights are int8 (compressed-tensors), so its package is "
                                      "int8: leave out --quantize none")
                if args.quantize in ("int4", "mxfp4"):
                    raise ExportError(f"the checkpoint's weights are int8 (compressed-tensors): {args.quantize} from "
                                      f"them is not supported; leave out --quantize {args.quantize}, or quantize an "
                                      "unquantized checkpoint")
                args.quantize = "int8"
                if args.group_size not in (0, scheme.group_size):
                    grouping = f"groups of {scheme.group_size}" if scheme.group_size else "one scale per row"
                    raise ExportError(f"--group-size {args.group_size} does not match the checkpoint's int8 weights, "
                                      f"which have {grouping}: leave --group-size out")
                args.group_size = scheme.group_size
            model, exact = load_checkpoint(config, args.checkpoint, scheme, args.dtype,
                                           keep_mxfp4=mxfp4 and args.quantize == "mxfp4")
        else:
            overrides = {flag: getattr(args, flag) for flag in SIZE_FLAGS if getattr(args, flag) is not None}
            config = dataclasses.replace(PRESETS[args.preset], **overrides)
            if config.moe_layers:  # the mixture-of-experts presets route in every layer, however many there are
                config.moe_layers = tuple(range(config.num_layers))
            if config.layer_windows:  # a preset's pattern of windows repeats over the layers asked for
                pattern = PRESETS[args.preset].layer_windows
                config.layer_windows = tuple(pattern[i % len(pattern)] for i in range(config.num_layers))
            if args.eos_token_id:
                config.eos_token_ids = tuple(args.eos_token_id)
            config.validate()
            if args.rope_factors == "long":
                config.serve_long_rope_factors()  # refused: no preset has LongRoPE
            tokenizer = args.tokenizer
            if args.quantize == "mxfp4":
                check_mxfp4_fits(config, args.group_size)
            if config.moe_layers and args.quantize in ("int8", "int4", "mxfp4"):
                group_size = args.group_size or (INT4_DEFAULT_GROUP_SIZE if args.quantize == "int4" else 0)
                model = build_random_quantized_moe(config, args.seed, args.dtype, args.quantize, group_size)
            else:
                model = build_model(config, seed=args.seed)
        args.quantize = args.quantize or "none"
        if args.quantize == "int4" and args.group_size == 0:
            args.group_size = INT4_DEFAULT_GROUP_SIZE
        if args.quantize == "mxfp4":
            args.group_size = MXFP4_GROUP_SIZE
        name = args.name or os.path.basename(os.path.normpath(args.out))
        # A W8A16 checkpoint was quantized to run with 16-bit activations: the worker serves it so by default.
        served = "w8a16" if scheme is not None and getattr(scheme, "activations", "") == "none" else "int8"
        if args.int4_zero_point and args.quantize != "int4":
            raise ExportError("--int4-zero-point needs --quantize int4")
        write_package(model, config, args.out, name, args.dtype, tokenizer, args.chat_template, args.quantize,
                      args.group_size, args.embedding_pooling, exact, served, args.tool_call_format,
                      args.reasoning_markers, args.int4_zero_point)
    except ExportError as error:
        print(f"export_model: {error}", file=sys.stderr)
        return 2
    if args.quantize == "none":
        weights = args.dtype
    elif args.quantize == "mxfp4":
        weights = f"{args.dtype}, experts mxfp4"
    else:
        per = f"groups of {args.group_size}" if args.group_size else "channel"
        weights = f"{args.dtype} activations, {args.quantize} weights per {per}"
        if scheme is not None:
            weights += f", {len(exact)} matrices as the checkpoint has them"
            if getattr(scheme, "activations", "") == "none":
                weights += "; a W8A16 checkpoint, served with 16-bit activations unless the worker is told otherwise"
    with open(os.path.join(args.out, MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    reasoning = manifest.get("reasoning")
    formats = f"tool calls {manifest['tool_call_format']}, reasoning " + (
        f"{reasoning['start']}...{reasoning['end']}" if reasoning else "none")
    print(f"wrote {args.out} ({config.architecture}, {config.num_layers} layers, {weights}; {formats})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
