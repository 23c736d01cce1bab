"""Phase 6: the projections W_i by linear least squares for each candidate set of heads; best on validation.

With the Θ_i fixed, F(X) = Σ_i A_i(X) X W_i is linear in (W_1..W_m): stacking the features
Z = [A_1 X | … | A_m X] (Nk × md) gives Y ≈ Z [W_1; …; W_m], one least-squares problem whose d output
columns share the design (solved at once). The candidate set with the smallest held-out error wins.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import permutations
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import linear_sum_assignment

from ..result import PhaseRecord
from ..toolkit.forward_pass import attention, features, layer_relative_mse  # re-exported: the one kernel
from ..toolkit.forward_pass import forward as _forward
from ..toolkit.forward_pass import relative_mse as _relative_mse

if TYPE_CHECKING:
    from ..model import MultiHeadAttention

__all__ = [
    "attention",
    "features",
    "predict",
    "layer_relative_mse",
    "CholeskyFactor",
    "least_squares_solve",
    "normal_factor",
    "solve_projections",
    "HeadErrors",
    "head_errors",
    "ProjectionFit",
    "fit_projections",
]

#: scipy's ``cho_factor`` form: (the triangular factor, whether it is the lower one)
CholeskyFactor = tuple[np.ndarray, bool]


def predict(thetas: np.ndarray, ws: np.ndarray, X: np.ndarray) -> np.ndarray:
    """F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i for X (N, k, d): ``sculpt.toolkit.forward_pass`` (chunked over N).

    Parameters
    ----------
    thetas, ws : np.ndarray
        The heads Θ_i and projections W_i, each (m, d, d).
    X : np.ndarray
        Inputs (N, k, d).

    Returns
    -------
    np.ndarray
        F(X), (N, k, d).
    """
    return _forward(thetas, ws, X)


def normal_factor(Z: np.ndarray) -> CholeskyFactor | None:
    """The Cholesky factor of ZᵀZ + 1e-13·(tr ZᵀZ / n)·I, or None when it fails.

    Parameters
    ----------
    Z : np.ndarray
        A design matrix (rows, n).

    Returns
    -------
    CholeskyFactor or None
        scipy's ``cho_factor`` form, for ``least_squares_solve`` (the tiny ridge keeps merged heads solvable).
    """
    G = Z.T @ Z
    G[np.diag_indices_from(G)] += 1e-13 * max(float(np.trace(G)) / G.shape[0], 1e-300)
    try:
        return cho_factor(G, check_finite=False)
    except np.linalg.LinAlgError:
        return None


def least_squares_solve(Z: np.ndarray, B: np.ndarray, factor: CholeskyFactor | None = None) -> np.ndarray:
    """argmin_W ‖Z W − B‖ through the normal equations; lstsq when ZᵀZ has no Cholesky factor.

    Normal equations are ample for ranking candidates and seeding the polish, and much cheaper than an SVD.

    Parameters
    ----------
    Z : np.ndarray
        The design (rows, n).
    B : np.ndarray
        Right-hand sides (rows, c).
    factor : CholeskyFactor, optional
        ``normal_factor(Z)`` when the caller has it already (computed here otherwise).

    Returns
    -------
    np.ndarray
        W, (n, c).
    """
    fac = normal_factor(Z) if factor is None else factor
    if fac is None:
        return np.linalg.lstsq(Z, B, rcond=None)[0]
    return cho_solve(fac, Z.T @ B, check_finite=False)


def solve_projections(thetas: np.ndarray, X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, float]:
    """The projections for fixed heads: W = argmin Σ_n ‖Y_n − Σ_i A_i(X_n) X_n W_i‖².

    Parameters
    ----------
    thetas : np.ndarray
        The heads Θ_i, (m, d, d).
    X, Y : np.ndarray
        Training inputs and outputs, (N, k, d).

    Returns
    -------
    ws : np.ndarray
        The W_i, (m, d, d).
    train_error : float
        The training relative MSE with them.
    """
    m, d = thetas.shape[0], X.shape[2]
    Z = features(thetas, X)
    Yf = Y.reshape(-1, d)
    Wst = least_squares_solve(Z, Yf)
    return Wst.reshape(m, d, d), _relative_mse(Z @ Wst, Yf)


class HeadErrors(TypedDict, total=False):
    """``head_errors``' figures: the largest relative Θ_i and W_i errors after matching the heads, and the
    matching (``permutation[i]`` is the estimated head matched to true head i; None when m differs)."""

    theta_error: float
    w_error: float
    permutation: list[int] | None


#: heads up to which ``_nearest_matching`` enumerates the permutations (720 at 6); above, an assignment solver
#: finds the same minimum (8! = 40,320 orderings took 4 s at m = 8, d = 64)
_ENUMERATE_HEADS = 6


def _nearest_matching(thetas: np.ndarray, T: np.ndarray) -> list[int]:
    """The permutation π minimising Σ_i ‖Θ_π(i) − Θ*_i‖² (``head_errors``)."""
    m = T.shape[0]
    if m > _ENUMERATE_HEADS:
        cost = np.sum((T[:, None] - thetas[None]) ** 2, axis=(2, 3))  # [true i, estimated j]
        return [int(j) for j in linear_sum_assignment(cost)[1]]
    best: tuple[float, list[int]] | None = None
    for cand in permutations(range(m)):
        e = sum(float(np.linalg.norm(thetas[list(cand)][i] - T[i]) ** 2) for i in range(m))
        if best is None or e < best[0]:
            best = (e, list(cand))
    assert best is not None  # permutations() yields at least one ordering, even for m = 0
    return best[1]


def head_errors(thetas: np.ndarray, ws: np.ndarray | None, truth: MultiHeadAttention) -> HeadErrors:
    """Relative errors against the true model, heads matched by the permutation nearest in Θ.

    Parameters
    ----------
    thetas : np.ndarray
        Estimated heads, (m, d, d).
    ws : np.ndarray or None
        Estimated projections, (m, d, d); None: no ``w_error``.
    truth : MultiHeadAttention
        The true layer.

    Returns
    -------
    HeadErrors
        max_i ‖Θ_π(i) − Θ*_i‖/‖Θ*_i‖ (``theta_error``), the same for W (``w_error``) and π (``permutation``);
        NaN errors when the head counts differ.
    """
    T = np.asarray(truth.thetas, dtype=float)
    Wt = np.asarray(truth.ws, dtype=float)
    m = T.shape[0]
    if thetas.shape[0] != m:
        return {"theta_error": float("nan"), "w_error": float("nan"), "permutation": None}
    perm = _nearest_matching(thetas, T)
    th_err = max(float(np.linalg.norm(thetas[perm[i]] - T[i]) / max(np.linalg.norm(T[i]), 1e-300)) for i in range(m))
    out: HeadErrors = {"theta_error": th_err, "permutation": perm}
    if ws is not None:
        out["w_error"] = max(
            float(np.linalg.norm(ws[perm[i]] - Wt[i]) / max(np.linalg.norm(Wt[i]), 1e-300)) for i in range(m)
        )
    return out


@dataclass
class ProjectionFit:
    """The selected heads and projections: ``thetas``/``ws`` (m, d, d), training and validation relative
    MSE of the winner, ``index`` of the winning candidate, and every candidate's validation error."""

    thetas: np.ndarray
    ws: np.ndarray
    train_error: float
    validation_error: float
    index: int
    validation_errors: np.ndarray = field(default_factory=lambda: np.empty(0))


