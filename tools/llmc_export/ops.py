"""The llmc:: custom operators: schemas and plain reference implementations.

The worker registers the same schemas in C++ with fast CPU and CUDA kernels; the TorchScript graph records
only the operator names, so a package exported here runs on the C++ kernels at serving time. These Python
implementations exist so export and tests need no C++ build; they favour clarity over speed.

The decoder layer is four fused operators around the attention, so the worker's CPU kernels stream each
weight matrix once for every row of the batch: rms_norm_qkv_rope (RMSNorm, the stacked q/k/v projection with
bias, the optional per-head RMSNorm of q and k (Qwen3's QK-norm: q_norm_weight and k_norm_weight of size
head_dim, the same eps; None or empty means none), rotary embedding, and the k/v cache write),
linear_residual (o_proj and down_proj with the residual add; with norm_weight, Gemma 3's RMSNorm of the
projection before the add), rms_norm_gate_up_silu (RMSNorm, the stacked gate/up projection, SiLU(gate) * up;
rms_norm_gate_up_gelu_tanh the same with GELU's tanh form, Gemma 3's GeGLU), rms_norm_lm_head (the final norm and the LM head, float32 logits),
rms_norm_lm_head_top_k (the same pass, but full logits only for the rows that ask for them and, for every row,
its top_k largest logits: greedy and top-k sampling need no more), and embed. Weights arrive as
[out_features, in_features]; the worker repacks them for its kernels at load time, which the graph does not see.
cos and sin are [num_tokens, head_dim / 2] float32; rotation follows the rotate-half convention of Llama and Qwen2
(a NoPE layer, SmolLM3's, passes cos 1 and sin 0: q and k come out as projected).

Every weight matrix comes with a weight_scale. An empty one (numel 0) means the weight is a plain matrix in the
activation dtype. Otherwise the weight is int8 [N, K] and weight_scale float32 [N, G], G dividing K: group g
scales columns g * K / G .. (g + 1) * K / G - 1, so W[n, k] = weight[n, k] * weight_scale[n, k // (K / G)]
(G == 1: one scale per output row). An int4 weight is uint8 [N, K / 2] (two nibbles u a byte, input 2i low) with
weight_scale float32 [N, G]: W = (u - 8) * scale, or [N, G, 2] (scale, zero point z): W = (u - z) * scale.
An MXFP4 weight (OCP Microscaling; a package's experts) is uint8 [N, K / 2] of E2M1 codes, input 2i in the low
nibble, with weight_scale uint8 [N, K / 32] of E8M0 exponents e: W = E2M1(code) * 2^(e - 127), the code's bits
0-2 indexing E2M1_MAGNITUDES and bit 3 its sign (a uint8 weight_scale tells MXFP4 from int4's float scales).
Activations stay in their dtype; the quantized embed returns float32 rows, which the graph casts to the
activation dtype.

Cache layout: key_cache and value_cache are [num_blocks, block_size, num_kv_heads, head_dim]. Token slot s
lives at block s // block_size, offset s % block_size.

The flattened batch: tokens of all sequences back to back. Sequence i owns query rows
query_start_locs[i] .. query_start_locs[i + 1] - 1; its context (cached tokens, including the new ones,
already written) is seq_lens[i] tokens long and occupies the blocks in block_tables[i]. Query row j of a
sequence with n new tokens sits at position seq_lens[i] - n + j and attends causally to positions <= it;
paged_attention's window W > 0 (a sliding-window layer) limits that to the last W positions, p - W + 1 .. p
(Hugging Face's sliding-window mask: key > p - W). A graph that passes no window records none, so packages from
before windows load unchanged. paged_attention's sinks ([num_heads]; GPT-OSS) add one logit per head to each row's
softmax that weighs no value.
"""
import torch
import torch.nn.functional as F

_library = torch.library.Library("llmc", "DEF")
_library.define(
    "write_kv_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
    "Tensor slot_mapping) -> ()")
