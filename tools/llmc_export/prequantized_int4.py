"""Checkpoints already quantized to 4 bits, read exactly (no re-quantization) into an int4 package: GPTQ, AWQ
(GEMM layout) and compressed-tensors pack-quantized W4A16. Every weight keeps its nibble, scale and zero point, so
the package's dequantized matrix, (u - z) * scale in float32, is the checkpoint's bit for bit.

Layouts (each for a projection `base`, weight [N outputs, K inputs], G groups of K / G inputs):
- GPTQ (AutoGPTQ, GPTQModel; quant_method "gptq"): base.qweight int32 [K / 8, N], input 8i + j of column n in
  bits 4j of word [i, n]; base.qzeros int32 [G, N / 8], column n's zero in bits 4 (n % 8) of word [g, n / 8];
  base.scales [G, N]; base.g_idx [K] (group of each input). checkpoint_format "gptq" (v1, the default) stores
  each zero point minus one (z = stored + 1, 1..16); "gptq_v2" stores it as it is.
- AWQ (AutoAWQ, quant_method "awq", version "gemm"): base.qweight int32 [K, N / 8], base.qzeros int32 [G, N / 8],
  both with columns 8w + (0, 2, 4, 6, 1, 3, 5, 7) in bits 0, 4, ..., 28 of word w; base.scales [G, N]; zero
  points as they are.
- compressed-tensors pack-quantized, 4 bits: base.weight_packed int32 [N, K / 8], input 8i + j in bits 4j of
  word [n, i], each stored as q + 8 (q in -8..7); base.weight_shape [N, K]; base.weight_scale [N, G];
  asymmetric: base.weight_zero_point int32 [N / 8, G] packed along the rows (row 8i + j in bits 4j of word
  [i, g]), also + 8, so z = the stored nibble.
Activation order (GPTQ desc_act, compressed-tensors actorder "group"): g_idx [K] names each input's group, and a
group's inputs are scattered over the row. Such a weight's inputs are reordered by group (input_order.py), so that
each group is again a run of group-size inputs as the int4 kernels need; the network then takes its input in that
order. The nibbles, scales and zero points are kept as they are.
Symmetric checkpoints (every zero point 8: GPTQ sym, compressed-tensors symmetric) give symmetric packages (format
version 9); any other zero point keeps them all ([N, G, 2] scales, version 11). Groups of 32, 64 or 128 inputs are
kept; per-channel scales and groups of a multiple of 128 repeat exactly over groups of 128.

Symmetric 8-bit GPTQ (every zero point 128) is int8 exactly, q = u - 128: it gives an int8 package (W8A16):
qweight int32 [K / 4, N] with input 4i + j in bits 8j, qzeros int32 [G, N / 4] with column n in bits 8 (n % 4).
"""
import dataclasses
from typing import Dict, Optional, Tuple

import torch

from .config import ExportError
from .prequantized import Int8Scheme
from .quantize import GROUP_SIZES, INT4_GROUP_SIZES

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # the column (within 8) in nibble p of an AWQ word
AWQ_NIBBLE_OF_COLUMN = tuple(AWQ_ORDER.index(c) for c in range(8))
SHIFTS = torch.arange(8, dtype=torch.int32) * 4
GPTQ_FORMATS = {"gptq": 1, "gptq_v2": 0}  # checkpoint_format: what to add to a stored zero point


@dataclasses.dataclass
class Int4Scheme:
    method: str  # "gptq", "awq" or "compressed-tensors"
    group_size: int  # the package's: 32, 64 or 128
    source_group_size: int  # the checkpoint's; 0: one scale per output channel
    zero_offset: int = 0  # added to each stored zero point (GPTQ v1: 1)
    act_order: bool = False  # GPTQ's desc_act with groups: every weight must have its g_idx


@dataclasses.dataclass
class Gptq8Scheme(Int8Scheme):
    """Symmetric 8-bit GPTQ, read into an int8 package (group_size 0: one scale per row)."""
    zero_offset: int = 1


def _package_group(method: str, group_size) -> Tuple[int, int]:
    """(package group size, checkpoint group size; 0 per channel) for a declared group size."""
    if type(group_size) is not int:
        raise ExportError(f"{method}: group size {group_size!r} is not an integer")
    if group_size in INT4_GROUP_SIZES:
        return group_size, group_size
    if group_size == -1 or group_size == 0:
        return 128, 0
    if group_size > 0 and group_size % 128 == 0:
        return 128, group_size
    raise ExportError(f"{method}: group size {group_size} is not supported (llmc keeps groups of 32, 64 or 128 "
                      "inputs, and repeats per-channel scales or groups of a multiple of 128 over groups of 128)")


