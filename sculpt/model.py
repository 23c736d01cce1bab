"""The multi-head attention layer F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i (rows of X are tokens, softmax row-wise).

The ``MultiHeadAttention`` value class: forward, attention patterns, npz save/load, head-matched parameter
distance and prediction error. The numpy kernels live in :mod:`sculpt.toolkit.forward_pass` (the one
chunked forward pass, shared with ``sculpt.gradients``, the phases and the benchmark); ``chunk_size``,
``concat_thetas``, ``softmax_axis1``, ``forward_chunk``, ``forward`` and ``attention_patterns`` stay
importable from here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import linear_sum_assignment

from ._checks import (
    MAX_JSON_DEPTH,
    MAX_METADATA_CHARS,
    MAX_MODEL_BYTES,
    check_inputs,
    check_params,
    json_depth,
    read_npz,
)
from .toolkit.forward_pass import (  # noqa: F401
    attention_patterns,
    chunk_size,
    concat_thetas,
    forward,
    forward_chunk,
    prediction_relative_mse,
    relative_mse,
    softmax_axis1,
)

__all__ = ["MultiHeadAttention", "HeadDistance", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "sculpt.MultiHeadAttention"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class HeadDistance:
    """Parameter distance after the best matching of heads.

    ``theta_error`` = (Σ_i ‖Θ_i − Θ̂_π(i)‖_F²)^{1/2} / (Σ_i ‖Θ_i‖_F²)^{1/2}, likewise ``w_error``;
    ``permutation[i]`` is the head of the other model matched to head i of this one; ``max_theta_error`` and
    ``max_w_error`` are the largest per-head relative errors ‖Θ_i − Θ̂_π(i)‖_F / ‖Θ_i‖_F.
    """

    theta_error: float
    w_error: float
    permutation: tuple[int, ...]
    max_theta_error: float
    max_w_error: float


def _as_path(path: object, name: str = "path") -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a str or os.PathLike, got {type(path).__name__}")
    return os.fspath(path)


class MultiHeadAttention:
    """F(X) = Σ_{i=1}^m softmax(X Θ_i Xᵀ) X W_i, row-wise softmax, X (k, d) with tokens as rows.

    ``thetas`` and ``ws`` are float64 arrays of shape (m, d, d) (copied on construction). Calling the model
    on X of shape (k, d) or (N, k, d) returns an array of the same shape.
    """

    __slots__ = ("thetas", "ws")

    def __init__(self, thetas: ArrayLike, ws: ArrayLike) -> None:
        self.thetas, self.ws = check_params(thetas, ws)

    # ----------------------------------------------------------------------------------------- basics
    @property
    def m(self) -> int:
        """Number of heads."""
        return int(self.thetas.shape[0])

    @property
    def d(self) -> int:
        """Token dimension."""
        return int(self.thetas.shape[1])

    @property
    def n_params(self) -> int:
        """2 m d² real parameters."""
        return 2 * self.m * self.d * self.d

    def __repr__(self) -> str:
        tn = np.linalg.norm(self.thetas.reshape(self.m, -1), axis=1)
        return f"MultiHeadAttention(m={self.m}, d={self.d}, |Θ_i|_F={np.round(tn, 3).tolist()})"

    def copy(self) -> MultiHeadAttention:
        return MultiHeadAttention(self.thetas, self.ws)

    def params(self) -> np.ndarray:
        """Flat parameter vector [vec(Θ_1..Θ_m), vec(W_1..W_m)] (row-major), length 2 m d²."""
        return np.concatenate([self.thetas.ravel(), self.ws.ravel()])

    @classmethod
    def from_params(cls, params: ArrayLike, m: int, d: int) -> MultiHeadAttention:
        """Inverse of ``params()``.

        Parameters
        ----------
        params
            The flat vector, length 2md² (ValueError otherwise).
        m, d
            Heads and token dimension.

        Returns
        -------
        MultiHeadAttention
        """
        p = np.asarray(params, dtype=np.float64)
        if p.shape != (2 * m * d * d,):
            raise ValueError(f"params must have shape ({2 * m * d * d},) for m={m}, d={d}, got {p.shape}")
        half = m * d * d
        return cls(p[:half].reshape(m, d, d), p[half:].reshape(m, d, d))

    # ---------------------------------------------------------------------------------------- forward
    def __call__(self, X: ArrayLike) -> np.ndarray:
        """F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i.

        Parameters
        ----------
        X
            (k, d) or (N, k, d) of finite reals with the model's d.

        Returns
        -------
        numpy.ndarray
            float64 of X's shape.
        """
        X3, single = check_inputs(X, "X", d=self.d)
        out = forward(self.thetas, self.ws, X3)
        return out[0] if single else out

    forward = __call__

    def attention(self, X: ArrayLike) -> np.ndarray:
        """Attention patterns p[n, i, a, b] = softmax_b(x_aᵀ Θ_i x_b).

        Parameters
        ----------
        X
            (N, k, d) or (k, d).

        Returns
        -------
        numpy.ndarray
            (N, m, k, k), or (m, k, k) for a single sequence.
        """
        X3, single = check_inputs(X, "X", d=self.d)
        out = attention_patterns(self.thetas, X3)
        return out[0] if single else out

    # ---------------------------------------------------------------------------------------- metrics
    def _check_other(self, other: object) -> MultiHeadAttention:
        if not isinstance(other, MultiHeadAttention):
            raise TypeError(f"other must be a MultiHeadAttention, got {type(other).__name__}")
        if other.d != self.d:
            raise ValueError(f"other has d = {other.d}, this model has d = {self.d}")
        return other

    def distance(self, other: MultiHeadAttention) -> HeadDistance:
        """Relative Frobenius errors of Θ and W of ``other`` against this model (the reference), heads matched by
        linear_sum_assignment on the cost ‖Θ_i − Θ̂_j‖²/Σ‖Θ‖² + ‖W_i − Ŵ_j‖²/Σ‖W‖².

        Parameters
        ----------
        other
            A layer with the same m and d (ValueError otherwise).

        Returns
        -------
        HeadDistance
            Overall and largest per-head errors, and the matching.
        """
        other = self._check_other(other)
        if other.m != self.m:
            raise ValueError(f"other has m = {other.m} heads, this model has m = {self.m}")
        tiny = np.finfo(float).tiny
        # every figure is a ratio, so both models are first divided by one power of two per parameter kind
        # (exact): squares of entries near 1e300 would overflow, of entries near 1e-300 underflow
        A_t, B_t = _common_scale(self.thetas, other.thetas)
        A_w, B_w = _common_scale(self.ws, other.ws)
        t_sq = max(float(np.sum(A_t**2)), tiny)
        w_sq = max(float(np.sum(A_w**2)), tiny)
        dt = np.sum((A_t[:, None] - B_t[None]) ** 2, axis=(2, 3))  # (m, m)
        dw = np.sum((A_w[:, None] - B_w[None]) ** 2, axis=(2, 3))
        with np.errstate(over="ignore"):  # a ratio beyond float64 is inf, as documented
            return self._distance(dt, dw, t_sq, w_sq, A_t, A_w, tiny)

    def _distance(
        self, dt: np.ndarray, dw: np.ndarray, t_sq: float, w_sq: float, A_t: np.ndarray, A_w: np.ndarray, tiny: float
    ) -> HeadDistance:
        cost = dt / t_sq + dw / w_sq
        rows, cols = linear_sum_assignment(np.where(np.isfinite(cost), cost, np.finfo(float).max / (4 * self.m)))
        perm = tuple(int(c) for c in cols[np.argsort(rows)])
        idx = np.arange(self.m)
        et, ew = dt[idx, list(perm)], dw[idx, list(perm)]
        tn = np.maximum(np.sum(A_t**2, axis=(1, 2)), tiny)
        wn = np.maximum(np.sum(A_w**2, axis=(1, 2)), tiny)
        return HeadDistance(
            theta_error=float(np.sqrt(et.sum() / t_sq)),
            w_error=float(np.sqrt(ew.sum() / w_sq)),
            permutation=perm,
            max_theta_error=float(np.sqrt(np.max(et / tn))),
            max_w_error=float(np.sqrt(np.max(ew / wn))),
        )

    def prediction_error(self, other: MultiHeadAttention, X: ArrayLike) -> float:
        """Relative MSE Σ_n ‖F(X_n) − F̂(X_n)‖² / Σ_n ‖F(X_n)‖² with this model as F (0/0 = 0, x/0 = inf; a
        non-finite F̂ gives inf).

        Parameters
        ----------
        other
            The layer F̂, with the same d.
        X
            Inputs (N, k, d) or (k, d).

        Returns
        -------
        float
        """
        other = self._check_other(other)
        X3, _ = check_inputs(X, "X", d=self.d)
        return prediction_relative_mse(other.thetas, other.ws, self.thetas, self.ws, X3)

    # --------------------------------------------------------------------------------------------- io
    def save(self, path: str | os.PathLike) -> None:
        """Write an npz (no pickle) holding ``thetas``, ``ws`` and ``metadata``: a 0-d unicode array with the JSON
        {"format": "sculpt.MultiHeadAttention", "version": 1, "m": m, "d": d}.

        Parameters
        ----------
        path
            The file, written exactly there (no ".npz" appended).
        """
        meta = json.dumps({"format": FORMAT_NAME, "version": FORMAT_VERSION, "m": self.m, "d": self.d})
        with open(_as_path(path), "wb") as fh:
            np.savez(fh, thetas=self.thetas, ws=self.ws, metadata=np.array(meta))

    @classmethod
    def load(cls, path: str | os.PathLike) -> MultiHeadAttention:
        """Read a file written by ``save``; a missing, corrupted, foreign or oversized file raises ValueError.

        Limits, checked before anything is allocated or parsed: the arrays take at most 1 GiB together
        (``sculpt._checks.MAX_MODEL_BYTES``), every array's .npy header must agree with the bytes stored, no
        pickled objects; the metadata is a JSON text of at most 65,536 characters nested at most 32 deep,
        with integer ``m``, ``d`` >= 1 matching the arrays' shape (m, d, d) of float64.

        Parameters
        ----------
        path
            The file.

        Returns
        -------
        MultiHeadAttention
        """
        p = _as_path(path)
        z = read_npz(
            p,
            ("thetas", "ws", "metadata"),
            max_bytes=MAX_MODEL_BYTES,
            max_member_bytes={"metadata": 4 * MAX_METADATA_CHARS + 4096},
        )
        meta_arr, thetas, ws = z["metadata"], z["thetas"], z["ws"]
        try:
            if meta_arr.ndim != 0 or meta_arr.dtype.kind != "U":
                raise ValueError("metadata is not a string")
            text = str(meta_arr)
            if len(text) > MAX_METADATA_CHARS:
                raise ValueError(f"metadata has {len(text)} characters, above the limit of {MAX_METADATA_CHARS}")
            if json_depth(text) > MAX_JSON_DEPTH:
                raise ValueError(f"metadata JSON is nested deeper than {MAX_JSON_DEPTH} levels")
            meta = json.loads(text)
            if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
                raise ValueError(f"format is {meta.get('format') if isinstance(meta, dict) else None!r}")
            if meta.get("version") != FORMAT_VERSION:
                raise ValueError(f"unsupported version {meta.get('version')!r} (expected {FORMAT_VERSION})")
            m, d = meta.get("m"), meta.get("d")
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (m, d)):
                raise ValueError(f"metadata m, d must be integers >= 1, got {m!r}, {d!r}")
            if thetas.dtype != np.float64 or ws.dtype != np.float64:
                raise ValueError("arrays are not float64")
            if thetas.shape != (m, d, d) or ws.shape != (m, d, d):
                raise ValueError(f"array shapes {thetas.shape}, {ws.shape} disagree with m={m}, d={d}")
            return cls(thetas, ws)
        except (ValueError, TypeError, RecursionError) as exc:
            raise ValueError(f"{p!r} is not a valid sculpt model file: {exc}") from None


def _common_scale(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a and b divided by the power of two nearest their largest entry (exact), so that their squared
    differences neither overflow nor underflow."""
    top = max(float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0)))
    if top == 0.0:
        return a, b
    e = int(np.frexp(top)[1])
    return np.ldexp(a, -e), np.ldexp(b, -e)
