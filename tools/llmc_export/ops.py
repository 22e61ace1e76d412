"""The llmc:: custom operators: schemas and plain reference implementations.

The worker registers the same schemas in C++ with fast CPU and CUDA kernels; the TorchScript graph records
only the operator names, so a package exported here runs on the C++ kernels at serving time. These Python
implementations exist so export and tests need no C++ build; they favour clarity over speed.

llmc::linear is torch.nn.functional.linear under its own name, so the worker can run the decode-sized
(few-row) projections through a kernel that streams the weight once.

Cache layout: key_cache and value_cache are [num_blocks, block_size, num_kv_heads, head_dim]. Token slot s
lives at block s // block_size, offset s % block_size.

The flattened batch: tokens of all sequences back to back. Sequence i owns query rows
query_start_locs[i] .. query_start_locs[i + 1] - 1; its context (cached tokens, including the new ones,
already written) is seq_lens[i] tokens long and occupies the blocks in block_tables[i]. Query row j of a
sequence with n new tokens sits at position seq_lens[i] - n + j and attends causally to positions <= it.
"""
import torch
import torch.nn.functional as F

_library = torch.library.Library("llmc", "DEF")
_library.define("linear(Tensor input, Tensor weight, Tensor? bias) -> Tensor")
_library.define(
    "write_kv_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
    "Tensor slot_mapping) -> ()")
_library.define(
    "paged_attention(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_tables, "
    "Tensor seq_lens, Tensor query_start_locs, float scale) -> Tensor")


def write_kv_cache_reference(key, value, key_cache, value_cache, slot_mapping):
    """Stores key/value rows [num_tokens, num_kv_heads, head_dim] into their cache slots."""
    num_kv_heads, head_dim = key_cache.shape[-2], key_cache.shape[-1]
    key_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, key.to(key_cache.dtype))
    value_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, value.to(value_cache.dtype))


def paged_attention_reference(query, key_cache, value_cache, block_tables, seq_lens, query_start_locs, scale):
    """Causal attention of each sequence's query rows over its cached context, grouped-query aware."""
    num_heads, head_dim = query.shape[1], query.shape[2]
    block_size, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
    group = num_heads // num_kv_heads
    out = torch.empty_like(query)
    for i in range(seq_lens.shape[0]):
        start, end = int(query_start_locs[i]), int(query_start_locs[i + 1])
        if end == start:
            continue
        context = int(seq_lens[i])
        blocks = block_tables[i, : (context + block_size - 1) // block_size].long()
        keys = key_cache[blocks].reshape(-1, num_kv_heads, head_dim)[:context].float()
        values = value_cache[blocks].reshape(-1, num_kv_heads, head_dim)[:context].float()
        keys = keys.repeat_interleave(group, dim=1)  # [context, num_heads, head_dim]
        values = values.repeat_interleave(group, dim=1)
        q = query[start:end].float()  # [n, num_heads, head_dim]
        scores = torch.einsum("qhd,khd->hqk", q, keys) * scale
        n = end - start
        query_positions = torch.arange(context - n, context).unsqueeze(1)
        key_positions = torch.arange(context).unsqueeze(0)
        scores = scores.masked_fill(key_positions > query_positions, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out[start:end] = torch.einsum("hqk,khd->qhd", weights, values).to(query.dtype)
    return out


_library.impl("linear", F.linear, "CPU")
_library.impl("write_kv_cache", write_kv_cache_reference, "CPU")
_library.impl("paged_attention", paged_attention_reference, "CPU")
