"""Argument checks shared by the engine: bad input is a ValueError naming the argument."""
from __future__ import annotations

import numpy as np


def as_vector(x, name: str, dim: int | None = None) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {arr.shape}")
    if dim is not None and arr.shape[0] != dim:
        raise ValueError(f"{name} must have length {dim}, got {arr.shape[0]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def as_matrix(A, name: str, cols: int | None = None) -> np.ndarray:
    arr = np.asarray(A, dtype=float)
    if arr.ndim == 1 and cols is not None and arr.shape[0] == cols:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {arr.shape}")
    if cols is not None and arr.shape[1] != cols:
        raise ValueError(f"{name} must have {cols} columns, got {arr.shape[1]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def as_rhs(b, name: str, rows: int) -> np.ndarray:
    arr = np.asarray(b, dtype=float)
    if arr.ndim == 0:
        arr = np.full(rows, float(arr))
    if arr.ndim != 1 or arr.shape[0] != rows:
        raise ValueError(f"{name} must have shape ({rows},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def positive(value: float, name: str, *, strict: bool = True) -> float:
    v = float(value)
    if not np.isfinite(v) or (v <= 0 if strict else v < 0):
        raise ValueError(f"{name} must be {'positive' if strict else 'non-negative'} and finite, got {value}")
    return v
