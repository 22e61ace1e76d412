#!/usr/bin/env python3
"""Writes a checkpoint of one model family in Hugging Face's layout, exports it with tools/export_model.py, and
writes the independent reference of the same folder for the C++ tests:

  make_family_fixture.py FAMILY --out DIR --dtype float32|bfloat16 --head tied|untied
  make_family_fixture.py gemma3 --out DIR --dtype bfloat16 --head tied --tokenizer-dir DIR --vocab-size 262208 \
      --name tiny-gemma3 --no-reference   (a package to serve with Gemma 3's tokenizer and chat template)

FAMILY: smollm3 (a NoPE layer between two RoPE layers, smollm3_reference.py), phi3 (fused qkv_proj and
gate_up_proj, partial rotary 0.75, LongRoPE, phi3_reference.py), granite (non-trivial multipliers,
granite_reference.py) or gemma3 (gemma3_text: sliding layers with a window of 8 among full ones, two RoPE bases,
(1 + w) norms around both sublayers, the final softcap, gemma3_reference.py), qwen3_moe (8 experts, 3 per token,
one dense layer between two sparse ones) or mixtral (top-2 of 8 in every layer; both moe_reference.py), or
gpt_oss (MXFP4 experts, sinks, a sliding and a full layer, YaRN; gpt_oss_reference.py). DIR/checkpoint/ is the checkpoint,
DIR/package/ the exported package and DIR/reference.pt (unless --no-reference) the reference module
(family_fixture.py). --tokenizer-dir puts that folder's tokenizer.json and tokenizer_config.json in the checkpoint
in place of the placeholder tokenizer.json, so the package carries the real vocabulary and chat template.
"""
import argparse
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gemma3_reference  # noqa: E402
import gpt_oss_reference  # noqa: E402
import granite_reference  # noqa: E402
import moe_reference  # noqa: E402
import phi3_reference  # noqa: E402
import smollm3_reference  # noqa: E402
from family_fixture import DTYPES, export, write_reference  # noqa: E402

FAMILIES = {
    "smollm3": (smollm3_reference.SMOLLM3_CONFIG, smollm3_reference.SmolLM3Reference,
                smollm3_reference.write_checkpoint),
    "phi3": (phi3_reference.PHI3_CONFIG, phi3_reference.Phi3Reference, phi3_reference.write_checkpoint),
    "granite": (granite_reference.GRANITE_CONFIG, granite_reference.GraniteReference,
                granite_reference.write_checkpoint),
    "gemma3": (gemma3_reference.GEMMA3_CONFIG, gemma3_reference.Gemma3Reference, gemma3_reference.write_checkpoint),
    "qwen3_moe": (moe_reference.QWEN3_MOE_CONFIG, moe_reference.MoeReference, moe_reference.write_checkpoint),
    "mixtral": (moe_reference.MIXTRAL_CONFIG, moe_reference.MoeReference, moe_reference.write_checkpoint),
    "gpt_oss": (gpt_oss_reference.GPT_OSS_CONFIG, gpt_oss_reference.GptOssReference,
                lambda folder, config: gpt_oss_reference.write_checkpoint(folder, config, mxfp4=True)),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("family", choices=sorted(FAMILIES))
    parser.add_argument("--out", required=True)
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--head", required=True, choices=("tied", "untied"),
                        help="tie_word_embeddings (untied: an lm_head tensor)")
    parser.add_argument("--tokenizer-dir", help="folder with tokenizer.json (and tokenizer_config.json)")
    parser.add_argument("--vocab-size", type=int, help="in place of the family config's (e.g. the tokenizer's)")
    parser.add_argument("--bos-token-id", type=int)
    parser.add_argument("--eos-token-id", type=int)
    parser.add_argument("--name", help="the served name (default tiny-FAMILY)")
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--long-rope", action="store_true",
                        help="phi3: original_max_position_embeddings 4, shorter than every scenario sequence, the "
                        "attention factor 1.19, and the package exported with --rope-factors long")
    args = parser.parse_args()
    config, reference_class, write_checkpoint = FAMILIES[args.family]
    hf_config = dict(config, tie_word_embeddings=args.head == "tied")
    for key in ("vocab_size", "bos_token_id", "eos_token_id"):
        if getattr(args, key) is not None:
            hf_config[key] = getattr(args, key)
    extra = []
    if args.long_rope:
        # Phi-3.5-mini's attention factor (131072 / 4096 positions); the one 1024 / 4 would give, 2.24, makes
        # float32 logits large enough to round past the tests' 1e-4.
        hf_config["original_max_position_embeddings"] = 4
        hf_config["rope_scaling"] = dict(hf_config["rope_scaling"], attention_factor=1.19)
        extra = ["--rope-factors", "long"]
    checkpoint = write_checkpoint(os.path.join(args.out, "checkpoint"), hf_config)
    if args.tokenizer_dir:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            if os.path.exists(os.path.join(args.tokenizer_dir, name)):
                shutil.copyfile(os.path.join(args.tokenizer_dir, name), os.path.join(checkpoint, name))
    code = export(checkpoint, args.out, args.dtype, args.name or f"tiny-{args.family}", *extra)
    if code != 0:
        return code
    if not args.no_reference:
        write_reference(args.out, reference_class(checkpoint, DTYPES[args.dtype]), hf_config["vocab_size"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
