"""Trains a small Qwen2-architecture model on the token ids of real text and writes it as a Hugging Face
checkpoint folder (config.json, model.safetensors and a copy of the given tokenizer.json), which
tools/export_model.py --checkpoint turns into packages.

Tests that judge how closely int8 weights follow the bfloat16 ones need a model whose next-token
distributions have a trained model's structure: the Qwen2-0.5B-shaped random model's top two logits are so close that
any rounding flips them (docs/performance.md). Plain PyTorch (Debian's python3-torch), float32, one thread,
seeded (OpenBLAS still moves the last bits with the buffers' alignment).

  train_text_model.py --tokens ids.txt --vocab-size N --tokenizer tokenizer.json --out folder [--steps N]

ids.txt holds whitespace-separated token ids below --vocab-size. The model's vocabulary is whatever those
ids number: the caller renumbers a real tokenizer's ids to the ones its text uses, so tokenizer.json only
fills the checkpoint's slot and does not match the model.
"""
import argparse
import json
import os
import shutil
import sys

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from llmc_export.model import RMSNorm, rotate_half  # noqa: E402  (the served model's own)
from llmc_export.safetensors import write_safetensors  # noqa: E402

CONFIG = {"hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 2, "num_attention_heads": 2,
          "num_key_value_heads": 1, "head_dim": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000.0}


class Layer(nn.Module):
    """Hugging Face's Qwen2 decoder layer: q, k and v with bias, rotary positions, grouped KV heads, SwiGLU. Its
    parameters carry Hugging Face's names (self_attn.q_proj.weight, mlp.gate_proj.weight, ...)."""

    def __init__(self, c):
        super().__init__()
        h, heads, kv_heads, d = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d
        self.input_layernorm = RMSNorm(h, c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(h, c["rms_norm_eps"])
        self.self_attn = nn.ModuleDict({"q_proj": nn.Linear(h, heads * d), "k_proj": nn.Linear(h, kv_heads * d),
                                        "v_proj": nn.Linear(h, kv_heads * d),
                                        "o_proj": nn.Linear(heads * d, h, bias=False)})
        i = c["intermediate_size"]
        self.mlp = nn.ModuleDict({"gate_proj": nn.Linear(h, i, bias=False), "up_proj": nn.Linear(h, i, bias=False),
                                  "down_proj": nn.Linear(i, h, bias=False)})

    def forward(self, x, cos, sin, mask):
        batch, length, _ = x.shape
        attn, mlp = self.self_attn, self.mlp
        y = self.input_layernorm(x)
        q = attn["q_proj"](y).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        k = attn["k_proj"](y).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        v = attn["v_proj"](y).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        scores = (q @ k.transpose(-1, -2)) * self.head_dim ** -0.5 + mask
        attended = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, length, -1)
        x = x + attn["o_proj"](attended)
        y = self.post_attention_layernorm(x)
        return x + mlp["down_proj"](F.silu(mlp["gate_proj"](y)) * mlp["up_proj"](y))


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        nn.init.normal_(self.embed_tokens.weight, std=0.02)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        d = c["head_dim"]
        self.register_buffer("inv_freq", 1.0 / c["rope_theta"] ** (torch.arange(0, d, 2).float() / d))

    def forward(self, ids):
        length = ids.shape[1]
        freqs = torch.arange(length).float()[:, None] * self.inv_freq[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        mask = torch.full((length, length), float("-inf")).triu(1)
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.norm(x) @ self.embed_tokens.weight.T  # tied LM head


def hf_tensors(model):
    """The weights of a Hugging Face Qwen2 checkpoint (tied: no lm_head.weight)."""
    return {"model." + name: tensor.detach().clone().contiguous()
            for name, tensor in model.state_dict().items() if name != "inv_freq"}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", required=True)
    parser.add_argument("--vocab-size", type=int, required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    with open(args.tokens, encoding="utf-8") as f:
        ids = torch.tensor([int(t) for t in f.read().split()], dtype=torch.long)
    if ids.numel() < 1024 or int(ids.min()) < 0 or int(ids.max()) >= args.vocab_size:
        sys.exit(f"need at least 1024 token ids in [0, {args.vocab_size}), got {ids.numel()}")
    config = dict(CONFIG, vocab_size=args.vocab_size)
    model = Model(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    window, batch = 512, 2  # windows as long as the tests judge, so every position is one it trained on
    for step in range(args.steps):
        starts = torch.randint(0, ids.numel() - window - 1, (batch,))
        chunk = torch.stack([ids[s:s + window + 1] for s in starts.tolist()])
        logits = model(chunk[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, args.vocab_size), chunk[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)

    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "model.safetensors"), hf_tensors(model))
    hf_config = dict(config, model_type="qwen2", architectures=["Qwen2ForCausalLM"], tie_word_embeddings=True,
                     max_position_embeddings=2048, eos_token_id=0, torch_dtype="float32")
    with open(os.path.join(args.out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(hf_config, f, indent=1)
    shutil.copyfile(args.tokenizer, os.path.join(args.out, "tokenizer.json"))


if __name__ == "__main__":
    main()
