"""The Llama-family network (Llama 2/3, Mistral, Qwen2/2.5, Qwen3, SmolLM3, Phi-3, Granite 3, Gemma 3, and the
mixtures of experts Qwen3-MoE, Mixtral and GPT-OSS) over one flattened batch and a paged KV cache.

Parameter names follow Hugging Face's, so a checkpoint's state dict loads as it is. The module does the
math only: the caller (the worker's engine) owns scheduling, the KV memory and sampling.

Every weight matrix's module also holds a weight_scale buffer: empty for a plain matrix, the int8 or int4 group
scales once quantize.quantize_model has quantized it, an MXFP4 expert's uint8 exponents (see ops.py).
"""
from typing import List, Tuple

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


def with_weight_scale(module: nn.Module) -> nn.Module:
    """Gives a Linear or Embedding an empty weight_scale (a plain, unquantized weight). Each module gets its
    own tensor: the worker replaces every buffer's data in place at load."""
    module.register_buffer("weight_scale", torch.empty(0, dtype=torch.float32))
    return module


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    """q, k and v projections stacked in one matrix (qkv_proj: [q; k; v] rows), so one operator reads them.
    With QK-norm (Qwen3), q_norm and k_norm hold the per-head RMSNorm weights [head_dim] that operator applies
    to each head of q and k before RoPE; without it the module has neither, and the graph passes none."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.num_heads = config.num_heads
        self.num_kv_heads = config.num_kv_heads
        self.head_dim = config.head_dim
        # Granite's attention_multiplier replaces the usual head_dim ** -0.5.
        self.scale = config.attention_scale or config.head_dim ** -0.5
        qkv_width = (config.num_heads + 2 * config.num_kv_heads) * config.head_dim
        self.qkv_proj = with_weight_scale(nn.Linear(config.hidden_size, qkv_width, bias=config.qkv_bias))
        self.o_proj = with_weight_scale(nn.Linear(config.num_heads * config.head_dim, config.hidden_size,
                                                  bias=config.o_proj_bias))
        if config.o_proj_bias:
            self.has_o_proj_bias = True
        # GPT-OSS's attention sinks: one logit per head in every softmax, weighing no value.
        if config.attention_sinks:
            self.sinks = nn.Parameter(torch.zeros(config.num_heads))
        if config.qk_norm:
            self.q_norm = RMSNorm(config.head_dim, config.rms_norm_eps)
            self.k_norm = RMSNorm(config.head_dim, config.rms_norm_eps)


class Mlp(nn.Module):
    """Gate and up projections stacked in one matrix (gate_up_proj: [gate; up] rows). With a gelu_tanh attribute
    (Gemma 3) the gate goes through GELU's tanh form instead of SiLU."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.hidden_activation == "gelu_tanh":
            self.gelu_tanh = True
        self.intermediate_size = config.intermediate_size
        self.gate_up_proj = with_weight_scale(nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=False))
        self.down_proj = with_weight_scale(nn.Linear(config.intermediate_size, config.hidden_size, bias=False))


class Expert(nn.Module):
    """One expert of a sparse layer: a SwiGLU MLP with gate and up stacked as the dense Mlp's (GPT-OSS's with
    biases)."""

    def __init__(self, hidden_size: int, intermediate_size: int, bias: bool = False, initialize: bool = True):
        super().__init__()
        # Without initialize the matrices are allocated but never written (nor made resident) here: a large
        # random package fills and quantizes them one expert at a time (package.fill_experts_quantized).
        linear = nn.Linear if initialize else lambda *args, **kwargs: torch.nn.utils.skip_init(nn.Linear, *args,
                                                                                                **kwargs)
        self.gate_up_proj = with_weight_scale(linear(hidden_size, 2 * intermediate_size, bias=bias))
        self.down_proj = with_weight_scale(linear(intermediate_size, hidden_size, bias=bias))


