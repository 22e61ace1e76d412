"""The Llama-family network (Llama 2/3, Mistral, Qwen2/2.5) over one flattened batch and a paged KV cache.

Parameter names follow Hugging Face's, so a checkpoint's state dict loads as it is. The module does the
math only: the caller (the worker's engine) owns scheduling, the KV memory and sampling.
"""
from typing import List

import torch
from torch import nn

from . import ops  # noqa: F401  (registers torch.ops.llmc.*)
from .config import ModelConfig


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Linear(nn.Linear):
    """nn.Linear (same parameters and names) whose forward is the llmc::linear operator."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.llmc.linear(x, self.weight, self.bias)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.num_heads = config.num_heads
        self.num_kv_heads = config.num_kv_heads
        self.head_dim = config.head_dim
        self.scale = config.head_dim ** -0.5
        self.q_proj = Linear(config.hidden_size, config.num_heads * config.head_dim, bias=config.qkv_bias)
        self.k_proj = Linear(config.hidden_size, config.num_kv_heads * config.head_dim, bias=config.qkv_bias)
        self.v_proj = Linear(config.hidden_size, config.num_kv_heads * config.head_dim, bias=config.qkv_bias)
        self.o_proj = Linear(config.num_heads * config.head_dim, config.hidden_size, bias=False)

    def forward(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, key_cache: torch.Tensor,
                value_cache: torch.Tensor, slot_mapping: torch.Tensor, block_tables: torch.Tensor,
                seq_lens: torch.Tensor, query_start_locs: torch.Tensor) -> torch.Tensor:
        q = self.q_proj(hidden).view(-1, self.num_heads, self.head_dim)
        k = self.k_proj(hidden).view(-1, self.num_kv_heads, self.head_dim)
        v = self.v_proj(hidden).view(-1, self.num_kv_heads, self.head_dim)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        torch.ops.llmc.write_kv_cache(k, v, key_cache, value_cache, slot_mapping)
        out = torch.ops.llmc.paged_attention(q, key_cache, value_cache, block_tables, seq_lens, query_start_locs,
                                             self.scale)
        return self.o_proj(out.reshape(-1, self.num_heads * self.head_dim))


class Mlp(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.gate_proj = Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attn = Attention(config)
        self.mlp = Mlp(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, key_cache: torch.Tensor,
                value_cache: torch.Tensor, slot_mapping: torch.Tensor, block_tables: torch.Tensor,
                seq_lens: torch.Tensor, query_start_locs: torch.Tensor) -> torch.Tensor:
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), cos, sin, key_cache, value_cache, slot_mapping,
                                         block_tables, seq_lens, query_start_locs)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class Backbone(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(config) for _ in range(config.num_layers)])
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class CausalLM(nn.Module):
    """forward(input_ids, positions, kv_cache, slot_mapping, block_tables, seq_lens, query_start_locs,
    logits_indices) -> float32 logits [len(logits_indices), vocab_size].

    input_ids, positions, slot_mapping: [num_tokens] int64, the flattened batch.
    kv_cache: [num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim], written in place.
    block_tables: [num_seqs, max_blocks] int32; seq_lens: [num_seqs] int32 (context incl. new tokens);
    query_start_locs: [num_seqs + 1] int32; logits_indices: rows whose logits are needed (int64).
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.model = Backbone(config)
        self.lm_head = Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.register_buffer("inv_freq", torch.tensor(config.inverse_frequencies(), dtype=torch.float32),
                             persistent=False)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, kv_cache: torch.Tensor,
                slot_mapping: torch.Tensor, block_tables: torch.Tensor, seq_lens: torch.Tensor,
                query_start_locs: torch.Tensor, logits_indices: torch.Tensor) -> torch.Tensor:
        hidden = self.model.embed_tokens(input_ids)
        freqs = positions.float().unsqueeze(1) * self.inv_freq.unsqueeze(0)
        angles = torch.cat((freqs, freqs), dim=-1).unsqueeze(1)  # [num_tokens, 1, head_dim]
        cos = angles.cos().to(hidden.dtype)
        sin = angles.sin().to(hidden.dtype)
        layer_index = 0
        for layer in self.model.layers:
            hidden = layer(hidden, cos, sin, kv_cache[layer_index, 0], kv_cache[layer_index, 1], slot_mapping,
                           block_tables, seq_lens, query_start_locs)
            layer_index += 1
        hidden = self.model.norm(hidden.index_select(0, logits_indices))
        return self.lm_head(hidden).float()


def random_weights(model: CausalLM, seed: int) -> None:
    """Initialises every weight reproducibly: N(0, 0.02) for matrices and biases, 1 for norms."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                parameter.fill_(1.0)
            else:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)
