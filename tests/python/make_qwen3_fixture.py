#!/usr/bin/env python3
"""Writes a Qwen3 checkpoint in Hugging Face's layout, exports it with tools/export_model.py, and writes the
independent reference of the same folder (qwen3_reference.py) for the C++ tests.

  make_qwen3_fixture.py --out DIR --dtype float32|bfloat16 [--tied] [--quantize int8]
  make_qwen3_fixture.py --out DIR --tokenizer-dir DIR --vocab-size 151936 --bos-token-id 151643 \
      --eos-token-id 151645 --no-reference   (a package to serve with Qwen3's tokenizer)

DIR/checkpoint/ is the checkpoint, DIR/package/ the exported package, and DIR/reference.pt (unless
--no-reference) the reference module (family_fixture.py).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from family_fixture import DTYPES, export, write_reference  # noqa: E402
from qwen3_reference import QWEN3_CONFIG, Qwen3Reference, write_checkpoint  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--tied", action="store_true", help="tie_word_embeddings: true (no lm_head tensor)")
    parser.add_argument("--quantize", default="none", choices=("none", "int8"))
    parser.add_argument("--tokenizer-dir", help="folder with tokenizer.json (and tokenizer_config.json)")
    parser.add_argument("--vocab-size", type=int, default=QWEN3_CONFIG["vocab_size"])
    parser.add_argument("--bos-token-id", type=int, default=QWEN3_CONFIG["bos_token_id"])
    parser.add_argument("--eos-token-id", type=int, default=QWEN3_CONFIG["eos_token_id"])
    parser.add_argument("--name", default="tiny-qwen3")
    parser.add_argument("--no-reference", action="store_true")
    args = parser.parse_args()
    hf_config = dict(QWEN3_CONFIG, tie_word_embeddings=args.tied, vocab_size=args.vocab_size,
                     bos_token_id=args.bos_token_id, eos_token_id=args.eos_token_id)
    checkpoint = write_checkpoint(os.path.join(args.out, "checkpoint"), hf_config, tokenizer_dir=args.tokenizer_dir)
    code = export(checkpoint, args.out, args.dtype, args.name, "--quantize", args.quantize)
    if code != 0:
        return code
    if not args.no_reference:
        write_reference(args.out, Qwen3Reference(checkpoint, DTYPES[args.dtype]), args.vocab_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