class SparseMoe(nn.Module):
    """A mixture-of-experts MLP (moe.py): the router `gate` [num_experts, hidden] (no weight_scale: it stays in the
    activations' dtype) and the experts, run by one fused operator (ops.moe_rms_norm_swiglu)."""
    gate_up_weights: List[torch.Tensor]
    gate_up_scales: List[torch.Tensor]
    gate_up_biases: List[torch.Tensor]
    down_weights: List[torch.Tensor]
    down_scales: List[torch.Tensor]
    down_biases: List[torch.Tensor]

    def __init__(self, config: ModelConfig, initialize_experts: bool = True):
        super().__init__()
        self.top_k = config.experts_per_token
        self.normalize_top_k = config.normalize_top_k
        self.intermediate_size = config.moe_intermediate_size
        clamped = config.moe_variant == "clamped_swiglu"
        if clamped:  # GPT-OSS: biases, top-k logits then softmax, the clamped SwiGLU
            self.clamped_swiglu = True
            self.alpha = float(config.swiglu_alpha)
            self.limit = float(config.swiglu_limit)
        self.gate = nn.Linear(config.hidden_size, config.num_experts, bias=clamped)
        self.experts = nn.ModuleList([Expert(config.hidden_size, config.moe_intermediate_size, bias=clamped,
                                             initialize=initialize_experts) for _ in range(config.num_experts)])
        # The operator's expert lists, held rather than gathered per call: the scripted network would otherwise
        # append every expert's four tensors in the interpreter at every step (2048 appends per step for 4 layers
        # of 128 experts). Whoever replaces an expert's tensors refreshes them (package.write_package before
        # scripting; the worker's loader after repacking); in Python, forward refreshes them itself.
        self.gate_up_weights: List[torch.Tensor] = []
        self.gate_up_scales: List[torch.Tensor] = []
        self.gate_up_biases: List[torch.Tensor] = []
        self.down_weights: List[torch.Tensor] = []
        self.down_scales: List[torch.Tensor] = []
        self.down_biases: List[torch.Tensor] = []
        self.refresh_expert_lists()

    @torch.jit.unused
    def refresh_expert_lists(self) -> None:
        self.gate_up_weights = [expert.gate_up_proj.weight for expert in self.experts]
        self.gate_up_scales = [expert.gate_up_proj.weight_scale for expert in self.experts]
        self.down_weights = [expert.down_proj.weight for expert in self.experts]
        self.down_scales = [expert.down_proj.weight_scale for expert in self.experts]
        biased = self.experts[0].gate_up_proj.bias is not None
        self.gate_up_biases = [expert.gate_up_proj.bias for expert in self.experts] if biased else []
        self.down_biases = [expert.down_proj.bias for expert in self.experts] if biased else []