def _gptq_scheme(config: dict) -> Int4Scheme:
    bits = config.get("bits")
    if bits not in (4, 8):
        raise ExportError(f"GPTQ {bits}-bit weights are not supported (llmc reads 4-bit GPTQ checkpoints, and "
                          "symmetric 8-bit ones as int8)")
    if config.get("is_marlin_format") or config.get("checkpoint_format", "gptq") not in GPTQ_FORMATS:
        fmt = "marlin" if config.get("is_marlin_format") else config.get("checkpoint_format")
        raise ExportError(f"GPTQ checkpoint_format '{fmt}' is not supported (supported: {', '.join(GPTQ_FORMATS)})")
    if config.get("dynamic"):
        raise ExportError("GPTQ per-module overrides (dynamic) are not supported")
    zero_offset = GPTQ_FORMATS[config.get("checkpoint_format", "gptq")]
    if bits == 8:
        group_size = config.get("group_size", 128)
        group_size = 0 if group_size == -1 else group_size
        if type(group_size) is not int or group_size not in GROUP_SIZES:
            raise ExportError(f"GPTQ 8-bit group size {group_size} is not supported (int8 packages take -1, per "
                              f"channel, or {', '.join(map(str, GROUP_SIZES[1:]))})")
        if config.get("desc_act"):
            raise ExportError("8-bit GPTQ with act-order (desc_act true) is not supported: its int8 package needs "
                              "each group's inputs side by side; quantize without act-order")
        return Gptq8Scheme(group_size=group_size, packed=False, activations="none",
                           group_sizes=(group_size,) if group_size else (), zero_offset=zero_offset)
    group_size, source = _package_group("GPTQ", config.get("group_size", 128))
    # With one scale per channel every input is in group 0: act-order changes nothing the package holds.
    return Int4Scheme("gptq", group_size, source, zero_offset, act_order=bool(config.get("desc_act")) and source != 0)


def _awq_scheme(config: dict) -> Int4Scheme:
    bits = config.get("bits", config.get("w_bit"))
    if bits != 4:
        raise ExportError(f"AWQ {bits}-bit weights are not supported (llmc reads 4-bit AWQ checkpoints)")
    version = str(config.get("version", "gemm")).lower()
    if version != "gemm":
        raise ExportError(f"AWQ version '{version}' is not supported (llmc reads the GEMM layout, version gemm)")
    if not config.get("zero_point", True):
        raise ExportError("AWQ without zero points (zero_point false) is not supported")
    group_size, source = _package_group("AWQ", config.get("group_size", config.get("q_group_size", 128)))
    return Int4Scheme("awq", group_size, source)


def _is_4bit_compressed_tensors(config: dict) -> bool:
    groups = config.get("config_groups")
    if not isinstance(groups, dict):
        return False
    return any(isinstance(g, dict) and isinstance(g.get("weights"), dict) and g["weights"].get("num_bits") == 4
               for g in groups.values())


def _compressed_tensors_scheme(config: dict) -> Int4Scheme:
    if config.get("quantization_status", "compressed") != "compressed":
        raise ExportError(f"quantization_status '{config.get('quantization_status')}': only a compressed checkpoint "
                          "holds its 4-bit weights")
    if config.get("kv_cache_scheme"):
        raise ExportError("a quantized KV cache (kv_cache_scheme) is not supported")
    sparsity = config.get("sparsity_config") or {}
    if not isinstance(sparsity, dict) or sparsity.get("format", "dense") != "dense":
        raise ExportError(f"sparse checkpoints ({sparsity}) are not supported")
    sizes = set()
    for name, group in config["config_groups"].items():
        weights = group.get("weights") if isinstance(group, dict) else None
        if not isinstance(weights, dict) or weights.get("num_bits") != 4 or weights.get("type", "int") != "int":
            raise ExportError(f"quantization config group {name}: only 4-bit integer weights can share a checkpoint "
                              "with 4-bit ones (mixed bit widths are not supported)")
        format_ = group.get("format") or config.get("format")
        if format_ != "pack-quantized":
            raise ExportError(f"quantization config group {name}: 4-bit format '{format_}' is not supported "
                              "(supported: pack-quantized)")
        if group.get("input_activations") or group.get("output_activations"):
            raise ExportError(f"quantization config group {name}: quantized activations with 4-bit weights (W4A8) "
                              "are not supported (llmc reads W4A16)")
        # Activation order "group" stores weight_g_idx (read where present); "weight" and "static" only changed
        # the order in which the quantizer went through the inputs.
        if weights.get("actorder") not in (None, False, True, "group", "weight", "static"):
            raise ExportError(f"quantization config group {name}: actorder '{weights.get('actorder')}' is not "
                              "supported (supported: group, weight, static)")
        if weights.get("dynamic", False):
            raise ExportError(f"quantization config group {name}: dynamic weight quantization is not supported")
        strategy = weights.get("strategy")
        if strategy == "channel":
            sizes.add(-1)
        elif strategy == "group":
            sizes.add(weights.get("group_size"))
        else:
            raise ExportError(f"quantization config group {name}: 4-bit weight strategy '{strategy}' is not "
                              "supported (supported: group, channel)")
    if len(sizes) != 1:
        raise ExportError(f"4-bit weight groups of different sizes ({sorted(sizes)}) are not supported")
    group_size, source = _package_group("compressed-tensors", sizes.pop())
    return Int4Scheme("compressed-tensors", group_size, source)


