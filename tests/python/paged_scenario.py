"""A serving-shaped scenario over the paged KV cache, shared by the Python tests (and mirrored in C++):
several sequences of different lengths prefilled in one flattened batch, then decoded greedily step by
step, one sequence joining late with its prompt split into chunks that ride along with decode tokens."""
import os
import random
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

from llmc_export.config import ModelConfig  # noqa: E402
from llmc_export.model import CausalLM, rotate_half  # noqa: E402


def reference_logits(model: CausalLM, config: ModelConfig, token_ids):
    """Logits of the last position, recomputing the whole sequence with plain causal attention."""
    with torch.no_grad():
        return model.lm_head(reference_final_hidden(model, config, token_ids)[-1:]).float()[0]


def reference_final_hidden(model: CausalLM, config: ModelConfig, token_ids):
    """Every position's hidden state after the final norm, [len(token_ids), hidden_size], recomputed with
    plain causal attention."""
    with torch.no_grad():
        ids = torch.tensor(token_ids, dtype=torch.long)
        hidden = model.model.embed_tokens(ids)
        positions = torch.arange(len(token_ids), dtype=torch.float32)
        freqs = positions.unsqueeze(1) * model.inv_freq.float().unsqueeze(0)
        angles = torch.cat((freqs, freqs), dim=-1).unsqueeze(1)
        cos, sin = angles.cos().to(hidden.dtype), angles.sin().to(hidden.dtype)
        n = len(token_ids)
        mask = torch.ones(n, n, dtype=torch.bool).tril()
        group = config.num_heads // config.num_kv_heads
        for layer in model.model.layers:
            attn = layer.self_attn
            x = layer.input_layernorm(hidden)
            qkv = F.linear(x, attn.qkv_proj.weight, attn.qkv_proj.bias)
            q_width, kv_width = config.num_heads * config.head_dim, config.num_kv_heads * config.head_dim
            q = qkv[:, :q_width].reshape(n, config.num_heads, config.head_dim)
            k = qkv[:, q_width:q_width + kv_width].reshape(n, config.num_kv_heads, config.head_dim)
            v = qkv[:, q_width + kv_width:].reshape(n, config.num_kv_heads, config.head_dim)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = k.repeat_interleave(group, dim=1).float()
            v = v.repeat_interleave(group, dim=1).float()
            scores = torch.einsum("qhd,khd->hqk", q.float(), k) * attn.scale
            scores = scores.masked_fill(~mask, float("-inf"))
            out = torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), v).to(hidden.dtype)
            hidden = hidden + attn.o_proj(out.reshape(n, -1))
            gate_up = F.linear(layer.post_attention_layernorm(hidden), layer.mlp.gate_up_proj.weight)
            gate, up = gate_up[:, :config.intermediate_size], gate_up[:, config.intermediate_size:]
            hidden = hidden + layer.mlp.down_proj(F.silu(gate) * up)
        return model.model.norm(hidden)


class PagedRunner:
    """Plays the engine's part in Python: block allocation, slot mapping and the flattened batch."""

    def __init__(self, forward, config: ModelConfig, dtype, num_blocks=64, block_size=16, seed=0):
        self.forward = forward
        self.block_size = block_size
        self.kv_cache = torch.zeros(config.num_layers, 2, num_blocks, block_size, config.num_kv_heads,
                                    config.head_dim, dtype=dtype)
        self.free_blocks = list(range(num_blocks))
        random.Random(seed).shuffle(self.free_blocks)  # scattered blocks exercise the paging
        self.blocks = {}  # sequence -> block ids
        self.cached = {}  # sequence -> tokens already in the cache

    def step(self, chunks):
        """chunks: [(sequence, new tokens)]; returns {sequence: logits of its last new token}."""
        input_ids, positions, slots, starts, lengths, tables, logits_rows = [], [], [], [0], [], [], []
        for sequence, tokens in chunks:
            done = self.cached.get(sequence, 0)
            blocks = self.blocks.setdefault(sequence, [])
            total = done + len(tokens)
            while len(blocks) * self.block_size < total:
                blocks.append(self.free_blocks.pop())
            for offset, token in enumerate(tokens):
                position = done + offset
                input_ids.append(token)
                positions.append(position)
                slots.append(blocks[position // self.block_size] * self.block_size + position % self.block_size)
            self.cached[sequence] = total
            starts.append(starts[-1] + len(tokens))
            lengths.append(total)
            tables.append(blocks)
            logits_rows.append(len(input_ids) - 1)
        width = max(len(t) for t in tables)
        block_tables = torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32)
        logits = self.forward(torch.tensor(input_ids, dtype=torch.long), torch.tensor(positions, dtype=torch.long),
                              self.kv_cache, torch.tensor(slots, dtype=torch.long), block_tables,
                              torch.tensor(lengths, dtype=torch.int32), torch.tensor(starts, dtype=torch.int32),
                              torch.tensor(logits_rows, dtype=torch.long))
        return {sequence: logits[i] for i, (sequence, _) in enumerate(chunks)}


def run_scenario(forward, model, config, dtype, steps=32, on_logits=None):
    """Prefills three prompts (5, 17 and 33 tokens) together, then decodes `steps` greedy tokens; a fourth
    sequence of 40 tokens joins at step 5 in two 20-token chunks mixed with the decode tokens. Calls
    on_logits(sequence, tokens so far, logits) for every logits row; returns the token lists."""
    rng = random.Random(1234)
    prompts = {name: [rng.randrange(config.vocab_size) for _ in range(length)]
               for name, length in (("a", 5), ("b", 17), ("c", 33), ("late", 40))}
    runner = PagedRunner(forward, config, dtype)
    sequences = {name: list(prompts[name]) for name in ("a", "b", "c")}
    pending_chunks = {}
    logits = runner.step([(name, tokens) for name, tokens in sequences.items()])
    for step in range(steps):
        for name, row in logits.items():
            if name in pending_chunks and pending_chunks[name]:
                continue  # mid-prefill: nothing to sample yet
            if on_logits:
                on_logits(name, list(sequences[name]), row)
            sequences[name].append(int(torch.argmax(row)))
        chunks = [(name, tokens[-1:]) for name, tokens in sequences.items() if not pending_chunks.get(name)]
        if step == 5:
            pending_chunks["late"] = [prompts["late"][:20], prompts["late"][20:]]
            sequences["late"] = []
        if pending_chunks.get("late"):
            chunk = pending_chunks["late"].pop(0)
            sequences["late"].extend(chunk)
            chunks.append(("late", chunk))
        logits = runner.step(chunks)
    return sequences