class DecoderLayer(nn.Module):
    """One layer as four fused operators and the paged attention (tools/llmc_export/ops.py). A NoPE layer
    (SmolLM3's nope_layers) has a no_rope attribute; CausalLM passes it the identity rotation. A local_rope
    layer (Gemma 3's local layers) gets the local rotation. With sandwich norms (Gemma 3) post_attention_layernorm
    normalizes the attention output before its residual add, pre_feedforward_layernorm the MLP's input and
    post_feedforward_layernorm its output; otherwise post_attention_layernorm is the MLP's input norm (Llama's
    naming)."""

    def __init__(self, config: ModelConfig, index: int = 0, initialize_experts: bool = True):
        super().__init__()
        if index in config.nope_layers:
            self.no_rope = True
        if index in config.local_rope_layers:
            self.local_rope = True
        # A sliding-window layer (config.layer_windows) attends to its last attention_window positions; a layer
        # without the attribute attends to the whole context.
        if config.layer_windows and config.layer_windows[index] > 0:
            self.attention_window = int(config.layer_windows[index])
        self.self_attn = Attention(config)
        self.mlp = SparseMoe(config, initialize_experts) if index in config.moe_layers else Mlp(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        if config.sandwich_norms:
            self.pre_feedforward_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
            self.post_feedforward_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, key_cache: torch.Tensor,
                value_cache: torch.Tensor, slot_mapping: torch.Tensor, block_tables: torch.Tensor,
                seq_lens: torch.Tensor, query_start_locs: torch.Tensor) -> torch.Tensor:
        attn = self.self_attn
        # Act-order 4-bit weights take their input in their own order (input_order.py); resolved when scripted,
        # so other packages record no gather.
        attn_input = hidden
        if hasattr(attn.qkv_proj, "input_order"):
            attn_input = hidden.index_select(-1, attn.qkv_proj.input_order)
        # Resolved when the model is scripted: a layer without QK-norm records the call without its operands,
        # as packages before Qwen3 have it.
        if hasattr(self.self_attn, "q_norm"):
            q = torch.ops.llmc.rms_norm_qkv_rope(attn_input, self.input_layernorm.weight, self.input_layernorm.eps,
                                                 attn.qkv_proj.weight, attn.qkv_proj.weight_scale, attn.qkv_proj.bias,
                                                 cos, sin, key_cache, value_cache, slot_mapping, attn.num_heads,
                                                 attn.num_kv_heads, attn.q_norm.weight, attn.k_norm.weight)
        else:
            q = torch.ops.llmc.rms_norm_qkv_rope(attn_input, self.input_layernorm.weight, self.input_layernorm.eps,
                                                 attn.qkv_proj.weight, attn.qkv_proj.weight_scale, attn.qkv_proj.bias,
                                                 cos, sin, key_cache, value_cache, slot_mapping, attn.num_heads,
                                                 attn.num_kv_heads)
        # Resolved when the model is scripted, as above: a layer without a window records the call without one,
        # as packages before windows have it.
        if hasattr(attn, "sinks"):  # GPT-OSS (resolved when scripted, as the window)
            window = self.attention_window if hasattr(self, "attention_window") else 0
            out = torch.ops.llmc.paged_attention(q, key_cache, value_cache, block_tables, seq_lens, query_start_locs,
                                                 attn.scale, window, attn.sinks)
        elif hasattr(self, "attention_window"):
            out = torch.ops.llmc.paged_attention(q, key_cache, value_cache, block_tables, seq_lens, query_start_locs,
                                                 attn.scale, self.attention_window)
        else:
            out = torch.ops.llmc.paged_attention(q, key_cache, value_cache, block_tables, seq_lens, query_start_locs,
                                                 attn.scale)
        mlp = self.mlp
        if hasattr(attn.o_proj, "input_order"):
            out = out.reshape(-1, attn.num_heads * attn.head_dim).index_select(-1, attn.o_proj.input_order)
        # Resolved when the model is scripted: packages without sandwich norms record Llama's calls unchanged.
        if hasattr(self, "pre_feedforward_layernorm"):
            hidden = torch.ops.llmc.linear_residual(out.reshape(-1, attn.num_heads * attn.head_dim),
                                                    attn.o_proj.weight, attn.o_proj.weight_scale, hidden,
                                                    self.post_attention_layernorm.weight,
                                                    self.post_attention_layernorm.eps)
            mlp_norm = self.pre_feedforward_layernorm
        elif hasattr(attn, "has_o_proj_bias"):
            hidden = torch.ops.llmc.linear_residual(out.reshape(-1, attn.num_heads * attn.head_dim),
                                                    attn.o_proj.weight, attn.o_proj.weight_scale, hidden, None, 1e-6,
                                                    attn.o_proj.bias)
            mlp_norm = self.post_attention_layernorm
        else:
            hidden = torch.ops.llmc.linear_residual(out.reshape(-1, attn.num_heads * attn.head_dim),
                                                    attn.o_proj.weight, attn.o_proj.weight_scale, hidden)
            mlp_norm = self.post_attention_layernorm
        if hasattr(mlp, "experts"):  # resolved when scripted: only sparse layers record this call
            if not torch.jit.is_scripting():
                mlp.refresh_expert_lists()
            if hasattr(mlp, "clamped_swiglu"):
                return torch.ops.llmc.moe_rms_norm_clamped_swiglu(hidden, mlp_norm.weight, mlp_norm.eps,
                                                                  mlp.gate.weight, mlp.gate.bias, mlp.gate_up_weights,
                                                                  mlp.gate_up_scales, mlp.gate_up_biases,
                                                                  mlp.down_weights, mlp.down_scales, mlp.down_biases,
                                                                  mlp.top_k, mlp.intermediate_size, mlp.alpha,
                                                                  mlp.limit)
            return torch.ops.llmc.moe_rms_norm_swiglu(hidden, mlp_norm.weight, mlp_norm.eps, mlp.gate.weight,
                                                      mlp.gate_up_weights, mlp.gate_up_scales, mlp.down_weights,
                                                      mlp.down_scales, mlp.top_k, mlp.normalize_top_k,
                                                      mlp.intermediate_size)
        mlp_input = hidden
        if hasattr(mlp.gate_up_proj, "input_order"):
            mlp_input = hidden.index_select(-1, mlp.gate_up_proj.input_order)
        if hasattr(mlp, "gelu_tanh"):
            act = torch.ops.llmc.rms_norm_gate_up_gelu_tanh(mlp_input, mlp_norm.weight, mlp_norm.eps,
                                                            mlp.gate_up_proj.weight, mlp.gate_up_proj.weight_scale,
                                                            mlp.intermediate_size)
        else:
            act = torch.ops.llmc.rms_norm_gate_up_silu(mlp_input, mlp_norm.weight, mlp_norm.eps,
                                                       mlp.gate_up_proj.weight, mlp.gate_up_proj.weight_scale,
                                                       mlp.intermediate_size)
        if hasattr(self, "post_feedforward_layernorm"):
            return torch.ops.llmc.linear_residual(act, mlp.down_proj.weight, mlp.down_proj.weight_scale, hidden,
                                                  self.post_feedforward_layernorm.weight,
                                                  self.post_feedforward_layernorm.eps)
        return torch.ops.llmc.linear_residual(act, mlp.down_proj.weight, mlp.down_proj.weight_scale, hidden)


