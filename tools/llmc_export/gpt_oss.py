"""GPT-OSS (gpt_oss: gpt-oss-20b, gpt-oss-120b): config reading and the checkpoint's tensors in the network's terms.

Attention: q/k/v and o_proj with biases, a learned sink logit per head (`self_attn.sinks`) in every softmax, layers
alternating a sliding window (`layer_types`) with full attention, and YaRN RoPE: inverse frequencies blended between
the plain ones and those divided by `factor` over YaRN's correction range, and cos and sin times YaRN's attention
factor, which the export folds into the q and k rows and biases (a rotation is linear, so rotating s·q is s times
rotating q). Every layer is sparse: a router with a bias (`mlp.router`) whose top `num_experts_per_tok` logits are
softmaxed among themselves, and `num_local_experts` experts with biases whose gate/up output interleaves gate
(even) and up (odd) columns, activated as (clamp(up, ±limit) + 1) · g · σ(1.702 g), g = min(gate, limit).

The checkpoint stores each layer's experts as one tensor per matrix: dense (`gate_up_proj` [E, H, 2I], multiplied
as x @ W, and `down_proj` [E, I, H]) or MXFP4 (`gate_up_proj_blocks` uint8 [E, 2I, H / 32, 16] with
`gate_up_proj_scales` uint8 [E, 2I, H / 32], and the same for down_proj over [E, H, I]): two E2M1 values a byte,
the low nibble first, and one E8M0 exponent 2^(s - 127) per 32 inputs. Both become the network's per-expert
[out, in] matrices, gate rows then up rows: float ones, or (an mxfp4 package) MXFP4 ones holding the checkpoint's
bytes, its blocks' rows taken as they are.
"""
import math

import torch

from .ops import dequantize_mxfp4

GPT_OSS_SWIGLU_ALPHA = 1.702  # Hugging Face's GptOssExperts.alpha (not in the config)


