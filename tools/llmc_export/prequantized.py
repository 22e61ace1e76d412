"""Checkpoints already quantized to int8 in the compressed-tensors format (what llm-compressor writes and vLLM
serves as W8A8 or W8A16): their int8 weights and scales go into the package exactly, not quantized again.

Read: quant_method "compressed-tensors", format int-quantized or naive-quantized (int8 weight tensors) or
pack-quantized with 8 bits (four weights to an int32, each stored plus 128); symmetric 8-bit integer weights
with one scale per tensor, per output row or per group of input columns. Activations may be unquantized
(W8A16) or int8 (W8A8): the worker quantizes activations itself, per row at run time, so a static
input_scale is not used. Projections the checkpoint leaves in floating point (its ignore list, typically
lm_head) are quantized by the exporter with the package's group size.
"""
import dataclasses
from typing import Dict, List, Optional, Tuple

import torch

from .config import ExportError
from .model import STACKED_PARTS
from .quantize import GROUP_SIZES

INT8_FORMATS = ("int-quantized", "naive-quantized")
PACKED_FORMAT = "pack-quantized"
WEIGHT_STRATEGIES = ("tensor", "channel", "group")
# Tensors a quantized projection carries beside its weight; those llmc has no use for are dropped.
SCALE, ZERO_POINT, GROUP_INDEX = ".weight_scale", ".weight_zero_point", ".weight_g_idx"
PACKED, PACKED_SHAPE = ".weight_packed", ".weight_shape"
UNUSED_SUFFIXES = (".input_scale", ".input_zero_point")


@dataclasses.dataclass
class Int8Scheme:
    group_size: int  # input columns per scale in the package; 0: one scale per output row
    packed: bool  # pack-quantized: weight_packed int32 words instead of int8 weight tensors
    activations: str  # "none" (W8A16) or "int8" (W8A8)
    group_sizes: tuple = ()  # the group sizes the checkpoint's config groups declare


def _check_weight_args(group: str, weights) -> int:
    """The group size a config group's weight arguments give (0 per row or tensor); refuses what llmc cannot run."""
    if not isinstance(weights, dict):
        raise ExportError(f"quantization config group {group} quantizes no weights (llmc serves int8 weights)")
    if weights.get("type", "int") != "int" or weights.get("num_bits") != 8:
        raise ExportError(f"quantization config group {group}: {weights.get('num_bits')}-bit {weights.get('type')} "
                          "weights are not supported (llmc serves 8-bit integer weights)")
    if not weights.get("symmetric", True):
        raise ExportError(f"quantization config group {group}: asymmetric weights (zero points) are not supported")
    if weights.get("dynamic", False):
        raise ExportError(f"quantization config group {group}: dynamic weight quantization is not supported")
    strategy = weights.get("strategy")
    if strategy not in WEIGHT_STRATEGIES:
        raise ExportError(f"quantization config group {group}: weight strategy '{strategy}' is not supported "
                          f"(supported: {', '.join(WEIGHT_STRATEGIES)})")
    if strategy != "group":
        return 0
    group_size = weights.get("group_size")
    if type(group_size) is not int or group_size not in GROUP_SIZES[1:]:
        raise ExportError(f"quantization config group {group}: weight group size {group_size} is not supported "
                          f"(supported: {', '.join(map(str, GROUP_SIZES[1:]))})")
    return group_size