def fit_projections(
    candidates: Sequence[np.ndarray] | np.ndarray,
    X: np.ndarray,
    Y: np.ndarray,
    X_val: np.ndarray,
    Y_val: np.ndarray,
    *,
    truth: MultiHeadAttention | None = None,
) -> tuple[ProjectionFit, PhaseRecord]:
    """Phase 6: for each candidate set of heads the projections by least squares on (X, Y); the candidate with
    the smallest validation relative MSE wins.

    Parameters
    ----------
    candidates : sequence of np.ndarray
        Candidate heads, each (m, d, d) (phase 5's ``HeadCandidates.thetas``).
    X, Y : np.ndarray
        Training examples the projections are fitted on, (N, k, d).
    X_val, Y_val : np.ndarray
        Validation examples the candidates are compared on.
    truth : MultiHeadAttention, optional
        The true layer, for the record's ``truth`` figures.

    Returns
    -------
    fit : ProjectionFit
        The winner and every candidate's validation error.
    record : PhaseRecord
        "6-projections"; status "failed" when no candidate has a finite validation error.
    """
    t0 = time.perf_counter()
    cands = [np.asarray(c, dtype=float) for c in candidates]
    if not cands:
        raise ValueError("candidates must contain at least one candidate set of heads")
    fits = []
    for th in cands:
        ws, tr = solve_projections(th, X, Y)
        fits.append((th, ws, tr, layer_relative_mse(th, ws, X_val, Y_val)))
    verr = np.array([f[3] for f in fits])
    verr_safe = np.where(np.isfinite(verr), verr, np.inf)
    i = int(np.argmin(verr_safe))
    th, ws, tr, va = fits[i]
    fit = ProjectionFit(th, ws, tr, va, i, verr)
    rec = PhaseRecord(
        "6-projections",
        figures={
            "candidates": len(cands),
            "examples": int(X.shape[0]),
            "validation_examples": int(X_val.shape[0]),
            "train_error": tr,
            "validation_error": va,
            "chosen": i,
            "validation_errors": [float(v) for v in verr[:20]],
        },
    )
    if truth is not None:
        rec.truth.update(head_errors(th, ws, truth))
    rec.time = time.perf_counter() - t0
    if not np.isfinite(va):
        rec.status, rec.message = "failed", "every candidate gave a non-finite validation error"
    return fit, rec