_library.define(
    "paged_attention(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_tables, "
    "Tensor seq_lens, Tensor query_start_locs, float scale, int window=0, Tensor? sinks=None) -> Tensor")
_library.define("embed(Tensor input_ids, Tensor weight, Tensor weight_scale, int hidden_size) -> Tensor")
_library.define(
    "rms_norm_qkv_rope(Tensor hidden, Tensor norm_weight, float eps, Tensor weight, Tensor weight_scale, "
    "Tensor? bias, Tensor cos, Tensor sin, Tensor(a!) key_cache, Tensor(b!) value_cache, Tensor slot_mapping, "
    "int num_heads, int num_kv_heads, Tensor? q_norm_weight=None, Tensor? k_norm_weight=None) -> Tensor")
_library.define(
    "linear_residual(Tensor input, Tensor weight, Tensor weight_scale, Tensor residual, Tensor? norm_weight=None, "
    "float eps=1e-06, Tensor? bias=None) -> Tensor")
_library.define(
    "rms_norm_gate_up_silu(Tensor hidden, Tensor norm_weight, float eps, Tensor weight, Tensor weight_scale, "
    "int intermediate_size) -> Tensor")
_library.define(
    "rms_norm_gate_up_gelu_tanh(Tensor hidden, Tensor norm_weight, float eps, Tensor weight, Tensor weight_scale, "
    "int intermediate_size) -> Tensor")
_library.define(
    "moe_rms_norm_swiglu(Tensor hidden, Tensor norm_weight, float eps, Tensor router_weight, "
    "Tensor[] gate_up_weights, Tensor[] gate_up_scales, Tensor[] down_weights, Tensor[] down_scales, int top_k, "
    "bool normalize_top_k, int intermediate_size) -> Tensor")
_library.define(
    "moe_rms_norm_clamped_swiglu(Tensor hidden, Tensor norm_weight, float eps, Tensor router_weight, "
    "Tensor router_bias, Tensor[] gate_up_weights, Tensor[] gate_up_scales, Tensor[] gate_up_biases, "
    "Tensor[] down_weights, Tensor[] down_scales, Tensor[] down_biases, int top_k, int intermediate_size, "
    "float alpha, float limit) -> Tensor")
_library.define(
    "rms_norm_lm_head(Tensor hidden, Tensor norm_weight, float eps, Tensor weight, Tensor weight_scale, "
    "int vocab_size) -> Tensor")
_library.define(
    "rms_norm_lm_head_top_k(Tensor hidden, Tensor norm_weight, float eps, Tensor weight, Tensor weight_scale, "
    "int vocab_size, Tensor full_rows, int top_k) -> (Tensor, Tensor, Tensor)")


# MXFP4: E2M1's eight magnitudes (code bits 0-2; bit 3 is the sign), and the inputs that share an E8M0 exponent.
E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
MXFP4_GROUP_SIZE = 32
# float32 holds every E2M1 value times every 2^(e - 127) exactly (2^-127 as a subnormal); e = 255 is NaN.
_E2M1_VALUES = torch.tensor(E2M1_MAGNITUDES + tuple(-m for m in E2M1_MAGNITUDES), dtype=torch.float32)
_E8M0_SCALES = torch.tensor([2.0 ** (e - 127) for e in range(255)] + [float("nan")], dtype=torch.float64).float()


def dequantize_mxfp4(codes, exponents):
    """float32 [..., K] from E2M1 codes uint8 [..., K / 2] (input 2i in the low nibble, 2i + 1 in the high one) and
    E8M0 exponents uint8 [..., K / 32]."""
    values = _E2M1_VALUES[torch.stack([codes & 15, codes >> 4], dim=-1).long()]  # [..., K / 2, 2]
    values = values.reshape(*exponents.shape, MXFP4_GROUP_SIZE) * _E8M0_SCALES[exponents.long()].unsqueeze(-1)
    return values.reshape(*codes.shape[:-1], 2 * codes.shape[-1])


