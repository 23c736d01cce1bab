"""The one forward pass of F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i (rows of X are tokens, softmax row-wise),
chunked over examples so that memory stays bounded for any N, and the one relative MSE.

Every caller evaluates the layer through these kernels: ``MultiHeadAttention`` and ``sculpt.gradients``
(``forward``, ``forward_chunk``, ``attention_patterns``), phases 5–6 and the polish (``attention``,
``features``, ``layer_relative_mse``) and the benchmark's scoring (``forward``, ``relative_mse``).

Internal layout (chosen so every reduction runs over a non-innermost axis and every product is one GEMM or
one batched matmul): for a chunk of n sequences, ``logits[n, b, a*m + i] = x_aᵀ Θ_i x_b`` (key b on axis 1,
query a and head i flattened on axis 2), the softmax runs over axis 1,
``A[n, a*m + i, :] = Σ_b P[n, b, a*m + i] x_b`` and ``F[n, a, :] = Σ_i A[n, a*m + i, :] W_i``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from ..settings import ERROR_CHUNK_ELEMENTS, FORWARD_CHUNK_ELEMENTS

__all__ = [
    "chunk_size",
    "concat_thetas",
    "softmax_axis1",
    "forward_chunk",
    "forward",
    "attention_patterns",
    "attention",
    "features",
    "relative_mse",
    "layer_relative_mse",
    "error_chunk",
    "prediction_relative_mse",
    "residual_sums",
]

_NO_SHIFT_BOUND = 300.0  # softmax skips the max shift when all |logits| <= this


def chunk_size(k: int, d: int, m: int) -> int:
    """Sequences per chunk, n = max(1, 2^15 // (k m max(k, d))): (n, k, k m) and (n, k m, d) hold ~2^15 floats.

    Parameters
    ----------
    k, d, m
        Tokens, token dimension, heads.

    Returns
    -------
    int
        n >= 1.
    """
    return max(1, FORWARD_CHUNK_ELEMENTS // (k * m * max(k, d)))


def concat_thetas(thetas: np.ndarray) -> np.ndarray:
    """[Θ_1 | … | Θ_m]: column block i is Θ_i, so x Θ_cat = [xΘ_1, …, xΘ_m].

    Parameters
    ----------
    thetas
        (m, d, d).

    Returns
    -------
    numpy.ndarray
        (d, m d), contiguous.
    """
    m, d, _ = thetas.shape
    return np.ascontiguousarray(thetas.transpose(1, 0, 2).reshape(d, m * d))


def softmax_axis1(logits: np.ndarray) -> np.ndarray:
    """In place: logits[:, b, c] ← exp(L[:, b, c]) / Σ_b' exp(L[:, b', c]).

    When every logit lies in [−300, 300] exp cannot overflow and the largest term of a row cannot underflow,
    so exp(L)/Σexp(L) is exact to rounding without the max shift (one pass fewer); otherwise the max over
    axis 1 is subtracted first.

    Parameters
    ----------
    logits
        (n, k, c), overwritten.

    Returns
    -------
    numpy.ndarray
        ``logits``, now the softmax over axis 1.
    """
    if logits.size == 0:
        return logits
    if -_NO_SHIFT_BOUND <= float(logits.min()) and float(logits.max()) <= _NO_SHIFT_BOUND:
        np.exp(logits, out=logits)
    else:
        k = logits.shape[1]
        mx = logits[:, 0].copy()
        for b in range(1, k):
            np.maximum(mx, logits[:, b], out=mx)
        logits -= mx[:, None]
        np.exp(logits, out=logits)
    total = logits.sum(axis=1)
    np.reciprocal(total, out=total)
    logits *= total[:, None]
    return logits


def _patterns_chunk(theta_cat: np.ndarray, X: np.ndarray, m: int) -> np.ndarray:
    """P[n, b, a m + i] = softmax_b(x_aᵀ Θ_i x_b) for one chunk X (n, k, d); theta_cat = concat_thetas(thetas)."""
    n, k, d = X.shape
    xt = (X.reshape(n * k, d) @ theta_cat).reshape(n, k * m, d)  # xt[n, a m + i] = x_aᵀ Θ_i
    return softmax_axis1(X @ xt.transpose(0, 2, 1))


def forward_chunk(
    theta_cat: np.ndarray, w_cat: np.ndarray, X: np.ndarray, m: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One chunk: P[n, b, a m + i] = softmax_b(x_aᵀ Θ_i x_b), A[n, a m + i] = Σ_b P x_b, F[n, a] = Σ_i A W_i.

    Parameters
    ----------
    theta_cat
        ``concat_thetas(thetas)``, (d, m d).
    w_cat
        ``ws.reshape(m d, d)``.
    X
        (n, k, d).
    m
        Heads.

    Returns
    -------
    tuple of numpy.ndarray
        P (n, k, k m) with keys on axis 1, A (n, k m, d) and F (n, k, d).
    """
    n, k, d = X.shape
    P = _patterns_chunk(theta_cat, X, m)
    A = P.transpose(0, 2, 1) @ X  # A[n, a m + i] = Σ_b p^{(i)}_{ab} x_b
    F = (A.reshape(n * k, m * d) @ w_cat).reshape(n, k, d)
    return P, A, F


