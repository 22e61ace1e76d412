"""Phi-3 / Phi-4-mini checkpoints (model_type phi3) as the Llama-family network reads them.

Hugging Face's Phi3 fuses the projections: self_attn.qkv_proj.weight holds q, k and v rows in that order
([num_heads * head_dim; num_kv_heads * head_dim; num_kv_heads * head_dim]) and mlp.gate_up_proj.weight the gate
rows, then the up rows (the first half of its output goes through SiLU). Both are the order llmc stacks them in;
they are split into Hugging Face's Llama names here so that the common checks and loading apply.

Partial rotary (partial_rotary_factor): Hugging Face rotates the first rotary_dim dims of each head, pairing
(i, i + rotary_dim / 2), and passes the rest through. llmc's kernel pairs (j, j + head_dim / 2) over the whole
head. The q and k rows of each head are permuted at export so that the kernel's pair j < rotary_dim / 2 is
Hugging Face's pair j, and the pass-through dims fill the other pairs, whose inverse frequency is 0 (cos 1,
sin 0: config.inverse_frequencies). The same permutation of q and k leaves every q.k unchanged; v and o_proj
are untouched. LongRoPE's attention factor multiplies cos and sin of the rotated dims only; the rotation is
linear, so it is folded into the rotated q and k rows.
"""
from typing import List

import torch

from .config import ExportError, ModelConfig


def rotary_permutation(head_dim: int, rotary_dim: int) -> List[int]:
    """For each dim of an exported head, the checkpoint's dim it holds."""
    half, rotary_half = head_dim // 2, rotary_dim // 2
    passing = list(range(rotary_dim, head_dim))  # (head_dim - rotary_dim) dims, two per remaining pair
    order = [0] * head_dim
    for j in range(half):
        if j < rotary_half:
            order[j], order[j + half] = j, j + rotary_half
        else:
            order[j], order[j + half] = passing[j - rotary_half], passing[j - rotary_half + half - rotary_half]
    return order


def rotated_dims(head_dim: int, rotary_dim: int) -> List[int]:
    """The dims of an exported head that the kernel rotates with a nonzero frequency."""
    half, rotary_half = head_dim // 2, rotary_dim // 2
    return list(range(rotary_half)) + list(range(half, half + rotary_half))


def split_fused(tensors: dict, config: ModelConfig) -> None:
    """Replaces each layer's qkv_proj and gate_up_proj weights by q/k/v_proj and gate/up_proj, in place."""
    q, kv, i = config.num_heads * config.head_dim, config.num_kv_heads * config.head_dim, config.intermediate_size
    for layer in range(config.num_layers):
        prefix = f"model.layers.{layer}."
        for fused, parts, sizes in (("self_attn.qkv_proj", ("q_proj", "k_proj", "v_proj"), (q, kv, kv)),
                                    ("mlp.gate_up_proj", ("gate_proj", "up_proj"), (i, i))):
            name = prefix + fused + ".weight"
            if name not in tensors:
                raise ExportError(f"checkpoint is missing tensors: {name}")
            if prefix + fused + ".bias" in tensors:
                raise ExportError(f"checkpoint has tensors this architecture does not use: {prefix + fused}.bias")
            weight = tensors.pop(name)
            if tuple(weight.shape) != (sum(sizes), config.hidden_size):
                raise ExportError(f"tensor {name} has shape {tuple(weight.shape)}, config implies "
                                  f"{(sum(sizes), config.hidden_size)}")
            parent = prefix + fused.split(".")[0] + "."
            for part, piece in zip(parts, weight.split(list(sizes))):
                tensors[parent + part + ".weight"] = piece


def arrange_rotary_rows(tensors: dict, config: ModelConfig) -> None:
    """Permutes each head's q and k rows for partial rotary and folds the LongRoPE attention factor into the
    rotated ones, in place (float32)."""
    d = config.head_dim
    rotary_dim = config.rotary_dim or d
    order = torch.tensor(rotary_permutation(d, rotary_dim))
    scale = torch.ones(d)
    scale[rotated_dims(d, rotary_dim)] = config.rope_attention_factor
    if rotary_dim == d and config.rope_attention_factor == 1.0:
        return
    for layer in range(config.num_layers):
        for part, heads in (("q_proj", config.num_heads), ("k_proj", config.num_kv_heads)):
            name = f"model.layers.{layer}.self_attn.{part}.weight"
            weight = tensors[name].float().reshape(heads, d, -1)
            tensors[name] = (weight[:, order] * scale[None, :, None]).reshape(heads * d, -1)


def prepare_phi3_tensors(tensors: dict, config: ModelConfig) -> None:
    split_fused(tensors, config)
    arrange_rotary_rows(tensors, config)