def read_scheme(hf_config: dict) -> Optional[Int8Scheme]:
    """The int8 scheme of a config.json's quantization_config; None for an unquantized checkpoint."""
    config = hf_config.get("quantization_config", hf_config.get("compression_config"))
    if config is None:
        return None
    if not isinstance(config, dict):
        raise ExportError("config.json: quantization_config is not an object")
    method = config.get("quant_method")
    if method != "compressed-tensors":
        raise ExportError(f"checkpoints quantized with '{method}' are not supported: llmc reads int8 checkpoints in "
                          "the compressed-tensors format (llm-compressor's W8A8 and W8A16) and 4-bit GPTQ, AWQ and "
                          "compressed-tensors pack-quantized ones; or export the unquantized checkpoint with "
                          "--quantize int8 or int4")
    if config.get("quantization_status", "compressed") != "compressed":
        raise ExportError(f"quantization_status '{config.get('quantization_status')}': only a compressed checkpoint "
                          "holds its int8 weights")
    if config.get("kv_cache_scheme"):
        raise ExportError("a quantized KV cache (kv_cache_scheme) is not supported")
    sparsity = config.get("sparsity_config") or {}
    if not isinstance(sparsity, dict) or sparsity.get("format", "dense") != "dense":
        raise ExportError(f"sparse checkpoints ({sparsity}) are not supported")
    groups = config.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise ExportError("quantization_config has no config_groups")
    formats, group_sizes, activations = set(), set(), set()
    for name, group in groups.items():
        if not isinstance(group, dict):
            raise ExportError(f"quantization config group {name} is not an object")
        group_sizes.add(_check_weight_args(name, group.get("weights")))
        format_ = group.get("format") or config.get("format")
        if not isinstance(format_, str):
            raise ExportError(f"quantization config group {name}: format {format_!r} is not a name")
        formats.add(format_)
        if group.get("output_activations"):
            raise ExportError(f"quantization config group {name}: quantized outputs are not supported")
        inputs = group.get("input_activations")
        if inputs:
            if not isinstance(inputs, dict):
                raise ExportError(f"quantization config group {name}: input_activations {inputs!r} is not an object")
            if inputs.get("type", "int") != "int" or inputs.get("num_bits") != 8:
                raise ExportError(f"quantization config group {name}: {inputs.get('num_bits')}-bit "
                                  f"{inputs.get('type')} activations are not supported (llmc runs int8 or 16-bit)")
            activations.add("int8")
        else:
            activations.add("none")
    unsupported = sorted(f for f in formats if f not in INT8_FORMATS + (PACKED_FORMAT,))
    if unsupported:
        raise ExportError(f"compressed-tensors format {', '.join(unsupported)} is not supported (supported: "
                          f"{', '.join(INT8_FORMATS)}, and {PACKED_FORMAT} with 8 bits)")
    if len(formats) > 1 and PACKED_FORMAT in formats:
        raise ExportError("checkpoints mixing packed and unpacked int8 weights are not supported")
    grouped = sorted(size for size in group_sizes if size)
    if any(size % grouped[0] for size in grouped[1:]):
        raise ExportError(f"weight group sizes {', '.join(map(str, grouped))} do not share one group size")
    return Int8Scheme(group_size=grouped[0] if grouped else 0, packed=PACKED_FORMAT in formats,
                      activations="int8" if activations == {"int8"} else "none", group_sizes=tuple(grouped))


def _unpack(words: torch.Tensor, shape: torch.Tensor, name: str) -> torch.Tensor:
    """int8 [rows, columns] from pack-quantized int32 words: weight k of a row is byte k % 4 (lowest first) of
    word k // 4, stored as weight + 128."""
    if (words.dtype != torch.int32 or words.dim() != 2 or shape.numel() != 2 or shape.is_floating_point()
            or shape.dtype == torch.bool):
        raise ExportError(f"{name}{PACKED} must be int32 [rows, columns / 4] beside two integers in {name}{PACKED_SHAPE}")
    rows, columns = (int(v) for v in shape.reshape(-1).tolist())
    if rows != words.shape[0] or (columns + 3) // 4 != words.shape[1]:
        raise ExportError(f"{name}{PACKED} is {tuple(words.shape)}, which does not hold a [{rows}, {columns}] weight")
    bytes_ = torch.stack([(words >> (8 * i)) & 0xFF for i in range(4)], dim=-1).reshape(rows, -1)[:, :columns]
    return (bytes_ - 128).to(torch.int8)