def dequantize(weight, weight_scale, dtype):
    """The matrix an int8, int4 or MXFP4 weight and its scales stand for, in dtype; a plain weight as it is."""
    if weight_scale.numel() == 0:
        return weight
    if weight.dtype == torch.uint8 and weight_scale.dtype == torch.uint8:
        return dequantize_mxfp4(weight, weight_scale).to(dtype)
    if weight.dtype == torch.uint8:  # int4: nibble u of input 2i low, 2i + 1 high
        u = torch.stack([weight & 15, weight >> 4], dim=2).reshape(weight.shape[0], -1).float()
        if weight_scale.dim() == 3:  # zero points
            scale, zero = weight_scale[..., 0], weight_scale[..., 1]
        else:
            scale, zero = weight_scale, torch.full_like(weight_scale, 8.0)
        width = u.shape[1] // scale.shape[1]
        return ((u - zero.repeat_interleave(width, dim=1)) * scale.repeat_interleave(width, dim=1)).to(dtype)
    group_width = weight.shape[1] // weight_scale.shape[1]
    return (weight.float() * weight_scale.repeat_interleave(group_width, dim=1)).to(dtype)


def rms_norm_reference(hidden, weight, eps):
    x = hidden.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden.dtype)


def rope_reference(x, cos, sin):
    """x [tokens, heads, head_dim]; cos/sin [tokens, head_dim / 2] float32."""
    half = x.shape[-1] // 2
    xf = x.float()
    first, second = xf[..., :half], xf[..., half:]
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return torch.cat((first * c - second * s, second * c + first * s), dim=-1).to(x.dtype)


def embed_reference(input_ids, weight, weight_scale, hidden_size):
    rows = F.embedding(input_ids, weight)
    if weight_scale.numel() == 0:
        return rows
    return dequantize(rows, weight_scale[input_ids], torch.float32)


def has_weight(weight) -> bool:
    """Whether an optional weight operand is given (None or an empty tensor: absent)."""
    return weight is not None and weight.numel() > 0


def rms_norm_qkv_rope_reference(hidden, norm_weight, eps, weight, weight_scale, bias, cos, sin, key_cache,
                                value_cache, slot_mapping, num_heads, num_kv_heads, q_norm_weight=None,
                                k_norm_weight=None):
    head_dim = key_cache.shape[-1]
    matrix = dequantize(weight, weight_scale, hidden.dtype)
    qkv = F.linear(rms_norm_reference(hidden, norm_weight, eps), matrix, bias)
    q_width, kv_width = num_heads * head_dim, num_kv_heads * head_dim
    q = qkv[:, :q_width].reshape(-1, num_heads, head_dim)
    k = qkv[:, q_width:q_width + kv_width].reshape(-1, num_kv_heads, head_dim)
    v = qkv[:, q_width + kv_width:].reshape(-1, num_kv_heads, head_dim)
    # QK-norm (Qwen3): each head's vector normalized over head_dim, before the rotation.
    if has_weight(q_norm_weight):
        q = rms_norm_reference(q, q_norm_weight, eps)
    if has_weight(k_norm_weight):
        k = rms_norm_reference(k, k_norm_weight, eps)
    write_kv_cache_reference(rope_reference(k, cos, sin), v, key_cache, value_cache, slot_mapping)
    return rope_reference(q, cos, sin)


def linear_residual_reference(input, weight, weight_scale, residual, norm_weight=None, eps=1e-6, bias=None):
    projected = F.linear(input, dequantize(weight, weight_scale, input.dtype), bias if has_weight(bias) else None)
    if has_weight(norm_weight):  # Gemma 3's output norm before the residual add
        projected = rms_norm_reference(projected, norm_weight, eps)
    return residual + projected


