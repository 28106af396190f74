"""safetensors files written byte for byte the same from the same tensors, and headers read without data.

A registry pins weights by sha256, so exporting one checkpoint twice must give one file. The
safetensors library's writer keeps ``__metadata__`` in a hash map whose order changes from process
to process; with at most one metadata key there is no order to change, and its tensors are laid
out by dtype and name. Measured: ``safetensors.torch.save_file`` of the same tensors in 20
processes gave one sha256 with no metadata and with one key, two different ones with two keys. So
genzoo writes with the library and at most one key (``format``); everything else about a model
belongs in its config.json. The byte-identical export test guards this.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import torch

from .errors import WeightsError

DTYPE_CODES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
               torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
               torch.bool: "BOOL"}
CODE_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the limit safetensors itself applies


def write_tensors(tensors: dict[str, torch.Tensor], path: str | os.PathLike,
                  metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` to ``path`` in the safetensors format, the same bytes every time.

    ``metadata`` may hold one key at most (see the module's docstring). Tensors that share memory
    (tied weights) are written as copies of their own. A refused write (a full disk) raises the
    system's OSError.
    """
    from safetensors.torch import save

    if metadata is not None and len(metadata) > 1:
        raise WeightsError(f"safetensors metadata of more than one key ({sorted(metadata)}) is not written the same "
                           f"way twice; keep one key and put the rest in config.json")
    plain: dict[str, torch.Tensor] = {}
    storages: set[int] = set()
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        if tensor.dtype not in DTYPE_CODES:
            raise WeightsError(f"tensor {name!r} has dtype {tensor.dtype}, which genzoo's safetensors files do not hold")
        storage = tensor.untyped_storage().data_ptr() if tensor.numel() else None
        if storage in storages:
            tensor = tensor.clone()
        elif storage is not None:
            storages.add(storage)
        plain[name] = tensor
    # serialised by the library, written by Python: a refused write (a full disk) is an OSError with its errno
    data = save(plain, metadata=dict(metadata) if metadata else None)
    with open(path, "wb") as fh:
        fh.write(data)


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