def forward(thetas: np.ndarray, ws: np.ndarray, X: np.ndarray) -> np.ndarray:
    """F(X)[n] = Σ_i softmax(X_n Θ_i X_nᵀ) X_n W_i, chunked over N (``chunk_size``): memory beyond the output is
    O(2^15) floats whatever N is.

    Parameters
    ----------
    thetas, ws
        (m, d, d) each.
    X
        (N, k, d).

    Returns
    -------
    numpy.ndarray
        (N, k, d).
    """
    thetas = np.asarray(thetas, dtype=np.float64)
    ws = np.asarray(ws, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    m, d, _ = thetas.shape
    N, k, _ = X.shape
    theta_cat, w_cat = concat_thetas(thetas), ws.reshape(m * d, d)
    out = np.empty((N, k, d))
    step = chunk_size(k, d, m)
    for s in range(0, N, step):
        out[s : s + step] = forward_chunk(theta_cat, w_cat, X[s : s + step], m)[2]
    return out


def attention_patterns(thetas: np.ndarray, X: np.ndarray) -> np.ndarray:
    """p[n, i, a, b] = softmax_b(x_aᵀ Θ_i x_b).

    Parameters
    ----------
    thetas
        (m, d, d).
    X
        (N, k, d).

    Returns
    -------
    numpy.ndarray
        (N, m, k, k).
    """
    thetas = np.asarray(thetas, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    m, d, _ = thetas.shape
    N, k, _ = X.shape
    theta_cat = concat_thetas(thetas)
    out = np.empty((N, m, k, k))
    step = chunk_size(k, d, m)
    for s in range(0, N, step):
        Xc = X[s : s + step]
        P = _patterns_chunk(theta_cat, Xc, m)  # (n, b, a m + i)
        out[s : s + step] = P.reshape(Xc.shape[0], k, k, m).transpose(0, 3, 2, 1)
    return out


def attention(thetas: np.ndarray, X: np.ndarray) -> np.ndarray:
    """p[..., n, a, b] = softmax_b(x_aᵀ Θ x_b) for a stack of Θ: the head-major twin of ``attention_patterns``
    (same kernel, chunked over N), for callers that stack a grid of candidate Θ on the leading axes.

    Parameters
    ----------
    thetas
        (..., d, d).
    X
        (N, k, d).

    Returns
    -------
    numpy.ndarray
        (..., N, k, k).
    """
    th = np.asarray(thetas, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    lead, d = th.shape[:-2], th.shape[-1]
    N, k, _ = X.shape
    flat = th.reshape(-1, d, d)
    g = flat.shape[0]
    out = np.empty((g, N, k, k))
    if g:
        theta_cat = concat_thetas(flat)
        step = chunk_size(k, d, g)
        for s in range(0, N, step):
            Xc = X[s : s + step]
            P = _patterns_chunk(theta_cat, Xc, g)  # (n, b, a g + i)
            out[:, s : s + step] = P.reshape(Xc.shape[0], k, k, g).transpose(3, 0, 2, 1)
    return out.reshape(*lead, N, k, k)


def features(thetas: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Z[(n, a), i d + j] = (Σ_b p^{(i)}_{ab} x_b)_j: the design with F(X) = Z [W_1; …; W_m].

    Parameters
    ----------
    thetas
        (m, d, d).
    X
        (N, k, d).

    Returns
    -------
    numpy.ndarray
        (N k, m d).
    """
    thetas = np.asarray(thetas, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    m, d, _ = thetas.shape
    N, k, _ = X.shape
    theta_cat = concat_thetas(thetas)
    out = np.empty((N, k * m, d))
    step = chunk_size(k, d, m)
    for s in range(0, N, step):
        Xc = X[s : s + step]
        out[s : s + step] = _patterns_chunk(theta_cat, Xc, m).transpose(0, 2, 1) @ Xc
    return out.reshape(N * k, m * d)  # row (n, a), column block i: A[n, a m + i]


def relative_mse(Y_hat: ArrayLike, Y: ArrayLike) -> float:
    """‖Y − Ŷ‖² / ‖Y‖² summed over every entry (0/0 = 0, x/0 = inf; a non-finite Ŷ gives inf).

    Parameters
    ----------
    Y_hat, Y
        Prediction and target of the same shape (ValueError otherwise).

    Returns
    -------
    float
        The relative MSE.
    """
    P = np.asarray(Y_hat, dtype=np.float64)
    T = np.asarray(Y, dtype=np.float64)
    if P.shape != T.shape:
        raise ValueError(f"prediction and target shapes differ: {P.shape} vs {T.shape}")
    if not np.all(np.isfinite(P)):
        return math.inf
    R = T - P
    num, den = float(np.vdot(R, R)), float(np.vdot(T, T))
    if not (math.isfinite(num) and math.isfinite(den)):
        # entries near 1e150 and above: the ratio is scale-free, so divide both by one power of two (exact)
        top = max(float(np.max(np.abs(R), initial=0.0)), float(np.max(np.abs(T), initial=0.0)))
        if not math.isfinite(top):
            return math.inf
        e = int(np.frexp(top)[1])
        Rs, Ys = np.ldexp(R, -e), np.ldexp(T, -e)
        num, den = float(np.vdot(Rs, Rs)), float(np.vdot(Ys, Ys))
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def error_chunk(k: int, d: int) -> int:
    """Sequences per chunk of the error sums: max(1, ``ERROR_CHUNK_ELEMENTS`` // (k d)) (``sculpt.settings``).

    Parameters
    ----------
    k, d
        Tokens, token dimension.

    Returns
    -------
    int
        n >= 1.
    """
    return max(1, ERROR_CHUNK_ELEMENTS // (k * d))


def _chunked_relative_mse(
    pairs: Callable[[int, int], tuple[np.ndarray, np.ndarray]], N: int, step: int, whole: Callable[[], float]
) -> float:
    """Σ‖T − P‖² / Σ‖T‖² from (P, T) = ``pairs(lo, hi)`` chunk by chunk (``relative_mse``'s conventions); a
    non-finite prediction gives inf, and sums that overflow are left to ``whole()`` (the unchunked error, whose
    scale-free rescaling needs every entry at once)."""
    if N <= step:
        return whole()
    num = den = 0.0
    for lo in range(0, N, step):
        P, T = pairs(lo, min(N, lo + step))
        if not np.all(np.isfinite(P)):
            return math.inf
        R = T - P
        num += float(np.vdot(R, R))
        den += float(np.vdot(T, T))
    if not (math.isfinite(num) and math.isfinite(den)):
        return whole()
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def residual_sums(
    thetas: np.ndarray, ws: np.ndarray, X: np.ndarray, Y: np.ndarray, *, chunk: int | None = None
) -> tuple[float, float]:
    """‖Y − F(X)‖² and ‖Y‖² for the layer (thetas, ws), summed over chunks of examples: no prediction or residual
    of the data's size is held (a non-finite prediction gives an infinite or NaN first sum, as unchunked).

    Parameters
    ----------
    thetas, ws
        (m, d, d) each.
    X, Y
        (N, k, d) each.
    chunk : int, optional
        Sequences per chunk (default ``error_chunk(k, d)``).

    Returns
    -------
    tuple of float
        (RSS, ‖Y‖²).
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    N, k, d = X.shape
    step = error_chunk(k, d) if chunk is None else max(1, int(chunk))
    rss = yy = 0.0
    for lo in range(0, max(N, 1), step):
        R = Y[lo : lo + step] - forward(thetas, ws, X[lo : lo + step])
        rss += float(np.vdot(R, R))
        yy += float(np.vdot(Y[lo : lo + step], Y[lo : lo + step]))
    return rss, yy


def layer_relative_mse(
    thetas: np.ndarray, ws: np.ndarray, X: np.ndarray, Y: np.ndarray, *, chunk: int | None = None
) -> float:
    """‖Y − F(X)‖² / ‖Y‖² for the layer (thetas, ws) over the whole batch (``relative_mse``'s conventions),
    summed over chunks of examples: no prediction or residual of the data's size is held.

    Parameters
    ----------
    thetas, ws
        (m, d, d) each.
    X, Y
        (N, k, d) each.
    chunk : int, optional
        Sequences per chunk (default ``error_chunk(k, d)``; one chunk, the unchunked sum, when N fits in it).

    Returns
    -------
    float
        The relative MSE.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if X.ndim != 3 or Y.shape != X.shape:
        return relative_mse(forward(thetas, ws, X), Y)  # its shape errors, as before
    N, k, d = X.shape
    step = error_chunk(k, d) if chunk is None else max(1, int(chunk))
    return _chunked_relative_mse(
        lambda lo, hi: (forward(thetas, ws, X[lo:hi]), Y[lo:hi]),
        N,
        step,
        lambda: relative_mse(forward(thetas, ws, X), Y),
    )


def prediction_relative_mse(
    thetas: np.ndarray,
    ws: np.ndarray,
    ref_thetas: np.ndarray,
    ref_ws: np.ndarray,
    X: np.ndarray,
    *,
    chunk: int | None = None,
) -> float:
    """‖F_ref(X) − F(X)‖² / ‖F_ref(X)‖²: how far the layer (thetas, ws) predicts from the reference layer, summed
    over chunks of examples as ``layer_relative_mse``.

    Parameters
    ----------
    thetas, ws
        The layer compared, (m, d, d) each.
    ref_thetas, ref_ws
        The reference layer, (m', d, d) each.
    X
        (N, k, d).
    chunk : int, optional
        Sequences per chunk (default ``error_chunk(k, d)``).

    Returns
    -------
    float
        The relative MSE.
    """
    X = np.asarray(X, dtype=np.float64)
    N, k, d = X.shape
    step = error_chunk(k, d) if chunk is None else max(1, int(chunk))
    return _chunked_relative_mse(
        lambda lo, hi: (forward(thetas, ws, X[lo:hi]), forward(ref_thetas, ref_ws, X[lo:hi])),
        N,
        step,
        lambda: relative_mse(forward(thetas, ws, X), forward(ref_thetas, ref_ws, X)),
    )
