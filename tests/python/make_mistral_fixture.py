#!/usr/bin/env python3
"""Writes a Mistral checkpoint with a sliding window (mistral_reference.py: 24 positions, blocks of 16 in the
tests) in Hugging Face's layout, exports it with tools/export_model.py, and writes the independent reference of
the same folder for the C++ tests.

  make_mistral_fixture.py --out DIR

DIR/checkpoint/ is the checkpoint, DIR/package/ the exported package, and DIR/reference.pt the reference module
(family_fixture.py) without embeddings: prompts of 5, 17, 33 and 40 tokens, each decoding 32 tokens past the
window.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from family_fixture import export, write_reference  # noqa: E402
from mistral_reference import MISTRAL_CONFIG, MistralReference, write_checkpoint  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    checkpoint = write_checkpoint(os.path.join(args.out, "checkpoint"))
    code = export(checkpoint, args.out, "float32", "tiny-mistral-window")
    if code != 0:
        return code
    write_reference(args.out, MistralReference(checkpoint), MISTRAL_CONFIG["vocab_size"], with_embeddings=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
