"""What the model families' fixture makers share (make_family_fixture.py, make_qwen3_fixture.py,
make_mistral_fixture.py): the export of a checkpoint, and reference.pt, a TorchScript module with
make_parity_fixture.py's attributes: for each scenario sequence the prompt, the greedy continuation (32 tokens)
and the reference logits at every step, and (when the reference gives final hidden states) each prompt's
last-token and mean embeddings, L2-normalized."""
import os
import random
import sys
from typing import List

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import export_model  # noqa: E402

PROMPT_LENGTHS = (5, 17, 33, 40)
STEPS = 32
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class Reference(torch.nn.Module):
    # Declared on the class: TorchScript keeps a list attribute that is empty (no embeddings) only so.
    prompts: List[torch.Tensor]
    continuations: List[torch.Tensor]
    logits: List[torch.Tensor]
    last_embeddings: List[torch.Tensor]
    mean_embeddings: List[torch.Tensor]

    def __init__(self, prompts, continuations, logits, last_embeddings, mean_embeddings):
        super().__init__()
        self.prompts = prompts
        self.continuations = continuations
        self.logits = logits
        self.last_embeddings = last_embeddings
        self.mean_embeddings = mean_embeddings

    def forward(self) -> int:
        return len(self.prompts)


def export(checkpoint: str, out: str, dtype: str, name: str, *extra: str) -> int:
    """tools/export_model.py on `checkpoint` into out/package; its exit code."""
    return export_model.main(["--checkpoint", checkpoint, "--out", os.path.join(out, "package"), "--dtype", dtype,
                              "--name", name, *extra])


def write_reference(out: str, reference, vocab_size: int, with_embeddings: bool = True) -> None:
    """out/reference.pt from `reference` (greedy(tokens, steps) -> (tokens, logits), and final_hidden(tokens)
    when `with_embeddings`) over the scenario's prompts (random ids, seed 99)."""
    rng = random.Random(99)
    prompts, continuations, all_logits, last_embeddings, mean_embeddings = [], [], [], [], []
    with torch.no_grad():
        for length in PROMPT_LENGTHS:
            tokens = [rng.randrange(vocab_size) for _ in range(length)]
            prompts.append(torch.tensor(tokens, dtype=torch.long))
            if with_embeddings:
                hidden = reference.final_hidden(tokens).float()
                last_embeddings.append(torch.nn.functional.normalize(hidden[-1], dim=0))
                mean_embeddings.append(torch.nn.functional.normalize(hidden.mean(0), dim=0))
            continuation, logits = reference.greedy(tokens, STEPS)
            continuations.append(torch.tensor(continuation, dtype=torch.long))
            all_logits.append(logits)
    module = torch.jit.script(Reference(prompts, continuations, all_logits, last_embeddings, mean_embeddings))
    module.save(os.path.join(out, "reference.pt"))
    print(f"wrote {out}")
