"""What goes into a ``torch.save`` file so that torch's safe loader can read it back.

torch >= 2.6 loads with ``weights_only=True`` by default: tensors, plain containers and
Python numbers only. A ``numpy.float64`` slips in easily (``np.mean`` returns one) and makes
the file unreadable without extra allowances, so every checkpoint this project writes goes
through :func:`plain_numbers` first.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def plain_numbers(value: Any) -> Any:
    """``value`` with numpy scalars turned into Python numbers, inside dicts, lists and tuples."""
    if isinstance(value, dict):
        return {k: plain_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain_numbers(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value
