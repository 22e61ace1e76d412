#!/usr/bin/env python3
"""Writes what the C++ model tests need: a tiny random model package and the full-recompute reference.

  make_parity_fixture.py --out DIR --dtype float32|bfloat16 --tokenizer tokenizer.json

DIR/package/ is the exported package; DIR/reference.pt a TorchScript module whose attributes hold, for
each scenario sequence, the prompt, the greedy continuation (32 tokens) and the reference logits at every
step, computed by plain causal attention without any cache; and each prompt's embeddings, the final
normalized hidden state of its last token and the mean over its tokens, L2-normalized.
"""
import argparse
import os
import random
import sys
from typing import List

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paged_scenario import reference_final_hidden, reference_logits  # noqa: E402
from llmc_export.config import ModelConfig  # noqa: E402
from llmc_export.model import CausalLM, random_weights  # noqa: E402
from llmc_export.package import write_package  # noqa: E402

CONFIG = ModelConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_layers=2, num_heads=4,
                     num_kv_heads=2, head_dim=32, max_context_length=2048, eos_token_ids=(3,))
PROMPT_LENGTHS = (5, 17, 33, 40)
STEPS = 32


class Reference(torch.nn.Module):
    def __init__(self, prompts, continuations, logits, last_embeddings, mean_embeddings):
        super().__init__()
        self.prompts: List[torch.Tensor] = prompts
        self.continuations: List[torch.Tensor] = continuations
        self.logits: List[torch.Tensor] = logits
        self.last_embeddings: List[torch.Tensor] = last_embeddings
        self.mean_embeddings: List[torch.Tensor] = mean_embeddings

    def forward(self) -> int:
        return len(self.prompts)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--tokenizer", required=True)
    args = parser.parse_args()
    dtype = torch.float32 if args.dtype == "float32" else torch.bfloat16
    model = CausalLM(CONFIG)
    random_weights(model, 11)
    write_package(model, CONFIG, os.path.join(args.out, "package"), "tiny-parity", args.dtype, args.tokenizer)
    model = model.to(dtype).eval()
    model.inv_freq = model.inv_freq.float()
    rng = random.Random(99)
    prompts, continuations, all_logits, last_embeddings, mean_embeddings = [], [], [], [], []
    with torch.no_grad():
        for length in PROMPT_LENGTHS:
            tokens = [rng.randrange(CONFIG.vocab_size) for _ in range(length)]
            prompts.append(torch.tensor(tokens, dtype=torch.long))
            hidden = reference_final_hidden(model, CONFIG, tokens).float()
            last_embeddings.append(torch.nn.functional.normalize(hidden[-1], dim=0))
            mean_embeddings.append(torch.nn.functional.normalize(hidden.mean(0), dim=0))
            rows = []
            for _ in range(STEPS):
                row = reference_logits(model, CONFIG, tokens)
                rows.append(row)
                tokens.append(int(torch.argmax(row)))
            continuations.append(torch.tensor(tokens[length:], dtype=torch.long))
            all_logits.append(torch.stack(rows))
    torch.jit.script(Reference(prompts, continuations, all_logits, last_embeddings, mean_embeddings)).save(os.path.join(args.out, "reference.pt"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