class Backbone(nn.Module):
    def __init__(self, config: ModelConfig, initialize_experts: bool = True):
        super().__init__()
        self.embed_tokens = with_weight_scale(nn.Embedding(config.vocab_size, config.hidden_size))
        self.layers = nn.ModuleList([DecoderLayer(config, index, initialize_experts)
                                     for index in range(config.num_layers)])
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class CausalLM(nn.Module):
    """forward(input_ids, positions, kv_cache, slot_mapping, block_tables, seq_lens, query_start_locs,
    logits_indices) -> float32 logits [len(logits_indices), vocab_size].

    input_ids, positions, slot_mapping: [num_tokens] int64, the flattened batch.
    kv_cache: [num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim], written in place.
    block_tables: [num_seqs, max_blocks] int32; seq_lens: [num_seqs] int32 (context incl. new tokens);
    query_start_locs: [num_seqs + 1] int32; logits_indices: rows whose logits are needed (int64).
    """

    def __init__(self, config: ModelConfig, initialize_experts: bool = True):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.vocab_size = config.vocab_size
        self.model = Backbone(config, initialize_experts)
        self.lm_head = with_weight_scale(nn.Linear(config.hidden_size, config.vocab_size, bias=False))
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        if config.nope_layers:
            self.has_nope_layers = True
        if config.final_logit_softcapping > 0:
            self.final_logit_softcapping = float(config.final_logit_softcapping)
        self.register_buffer("inv_freq", torch.tensor(config.inverse_frequencies(), dtype=torch.float32),
                             persistent=False)
        # Local layers' rotation (Gemma 3); an empty buffer when every layer rotates by inv_freq.
        local = config.local_inverse_frequencies() if config.local_rope_layers else []
        if local:
            self.has_local_rope = True
        self.register_buffer("local_inv_freq", torch.tensor(local, dtype=torch.float32), persistent=False)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, kv_cache: torch.Tensor,
                slot_mapping: torch.Tensor, block_tables: torch.Tensor, seq_lens: torch.Tensor,
                query_start_locs: torch.Tensor, logits_indices: torch.Tensor) -> torch.Tensor:
        """float32 logits [len(logits_indices), vocab] of the batch rows named by logits_indices."""
        hidden = self.final_hidden(input_ids, positions, kv_cache, slot_mapping, block_tables, seq_lens,
                                   query_start_locs, logits_indices)
        return self.soft_capped(torch.ops.llmc.rms_norm_lm_head(hidden, self.model.norm.weight, self.model.norm.eps,
                                                                self.lm_head.weight, self.lm_head.weight_scale,
                                                                self.vocab_size))

    @torch.jit.export
    def forward_top_k(self, input_ids: torch.Tensor, positions: torch.Tensor, kv_cache: torch.Tensor,
                      slot_mapping: torch.Tensor, block_tables: torch.Tensor, seq_lens: torch.Tensor,
                      query_start_locs: torch.Tensor, logits_indices: torch.Tensor, full_rows: torch.Tensor,
                      top_k: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The same step for sampling: full logits only for the logits rows in full_rows, and the top_k
        largest logits (values, ids) of every logits row (see ops.rms_norm_lm_head_top_k)."""
        hidden = self.final_hidden(input_ids, positions, kv_cache, slot_mapping, block_tables, seq_lens,
                                   query_start_locs, logits_indices)
        full, values, ids = torch.ops.llmc.rms_norm_lm_head_top_k(hidden, self.model.norm.weight,
                                                                  self.model.norm.eps, self.lm_head.weight,
                                                                  self.lm_head.weight_scale, self.vocab_size,
                                                                  full_rows, top_k)
        # Soft-capping is increasing: the same ids stay on top, in the same order.
        return self.soft_capped(full), self.soft_capped(values), ids

    @torch.jit.export
    def forward_with_hidden(self, input_ids: torch.Tensor, positions: torch.Tensor, kv_cache: torch.Tensor,
                            slot_mapping: torch.Tensor, block_tables: torch.Tensor, seq_lens: torch.Tensor,
                            query_start_locs: torch.Tensor, logits_indices: torch.Tensor, full_rows: torch.Tensor,
                            top_k: int, hidden_rows: torch.Tensor
                            ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """forward_top_k's step that also returns the final normalized hidden state (after the last RMSNorm,
        float32 [len(hidden_rows), hidden_size]) of the batch rows named by hidden_rows: what embeddings pool.
        logits_indices may be empty (a step of embedding prompts only)."""
        hidden = self.layers_output(input_ids, positions, kv_cache, slot_mapping, block_tables, seq_lens,
                                    query_start_locs)
        pooled = self.model.norm(hidden.index_select(0, hidden_rows)).float()
        if logits_indices.numel() == 0:
            float_options = torch.empty(0, dtype=torch.float32, device=hidden.device)
            return (float_options.new_empty((0, self.vocab_size)), float_options.new_empty((0, top_k)),
                    torch.empty((0, top_k), dtype=torch.int64, device=hidden.device), pooled)
        full, values, ids = torch.ops.llmc.rms_norm_lm_head_top_k(hidden.index_select(0, logits_indices),
                                                                  self.model.norm.weight, self.model.norm.eps,
                                                                  self.lm_head.weight, self.lm_head.weight_scale,
                                                                  self.vocab_size, full_rows, top_k)
        return self.soft_capped(full), self.soft_capped(values), ids, pooled

    def soft_capped(self, logits: torch.Tensor) -> torch.Tensor:
        """cap * tanh(logits / cap) with final_logit_softcapping (Gemma 3, where the config sets it); resolved when
        the model is scripted, so other packages record nothing."""
        if hasattr(self, "final_logit_softcapping"):
            return torch.tanh(logits / self.final_logit_softcapping) * self.final_logit_softcapping
        return logits

    def final_hidden(self, input_ids: torch.Tensor, positions: torch.Tensor, kv_cache: torch.Tensor,
                     slot_mapping: torch.Tensor, block_tables: torch.Tensor, seq_lens: torch.Tensor,
                     query_start_locs: torch.Tensor, logits_indices: torch.Tensor) -> torch.Tensor:
        """The last layer's output (before the final norm) of the rows named by logits_indices."""
        return self.layers_output(input_ids, positions, kv_cache, slot_mapping, block_tables, seq_lens,
                                  query_start_locs).index_select(0, logits_indices)

    def layers_output(self, input_ids: torch.Tensor, positions: torch.Tensor, kv_cache: torch.Tensor,
                      slot_mapping: torch.Tensor, block_tables: torch.Tensor, seq_lens: torch.Tensor,
                      query_start_locs: torch.Tensor) -> torch.Tensor:
        """The last layer's output (before the final norm) of every row of the batch."""
        embed_tokens = self.model.embed_tokens
        # A quantized embedding gives float32 rows; the norm weights carry the activation dtype (a no-op cast
        # for a plain embedding).
        hidden = torch.ops.llmc.embed(input_ids, embed_tokens.weight, embed_tokens.weight_scale,
                                      self.hidden_size).to(self.model.norm.weight.dtype)
        freqs = positions.float().unsqueeze(1) * self.inv_freq.unsqueeze(0)  # [num_tokens, head_dim / 2]
        cos = freqs.cos()
        sin = freqs.sin()
        # NoPE layers (SmolLM3) get the identity rotation, cos 1 and sin 0: the fused operator then leaves q and k
        # as they are. Resolved when the model is scripted: a model without NoPE layers makes no such tables.
        identity_cos = cos
        identity_sin = sin
        if hasattr(self, "has_nope_layers"):
            identity_cos = torch.ones_like(cos)
            identity_sin = torch.zeros_like(sin)
        # Gemma 3's local layers rotate by their own frequencies; resolved when scripted, as above.
        local_cos = cos
        local_sin = sin
        if hasattr(self, "has_local_rope"):
            local_freqs = positions.float().unsqueeze(1) * self.local_inv_freq.unsqueeze(0)
            local_cos = local_freqs.cos()
            local_sin = local_freqs.sin()
        # Every layer's key and value caches as views made by two operators, not four selects per layer (96 of a
        # 24-layer decode step's 250 operators went to them). The cache is contiguous (AllocateKvCache), so
        # flattening its first two dimensions is a view and the layers write into the caller's cache.
        caches = kv_cache.flatten(0, 1).unbind(0)
        for layer_index, layer in enumerate(self.model.layers):
            key_cache = caches[2 * layer_index]
            value_cache = caches[2 * layer_index + 1]
            if hasattr(layer, "no_rope"):
                hidden = layer(hidden, identity_cos, identity_sin, key_cache, value_cache, slot_mapping, block_tables,
                               seq_lens, query_start_locs)
            elif hasattr(layer, "local_rope"):
                hidden = layer(hidden, local_cos, local_sin, key_cache, value_cache, slot_mapping, block_tables,
                               seq_lens, query_start_locs)
            else:
                hidden = layer(hidden, cos, sin, key_cache, value_cache, slot_mapping, block_tables, seq_lens,
                               query_start_locs)
        return hidden


