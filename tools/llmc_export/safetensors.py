"""Reads .safetensors files with nothing but the standard library and torch.

The format: an 8-byte little-endian header length, a JSON header mapping tensor names to dtype, shape and
byte offsets into the data that follows, then the raw tensors.
"""
import json
import os
import struct

import torch

from .config import ExportError

_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
           "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
           "BOOL": torch.bool}


def read_safetensors(path):
    """Returns {name: tensor} for one file."""
    with open(path, "rb") as f:
        raw_length = f.read(8)
        if len(raw_length) != 8:
            raise ExportError(f"{path}: too short to be a safetensors file")
        (header_length,) = struct.unpack("<Q", raw_length)
        if header_length > 100_000_000:
            raise ExportError(f"{path}: implausible header length {header_length}")
        try:
            header = json.loads(f.read(header_length))
        except ValueError as error:
            raise ExportError(f"{path}: header is not JSON ({error})") from None
        data = bytearray(f.read())
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(entry.get("dtype"))
        if dtype is None:
            raise ExportError(f"{path}: tensor {name} has unsupported dtype {entry.get('dtype')}")
        begin, end = entry["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            raise ExportError(f"{path}: tensor {name} lies outside the file")
        count = 1
        for size in entry["shape"]:
            count *= size
        element_size = torch.empty((), dtype=dtype).element_size()
        if (end - begin) != count * element_size:
            raise ExportError(f"{path}: tensor {name} has {end - begin} bytes for shape {entry['shape']}")
        tensor = torch.frombuffer(data, dtype=dtype, count=count, offset=begin) if count else torch.empty(0, dtype=dtype)
        tensors[name] = tensor.reshape(entry["shape"]).clone()
    return tensors


def read_checkpoint(folder):
    """All tensors of a checkpoint folder: model.safetensors, or the shards its index file lists."""
    index_path = os.path.join(folder, "model.safetensors.index.json")
    single_path = os.path.join(folder, "model.safetensors")
    if os.path.exists(index_path):
        with open(index_path, encoding="utf-8") as f:
            weight_map = json.load(f).get("weight_map", {})
        tensors = {}
        for shard in sorted(set(weight_map.values())):
            shard_path = os.path.join(folder, shard)
            if not os.path.exists(shard_path):
                raise ExportError(f"shard {shard} named by the index file is missing")
            tensors.update(read_safetensors(shard_path))
        return tensors
    if os.path.exists(single_path):
        return read_safetensors(single_path)
    raise ExportError(f"{folder} has neither model.safetensors nor model.safetensors.index.json")


def write_safetensors(path, tensors):
    """Writes {name: tensor} (used by tests to build checkpoints)."""
    names = {v: k for k, v in _DTYPES.items()}
    header, offset, blobs = {}, 0, []
    for name, tensor in tensors.items():
        tensor = tensor.contiguous()
        blob = tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        header[name] = {"dtype": names[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    encoded = json.dumps(header).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for blob in blobs:
            f.write(blob)
