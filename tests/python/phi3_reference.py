"""Phi-3 / Phi-4-mini checkpoints written as Hugging Face lays them out, and an independent forward of such a folder.

The forward is written from Hugging Face's Phi3 semantics (Phi3ForCausalLM), not from the exporter's network: it
reads config.json and model.safetensors itself and recomputes the whole sequence with plain causal attention.
Per layer: RMSNorm -> the fused qkv_proj (rows q, then k, then v; no bias) -> q and k viewed as heads; RoPE on
the first rotary_dim = int(head_dim * partial_rotary_factor) dims of each head (rotate-half over those dims),
the rest passed through -> grouped-query attention scaled by head_dim ** -0.5 (a sliding_window mask when the
config has one) -> o_proj + residual; RMSNorm -> the fused gate_up_proj, its first half through SiLU times the
second half -> down_proj + residual; then the final norm and the LM head (the embedding when tied).
LongRoPE (rope_scaling type longrope or su): the inverse frequencies over rotary_dim are divided by short_factor,
or long_factor when the forward's sequence (largest position + 1) is longer than original_max_position_embeddings,
and cos and sin are multiplied by the attention factor (rope_scaling's attention_factor, or
sqrt(1 + ln(max_position_embeddings / original) / ln(original)), or 1 when that ratio is at most 1).
In bfloat16 it keeps Hugging Face's roundings: RMSNorm in float32 cast back before the weight, rotary tables
computed in float32 and cast to the activations' dtype, the softmax in float32.
"""
import json
import math
import os

import torch
import torch.nn.functional as F

from qwen3_reference import Qwen3Reference, load_safetensors, save_safetensors

_ROTARY_HALF = 12  # head_dim 32 * partial_rotary_factor 0.75 = 24 rotated dims, 12 pairs
# Phi-4-mini's shape in small: partial rotary 0.75, LongRoPE with an attention factor, GQA. max_position_embeddings
# / original_max_position_embeddings = 8, as Phi-3.5-mini's 131072 / 4096 is 32; original_max_position_embeddings
# (128) exceeds every sequence of the tests, and sliding_window exceeds max_position_embeddings (as Phi-3.5-mini's).
PHI3_CONFIG = {
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 320, "hidden_size": 128,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "hidden_act": "silu", "attention_dropout": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "partial_rotary_factor": 0.75, "max_position_embeddings": 1024,
    "original_max_position_embeddings": 128,
    "rope_scaling": {"type": "longrope",
                     "short_factor": [1.0 + 0.25 * i for i in range(_ROTARY_HALF)],
                     "long_factor": [1.5 + 0.75 * i for i in range(_ROTARY_HALF)]},
    "sliding_window": 2048, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
    "pad_token_id": 0, "torch_dtype": "float32", "use_cache": True,
}


