"""safetensors files written byte for byte the same from the same tensors, and headers read without data.

safetensors' own writer keeps ``__metadata__`` in a hash map whose order changes from process to
process, so exporting one checkpoint twice could give two sha256 values. A registry pins weights
by sha256, so genzoo writes the (simple, documented) format itself: an 8-byte little-endian header
length, a JSON header with sorted keys padded with spaces to a multiple of 8, then each tensor's
bytes in name order. Reading stays with the safetensors library.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path
from typing import Any

import torch

from .errors import WeightsError

DTYPE_CODES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
               torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
               torch.bool: "BOOL"}
CODE_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the limit safetensors itself applies


def write_tensors(tensors: dict[str, torch.Tensor], path: str | os.PathLike,
                  metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` to ``path`` in the safetensors format, deterministically."""
    if sys.byteorder != "little":
        raise WeightsError("genzoo writes safetensors on little-endian machines only")
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in sorted(metadata.items())}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        if tensor.dtype not in DTYPE_CODES:
            raise WeightsError(f"tensor {name!r} has dtype {tensor.dtype}, which safetensors files cannot hold")
        data = tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        header[name] = {"dtype": DTYPE_CODES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)))
        fh.write(text)
        for blob in blobs:
            fh.write(blob)


def read_header(path: str | os.PathLike) -> dict[str, tuple[torch.dtype | None, tuple[int, ...]]]:
    """Each tensor's dtype (None if unknown to torch) and shape, read from the header alone.

    Nothing is allocated for the data, so a file that claims enormous tensors is cheap to refuse.
    Raises WeightsError for a file that is not safetensors.
    """
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        prefix = fh.read(8)
        if len(prefix) < 8:
            raise WeightsError(f"{path} is not a safetensors file (it is {size} bytes long); the model file is corrupt")
        (length,) = struct.unpack("<Q", prefix)
        if length > min(MAX_HEADER_BYTES, size - 8):
            raise WeightsError(f"{path} is not a readable safetensors file (its header length is invalid); "
                               f"the model file is corrupt")
        raw = fh.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
        entries = {name: (CODE_DTYPES.get(info["dtype"]), tuple(int(d) for d in info["shape"]), info["data_offsets"])
                   for name, info in header.items() if name != "__metadata__"}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise WeightsError(f"{path} is not a readable safetensors file (its header is not valid JSON); "
                           f"the model file is corrupt") from None
    data_size = size - 8 - length
    end = max((int(offsets[1]) for _, _, offsets in entries.values()), default=0)
    if end > data_size:
        raise WeightsError(f"{path} is truncated: its header describes {end} bytes of tensors, the file holds "
                           f"{data_size}; the model file is corrupt")
    return {name: (dtype, shape) for name, (dtype, shape, _) in entries.items()}
