"""Phase 1: estimate Σ_i W_i.

Crude estimator (Chen & Li; algorithm.md §3): Ŵ⁰ = (1/kN) Σ_n s_n t_nᵀ with s = Σ_a x_a, t = Σ_b y_b, unbiased
when every Θ_i = 0 because E[s sᵀ] = k I. Improved estimator (documented deviation, algorithm.md §8.4, §11):
trimmed single-token least squares. Each output row is fitted by its best single token,
y_a ≈ x_jᵀ Ŵ (j = argmin_j ‖y_a − x_jᵀ Ŵ‖); the rows with the smallest relative residual (nearly 1-sparse
attention in every head) are kept and Ŵ is refitted by least squares on them, with a shrinking kept
fraction.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from .._checks import check_data
from ..result import PhaseRecord

__all__ = ["estimate_sum_w", "crude_sum_w", "single_token_residuals", "DEFAULT_FRACTIONS"]

DEFAULT_FRACTIONS: tuple[float, ...] = (0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.005, 0.005)


def crude_sum_w(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Ŵ⁰ = (1/kN) Σ_n s_n t_nᵀ, s = Σ_a x_a, t = Σ_b y_b."""
    N, k, _ = X.shape
    return X.sum(1).T @ Y.sum(1) / (k * N)


def single_token_residuals(X: np.ndarray, Y: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every row (n, a): the best token j = argmin_j ‖y_a − x_jᵀ W‖ and its relative residual.
    Returns (j (N, k) int, rel (N, k))."""
    P = X @ W                                            # (N, k, d)
    yy = np.einsum("nad,nad->na", Y, Y)
    pp = np.einsum("njd,njd->nj", P, P)
    D2 = yy[:, :, None] - 2.0 * Y @ P.transpose(0, 2, 1) + pp[:, None, :]
    j = D2.argmin(-1)
    best = np.take_along_axis(D2, j[..., None], -1)[..., 0]
    rel = np.sqrt(np.maximum(best, 0.0) / np.maximum(yy, 1e-300))
    return j, rel


def _rel_err(W: np.ndarray, S: np.ndarray) -> float:
    return float(np.linalg.norm(W - S) / max(np.linalg.norm(S), 1e-300))


def trimmed_rounds(X: np.ndarray, Y: np.ndarray, W: np.ndarray, fractions: Sequence[float], *,
                   min_rows: int, truth_sum: np.ndarray | None = None) -> tuple[np.ndarray, list[dict]]:
    """Trimmed single-token least squares: for each fraction f, keep the f·N·k rows with the smallest
    relative single-token residual under the current Ŵ and refit Ŵ = argmin Σ ‖y_a − x_jᵀ Ŵ‖²."""
    N, k, d = X.shape
    Yf = Y.reshape(-1, d)
    steps: list[dict] = []
    for f in fractions:
        j, rel = single_token_residuals(X, Y, W)
        r = rel.reshape(-1)
        keep = int(min(N * k, max(min_rows, round(f * N * k))))
        idx = np.argpartition(r, keep - 1)[:keep]
        Z = np.take_along_axis(X, j[..., None], 1).reshape(-1, d)[idx]
        sv = np.linalg.svd(Z, compute_uv=False)
        if sv[-1] <= 1e-9 * sv[0]:
            steps.append({"fraction": float(f), "rows": keep, "status": "singular design, step skipped"})
            continue
        W = np.linalg.lstsq(Z, Yf[idx], rcond=None)[0]
        step = {"fraction": float(f), "rows": keep, "cond": float(sv[0] / sv[-1]),
                "residual_q50": float(np.quantile(r[idx], 0.5)), "residual_max_kept": float(r[idx].max())}
        if truth_sum is not None:
            step["err_sum_w"] = _rel_err(W, truth_sum)
        steps.append(step)
    return W, steps


def estimate_sum_w(X: Any, Y: Any, *, truth: Any = None, improve: bool = True,
                   fractions: Sequence[float] = DEFAULT_FRACTIONS, min_rows: int | None = None,
                   ) -> tuple[np.ndarray, PhaseRecord]:
    """Phase 1: crude Ŵ⁰ = (1/kN) Σ s tᵀ, then (``improve``) trimmed single-token least squares rounds
    with kept fractions ``fractions``. Returns (Σ̂W (d, d), PhaseRecord "1-sum-w")."""
    t0 = time.perf_counter()
    X, Y = check_data(X, Y)
    N, k, d = X.shape
    fr = [float(f) for f in fractions]
    if any(not (0.0 < f <= 1.0) for f in fr):
        raise ValueError(f"fractions must lie in (0, 1], got {list(fractions)}")
    min_rows = 3 * d if min_rows is None else int(min_rows)
    if min_rows < d:
        raise ValueError(f"min_rows must be >= d = {d}, got {min_rows}")
    rec = PhaseRecord("1-sum-w")
    S = None if truth is None else truth.ws.sum(0)
    W0 = crude_sum_w(X, Y)
    rec.figures.update(n_examples=N, crude_norm=float(np.linalg.norm(W0)))
    if S is not None:
        rec.truth["err_crude"] = _rel_err(W0, S)
    W = W0
    if improve and N * k >= min_rows:
        W, steps = trimmed_rounds(X, Y, W0, fr, min_rows=min_rows, truth_sum=S)
        rec.figures["trimmed_steps"] = steps
        rec.figures["estimator"] = "trimmed single-token least squares (deviation; method_phases_1_3.md)"
        if S is not None:
            rec.truth["err_improved"] = _rel_err(W, S)
            rec.truth["err_per_step"] = [s.get("err_sum_w") for s in steps]
    else:
        rec.figures["estimator"] = "crude (1/kN) Σ s tᵀ"
        if improve:
            rec.message = f"too few rows ({N * k}) for the trimmed refit (need {min_rows}); crude estimate kept"
    if S is not None:
        rec.truth["err_sum_w"] = _rel_err(W, S)
    rec.time = time.perf_counter() - t0
    return W, rec