def hf_parameter_shapes(config: ModelConfig) -> dict:
    """The parameters a Hugging Face checkpoint of this architecture holds, with their shapes."""
    q, kv = config.num_heads * config.head_dim, config.num_kv_heads * config.head_dim
    h, i = config.hidden_size, config.intermediate_size
    shapes = {"model.embed_tokens.weight": (config.vocab_size, h), "model.norm.weight": (h,)}
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (config.vocab_size, h)
    for layer in range(config.num_layers):
        prefix = f"model.layers.{layer}."
        shapes.update({
            prefix + "self_attn.q_proj.weight": (q, h), prefix + "self_attn.k_proj.weight": (kv, h),
            prefix + "self_attn.v_proj.weight": (kv, h), prefix + "self_attn.o_proj.weight": (h, q),
            prefix + "input_layernorm.weight": (h,), prefix + "post_attention_layernorm.weight": (h,),
        })
        if config.o_proj_bias:
            shapes[prefix + "self_attn.o_proj.bias"] = (h,)
        if config.attention_sinks:
            shapes[prefix + "self_attn.sinks"] = (config.num_heads,)
        if layer in config.moe_layers:
            m = config.moe_intermediate_size
            biases = config.moe_variant == "clamped_swiglu"
            shapes[prefix + "mlp.gate.weight"] = (config.num_experts, h)
            if biases:
                shapes[prefix + "mlp.gate.bias"] = (config.num_experts,)
            for expert in range(config.num_experts):
                p = f"{prefix}mlp.experts.{expert}."
                shapes.update({p + "gate_proj.weight": (m, h), p + "up_proj.weight": (m, h),
                               p + "down_proj.weight": (h, m)})
                if biases:
                    shapes.update({p + "gate_proj.bias": (m,), p + "up_proj.bias": (m,), p + "down_proj.bias": (h,)})
        else:
            shapes.update({prefix + "mlp.gate_proj.weight": (i, h), prefix + "mlp.up_proj.weight": (i, h),
                           prefix + "mlp.down_proj.weight": (h, i)})
        if config.sandwich_norms:
            shapes.update({prefix + "pre_feedforward_layernorm.weight": (h,),
                           prefix + "post_feedforward_layernorm.weight": (h,)})
        if config.qkv_bias:
            shapes.update({prefix + "self_attn.q_proj.bias": (q,), prefix + "self_attn.k_proj.bias": (kv,),
                           prefix + "self_attn.v_proj.bias": (kv,)})
        if config.qk_norm:
            shapes.update({prefix + "self_attn.q_norm.weight": (config.head_dim,),
                           prefix + "self_attn.k_norm.weight": (config.head_dim,)})
    return shapes


