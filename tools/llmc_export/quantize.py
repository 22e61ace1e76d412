"""int8 weight quantization (W8A16), and int4 (W4A16, quantize_int4): projection weights stored as int8 with float32 scales per output row,
or per group of input columns, while activations keep the package dtype (see ops.py for the operators' side).
MXFP4 (quantize_mxfp4) quantizes only a mixture of experts' experts, the other weights staying in the package dtype.

The worker implements the same rounding when it quantizes a package at load, and the two are compared, so
quantize_int8 must not change without the C++ loader.
"""
from typing import Dict, Optional, Tuple

import torch
from torch import nn

from .config import ExportError
from .model import CausalLM
from .ops import MXFP4_GROUP_SIZE

# 0: one scale per output row (per channel).
GROUP_SIZES = (0, 32, 64, 128, 256, 512)
# int4: symmetric 4-bit groups of this many inputs (no per-row scale: 4 bits need groups).
INT4_GROUP_SIZES = (32, 64, 128)
INT4_DEFAULT_GROUP_SIZE = 128
# Module names ending so (".gate_up_proj" and ".down_proj": the dense MLP's and every expert's).
QUANTIZED_MODULES = ("self_attn.qkv_proj", "self_attn.o_proj", ".gate_up_proj", ".down_proj", "lm_head")


def check_group_size(group_size: int) -> None:
    if group_size not in GROUP_SIZES:
        raise ExportError(f"unsupported quantization group size {group_size} "
                          f"(supported: {', '.join(map(str, GROUP_SIZES))}; 0 is one scale per output channel)")


def check_divides(name: str, weight: torch.Tensor, group_size: int) -> None:
    in_features = weight.shape[1]
    if group_size != 0 and in_features % group_size != 0:
        raise ExportError(f"{name} has {in_features} input columns, not a multiple of the quantization group "
                          f"size {group_size}")