def read_int4_scheme(hf_config: dict):
    """The scheme of a 4-bit checkpoint's quantization_config (GPTQ, AWQ, compressed-tensors with 4-bit weights);
    None for any other config (prequantized.read_scheme reads int8 ones and refuses the rest). Symmetric 8-bit GPTQ
    gives a Gptq8Scheme (an Int8Scheme)."""
    config = hf_config.get("quantization_config", hf_config.get("compression_config"))
    if not isinstance(config, dict):
        return None
    method = config.get("quant_method")
    if method == "gptq":
        return _gptq_scheme(config)
    if method == "awq":
        return _awq_scheme(config)
    if method == "compressed-tensors" and _is_4bit_compressed_tensors(config):
        return _compressed_tensors_scheme(config)
    return None


def _nibbles(words: torch.Tensor) -> torch.Tensor:
    """[..., 8 * W] of the nibbles of int32 words [..., W], bits 0..3 first."""
    return ((words.unsqueeze(-1) >> SHIFTS) & 15).reshape(*words.shape[:-1], -1)


def _int32(tensors: dict, name: str, dims: int = 2) -> torch.Tensor:
    tensor = tensors.pop(name, None)
    if tensor is None or tensor.dtype != torch.int32 or tensor.dim() != dims:
        found = "missing" if tensor is None else f"{tensor.dtype} {tuple(tensor.shape)}"
        raise ExportError(f"{name} is {found}, not an int32 matrix")
    return tensor


def _scales(tensor: Optional[torch.Tensor], name: str, shape: tuple) -> torch.Tensor:
    if tensor is None or not tensor.is_floating_point() or tensor.dtype == torch.float64:
        found = "missing" if tensor is None else str(tensor.dtype)
        raise ExportError(f"{name} is {found}, not float32, bfloat16 or float16 scales")
    if tuple(tensor.shape) != shape:
        raise ExportError(f"{name} has shape {tuple(tensor.shape)}, not {shape}")
    if not bool(torch.isfinite(tensor).all()):
        raise ExportError(f"{name} holds a NaN or infinite scale")
    return tensor.float()


def _groups(scheme: Int4Scheme, columns: int, name: str) -> int:
    """The checkpoint's groups per row of a `columns`-input weight."""
    if scheme.source_group_size == 0:
        groups = 1
    elif columns % scheme.source_group_size:
        raise ExportError(f"{name} has {columns} inputs, not a multiple of the group size {scheme.source_group_size}")
    else:
        groups = columns // scheme.source_group_size
    if columns % scheme.group_size:
        raise ExportError(f"{name} has {columns} inputs, not a multiple of the package's group size "
                          f"{scheme.group_size}")
    return groups