def rms_norm_gate_up_silu_reference(hidden, norm_weight, eps, weight, weight_scale, intermediate_size):
    matrix = dequantize(weight, weight_scale, hidden.dtype)
    gate_up = F.linear(rms_norm_reference(hidden, norm_weight, eps), matrix)
    return F.silu(gate_up[:, :intermediate_size]) * gate_up[:, intermediate_size:]


def rms_norm_gate_up_gelu_tanh_reference(hidden, norm_weight, eps, weight, weight_scale, intermediate_size):
    matrix = dequantize(weight, weight_scale, hidden.dtype)
    gate_up = F.linear(rms_norm_reference(hidden, norm_weight, eps), matrix)
    return F.gelu(gate_up[:, :intermediate_size], approximate="tanh") * gate_up[:, intermediate_size:]


def route_reference(x, router_weight, top_k, normalize_top_k):
    """(experts [T, top_k] int64, weights [T, top_k] float32) of normalized rows x: the top_k largest router
    probabilities (float32 softmax of x @ router^T), largest first and equal ones by lower expert index,
    renormalized to sum 1 when normalize_top_k."""
    probabilities = torch.softmax(F.linear(x, router_weight).float(), dim=-1)
    values, experts = torch.sort(probabilities, dim=-1, descending=True, stable=True)
    weights, experts = values[:, :top_k], experts[:, :top_k]
    if normalize_top_k:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return experts, weights


def moe_rms_norm_swiglu_reference(hidden, norm_weight, eps, router_weight, gate_up_weights, gate_up_scales,
                                  down_weights, down_scales, top_k, normalize_top_k, intermediate_size):
    """hidden + the mixture of experts of RMSNorm(hidden): each row's chosen experts (route_reference), each a
    SwiGLU MLP (gate_up [2 I, H] stacked as the dense one's, down [H, I]), their outputs times the routing
    weights (cast to the activations' dtype) summed."""
    x = rms_norm_reference(hidden, norm_weight, eps)
    experts, weights = route_reference(x, router_weight, top_k, normalize_top_k)
    weights = weights.to(hidden.dtype)
    mixed = torch.zeros_like(hidden)
    for expert in range(len(gate_up_weights)):
        rows, slots = torch.where(experts == expert)
        if rows.numel() == 0:
            continue
        gate_up = F.linear(x[rows], dequantize(gate_up_weights[expert], gate_up_scales[expert], hidden.dtype))
        activated = F.silu(gate_up[:, :intermediate_size]) * gate_up[:, intermediate_size:]
        out = F.linear(activated, dequantize(down_weights[expert], down_scales[expert], hidden.dtype))
        mixed.index_add_(0, rows, out * weights[rows, slots].unsqueeze(1))
    return hidden + mixed


def moe_rms_norm_clamped_swiglu_reference(hidden, norm_weight, eps, router_weight, router_bias, gate_up_weights,
                                          gate_up_scales, gate_up_biases, down_weights, down_scales, down_biases,
                                          top_k, intermediate_size, alpha, limit):
    """GPT-OSS's mixture: hidden + the experts of RMSNorm(hidden). The router's logits (with its bias, in the
    activations' dtype) choose each row's top_k experts (equal logits: the lower index first), weighted by the
    softmax of those top_k logits alone; each expert computes g = min(gate, limit), u = clamp(up, -limit, limit)
    from its gate_up (with bias; gate rows then up rows), (u + 1) * g * sigmoid(alpha * g), and down (with bias)."""
    x = rms_norm_reference(hidden, norm_weight, eps)
    logits = F.linear(x, router_weight, router_bias).float()
    values, experts = torch.sort(logits, dim=-1, descending=True, stable=True)
    weights = torch.softmax(values[:, :top_k], dim=-1).to(hidden.dtype)
    experts = experts[:, :top_k]
    mixed = torch.zeros_like(hidden)
    for expert in range(len(gate_up_weights)):
        rows, slots = torch.where(experts == expert)
        if rows.numel() == 0:
            continue
        gate_up = F.linear(x[rows], dequantize(gate_up_weights[expert], gate_up_scales[expert], hidden.dtype),
                           gate_up_biases[expert])
        gate = gate_up[:, :intermediate_size].clamp(max=limit)
        up = gate_up[:, intermediate_size:].clamp(-limit, limit)
        activated = (up + 1) * gate * torch.sigmoid(gate * alpha)
        out = F.linear(activated, dequantize(down_weights[expert], down_scales[expert], hidden.dtype),
                       down_biases[expert])
        mixed.index_add_(0, rows, out * weights[rows, slots].unsqueeze(1))
    return hidden + mixed