def quantize_int8(weight: torch.Tensor, group_size: int, name: str = "weight") -> Tuple[torch.Tensor, torch.Tensor]:
    """(int8 [N, K], float32 scales [N, G]) with weight ~ q * scale of its group; G = 1 for group_size 0, else
    K / group_size. Symmetric: each group's largest magnitude maps to 127; an all-zero group gets scale 1."""
    check_group_size(group_size)
    check_divides(name, weight, group_size)
    rows, in_features = weight.shape
    groups = 1 if group_size == 0 else in_features // group_size
    grouped = weight.float().reshape(rows, groups, in_features // groups)
    amax = grouped.abs().amax(-1)
    scale = torch.where(amax == 0, torch.ones_like(amax), amax / 127)
    q = torch.round(grouped / scale[..., None]).clamp(-127, 127).to(torch.int8)
    return q.reshape(rows, in_features), scale


def check_int4_group_size(group_size: int) -> None:
    if group_size not in INT4_GROUP_SIZES:
        raise ExportError(f"unsupported int4 group size {group_size} "
                          f"(supported: {', '.join(map(str, INT4_GROUP_SIZES))})")


# int4 scales are searched (as llama.cpp's k-quants and AWQ's clipping search do): besides the plain rule, each
# group tries the rounding at amax / d for each d here with the scale that fits that rounding best (least
# squares), and keeps the pair with the smallest squared error. Larger d clip the group's extremes for finer steps.
INT4_SCALE_DIVISORS = (6.5, 7.0, 7.5, 8.0, 8.5, 9.0, 9.5, 10.0)
# Zero-point groups: their range, widened to hold 0, in 15 + d steps.
INT4_RANGE_WIDENINGS = (-1.0, -0.5, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)


def _int4_nibbles(x: torch.Tensor, rounding: torch.Tensor) -> torch.Tensor:
    """The nibbles of float64 groups x [..., g] rounded at float64 scales [..., 1]: x times the scale's
    reciprocal, rounded half to even, clamped to [-8, 7]."""
    return torch.round(x * (1.0 / rounding)).clamp(-8, 7)


def _search_symmetric_int4(grouped: torch.Tensor, plain: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(float32 scales [N, G], float64 rounding scales [N, G, 1]) of the symmetric search. A candidate is a
    rounding (the plain scale's, or amax / d's) and its scale: the plain one, or the float32 least-squares fit
    sum(x q) / sum(q^2). Candidates are compared by the part of the squared error that depends on them,
    s^2 sum(q^2) - 2 s sum(x q), in float64: every product x q is exact there, and so are their sums in any order
    (a nonzero q needs |x| >= rounding / 2, so the terms span a few binades of 28-bit products), so the worker's
    QuantizeInt4 picks the same candidates, bit for bit."""
    x = grouped.double()
    amax = x.abs().amax(-1, keepdim=True)
    live = amax > 0
    best_scale = best_rounding = plain.double().unsqueeze(-1)
    q = _int4_nibbles(x, best_rounding)
    qq, xq = (q * q).sum(-1, keepdim=True), (x * q).sum(-1, keepdim=True)
    best_error = best_scale * best_scale * qq - 2 * best_scale * xq
    for divisor in INT4_SCALE_DIVISORS:
        rounding = torch.where(live, amax / divisor, best_rounding)
        q = _int4_nibbles(x, rounding)
        qq, xq = (q * q).sum(-1, keepdim=True), (x * q).sum(-1, keepdim=True)
        scale = torch.where(live, (xq / qq).float().double(), best_scale)
        error = scale * scale * qq - 2 * scale * xq
        better = error < best_error
        best_scale, best_rounding = torch.where(better, scale, best_scale), torch.where(better, rounding, best_rounding)
        best_error = torch.where(better, error, best_error)
    return best_scale.squeeze(-1).float(), best_rounding


def _search_asymmetric_int4(grouped: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(scales, zero points) [N, G] of the zero-point search: for the plain range and each widening, the zero
    point it gives and the least-squares scale for that rounding; the pair with the smallest squared error."""
    x = grouped.double()
    low, high = x.amin(-1, keepdim=True).clamp(max=0), x.amax(-1, keepdim=True).clamp(min=0)
    flat = high == low
    best_scale = best_zero = best_error = None
    for widening in (0.0,) + INT4_RANGE_WIDENINGS:
        scale = torch.where(flat, torch.ones_like(low), (high - low) / (15 + widening)).float().double()
        zero = torch.where(flat, torch.full_like(low, 8), torch.round(-low / scale).clamp(0, 15))
        if widening != 0.0:
            rounded = (torch.round(x / scale) + zero).clamp(0, 15) - zero
            fitted = ((x * rounded).sum(-1, keepdim=True) / (rounded * rounded).sum(-1, keepdim=True)).float().double()
            scale = torch.where(flat | ~(fitted > 0), scale, fitted)
        q = (torch.round(x / scale) + zero).clamp(0, 15) - zero
        error = ((x - q * scale) ** 2).sum(-1, keepdim=True)
        if best_error is None:
            best_scale, best_zero, best_error = scale, zero, error
            continue
        better = error < best_error
        best_scale, best_zero = torch.where(better, scale, best_scale), torch.where(better, zero, best_zero)
        best_error = torch.where(better, error, best_error)
    return best_scale.squeeze(-1).float(), best_zero.squeeze(-1).float()


def quantize_int4(weight: torch.Tensor, group_size: int, name: str = "weight",
                  zero_point: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """(uint8 [N, K / 2], float32 scales [N, K / group_size]): byte i of a row holds input 2i in its low nibble
    and 2i + 1 in its high one, each as q + 8, with weight ~ q * scale of its group. Symmetric: of the plain rule
    (the group's largest magnitude lands on -8 when negative, scale max / 8, else on 7, scale max / 7;
    q = clamp(round(w / scale), -8, 7)) and the searched candidates (INT4_SCALE_DIVISORS: q rounded at max / d,
    the scale fitted to it), the one of least squared error; an all-zero group gets scale 1. The worker's
    QuantizeInt4 (worker/model/cpu/int4_weight.cc) computes the very same.

    zero_point: asymmetric groups instead, scales [N, G, 2] (scale, zero point z), u = clamp(round(w / scale) + z,
    0, 15), w ~ (u - z) * scale: the plain rule (the group's range, widened to hold 0, in 15 steps, z =
    round(-min / scale)) or a searched one (INT4_RANGE_WIDENINGS), whichever errs least; a group of zeros gets
    scale 1 and z 8."""
    check_int4_group_size(group_size)
    check_divides(name, weight, group_size)
    rows, in_features = weight.shape
    grouped = weight.float().reshape(rows, in_features // group_size, group_size)
    if zero_point:
        scale, zero = _search_asymmetric_int4(grouped)
        u = (torch.round(grouped.double() / scale.double()[..., None]) + zero.double()[..., None]).clamp(0, 15)
        u = u.to(torch.int16)
        u = u.reshape(rows, in_features)
        return (u[:, 0::2] | (u[:, 1::2] << 4)).to(torch.uint8), torch.stack([scale, zero], dim=-1)
    amax = grouped.abs().amax(-1)
    extreme = grouped.gather(-1, grouped.abs().argmax(-1, keepdim=True)).squeeze(-1)
    plain = torch.where(amax == 0, torch.ones_like(amax), torch.where(extreme < 0, amax / 8, amax / 7))
    scale, rounding = _search_symmetric_int4(grouped, plain)
    q = _int4_nibbles(grouped.double(), rounding).to(torch.int16).reshape(rows, in_features) + 8
    return (q[:, 0::2] | (q[:, 1::2] << 4)).to(torch.uint8), scale


def dequantize_int4(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The float32 matrix [N, K] an int4 weight and its scales ([N, G], or [N, G, 2] with zero points) stand for."""
    u = torch.stack([packed & 15, packed >> 4], dim=2).reshape(packed.shape[0], 2 * packed.shape[1]).float()
    zero = scale[..., 1] if scale.dim() == 3 else torch.full(scale.shape, 8.0)
    scale = scale[..., 0] if scale.dim() == 3 else scale
    width = u.shape[1] // scale.shape[1]
    return (u - zero.float().repeat_interleave(width, dim=1)) * scale.float().repeat_interleave(width, dim=1)


# Between E2M1 magnitudes j and j + 1 (0, 0.5, 1, 1.5, 2, 3, 4, 6): a tie goes to the even code, so to j when j is
# even and to j + 1 when it is odd.
_E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
# Module names of the experts' projections, the only ones an mxfp4 package quantizes.
EXPERT_MODULES = (".gate_up_proj", ".down_proj")


def is_expert_projection(name: str) -> bool:
    return ".experts." in name and name.endswith(EXPERT_MODULES)


def check_mxfp4_divides(name: str, weight: torch.Tensor) -> None:
    if weight.shape[1] % MXFP4_GROUP_SIZE != 0:
        raise ExportError(f"{name} has {weight.shape[1]} input columns, not a multiple of MXFP4's blocks of "
                          f"{MXFP4_GROUP_SIZE}")


def quantize_mxfp4(weight: torch.Tensor, name: str = "weight") -> Tuple[torch.Tensor, torch.Tensor]:
    """(E2M1 codes uint8 [N, K / 2], E8M0 exponents uint8 [N, K / 32]) by the OCP Microscaling spec: each block of
    32 inputs shares X = floor(log2(max |w|)) - 2 (E2M1's largest power is 2^2), stored as e = X + 127 clamped to
    0..254, and each w / 2^X is rounded to the nearest E2M1 value (ties to the even code) and saturated at +-6.
    Byte i of a row holds input 2i in its low nibble, bit 3 of a code being its sign; a value that rounds to 0 gets
    code 0 (never -0), and an all-zero block exponent 127. NaN and infinities are refused."""
    check_mxfp4_divides(name, weight)
    rows, in_features = weight.shape
    blocks = weight.detach().double().reshape(rows, in_features // MXFP4_GROUP_SIZE, MXFP4_GROUP_SIZE)
    if not bool(torch.isfinite(blocks).all()):
        raise ExportError(f"{name} holds NaN or infinite values, which MXFP4 cannot represent")
    amax = blocks.abs().amax(-1)
    shared = torch.frexp(amax).exponent.long() - 1 - 2  # frexp: amax = m * 2^exponent with m in [0.5, 1)
    exponents = torch.where(amax == 0, torch.full_like(shared, 127), (shared + 127).clamp(0, 254))
    # Exact: float64 holds every w / 2^X of a float32 or bfloat16 w.
    scaled = blocks * torch.pow(2.0, 127 - exponents.double()).unsqueeze(-1)
    magnitude = scaled.abs()
    codes = torch.zeros(scaled.shape, dtype=torch.uint8)
    for j, midpoint in enumerate(_E2M1_MIDPOINTS):
        codes += (magnitude > midpoint if j % 2 == 0 else magnitude >= midpoint).to(torch.uint8)
    codes |= ((scaled < 0) & (codes > 0)).to(torch.uint8) << 3
    codes = codes.reshape(rows, in_features)
    return codes[:, 0::2] | (codes[:, 1::2] << 4), exponents.to(torch.uint8)


def quantize_experts_mxfp4(model: CausalLM) -> None:
    """Quantizes every expert's gate_up_proj and down_proj in place (weight: the codes, weight_scale: the
    exponents); experts already MXFP4 (a checkpoint's, or package.fill_experts_quantized's) are left as they are."""
    modules = [(name, module) for name, module in model.named_modules()
               if is_expert_projection(name) and module.weight.is_floating_point()]
    for name, module in modules:  # all checked before any is changed
        check_mxfp4_divides(name + ".weight", module.weight)
    for name, module in modules:
        codes, exponents = quantize_mxfp4(module.weight, name + ".weight")
        module.weight = nn.Parameter(codes, requires_grad=False)
        module.weight_scale = exponents


def quantize_model(model: CausalLM, group_size: int, exact: Optional[Dict[str, Tuple[torch.Tensor, torch.Tensor]]] = None,
                   method: str = "int8", zero_point: bool = False) -> None:
    """Quantizes every layer's projections and the LM head in place (weight becomes int8, weight_scale its
    scales). A tied embedding shares the LM head's int8 weight and scales; an untied one stays as it is.
    `exact` gives some modules (by name) their int8 weights and scales as a checkpoint has them
    (prequantized.py) instead. method "int4" stores uint8 pairs of 4-bit weights instead (quantize_int4;
    zero_point: asymmetric groups), and `exact` then holds int4 weights (prequantized_int4.py)."""
    if method == "int4":
        check_int4_group_size(group_size)
        if exact and any(q.dtype != torch.uint8 for q, _ in exact.values()):
            raise ExportError("int4 from a checkpoint's own int8 weights is not supported: export int8, or int4 "
                              "from an unquantized checkpoint")
    else:
        check_group_size(group_size)
    exact = exact or {}
    modules = [(name, module) for name, module in model.named_modules() if name.endswith(QUANTIZED_MODULES)]
    unknown = sorted(set(exact) - {name for name, _ in modules})
    if unknown:
        raise ExportError(f"int8 weights for modules this model does not quantize: {', '.join(unknown[:4])}")
    for name, module in modules:  # all checked before any is changed
        if not module.weight.is_floating_point():
            continue
        check_divides(name + ".weight", module.weight, group_size)
        if name in exact and method == "int4":
            q, scale = exact[name]
            rows, columns = module.weight.shape
            groups = columns // group_size
            if (q.dtype != torch.uint8 or q.shape != (rows, columns // 2)
                    or scale.shape not in ((rows, groups), (rows, groups, 2))):
                raise ExportError(f"{name}: int4 weight {tuple(q.shape)} with scales {tuple(scale.shape)} does not "
                                  f"fit a {tuple(module.weight.shape)} matrix in groups of {group_size}")
        elif name in exact:
            q, scale = exact[name]
            groups = 1 if group_size == 0 else module.weight.shape[1] // group_size
            if q.dtype != torch.int8 or q.shape != module.weight.shape or scale.shape != (q.shape[0], groups):
                raise ExportError(f"{name}: int8 weight {tuple(q.shape)} with scales {tuple(scale.shape)} does not "
                                  f"fit a {tuple(module.weight.shape)} matrix in {groups} group(s) per row")
    embed_tokens = model.model.embed_tokens
    tied = model.lm_head.weight is embed_tokens.weight
    for name, module in modules:
        if not module.weight.is_floating_point():  # made quantized already (package.fill_experts_quantized)
            continue
        if name in exact:
            q, scale = exact[name][0], exact[name][1].float()
        elif method == "int4":
            q, scale = quantize_int4(module.weight.detach(), group_size, name + ".weight", zero_point)
        else:
            q, scale = quantize_int8(module.weight.detach(), group_size, name + ".weight")
        module.weight = nn.Parameter(q, requires_grad=False)
        module.weight_scale = scale
    if tied:
        embed_tokens.weight = model.lm_head.weight
        embed_tokens.weight_scale = model.lm_head.weight_scale
