"""Torch files: what goes into them so torch's safe loader reads them back, how they are read,
(files are replaced whole through :mod:`common.atomic_io`).

torch >= 2.6 loads with ``weights_only=True`` by default: tensors, plain containers and
Python numbers only. A ``numpy.float64`` slips in easily (``np.mean`` returns one) and makes
the file unreadable without extra allowances, so every checkpoint this project writes goes
through :func:`plain_numbers` first. Files written elsewhere (older runs, the authors' release)
are read with :func:`safe_load`, which allows numpy's numeric scalars and nothing else.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

# numpy scalars pickle as numpy.core.multiarray.scalar(numpy.dtype(...), raw bytes), the dtype
# rebuilt through its class (numpy.dtypes.Float64DType, ...). Allowing the reconstructor, numpy.dtype
# and the numeric dtype classes only (no object, string or void dtype) rebuilds numbers and nothing
# else, so torch's safe loader stays safe.
_NUMERIC_SCALARS = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                    np.float16, np.float32, np.float64)
NUMPY_SCALAR_GLOBALS = [np.core.multiarray.scalar, np.dtype] + [type(np.dtype(t)) for t in _NUMERIC_SCALARS]


def safe_load(path: str | os.PathLike, device: Any = "cpu") -> Any:
    """``torch.load`` with ``weights_only=True``, numpy numeric scalars allowed; errors propagate."""
    import torch  # lazy: torch only when a file is read; --help imports this module

    with torch.serialization.safe_globals(NUMPY_SCALAR_GLOBALS):
        return torch.load(path, map_location=device, weights_only=True)


def load_error_reason(exc: BaseException) -> str:
    """The informative line of a ``torch.load`` error (the safe loader's errors start with advice)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    for line in lines:
        if "Unsupported global" in line or "but got" in line:
            return line[:300]
        if "Unsupported operand" in line:
            return "not a file written by torch.save (its content is not a pickle torch can read)"
        if "not a ZIP archive" in line or "failed finding central directory" in line:
            return "not a complete torch.save archive (cut short, or another kind of file)"
    return lines[0][:200] if lines else "no details"


def plain_numbers(value: Any) -> Any:
    """``value`` with numpy scalars turned into Python numbers, inside dicts, lists and tuples."""
    if isinstance(value, dict):
        return {k: plain_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain_numbers(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value
