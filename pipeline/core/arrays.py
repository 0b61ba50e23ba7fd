"""Array helpers where numpy's own is slow."""

from __future__ import annotations

import numpy as np


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique(values), by a sort: numpy 2.4's np.unique hashes, and on millions of
    integers took about 30 times longer here (15.6M uint32: 8.7 s against 0.3 s)."""
    values = np.sort(values)
    return values[np.concatenate([[True], values[1:] != values[:-1]])] if len(values) else values
