"""Cuts as values: ``Cut(normal, offset)`` means ``normal @ y <= offset`` for every y of the body."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._validate import check_real, norm, real_array

__all__ = ["Cut", "ParallelCut"]


@dataclass(frozen=True)
class Cut:
    """Half-space {y : normal @ y <= offset}; for a query x it separates when ``normal @ x > offset``.

    Parameters
    ----------
    normal : array_like of shape (n,)
        The (finite) normal; stored as a float array.
    offset : float
        The (finite) offset.
    """

    normal: np.ndarray
    offset: float

    def __post_init__(self) -> None:
        check_real(self.offset, "Cut.offset")
        normal = real_array(self.normal, "Cut.normal")
        if normal.ndim != 1:
            raise ValueError(f"Cut.normal must be a vector, got shape {normal.shape}")
        if not np.all(np.isfinite(normal)) or not np.isfinite(self.offset):
            raise ValueError("Cut.normal and Cut.offset must be finite")
        object.__setattr__(self, "normal", normal)
        object.__setattr__(self, "offset", float(self.offset))

    def violation(self, x: np.ndarray) -> float:
        """normal @ x - offset (positive: x is cut off)."""
        return float(self.normal @ np.asarray(x, dtype=float) - self.offset)

    def depth(self, x: np.ndarray) -> float:
        """Violation measured in units of ‖normal‖ (Euclidean distance of x to the cut's hyperplane), computed
        without overflow or underflow at any scale of the normal; a zero normal gives ±inf (0 if not violated)."""
        nrm = norm(self.normal)
        if nrm == 0.0:
            v = -self.offset
            return math.inf if v > 0 else (-math.inf if v < 0 else 0.0)
        return float((self.normal / nrm) @ np.asarray(x, dtype=float) - self.offset / nrm)


@dataclass(frozen=True)
class ParallelCut:
    """Slab {y : lower <= normal @ y <= upper}: two parallel cuts from one oracle answer.

    Parameters
    ----------
    normal : array_like of shape (n,)
        The (finite) normal.
    lower, upper : float
        The slab's sides, finite with lower <= upper.
    """

    normal: np.ndarray
    lower: float
    upper: float

    def __post_init__(self) -> None:
        check_real(self.lower, "ParallelCut.lower")
        check_real(self.upper, "ParallelCut.upper")
        normal = real_array(self.normal, "ParallelCut.normal")
        if normal.ndim != 1 or not np.all(np.isfinite(normal)):
            raise ValueError("ParallelCut.normal must be a finite vector")
        if not (np.isfinite(self.lower) and np.isfinite(self.upper)) or self.lower > self.upper:
            raise ValueError(f"ParallelCut needs finite lower <= upper, got {self.lower}, {self.upper}")
        object.__setattr__(self, "normal", normal)