def checkpoint_tensors(hf_config, seed):
    """Random weights under Hugging Face's Phi3 names and shapes (fused qkv_proj and gate_up_proj), scaled so
    that logits spread over several units; norm weights vary around 1."""
    generator = torch.Generator().manual_seed(seed)
    h, i, v = hf_config["hidden_size"], hf_config["intermediate_size"], hf_config["vocab_size"]
    d = hf_config.get("head_dim") or h // hf_config["num_attention_heads"]
    q, kv = hf_config["num_attention_heads"] * d, hf_config["num_key_value_heads"] * d

    def matrix(rows, columns, std=None):
        return torch.randn(rows, columns, generator=generator) * (std or columns ** -0.5)

    def norm(size):
        return 1.0 + 0.3 * torch.randn(size, generator=generator)

    tensors = {"model.embed_tokens.weight": matrix(v, h, 0.7), "model.norm.weight": norm(h)}
    if not hf_config["tie_word_embeddings"]:
        tensors["lm_head.weight"] = matrix(v, h, 0.7)
    for layer in range(hf_config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        tensors.update({
            p + "input_layernorm.weight": norm(h), p + "post_attention_layernorm.weight": norm(h),
            p + "self_attn.qkv_proj.weight": matrix(q + 2 * kv, h),
            p + "self_attn.o_proj.weight": matrix(h, q),
            p + "mlp.gate_up_proj.weight": matrix(2 * i, h), p + "mlp.down_proj.weight": matrix(h, i),
        })
    return tensors


def write_checkpoint(folder, hf_config=PHI3_CONFIG, seed=11, dtype=torch.float32):
    """A Phi-3 checkpoint folder: config.json, generation_config.json, model.safetensors (a tied head left out,
    as Hugging Face saves it) and a placeholder tokenizer.json."""
    os.makedirs(folder, exist_ok=True)
    config = dict(hf_config, torch_dtype={torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype])
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": [config["eos_token_id"], 7]}, f)
    tensors = {name: t.to(dtype) for name, t in checkpoint_tensors(config, seed).items()}
    save_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0"}')
    return folder


class Phi3Reference(Qwen3Reference):
    """The forward of a Phi-3 checkpoint folder in `dtype` (float32 or bfloat16), from Hugging Face's semantics.
    `tensors` replaces the folder's weights. (Its RMSNorm, linear, logits and greedy helpers are the plain
    Llama-family ones of qwen3_reference.py.)"""

    def __init__(self, folder, dtype=torch.float32, tensors=None):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        tensors = tensors if tensors is not None else load_safetensors(os.path.join(folder, "model.safetensors"))
        self.w = {name: t.to(dtype) for name, t in tensors.items()}
        c = self.config
        if c.get("tie_word_embeddings"):
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]
        self.dtype = dtype
        self.head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        self.rotary_dim = int(self.head_dim * c.get("partial_rotary_factor", 1.0))
        self.scaling = c.get("rope_scaling") or {}
        self.original = c.get("original_max_position_embeddings") or c["max_position_embeddings"]
        self.attention_factor = 1.0
        if self.scaling:
            given = self.scaling.get("attention_factor")
            ratio = c["max_position_embeddings"] / self.original
            self.attention_factor = given if given is not None else (
                1.0 if ratio <= 1.0 else math.sqrt(1 + math.log(ratio) / math.log(self.original)))

    def inverse_frequencies(self, seq_len):
        exponents = torch.arange(0, self.rotary_dim, 2, dtype=torch.int64).float() / self.rotary_dim
        base = self.config["rope_theta"] ** exponents
        if not self.scaling:
            return 1.0 / base
        factors = self.scaling["long_factor"] if seq_len > self.original else self.scaling["short_factor"]
        return 1.0 / (torch.tensor(factors, dtype=torch.float32) * base)

    def rope(self, x, cos, sin):
        r = self.rotary_dim
        rotated = x[..., :r] * cos + self.rotate_half(x[..., :r]) * sin
        return torch.cat((rotated, x[..., r:]), dim=-1)

    def final_hidden(self, token_ids):
        """Every position's hidden state after the final norm, [len(token_ids), hidden_size]."""
        c, w, d = self.config, self.w, self.head_dim
        heads, kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        n = len(token_ids)
        x = w["model.embed_tokens.weight"][torch.tensor(token_ids, dtype=torch.long)]
        freqs = torch.arange(n, dtype=torch.float32)[:, None] * self.inverse_frequencies(n)[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        cos = (angles.cos() * self.attention_factor).to(self.dtype)[:, None, :]
        sin = (angles.sin() * self.attention_factor).to(self.dtype)[:, None, :]
        query, key = torch.arange(n)[:, None], torch.arange(n)[None, :]
        allowed = key <= query
        if c.get("sliding_window"):
            allowed &= key > query - c["sliding_window"]
        for layer in range(c["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            h = self.rms_norm(x, w[p + "input_layernorm.weight"])
            qkv = self.linear(h, p + "self_attn.qkv_proj")
            q = qkv[:, :heads * d].view(n, heads, d)
            k = qkv[:, heads * d:(heads + kv_heads) * d].view(n, kv_heads, d)
            v = qkv[:, (heads + kv_heads) * d:].view(n, kv_heads, d)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            k = k.repeat_interleave(heads // kv_heads, dim=1)
            v = v.repeat_interleave(heads // kv_heads, dim=1)
            scores = torch.einsum("qhd,khd->hqk", q, k) * d ** -0.5
            scores = scores.masked_fill(~allowed, float("-inf"))
            probabilities = torch.softmax(scores, dim=-1, dtype=torch.float32).to(self.dtype)
            attention = torch.einsum("hqk,khd->qhd", probabilities, v).reshape(n, heads * d)
            x = x + self.linear(attention, p + "self_attn.o_proj")
            h = self.rms_norm(x, w[p + "post_attention_layernorm.weight"])
            gate, up = self.linear(h, p + "mlp.gate_up_proj").chunk(2, dim=-1)
            x = x + self.linear(up * F.silu(gate), p + "mlp.down_proj")
        return self.rms_norm(x, w["model.norm.weight"])
