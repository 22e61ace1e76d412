#!/usr/bin/env python3
"""Writes a checkpoint of one model family in Hugging Face's layout, exports it with tools/export_model.py, and
writes the independent reference of the same folder for the C++ tests:

  make_family_fixture.py FAMILY --out DIR --dtype float32|bfloat16 --head tied|untied

FAMILY: smollm3 (a NoPE layer between two RoPE layers, smollm3_reference.py), phi3 (fused qkv_proj and
gate_up_proj, partial rotary 0.75, LongRoPE, phi3_reference.py), granite (non-trivial multipliers,
granite_reference.py) or gemma3 (gemma3_text: sliding layers with a window of 8 among full ones, two RoPE bases,
(1 + w) norms around both sublayers, the final softcap, gemma3_reference.py). DIR/checkpoint/ is the checkpoint,
DIR/package/ the exported package and DIR/reference.pt the reference module (family_fixture.py).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gemma3_reference  # noqa: E402
import granite_reference  # noqa: E402
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
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("family", choices=sorted(FAMILIES))
    parser.add_argument("--out", required=True)
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--head", required=True, choices=("tied", "untied"),
                        help="tie_word_embeddings (untied: an lm_head tensor)")
    args = parser.parse_args()
    config, reference_class, write_checkpoint = FAMILIES[args.family]
    hf_config = dict(config, tie_word_embeddings=args.head == "tied")
    checkpoint = write_checkpoint(os.path.join(args.out, "checkpoint"), hf_config)
    code = export(checkpoint, args.out, args.dtype, f"tiny-{args.family}")
    if code != 0:
        return code
    write_reference(args.out, reference_class(checkpoint, DTYPES[args.dtype]), hf_config["vocab_size"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