def yarn_inverse_frequencies(head_dim: int, theta: float, scaling: dict, max_position_embeddings: int) -> tuple:
    """(inverse frequencies [head_dim / 2], attention factor) of YaRN as Hugging Face computes them."""
    factor = float(scaling["factor"])
    original = int(scaling.get("original_max_position_embeddings") or max_position_embeddings)
    beta_fast, beta_slow = float(scaling.get("beta_fast") or 32), float(scaling.get("beta_slow") or 1)

    def correction_dimension(rotations):
        return head_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dimension(beta_fast), correction_dimension(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001
    frequencies = []
    for i in range(head_dim // 2):
        plain = 1.0 / (theta ** (2 * i / head_dim))
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)  # 0: keep the plain frequency, 1: divide by factor
        frequencies.append(plain / factor * ramp + plain * (1 - ramp))

    def mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
        if scaling.get("mscale") and scaling.get("mscale_all_dim"):
            attention_factor = mscale(factor, scaling["mscale"]) / mscale(factor, scaling["mscale_all_dim"])
        else:
            attention_factor = mscale(factor)
    return frequencies, float(attention_factor)


def gpt_oss_model_config(hf: dict):
    """The ModelConfig of a gpt_oss config.json; what it cannot serve is refused by name."""
    from .config import ExportError, ModelConfig, rope_settings  # config.py imports this module
    try:
        theta, scaling = rope_settings(hf, "gpt_oss")
        kind = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
        if kind not in ("yarn", "default"):
            raise ExportError(f"gpt_oss rope_scaling type '{kind}' is not supported (supported: yarn)")
        num_layers = int(hf["num_hidden_layers"])
        layer_types = hf.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention"
                                                for i in range(num_layers)]
        if (not isinstance(layer_types, list) or len(layer_types) < num_layers
                or any(t not in ("sliding_attention", "full_attention") for t in layer_types)):
            raise ExportError(f"gpt_oss layer_types must name sliding_attention or full_attention for each of the "
                              f"{num_layers} layers, got {layer_types}")
        window = int(hf.get("sliding_window") or 0)
        maximum = int(hf.get("max_position_embeddings", 131072))
        windows = tuple(window if kind == "sliding_attention" and 0 < window < maximum else 0
                        for kind in layer_types[:num_layers])
        num_heads = int(hf["num_attention_heads"])
        experts, per_token = int(hf["num_local_experts"]), int(hf["num_experts_per_tok"])
        if not 0 < per_token <= experts:
            raise ExportError(f"gpt_oss num_experts_per_tok {per_token} must be 1 .. num_local_experts ({experts})")
        eos = hf.get("eos_token_id")
        config = ModelConfig(
            architecture="gpt_oss", vocab_size=int(hf["vocab_size"]), hidden_size=int(hf["hidden_size"]),
            intermediate_size=int(hf["intermediate_size"]), num_layers=num_layers, num_heads=num_heads,
            num_kv_heads=int(hf.get("num_key_value_heads") or num_heads),
            head_dim=int(hf.get("head_dim") or int(hf["hidden_size"]) // num_heads),
            rms_norm_eps=float(hf.get("rms_norm_eps", 1e-5)), rope_theta=theta, rope_scaling=scaling,
            qkv_bias=bool(hf.get("attention_bias", True)), tie_word_embeddings=bool(hf.get("tie_word_embeddings")),
            max_context_length=maximum, bos_token_id=hf.get("bos_token_id"),
            eos_token_ids=tuple(eos if isinstance(eos, list) else [eos] if eos is not None else []),
            layer_windows=windows if any(windows) else (),
        )
    except KeyError as missing:
        raise ExportError(f"config.json lacks {missing}") from None
    config.o_proj_bias = config.qkv_bias
    config.attention_sinks = True
    config.moe_layers = tuple(range(num_layers))
    config.num_experts, config.experts_per_token = experts, per_token
    config.moe_intermediate_size = config.intermediate_size
    config.moe_variant = "clamped_swiglu"
    config.swiglu_limit = float(hf.get("swiglu_limit", 7.0))
    config.swiglu_alpha = GPT_OSS_SWIGLU_ALPHA
    if kind == "yarn":
        config.rope_attention_factor = yarn_inverse_frequencies(config.head_dim, theta, scaling, maximum)[1]
    return config


def mxfp4_to_float(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """[..., rows, K] float32 from MXFP4 blocks [..., rows, K / 32, 16] (uint8) and scales [..., rows, K / 32]."""
    return dequantize_mxfp4(blocks.flatten(-2), scales)


def split_experts(tensors: dict, experts: str, matrix: str, stacked: torch.Tensor, part: str) -> None:
    """Stores each expert's rows of `stacked` [E, out, ...] under the network's names (gate_up_proj: even rows are
    the gate's, odd rows the up projection's), as `part` (weight or bias) of the split Hugging Face matrices."""
    for e in range(stacked.shape[0]):
        if matrix == "gate_up_proj":
            tensors[f"{experts}{e}.gate_proj.{part}"] = stacked[e, 0::2].contiguous()
            tensors[f"{experts}{e}.up_proj.{part}"] = stacked[e, 1::2].contiguous()
        else:
            tensors[f"{experts}{e}.down_proj.{part}"] = stacked[e].contiguous()


def prepare_gpt_oss_tensors(tensors: dict, config, keep_mxfp4: bool = False) -> dict:
    """The checkpoint's tensors in place, in the network's names: each layer's experts split per expert ([out, in]
    matrices, gate and up rows de-interleaved, biases alongside), the router as mlp.gate, and YaRN's attention
    factor folded into the q and k rows and biases. With keep_mxfp4, MXFP4 experts are not decoded: they are
    returned as {module name (...experts.E.gate_up_proj or .down_proj): (codes uint8 [out, in / 2], exponents
    uint8 [out, in / 32])}, gate_up_proj's rows [gate; up]; one layer's experts are split at a time."""
    from .config import ExportError
    kept = {}
    for layer in range(config.num_layers):
        p = f"model.layers.{layer}."
        experts = p + "mlp.experts."
        for matrix in ("gate_up_proj", "down_proj"):
            blocks, scales = experts + matrix + "_blocks", experts + matrix + "_scales"
            if blocks in tensors:
                if scales not in tensors:
                    raise ExportError(f"checkpoint has {blocks} without {scales}")
                if tensors[blocks].dtype != torch.uint8 or tensors[scales].dtype != torch.uint8:
                    raise ExportError(f"{blocks} and {scales} must be uint8 (MXFP4)")
                if bool((tensors[scales] == 255).any()):
                    raise ExportError(f"{scales} holds the E8M0 exponent 255 (NaN)")
                codes, exponents = tensors.pop(blocks), tensors.pop(scales)
                if keep_mxfp4:
                    codes = codes.flatten(-2)  # [E, out, in / 2]: the bytes in their order
                    if matrix == "gate_up_proj":  # [gate; up]: the even rows, then the odd ones
                        codes = torch.cat([codes[:, 0::2], codes[:, 1::2]], dim=1)
                        exponents = torch.cat([exponents[:, 0::2], exponents[:, 1::2]], dim=1)
                    for e in range(codes.shape[0]):  # clones: a view would save the whole layer's storage
                        kept[f"{experts}{e}.{matrix}"] = (codes[e].clone(), exponents[e].clone())
                    stacked = None
                else:
                    stacked = mxfp4_to_float(codes, exponents)  # [E, out, in]
            elif experts + matrix in tensors:
                stacked = tensors.pop(experts + matrix).float().transpose(1, 2)  # [E, in, out] -> [E, out, in]
            else:
                continue  # named as missing by the shape check
            if stacked is not None:
                split_experts(tensors, experts, matrix, stacked, "weight")
            bias = tensors.pop(experts + matrix + "_bias", None)
            if bias is not None:
                split_experts(tensors, experts, matrix, bias, "bias")
        for part in ("weight", "bias"):
            if p + "mlp.router." + part in tensors:
                tensors[p + "mlp.gate." + part] = tensors.pop(p + "mlp.router." + part)
        factor = config.rope_attention_factor
        if factor != 1.0:
            for name in ("q_proj", "k_proj"):
                for part in ("weight", "bias"):
                    key = f"{p}self_attn.{name}.{part}"
                    if key in tensors:
                        tensors[key] = tensors[key].float() * factor
    return kept