def _scales(scale: torch.Tensor, rows: int, columns: int, scheme: Int8Scheme, name: str) -> torch.Tensor:
    """float32 [rows, groups] for the package's group size, from a scale per tensor, per row or per group of
    one of the sizes the checkpoint declares: a coarser scale repeats over the finer groups it covers, exactly."""
    group_size = scheme.group_size
    groups = 1 if group_size == 0 else columns // group_size
    if group_size and columns % group_size:
        raise ExportError(f"{name}.weight has {columns} input columns, not a multiple of the group size {group_size}")
    if scale.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ExportError(f"{name}{SCALE} is {scale.dtype}; scales must be float32, bfloat16 or float16 to be kept "
                          "exactly")
    scale = scale.float()
    if scale.numel() == 1:
        scale = scale.reshape(1, 1).expand(rows, 1)
    # The width each stored scale covers must be the whole row or a declared group size: a last, shorter
    # group (compressed-tensors allows one) or an undeclared width would put scales on the wrong columns.
    widths = (columns,) + tuple(scheme.group_sizes)
    if (scale.dim() != 2 or scale.shape[0] != rows or scale.shape[1] == 0 or columns % scale.shape[1]
            or columns // scale.shape[1] not in widths or groups % scale.shape[1]):
        raise ExportError(f"{name}{SCALE} has shape {tuple(scale.shape)}, which is not one scale per tensor, per "
                          f"row or per group of {' or '.join(map(str, scheme.group_sizes)) or 'any declared size'} "
                          f"whole columns of a [{rows}, {columns}] weight")
    if not bool(torch.isfinite(scale).all()):
        raise ExportError(f"{name}{SCALE} holds a NaN or infinite scale")
    return scale.repeat_interleave(groups // scale.shape[1], dim=1).contiguous()


def take_int8_weights(tensors: dict, scheme: Int8Scheme) -> Dict[str, Tuple[torch.Tensor, torch.Tensor]]:
    """Takes every quantized projection out of `tensors` (Hugging Face names) and leaves a zero placeholder of
    its shape in its place, so the model loads and checks shapes as from any checkpoint. Returns
    {weight name: (int8 [rows, columns], float32 scales [rows, groups])} with the checkpoint's exact values."""
    exact = {}
    for base in sorted(name[:-len(SCALE)] for name in tensors if name.endswith(SCALE)):
        scale = tensors.pop(base + SCALE)
        zero_point = tensors.pop(base + ZERO_POINT, None)
        group_index = tensors.pop(base + GROUP_INDEX, None)
        for suffix in UNUSED_SUFFIXES:
            tensors.pop(base + suffix, None)
        if scheme.packed:
            if base + PACKED not in tensors or base + PACKED_SHAPE not in tensors:
                raise ExportError(f"{base}: a pack-quantized checkpoint needs {base}{PACKED} and {base}{PACKED_SHAPE}")
            weight = _unpack(tensors.pop(base + PACKED), tensors.pop(base + PACKED_SHAPE), base)
        else:
            weight = tensors.get(base + ".weight")
            if weight is None or weight.dtype != torch.int8 or weight.dim() != 2:
                found = "missing" if weight is None else f"{weight.dtype} {tuple(weight.shape)}"
                raise ExportError(f"{base}.weight is {found}, but {base}{SCALE} marks it an int8 matrix")
        rows, columns = weight.shape
        if zero_point is not None and bool((zero_point != 0).any()):
            raise ExportError(f"{base}{ZERO_POINT} is not zero: asymmetric weights are not supported")
        scales = _scales(scale, rows, columns, scheme, base)
        if group_index is not None:
            width = columns // scale.shape[-1] if scale.dim() == 2 else columns
            if not torch.equal(group_index.long(), torch.arange(columns) // width):
                raise ExportError(f"{base}{GROUP_INDEX} reorders the input columns (activation order), which is "
                                  "not supported")
        # A placeholder of the right shape for load_hf_tensors' checks: the exact values replace it
        # (quantize_model), so no float copy of the matrix is made.
        tensors[base + ".weight"] = torch.zeros(()).expand(rows, columns)
        exact[base + ".weight"] = (weight.contiguous(), scales)
    return exact


def stacked_parts(name: str) -> Tuple[str, Optional[List[str]]]:
    """For a projection's weight under Hugging Face's name: model.py's module holding it and, where that module
    stacks several (q/k/v, gate/up), the weight names of all its parts; None for a module of its own."""
    module = name[:-len(".weight")]
    parent, _, leaf = module.rpartition(".")
    stacked = next((s for s, parts in STACKED_PARTS.items() if leaf in parts), None)
    if stacked is None:
        return module, None
    return f"{parent}.{stacked}", [f"{parent}.{part}.weight" for part in STACKED_PARTS[stacked]]


def by_module(exact: Dict[str, Tuple[torch.Tensor, torch.Tensor]], tied: bool, kind: str = "int8") -> Dict[str, tuple]:
    """The exact int8 weights under model.py's module names, q/k/v and gate/up stacked as its matrices are.
    A stacked matrix must come whole from the checkpoint or not at all. With tied embeddings the LM head is
    the embedding matrix, which the exporter quantizes itself: an int8 lm_head in a tied checkpoint is left
    out, as Hugging Face and vLLM tie the LM head to the embedding."""
    modules = {}
    for name in exact:
        target, parts = stacked_parts(name)
        if parts is None:
            if not (tied and target == "lm_head"):
                modules[target] = exact[name]
            continue
        if target in modules:
            continue
        missing = [part for part in parts if part not in exact]
        if missing:
            raise ExportError(f"{', '.join(parts)} must be quantized alike, but {', '.join(missing)} "
                              f"{'is' if len(missing) == 1 else 'are'} not {kind} in the checkpoint")
        modules[target] = (torch.cat([exact[part][0] for part in parts]), torch.cat([exact[part][1] for part in parts]))
    return modules
