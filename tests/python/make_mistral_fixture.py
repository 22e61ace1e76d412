#!/usr/bin/env python3
"""Writes a Mistral checkpoint with a sliding window (mistral_reference.py: 24 positions, blocks of 16 in the
tests) in Hugging Face's layout, exports it with tools/export_model.py, and writes the independent reference of
the same folder for the C++ tests.

  make_mistral_fixture.py --out DIR

DIR/checkpoint/ is the checkpoint, DIR/package/ the exported package, and DIR/reference.pt a TorchScript module
with make_parity_fixture.py's attributes: for each scenario sequence the prompt (5, 17, 33 and 40 tokens), the
greedy continuation (32 tokens, so every sequence decodes past the window) and the reference logits at every step;
no embeddings (empty lists).
"""
import argparse
import os
import random
import sys
from typing import List

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import export_model  # noqa: E402
from mistral_reference import MISTRAL_CONFIG, MistralReference, write_checkpoint  # noqa: E402

PROMPT_LENGTHS = (5, 17, 33, 40)
STEPS = 32


class Reference(torch.nn.Module):
    last_embeddings: List[torch.Tensor]
    mean_embeddings: List[torch.Tensor]

    def __init__(self, prompts, continuations, logits):
        super().__init__()
        self.prompts: List[torch.Tensor] = prompts
        self.continuations: List[torch.Tensor] = continuations
        self.logits: List[torch.Tensor] = logits
        self.last_embeddings = []
        self.mean_embeddings = []

    def forward(self) -> int:
        return len(self.prompts)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    checkpoint = write_checkpoint(os.path.join(args.out, "checkpoint"))
    code = export_model.main(["--checkpoint", checkpoint, "--out", os.path.join(args.out, "package"), "--dtype",
                              "float32", "--name", "tiny-mistral-window"])
    if code != 0:
        return code
    reference = MistralReference(checkpoint)
    rng = random.Random(99)
    prompts, continuations, all_logits = [], [], []
    for length in PROMPT_LENGTHS:
        tokens = [rng.randrange(MISTRAL_CONFIG["vocab_size"]) for _ in range(length)]
        prompts.append(torch.tensor(tokens, dtype=torch.long))
        continuation, logits = reference.greedy(tokens, STEPS)
        continuations.append(torch.tensor(continuation, dtype=torch.long))
        all_logits.append(logits)
    torch.jit.script(Reference(prompts, continuations, all_logits)).save(os.path.join(args.out, "reference.pt"))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
