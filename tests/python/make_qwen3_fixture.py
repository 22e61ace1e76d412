#!/usr/bin/env python3
"""Writes a Qwen3 checkpoint in Hugging Face's layout, exports it with tools/export_model.py, and writes the
independent reference of the same folder (qwen3_reference.py) for the C++ tests.

  make_qwen3_fixture.py --out DIR --dtype float32|bfloat16 [--tied] [--quantize int8]
  make_qwen3_fixture.py --out DIR --tokenizer-dir DIR --vocab-size 151936 --bos-token-id 151643 \
      --eos-token-id 151645 --no-reference   (a package to serve with Qwen3's tokenizer)

DIR/checkpoint/ is the checkpoint, DIR/package/ the exported package, and DIR/reference.pt (unless
--no-reference) a TorchScript module with make_parity_fixture.py's attributes: for each scenario sequence the
prompt, the greedy continuation (32 tokens) and the reference logits at every step, and each prompt's last-token
and mean embeddings (final normalized hidden states, L2-normalized).
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
from qwen3_reference import QWEN3_CONFIG, Qwen3Reference, write_checkpoint  # noqa: E402

PROMPT_LENGTHS = (5, 17, 33, 40)
STEPS = 32
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


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
    code = export_model.main(["--checkpoint", checkpoint, "--out", os.path.join(args.out, "package"), "--dtype",
                              args.dtype, "--quantize", args.quantize, "--name", args.name])
    if code != 0:
        return code
    if args.no_reference:
        return 0
    reference = Qwen3Reference(checkpoint, DTYPES[args.dtype])
    rng = random.Random(99)
    prompts, continuations, all_logits, last_embeddings, mean_embeddings = [], [], [], [], []
    with torch.no_grad():
        for length in PROMPT_LENGTHS:
            tokens = [rng.randrange(args.vocab_size) for _ in range(length)]
            prompts.append(torch.tensor(tokens, dtype=torch.long))
            hidden = reference.final_hidden(tokens).float()
            last_embeddings.append(torch.nn.functional.normalize(hidden[-1], dim=0))
            mean_embeddings.append(torch.nn.functional.normalize(hidden.mean(0), dim=0))
            continuation, logits = reference.greedy(tokens, STEPS)
            continuations.append(torch.tensor(continuation, dtype=torch.long))
            all_logits.append(logits)
    module = torch.jit.script(Reference(prompts, continuations, all_logits, last_embeddings, mean_embeddings))
    module.save(os.path.join(args.out, "reference.pt"))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