def rms_norm_lm_head_reference(hidden, norm_weight, eps, weight, weight_scale, vocab_size):
    matrix = dequantize(weight, weight_scale, hidden.dtype)
    return F.linear(rms_norm_reference(hidden, norm_weight, eps), matrix).float()


def rms_norm_lm_head_top_k_reference(hidden, norm_weight, eps, weight, weight_scale, vocab_size, full_rows, top_k):
    """(logits of the rows in full_rows [F, vocab] float32, top_k largest logits of every row [T, top_k] float32,
    their ids [T, top_k] int64): largest first, equal logits in increasing id order."""
    logits = rms_norm_lm_head_reference(hidden, norm_weight, eps, weight, weight_scale, vocab_size)
    values, ids = torch.sort(logits, dim=-1, descending=True, stable=True)
    return logits.index_select(0, full_rows), values[:, :top_k].contiguous(), ids[:, :top_k].contiguous()


def write_kv_cache_reference(key, value, key_cache, value_cache, slot_mapping):
    """Stores key/value rows [num_tokens, num_kv_heads, head_dim] into their cache slots."""
    num_kv_heads, head_dim = key_cache.shape[-2], key_cache.shape[-1]
    key_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, key.to(key_cache.dtype))
    value_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, value.to(value_cache.dtype))


def paged_attention_reference(query, key_cache, value_cache, block_tables, seq_lens, query_start_locs, scale,
                              window=0, sinks=None):
    """Causal attention of each sequence's query rows over its cached context, grouped-query aware; with a
    window W > 0, only over the last W positions of each row's. With sinks ([num_heads], GPT-OSS's attention
    sinks), each head's softmax also counts a logit sinks[h] that weighs no value: the probabilities of the keys
    sum to less than one."""
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
        hidden = key_positions > query_positions
        if window > 0:
            hidden |= key_positions <= query_positions - window
        scores = scores.masked_fill(hidden, float("-inf"))
        if sinks is not None and sinks.numel() > 0:
            sink = sinks.float().reshape(num_heads, 1, 1).expand(num_heads, n, 1)
            weights = torch.softmax(torch.cat((scores, sink), dim=-1), dim=-1)[..., :-1]
        else:
            weights = torch.softmax(scores, dim=-1)
        out[start:end] = torch.einsum("hqk,khd->qhd", weights, values).to(query.dtype)
    return out


_library.impl("write_kv_cache", write_kv_cache_reference, "CPU")
_library.impl("paged_attention", paged_attention_reference, "CPU")
_library.impl("embed", embed_reference, "CPU")
_library.impl("rms_norm_qkv_rope", rms_norm_qkv_rope_reference, "CPU")
_library.impl("linear_residual", linear_residual_reference, "CPU")
_library.impl("rms_norm_gate_up_silu", rms_norm_gate_up_silu_reference, "CPU")
_library.impl("rms_norm_gate_up_gelu_tanh", rms_norm_gate_up_gelu_tanh_reference, "CPU")
_library.impl("moe_rms_norm_swiglu", moe_rms_norm_swiglu_reference, "CPU")
_library.impl("moe_rms_norm_clamped_swiglu", moe_rms_norm_clamped_swiglu_reference, "CPU")
_library.impl("rms_norm_lm_head", rms_norm_lm_head_reference, "CPU")
_library.impl("rms_norm_lm_head_top_k", rms_norm_lm_head_top_k_reference, "CPU")