def _input_order(tensors: dict, name: str, scheme: Int4Scheme, columns: int) -> Optional[torch.Tensor]:
    """None when the weight's groups are runs of consecutive inputs (no g_idx, or g_idx[k] = k // width); for
    activation-order groups, the inputs sorted by group (stable), after which each group is `width` consecutive
    inputs again, in the order of its scales."""
    group_index = tensors.pop(name, None)
    if group_index is None:
        if scheme.act_order:
            raise ExportError(f"{name} is missing: an act-order checkpoint (desc_act true) names each input's group")
        return None
    width = scheme.source_group_size or columns
    groups = columns // width
    if tuple(group_index.shape) != (columns,) or group_index.is_floating_point():
        raise ExportError(f"{name} is {group_index.dtype} {tuple(group_index.shape)}, not {columns} group numbers")
    group_index = group_index.long()
    if torch.equal(group_index, torch.arange(columns) // width):
        return None
    if bool((group_index < 0).any()) or bool((group_index >= groups).any()):
        raise ExportError(f"{name} names groups outside 0..{groups - 1}")
    sizes = torch.bincount(group_index, minlength=groups)
    if not bool((sizes == width).all()):
        group = int(torch.nonzero(sizes != width)[0])
        raise ExportError(f"{name} gives group {group} {int(sizes[group])} inputs, not {width}: act-order groups "
                          "of other sizes than the group size are not supported")
    return torch.sort(group_index, stable=True).indices


def _gptq(tensors: dict, base: str, scheme: Int4Scheme) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    qweight = _int32(tensors, base + ".qweight")
    columns, rows = 8 * qweight.shape[0], qweight.shape[1]
    groups = _groups(scheme, columns, base)
    if rows % 8:
        raise ExportError(f"{base}.qweight has {rows} output columns, not a multiple of 8")
    qzeros = _int32(tensors, base + ".qzeros")
    if tuple(qzeros.shape) != (groups, rows // 8):
        raise ExportError(f"{base}.qzeros has shape {tuple(qzeros.shape)}, not {(groups, rows // 8)}")
    scale = _scales(tensors.pop(base + ".scales", None), base + ".scales", (groups, rows))
    order = _input_order(tensors, base + ".g_idx", scheme, columns)
    u = _nibbles(qweight.t().contiguous())  # [N, K]: word [i, n] holds inputs 8i..8i+7 of column n
    zero = _nibbles(qzeros).t() + scheme.zero_offset  # [N, G]
    return u, scale.t(), zero.float(), order


def _awq(tensors: dict, base: str, scheme: Int4Scheme) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    qweight = _int32(tensors, base + ".qweight")
    columns, rows = qweight.shape[0], 8 * qweight.shape[1]
    groups = _groups(scheme, columns, base)
    qzeros = _int32(tensors, base + ".qzeros")
    if tuple(qzeros.shape) != (groups, rows // 8):
        raise ExportError(f"{base}.qzeros has shape {tuple(qzeros.shape)}, not {(groups, rows // 8)}")
    scale = _scales(tensors.pop(base + ".scales", None), base + ".scales", (groups, rows))

    def columns_in_order(words):  # [X, N / 8] words -> [X, N] nibbles, undoing AWQ's interleave
        nibbles = _nibbles(words).reshape(words.shape[0], -1, 8)
        return nibbles[..., list(AWQ_NIBBLE_OF_COLUMN)].reshape(words.shape[0], -1)

    return columns_in_order(qweight).t(), scale.t(), columns_in_order(qzeros).t().float(), None


def _compressed_tensors(tensors: dict, base: str,
                        scheme: Int4Scheme) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    packed = _int32(tensors, base + ".weight_packed")
    shape = tensors.pop(base + ".weight_shape", None)
    if shape is None or shape.numel() != 2 or shape.is_floating_point():
        raise ExportError(f"{base}.weight_shape must hold the weight's two sizes")
    rows, columns = (int(v) for v in shape.reshape(-1).tolist())
    if packed.shape != (rows, (columns + 7) // 8):
        raise ExportError(f"{base}.weight_packed is {tuple(packed.shape)}, which does not hold a [{rows}, {columns}] "
                          "4-bit weight")
    groups = _groups(scheme, columns, base)
    scale = tensors.pop(base + ".weight_scale", None)
    if scale is not None and scale.dim() == 1:
        scale = scale.reshape(-1, 1)
    scale = _scales(scale, base + ".weight_scale", (rows, groups))
    order = _input_order(tensors, base + ".weight_g_idx", scheme, columns)
    for suffix in (".input_scale", ".input_zero_point"):
        tensors.pop(base + suffix, None)
    zero_point = tensors.pop(base + ".weight_zero_point", None)
    if zero_point is None:
        zero = torch.full((rows, groups), 8.0)
    elif zero_point.dtype == torch.int32 and zero_point.shape == ((rows + 7) // 8, groups):
        zero = _nibbles(zero_point.t().contiguous()).t()[:rows].float()  # + 8 as stored: z itself
    elif not zero_point.is_floating_point() and tuple(zero_point.reshape(rows, -1).shape) == (rows, groups):
        zero = zero_point.reshape(rows, groups).float() + 8  # unpacked signed zero points
    else:
        raise ExportError(f"{base}.weight_zero_point has shape {tuple(zero_point.shape)} ({zero_point.dtype}), "
                          f"neither packed int32 [{(rows + 7) // 8}, {groups}] nor [{rows}, {groups}]")
    return _nibbles(packed)[:, :columns], scale, zero, order


def _gptq8(tensors: dict, base: str, scheme: Gptq8Scheme) -> Tuple[torch.Tensor, torch.Tensor]:
    qweight = _int32(tensors, base + ".qweight")
    columns, rows = 4 * qweight.shape[0], qweight.shape[1]
    int4_like = Int4Scheme("gptq", scheme.group_size or columns, scheme.group_size)
    groups = _groups(int4_like, columns, base)
    if rows % 4:
        raise ExportError(f"{base}.qweight has {rows} output columns, not a multiple of 4")
    qzeros = _int32(tensors, base + ".qzeros")
    if tuple(qzeros.shape) != (groups, rows // 4):
        raise ExportError(f"{base}.qzeros has shape {tuple(qzeros.shape)}, not {(groups, rows // 4)}")
    scale = _scales(tensors.pop(base + ".scales", None), base + ".scales", (groups, rows))
    if _input_order(tensors, base + ".g_idx", int4_like, columns) is not None:
        raise ExportError(f"{base}.g_idx reorders the inputs (act-order), which 8-bit GPTQ packages do not support: "
                          "quantize without act-order")
    shifts = torch.arange(4, dtype=torch.int32) * 8

    def bytes_of(words):
        return ((words.unsqueeze(-1) >> shifts) & 255).reshape(words.shape[0], -1)

    zero = bytes_of(qzeros) + scheme.zero_offset
    if not bool((zero == 128).all()):
        raise ExportError(f"{base}.qzeros: asymmetric 8-bit GPTQ (zero points other than 128) is not supported")
    q = (bytes_of(qweight.t().contiguous()) - 128).to(torch.int8)
    return q.contiguous(), scale.t().contiguous()


def take_quantized_weights(tensors: dict, scheme,
                           input_orders: Dict[str, torch.Tensor]) -> Dict[str, Tuple[torch.Tensor, torch.Tensor]]:
    """take_int4_weights, or for symmetric 8-bit GPTQ {weight name: (int8 [N, K], float32 scales [N, G])}."""
    if not isinstance(scheme, Gptq8Scheme):
        return take_int4_weights(tensors, scheme, input_orders)
    exact = {}
    for base in sorted(name[:-len(".qweight")] for name in tensors if name.endswith(".qweight")):
        q, scale = _gptq8(tensors, base, scheme)
        tensors[base + ".weight"] = torch.zeros(()).expand(*q.shape)
        exact[base + ".weight"] = (q, scale)
    return exact


READERS = {"gptq": (_gptq, ".qweight"), "awq": (_awq, ".qweight"),
           "compressed-tensors": (_compressed_tensors, ".weight_packed")}


def take_int4_weights(tensors: dict, scheme: Int4Scheme,
                      input_orders: Dict[str, torch.Tensor]) -> Dict[str, Tuple[torch.Tensor, torch.Tensor]]:
    """Takes every 4-bit projection out of `tensors` (Hugging Face names) and leaves a zero placeholder of its
    shape in its place, as take_int8_weights does. Returns {weight name: (uint8 [N, K / 2], float32 scales
    [N, K / group_size], or [N, K / group_size, 2] with zero points)}: zero points are kept for every matrix
    unless all of them are 8 (a symmetric checkpoint). An act-order weight's inputs come sorted by group, and
    input_orders gets {weight name: the checkpoint's input at each position} for it (input_order.py)."""
    read, marker = READERS[scheme.method]
    taken = {}
    for base in sorted(name[:-len(marker)] for name in tensors if name.endswith(marker)):
        u, scale, zero, order = read(tensors, base, scheme)
        if order is not None:
            u = u[:, order]
            input_orders[base + ".weight"] = order
        rows, columns = u.shape
        if columns % 2:
            raise ExportError(f"{base} has an odd number of inputs ({columns})")
        if bool((zero < 0).any()) or bool((zero > 16).any()):
            raise ExportError(f"{base}: zero points outside 0..16")
        repeat = columns // scheme.group_size // scale.shape[1]  # coarser groups repeat exactly
        scale, zero = scale.repeat_interleave(repeat, dim=1), zero.repeat_interleave(repeat, dim=1)
        packed = (u[:, 0::2] | (u[:, 1::2] << 4)).to(torch.uint8)
        tensors[base + ".weight"] = torch.zeros(()).expand(rows, columns)
        taken[base + ".weight"] = (packed.contiguous(), scale.contiguous(), zero.contiguous())
    symmetric = all(bool((zero == 8).all()) for _, _, zero in taken.values())
    return {name: (packed, scale if symmetric else torch.stack([scale, zero], dim=-1))
            for name, (packed, scale, zero) in taken.items()}
