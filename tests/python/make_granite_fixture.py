#!/usr/bin/env python3
"""Writes a Granite 3 checkpoint in Hugging Face's layout (non-trivial multipliers), exports it with
tools/export_model.py, and writes the independent reference of the same folder (granite_reference.py) for the
C++ tests.

  make_granite_fixture.py --out DIR --dtype float32|bfloat16 [--untied]

DIR/checkpoint/ is the checkpoint, DIR/package/ the exported package, and DIR/reference.pt a TorchScript module
with make_parity_fixture.py's attributes (make_qwen3_fixture.py's Reference): for each scenario sequence the
prompt, the greedy continuation (32 tokens) and the reference logits at every step, and each prompt's last-token
and mean embeddings.
"""
import argparse
import os
import random
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import export_model  # noqa: E402
from make_qwen3_fixture import DTYPES, PROMPT_LENGTHS, STEPS, Reference  # noqa: E402
from granite_reference import GRANITE_CONFIG, GraniteReference, write_checkpoint  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--untied", action="store_true", help="tie_word_embeddings: false (an lm_head tensor)")
    args = parser.parse_args()
    hf_config = dict(GRANITE_CONFIG, tie_word_embeddings=not args.untied)
    checkpoint = write_checkpoint(os.path.join(args.out, "checkpoint"), hf_config)
    code = export_model.main(["--checkpoint", checkpoint, "--out", os.path.join(args.out, "package"), "--dtype",
                              args.dtype, "--name", "tiny-granite"])
    if code != 0:
        return code
    reference = GraniteReference(checkpoint, DTYPES[args.dtype])
    rng = random.Random(99)
    prompts, continuations, all_logits, last_embeddings, mean_embeddings = [], [], [], [], []
    with torch.no_grad():
        for length in PROMPT_LENGTHS:
            tokens = [rng.randrange(hf_config["vocab_size"]) for _ in range(length)]
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