# The stacked matrices and the checkpoint's matrices each is made of, in row order.
STACKED_PARTS = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def load_hf_tensors(model: CausalLM, config: ModelConfig, tensors: dict) -> None:
    """Copies a checkpoint's tensors (Hugging Face names) into the model, stacking q/k/v and gate/up. Parameters
    that are quantized already (MXFP4 experts kept from the checkpoint) are left as they are."""
    def stacked(name: str) -> torch.Tensor:
        for matrix, parts in STACKED_PARTS.items():
            if f".{matrix}." in name:
                return torch.cat([tensors[name.replace(matrix, part)] for part in parts])
        return tensors[name]

    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.is_floating_point():
                parameter.copy_(stacked(name).to(torch.float32))


def hf_state_dict(model: CausalLM, config: ModelConfig) -> dict:
    """The model's weights under Hugging Face's names, stacked matrices split again (load_hf_tensors' inverse)."""
    q, kv = config.num_heads * config.head_dim, config.num_kv_heads * config.head_dim
    tensors = {}
    for name, parameter in model.named_parameters():
        value = parameter.detach().clone()
        if ".qkv_proj." in name:
            for part, piece in zip(("q_proj", "k_proj", "v_proj"), torch.split(value, [q, kv, kv])):
                tensors[name.replace("qkv_proj", part)] = piece.clone()
        elif ".gate_up_proj." in name:  # a dense MLP's or an expert's: [gate; up]
            for part, piece in zip(("gate_proj", "up_proj"), torch.chunk(value, 2)):
                tensors[name.replace("gate_up_proj", part)] = piece.clone()
        else:
            tensors[name] = value
    return tensors


def random_weights(model: CausalLM, seed: int, skip_experts: bool = False) -> None:
    """Initialises every weight reproducibly: N(0, 0.02) for matrices and biases, 1 for norms (with skip_experts,
    every parameter but the experts' matrices, left to package.fill_experts_quantized)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if skip_experts and ".experts." in name and name.endswith("proj.weight"):
                continue
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                parameter.fill_(1.0)
            else:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)
