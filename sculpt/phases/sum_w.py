"""Phase 1: estimate Σ_i W_i.

Crude estimator (Chen & Li; docs/method.md#recon-phase-1): Ŵ⁰ = (1/kN) Σ_n s_n t_nᵀ with s = Σ_a x_a, t = Σ_b y_b, unbiased
when every Θ_i = 0 because E[s sᵀ] = k I. Improved estimator (documented deviations: docs/method.md#recon-certifying-design and "Phase 1" below it):
(a) trimmed single-token least squares: each output row is fitted by its best single token,
y_a ≈ x_jᵀ Ŵ (j = argmin_j ‖y_a − x_jᵀ Ŵ‖); the rows with the smallest relative residual (nearly 1-sparse
attention in every head) are kept and Ŵ is refitted on them, with a shrinking kept fraction;
(b) a variable-projection Gauss–Newton refit on the agreeing rows (min over W of the affine-simplex
regression residuals), exact for m = 1 and a 2.5–4× improvement for m = 2 at k = 4; it is kept only when a
held-out agreement residual improves (``agreement_criterion``; where the agreement test is blind, e.g. at
(8,8,2), the refit makes Σ̂W 1.3–30× worse and is rejected).

A held-out single-token criterion (``holdout_criterion``) sizes the estimate's error (``error_scale`` ×
max(1, k/4) × criterion; docs/method.md#phase-1): a failure blames the instance only when Σ W_i is
ill-conditioned even allowing for that error (Weyl's bound, ``cond_lower_bound``), and otherwise says that phase 1
had too few examples or too long sequences.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike

from .._checks import check_data
from ..errors import PhaseFailed
from ..result import PhaseRecord
from ..settings import ProblemSize, SumWSettings
from ..toolkit.forward_pass import error_chunk
from ._simplex import affine_weights, simplex_lstsq, token_gram_ok

if TYPE_CHECKING:
    from ..model import MultiHeadAttention

__all__ = [
    "estimate_sum_w",
    "crude_sum_w",
    "single_token_residuals",
    "trimmed_rounds",
    "agreement_refit",
    "holdout_criterion",
    "agreement_criterion",
    "cond_lower_bound",
]

#: a refit's Gauss–Newton steps stop once the step is below this, relative to ‖W‖ (converged to rounding)
STEP_TOL = 1e-7
#: Tikhonov ridge of the Gauss–Newton normal equations, relative to their mean diagonal (keeps them solvable
#: when the rows leave some direction of W unseen)
GN_RIDGE = 1e-9
#: unknowns (s·d) of the Gauss–Newton step from which it is solved by preconditioned conjugate gradients with
#: products through the rows' factors (O(R·s·d) each) instead of forming and factoring the (s·d)² normal
#: equations (d = 64: 2 × 2 s for 4,096 unknowns on 1,000 rows)
GN_CG_FROM = 1024
#: the conjugate-gradient solve stops at this residual, relative to the right-hand side's
GN_CG_RTOL = 1e-12
#: conjugate-gradient iterations at most (the block preconditioner (ZᵀZ)⁻¹ ⊗ I leaves the spectrum in (0, 1])
GN_CG_MAX_ITER = 500
#: d² from which the trimmed rounds recompute residuals only where a row can be kept (``_ResidualBounds``)
TRIM_PRUNE_FROM = 1024
#: rounding allowance of those bounds (a residual's own rounding is below 1e-7: √ε of the squared distance)
TRIM_PRUNE_SLACK = 1e-6
#: the share of best-fitted rows whose single-token residual tells nearly uniform heads apart (the record's
#: ``single_token_residual_q005``)
SINGLE_TOKEN_QUANTILE = 0.005

#: one trimmed round's figures
Step = dict[str, float | str]


def crude_sum_w(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The crude moment estimate of Σ_i W_i: Ŵ⁰ = (1/kN) Σ_n s_n t_nᵀ, s = Σ_a x_a, t = Σ_b y_b.

    Parameters
    ----------
    X, Y : np.ndarray, shape (N, k, d)
        Inputs and outputs.

    Returns
    -------
    np.ndarray, shape (d, d)
        Ŵ⁰ (unbiased when every Θ_i = 0).
    """
    N, k, _ = X.shape
    return np.asarray(X.sum(1).T @ Y.sum(1) / (k * N))


def single_token_residuals(
    X: np.ndarray, Y: np.ndarray, W: np.ndarray, examples: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """For every output row (n, a): the single token that fits it best under W and how well.

    Parameters
    ----------
    X, Y : np.ndarray, shape (N, k, d)
        Inputs and outputs.
    W : np.ndarray, shape (d, d)
        An estimate of Σ_i W_i.
    examples : np.ndarray of int, optional
        Only these examples (rows of X and Y), gathered a chunk at a time; the results have one row per entry.

    Returns
    -------
    j : np.ndarray of int, shape (N, k)
        j = argmin_j ‖y_a − x_jᵀ W‖.
    rel : np.ndarray, shape (N, k)
        ‖y_a − x_jᵀ W‖ / ‖y_a‖ at that j.
    """
    _, k, d = X.shape
    N = X.shape[0] if examples is None else examples.size
    j = np.empty((N, k), dtype=np.intp)
    rel = np.empty((N, k))
    step = error_chunk(k, d)
    for lo in range(0, N, step):  # chunks bound the (n, k, d) temporaries; 2-D products (BLAS, not per example)
        if examples is None:
            x, y = X[lo : lo + step], Y[lo : lo + step]
        else:
            x, y = np.take(X, examples[lo : lo + step], axis=0), np.take(Y, examples[lo : lo + step], axis=0)
        n = x.shape[0]
        P = (x.reshape(n * k, d) @ W).reshape(n, k, d)
        yy = np.einsum("nad,nad->na", y, y)
        pp = np.einsum("njd,njd->nj", P, P)
        D2 = y @ P.transpose(0, 2, 1)
        D2 *= -2.0
        D2 += yy[:, :, None]
        D2 += pp[:, None, :]
        jc = D2.argmin(-1)
        best = np.take_along_axis(D2, jc[..., None], -1)[..., 0]
        j[lo : lo + n] = jc
        rel[lo : lo + n] = np.sqrt(np.maximum(best, 0.0) / np.maximum(yy, 1e-300))
    return j, rel


def _rel_err(W: np.ndarray, S: np.ndarray) -> float:
    return float(np.linalg.norm(W - S) / max(np.linalg.norm(S), 1e-300))


def trimmed_rounds(
    X: np.ndarray,
    Y: np.ndarray,
    W: np.ndarray,
    fractions: Sequence[float],
    *,
    min_rows: int,
    truth_sum: np.ndarray | None = None,
) -> tuple[np.ndarray, list[Step]]:
    """Trimmed single-token least squares: for each fraction f, keep the max(min_rows, f·N·k) rows with the
    smallest relative single-token residual under the current Ŵ and refit Ŵ = argmin Σ ‖y_a − x_jᵀ Ŵ‖². From
    ``TRIM_PRUNE_FROM`` (d²) on, a round after the first recomputes only the residuals that can be kept
    (``_ResidualBounds``): the same rows, and the residuals of the rows it does not read are bounds.

    Parameters
    ----------
    X, Y : np.ndarray, shape (N, k, d)
        Inputs and outputs.
    W : np.ndarray, shape (d, d)
        The starting estimate.
    fractions : sequence of float in (0, 1]
        The kept fraction of each round, in order.
    min_rows : int
        Rows a round keeps at least.
    truth_sum : np.ndarray, shape (d, d), optional
        The true Σ_i W_i: each round's error goes to its figures.

    Returns
    -------
    W : np.ndarray, shape (d, d)
        Ŵ after the last round (a round whose kept tokens are singular leaves Ŵ as it is).
    steps : list of dict
        One figures dict per round.
    """
    N, k, d = X.shape
    Yf = Y.reshape(-1, d)
    steps: list[Step] = []
    bounds = _ResidualBounds(X, Y) if d * d >= TRIM_PRUNE_FROM else None
    for f in fractions:
        keep = int(min(N * k, max(min_rows, round(f * N * k))))
        if bounds is None:
            j, rel = single_token_residuals(X, Y, W)
            r = rel.reshape(-1)
            idx = np.argpartition(r, keep - 1)[:keep]
            j_kept = j.reshape(-1)[idx]
        else:
            idx, j_kept, r = bounds.kept(W, keep)
        Z = X[idx // k, j_kept]  # each kept row's best token (gathered for the kept rows only)
        sv = np.linalg.svd(Z, compute_uv=False)
        if sv[-1] <= 1e-9 * sv[0]:
            steps.append({"fraction": float(f), "rows": keep, "status": "singular design, step skipped"})
            continue
        W = np.linalg.lstsq(Z, Yf[idx], rcond=None)[0]
        step: Step = {
            "fraction": float(f),
            "rows": keep,
            "cond": float(sv[0] / sv[-1]),
            "residual_q50": float(np.quantile(r[idx], 0.5)),
            "residual_max_kept": float(r[idx].max()),
        }
        if truth_sum is not None:
            step["err_sum_w"] = _rel_err(W, truth_sum)
        steps.append(step)
    return W, steps


class _ResidualBounds:
    """Every output row's relative single-token residual under the current Ŵ, computed again only where it can
    matter: moving Ŵ by ΔW moves min_j ‖y_a − x_jᵀŴ‖ by at most max_j ‖x_j‖·‖ΔW‖₂, so each row keeps bounds
    [lo, hi] on its residual, and a round recomputes only the examples with a row whose lower bound reaches the
    ``keep``-th smallest upper bound (no other row can be among the ``keep`` smallest). The rows kept are those of
    the full computation (to rounding); at d = 64 a round past the first reads 3–20 % of the examples."""

    def __init__(self, X: np.ndarray, Y: np.ndarray) -> None:
        self.X, self.Y = X, Y
        x_max = np.sqrt(np.einsum("njd,njd->nj", X, X).max(1))  # (N,)
        y_norm = np.sqrt(np.einsum("nad,nad->na", Y, Y))  # (N, k)
        self.reach = (x_max[:, None] / np.maximum(y_norm, 1e-300)).reshape(-1)  # |Δrel| per unit ‖ΔW‖₂
        self.W: np.ndarray | None = None
        self.lo = self.hi = np.zeros(0)
        self.j = np.zeros(0, dtype=np.intp)

    def kept(self, W: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ``keep`` rows (flat ids n·k + a) with the smallest residual under W, their best tokens, and the
        residuals of every row (exact where recomputed: every row that can be kept)."""
        k = self.X.shape[1]
        if self.W is None:
            j, rel = single_token_residuals(self.X, self.Y, W)
            self.j, self.lo, self.hi = j.reshape(-1), rel.reshape(-1), rel.reshape(-1).copy()
            rows = np.arange(self.lo.size)
        else:
            move = float(np.linalg.norm(W - self.W, 2)) * (1.0 + 1e-9)
            self.lo = self.lo - move * self.reach - TRIM_PRUNE_SLACK
            self.hi = self.hi + move * self.reach + TRIM_PRUNE_SLACK
            reach = np.partition(self.hi, keep - 1)[keep - 1]
            ex = np.unique(np.flatnonzero(self.lo <= reach) // k)
            rows = (ex[:, None] * k + np.arange(k)).reshape(-1)
            j, rel = single_token_residuals(self.X, self.Y, W, ex)
            self.j[rows], self.lo[rows], self.hi[rows] = j.reshape(-1), rel.reshape(-1), rel.reshape(-1)
        self.W = W
        idx = rows[np.argpartition(self.lo[rows], keep - 1)[:keep]]
        return idx, self.j[idx], self.lo


def _complement_projectors(T: np.ndarray) -> np.ndarray:
    """I − T T⁺ for a stack T (R, d, c): projectors onto each column space's complement.

    A batched reduced QR (P = I − Q Qᵀ) where every R factor is well conditioned, the SVD-based pinv only for
    the rest; the QR is 2.5× faster than a batched pinv on (1,280, 8, 3) and agrees with it to 1e-14."""
    if T.shape[2] == 0:  # one token per sequence: nothing for the pattern to absorb
        return np.broadcast_to(np.eye(T.shape[1]), (T.shape[0], T.shape[1], T.shape[1])).copy()
    Q, Rf = np.linalg.qr(T)
    diag = np.abs(np.diagonal(Rf, axis1=1, axis2=2))
    P = np.eye(T.shape[1]) - Q @ Q.transpose(0, 2, 1)
    bad = np.flatnonzero(diag.min(1) <= 1e-10 * np.maximum(diag.max(1), 1e-300))
    if bad.size:  # a (near-)dependent set of token directions: its column space has lower rank
        P[bad] = np.eye(T.shape[1]) - T[bad] @ np.linalg.pinv(T[bad])
    return P


def _gauss_newton_step(
    Xr: np.ndarray, B: np.ndarray, qq: np.ndarray, r: np.ndarray, basis: np.ndarray | None
) -> np.ndarray:
    """The Gauss–Newton step ΔW (d, d) of the variable-projection objective at B = Xr W, whose rows have the
    affine weights qq and residuals r (Kaufman's Jacobian; ``basis`` (s, d) restricts ΔW to basisᵀ C)."""
    R, _, d = B.shape
    T = (B[:, 1:] - B[:, :1]).transpose(0, 2, 1)  # (R, d, k−1): the directions q can absorb
    z = np.einsum("rj,rjd->rd", qq, Xr)  # (R, d)
    if (d if basis is None else basis.shape[0]) * d >= GN_CG_FROM:
        dW = _gauss_newton_cg(T, z if basis is None else z @ basis.T, r)
        return basis.T @ dW if basis is not None else dW
    Pp = _complement_projectors(T)  # (R, d, d)
    # ∂r_e/∂W[p, f] = −P⊥[e, f] z_p, so (P⊥ symmetric and idempotent) JᵀJ = Σ_rows (z zᵀ) ⊗ P⊥ and
    # Jᵀr = −Σ_rows z ⊗ P⊥r: one (R, s²)ᵀ(R, d²) product instead of the dense (R d, s d) Jacobian
    # (d² fewer flops per row)
    zb = z if basis is None else z @ basis.T  # (R, s)
    nb = zb.shape[1]
    Pr = np.einsum("ref,rf->re", Pp, r)
    ZZ = (zb[:, :, None] * zb[:, None, :]).reshape(R, nb * nb)
    H = (ZZ.T @ Pp.reshape(R, d * d)).reshape(nb, nb, d, d).transpose(0, 2, 1, 3).reshape(nb * d, nb * d)
    rhs_w = (zb.T @ Pr).reshape(-1)
    step = np.linalg.solve(H + GN_RIDGE * np.trace(H) / H.shape[0] * np.eye(H.shape[0]), rhs_w)
    dW = step.reshape(-1, d)
    return basis.T @ dW if basis is not None else dW


def _absorbed_bases(T: np.ndarray) -> np.ndarray:
    """Orthonormal bases (R, d, c) of the column spaces of T (R, d, c), padded with zero columns where a set of
    token directions is (nearly) dependent, so that I − Q Qᵀ is ``_complement_projectors``'s projector."""
    if T.shape[2] == 0:
        return T.copy()
    Q, Rf = np.linalg.qr(T)
    diag = np.abs(np.diagonal(Rf, axis1=1, axis2=2))
    bad = np.flatnonzero(diag.min(1) <= 1e-10 * np.maximum(diag.max(1), 1e-300))
    if bad.size:  # the left singular vectors of the nonzero singular values (pinv's rank) only
        U, sv = np.linalg.svd(T[bad], full_matrices=False)[:2]
        Q[bad] = U * (sv > 1e-15 * np.maximum(sv[:, :1], 1e-300))[:, None, :]
    return Q


def _gauss_newton_cg(T: np.ndarray, zb: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``_gauss_newton_step``'s ΔW (s, d) by conjugate gradients: H·V = Zᵀ P⊥(Z V) row by row with
    P⊥ = I − Q Qᵀ (``_absorbed_bases``), preconditioned by (ZᵀZ + ρI)⁻¹ ⊗ I, the same ridge ρ as the dense solve.
    Each product costs O(R·s·d) against the dense equations' (s·d)² entries."""
    Q = _absorbed_bases(T)  # (R, d, c)

    def perp(V: np.ndarray) -> np.ndarray:
        return V - np.einsum("rdc,rc->rd", Q, np.einsum("rdc,rd->rc", Q, V))

    d = T.shape[1]
    n_unknowns = zb.shape[1] * d
    trace = float(np.sum(zb**2, axis=1) @ (d - np.sum(Q**2, axis=(1, 2))))  # Σ_rows ‖z‖² tr P⊥
    ridge = GN_RIDGE * trace / n_unknowns
    G = zb.T @ zb + ridge * np.eye(zb.shape[1])
    factor = scipy.linalg.cho_factor(G, lower=True, check_finite=False)

    def hess(V: np.ndarray) -> np.ndarray:
        return zb.T @ perp(zb @ V) + ridge * V

    rhs = zb.T @ perp(r)
    x = np.zeros_like(rhs)
    res = rhs.copy()
    pre = scipy.linalg.cho_solve(factor, res, check_finite=False)
    direction = pre.copy()
    rho = float(np.sum(res * pre))
    stop = GN_CG_RTOL * float(np.linalg.norm(rhs))
    for _ in range(GN_CG_MAX_ITER):
        if float(np.linalg.norm(res)) <= stop:
            break
        Hd = hess(direction)
        alpha = rho / float(np.sum(direction * Hd))
        x += alpha * direction
        res -= alpha * Hd
        pre = scipy.linalg.cho_solve(factor, res, check_finite=False)
        rho, rho_old = float(np.sum(res * pre)), rho
        direction = pre + (rho / rho_old) * direction
    return x


def agreement_refit(
    X: np.ndarray,
    Y: np.ndarray,
    W: np.ndarray,
    *,
    n_rows: int,
    q_tol: float,
    max_iter: int,
    stall: float,
    stop_rms: float,
    basis: np.ndarray | None = None,
    examples: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, object]]:
    """Variable-projection Gauss–Newton on the agreeing rows: min_W Σ_rows min_{Σq=1} ‖y_a − qᵀ X W‖².

    Rows are fixed up front: the ``n_rows`` rows with the smallest simplex-regression residual under the
    current W and q̂ >= −q_tol (rows where all heads share a pattern; for m = 1 every row). Each step uses
    Kaufman's Jacobian: with q̂ the inner minimiser, B = X W and P⊥ the projector onto the complement of
    the directions {B_j − B_1} that q can absorb, r_a moves by −P⊥ ΔWᵀ(Xᵀq̂_a). From ``GN_CG_FROM`` unknowns the
    step is solved by conjugate gradients without forming its normal equations (``_gauss_newton_cg``).

    Parameters
    ----------
    X, Y : np.ndarray, shape (N, k, d)
        Inputs and outputs (checked by the caller).
    W : np.ndarray, shape (d, d)
        The starting estimate of Σ_i W_i.
    n_rows : int
        Agreeing rows the refit uses.
    q_tol : float
        A row needs q̂ >= −q_tol.
    max_iter : int
        Gauss–Newton steps at most.
    stall : float
        Stop when a step lowers the residual RMS by less than this fraction (m >= 2: the heads' disagreement
        floor, reached after one step); one head gains orders of magnitude per step.
    stop_rms : float
        Stop when the residual RMS is already at most this (fitted to rounding).
    basis : np.ndarray, shape (s, d), optional
        Restricts the update to ΔW = basisᵀ C.
    examples : np.ndarray of int, optional
        Rows are chosen among these examples only (None: all); the others are not copied out.

    Returns
    -------
    W : np.ndarray, shape (d, d)
        The refitted estimate (the input when fewer than d rows agree).
    info : dict
        "rows" used, "rms_per_iter" (the residual RMS before each step) and "rms_final" (under the returned
        W; absent when fewer than d rows agree).
    """
    N, k, d = X.shape
    fit = simplex_lstsq(X, Y, W)
    q = fit.q.reshape(-1, k)
    rel = fit.rel.reshape(-1)
    usable = (q.min(1) >= -q_tol) & np.repeat(token_gram_ok(X), k)
    if examples is not None:
        allowed = np.zeros(N, bool)
        allowed[examples] = True
        usable &= np.repeat(allowed, k)
    ok = np.flatnonzero(usable)
    rows = ok[np.argsort(rel[ok], kind="stable")[:n_rows]]
    hist: list[float] = []
    info: dict[str, object] = {"rows": int(rows.size), "rms_per_iter": hist}
    if rows.size < d:
        return W, info
    n_, a_ = np.divmod(rows, k)
    Xr, Yr = X[n_], Y[n_, a_]

    def inner(W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """B = X W, the affine-simplex weights q̂ (Σq = 1) of each row, its residual and their RMS."""
        B = Xr @ W  # (R, k, d)
        qq = affine_weights(B, np.einsum("rjd,rd->rj", B, Yr)[..., None])[..., 0]
        r = Yr - np.einsum("rj,rjd->rd", qq, B)  # (R, d)
        return B, qq, r, float(np.sqrt(np.mean(r**2)))

    stepped = False
    for _ in range(max_iter):
        B, qq, r, rms = inner(W)
        stepped = False
        if rms <= stop_rms:  # fitted to rounding (one head): a step would only confirm it
            hist.append(rms)
            break
        if hist and rms > (1.0 - stall) * hist[-1]:
            hist.append(rms)  # stalled (m >= 2: the heads' disagreement floor); keep the current W
            break
        hist.append(rms)
        dW = _gauss_newton_step(Xr, B, qq, r, basis)
        W = W + dW
        stepped = True
        if np.linalg.norm(dW) <= STEP_TOL * max(float(np.linalg.norm(W)), 1e-300):
            break
    info["rms_final"] = inner(W)[3] if stepped else hist[-1]
    return W, info


def holdout_criterion(X: np.ndarray, Y: np.ndarray, W: np.ndarray, fraction: float, rows: int) -> float:
    """The mean relative single-token residual of the max(``rows``, ``fraction``·N·k) output rows of (X, Y) best
    fitted by one token under W (all rows when there are fewer): small for the true Σ W_i, whose nearly one-hot
    rows it fits, and larger for a biased estimate, whatever the estimate was fitted on.

    Parameters
    ----------
    X, Y : np.ndarray, shape (N, k, d)
        Examples the estimate was not fitted on.
    W : np.ndarray, shape (d, d)
        An estimate of Σ_i W_i.
    fraction : float
        The share of the rows averaged (the best fitted).
    rows : int
        Rows averaged at least.

    Returns
    -------
    float
        The mean relative residual ‖y_a − x_jᵀW‖/‖y_a‖ of those rows (inf with no rows).
    """
    return _mean_of_best(single_token_residuals(X, Y, W)[1].reshape(-1), fraction, rows)


def agreement_criterion(X: np.ndarray, Y: np.ndarray, W: np.ndarray, fraction: float, rows: int) -> float:
    """The mean relative affine-simplex residual min_{Σq=1} ‖y_a − qᵀXW‖/‖y_a‖ of the max(``rows``,
    ``fraction``·N·k) output rows of (X, Y) best fitted by one shared pattern under W: the agreement refit's
    own objective, on examples it was not fitted on.

    Parameters
    ----------
    X, Y : np.ndarray, shape (N, k, d)
        Examples the estimate was not fitted on.
    W : np.ndarray, shape (d, d)
        An estimate of Σ_i W_i.
    fraction : float
        The share of the rows averaged (the best fitted).
    rows : int
        Rows averaged at least.

    Returns
    -------
    float
        Their mean relative residual (inf with no rows).
    """
    return _mean_of_best(simplex_lstsq(X, Y, W).rel.reshape(-1), fraction, rows)


def _mean_of_best(rel: np.ndarray, fraction: float, rows: int) -> float:
    """The mean of the max(``rows``, ``fraction``·size) smallest entries of ``rel`` (inf when it is empty)."""
    if rel.size == 0:
        return math.inf
    n = min(max(rows, round(fraction * rel.size)), rel.size)
    return float(np.partition(rel, n - 1)[:n].mean())


def cond_lower_bound(W: np.ndarray, rel_error: float) -> float:
    """The smallest condition number a matrix within ``rel_error``·‖W‖_F of W can have (Weyl: its singular
    values are within that distance of W's); 1 when the ball reaches a multiple of the identity's spread.

    Parameters
    ----------
    W : np.ndarray, shape (d, d)
        The estimate.
    rel_error : float
        Its relative (Frobenius) error bound.

    Returns
    -------
    float
        max(1, (σ_1 − δ)/(σ_d + δ)) with δ = rel_error·‖W‖_F.
    """
    sv = np.linalg.svd(W, compute_uv=False)
    delta = rel_error * float(np.linalg.norm(W))
    top, bottom = float(sv[0]) - delta, float(sv[-1]) + delta
    if bottom <= 0:
        return math.inf
    return max(1.0, top / bottom)


def _holdout_split(N: int, every: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ``every``-th example held out (a fixed stride: no draw, and no bias from the data's order); none
    when fewer than 2·every examples."""
    idx = np.arange(N)
    if N < 2 * every:
        return idx, idx[:0]
    held = idx % every == every - 1
    return idx[~held], idx[held]


def _refits(
    X: np.ndarray,
    Y: np.ndarray,
    W: np.ndarray,
    s: SumWSettings,
    S: np.ndarray | None,
    fit: np.ndarray,
    held: np.ndarray,
) -> tuple[np.ndarray, list[dict[str, object]], bool]:
    """Phase 1's ``vp_rounds`` agreement refits on the examples ``fit`` (``held``: the others), each re-selecting
    its rows under the last W. Returns (W, one info dict per refit, whether one pattern fits every selected row to
    rounding: then the refits stop, since another would re-select rows under the same W)."""
    Yh = np.take(Y, held, axis=0)
    fit_sq = float(np.vdot(Y, Y)) - float(np.vdot(Yh, Yh))  # Σ y² over ``fit`` without copying those examples
    stop_rms = s.exact_agreement * float(np.sqrt(max(fit_sq, 0.0) / max(fit.size * Y.shape[1] * Y.shape[2], 1)))
    steps: list[dict[str, object]] = []
    for _ in range(s.vp_rounds):
        W, info = agreement_refit(
            X,
            Y,
            W,
            n_rows=s.vp_rows,
            q_tol=s.vp_q_tol,
            max_iter=s.vp_max_iter,
            stall=s.vp_stall,
            stop_rms=stop_rms,
            examples=fit,
        )
        if S is not None:
            info["err_sum_w"] = _rel_err(W, S)
        steps.append(info)
        rms_final = info.get("rms_final")  # absent when fewer than d rows agree
        if isinstance(rms_final, float) and rms_final <= stop_rms:
            return W, steps, True
    return W, steps, False


def _improve(
    X: np.ndarray, Y: np.ndarray, W0: np.ndarray, s: SumWSettings, rec: PhaseRecord, S: np.ndarray | None
) -> np.ndarray:
    """The trimmed single-token rounds from the crude Ŵ⁰ on every example, then the agreement refits on the
    examples not held out; the refit is kept only when it fits every agreeing row exactly (one head) or lowers
    the held-out agreement residual (the trimmed rounds fit single-token residuals, not that one, so reading the
    held-out rows does not favour them there). Their figures (and truth figures when the true Σ W_i is ``S``) go
    to ``rec``."""
    assert s.min_rows is not None  # resolved
    fit, held = _holdout_split(X.shape[0], s.holdout_every)
    # too few examples to hold any out: judged in-sample
    Xh, Yh = (np.take(X, held, axis=0), np.take(Y, held, axis=0)) if held.size else (X, Y)
    rec.figures["holdout_examples"] = int(held.size)
    W, steps = trimmed_rounds(X, Y, W0, s.fractions, min_rows=s.min_rows, truth_sum=S)
    rec.figures["trimmed_steps"] = steps
    rec.figures["estimator"] = "trimmed single-token least squares (deviation; docs/method.md)"
    if S is not None:
        rec.truth["err_trimmed"] = _rel_err(W, S)
        rec.truth["err_per_step"] = [step.get("err_sum_w") for step in steps]
    crit = {"trimmed": holdout_criterion(Xh, Yh, W, s.holdout_fraction, s.holdout_rows)}
    W_r, vp_steps, exact = _refits(X, Y, W, s, S, fit, held)
    rec.figures["agreement_refit"] = vp_steps
    if s.vp_rounds:
        agree = {
            name: agreement_criterion(Xh, Yh, V, s.refit_fraction, s.holdout_rows)
            for name, V in (("trimmed", W), ("refit", W_r))
        }
        rec.figures["refit_criterion"] = agree
        accepted = exact or agree["refit"] < agree["trimmed"]
        rec.figures["refit_accepted"] = accepted
        if accepted:
            W = W_r
            crit["refit"] = holdout_criterion(Xh, Yh, W, s.holdout_fraction, s.holdout_rows)
            rec.figures["estimator"] += " + agreement variable-projection refit"
        else:
            rec.figures["estimator"] += " (agreement refit rejected: held-out agreement residual not lower)"
    if exact:
        rec.figures["exact_agreement"] = True
    rec.figures["holdout_criterion"] = crit
    rec.figures["criterion"] = crit.get("refit", crit["trimmed"])
    if S is not None:
        rec.truth["err_improved"] = _rel_err(W, S)
        rec.truth["err_refit"] = _rel_err(W_r, S)
        rec.truth["err_per_vp_round"] = [v.get("err_sum_w") for v in vp_steps]
    return W


def _uncertainty(X: np.ndarray, Y: np.ndarray, W: np.ndarray, s: SumWSettings, rec: PhaseRecord) -> float:
    """Σ̂W's relative error as the error model sizes it: ``error_scale`` × max(1, k/4) × the held-out criterion
    (the single-token rows' leftover attention biases the estimate, more so as k grows); into the record."""
    crit = rec.figures.get("criterion")
    if not isinstance(crit, float):  # the crude estimate only: judged on every row
        crit = holdout_criterion(X, Y, W, s.holdout_fraction, s.holdout_rows)
        rec.figures["criterion"] = crit
    u = s.error_scale * max(1.0, X.shape[1] / 4.0) * crit
    rec.figures["rel_uncertainty"] = u
    return u


def _check_conditioning(X: np.ndarray, Y: np.ndarray, W: np.ndarray, s: SumWSettings, rec: PhaseRecord) -> None:
    """cond(Σ̂W) and the lowest condition number within its uncertainty (``cond_lower``) into the record;
    PhaseFailed above ``max_cond``: naming a singular Σ W_i only when ``cond_lower`` is above ``max_cond`` too,
    nearly uniform heads when no row is fitted by a single token, and too few examples (or too long sequences)
    for phase 1 otherwise.

    The estimator rests on rows one token explains; with nearly uniform attention in every head there are none
    (torch.nn.MultiheadAttention's own initialisation, ‖Θ_i‖_F ≈ 0.5: the best 0.5 % of rows are fitted to
    0.7–2.9 relative, against <= 0.09 for every planted family at scale 2.5), and the estimate is then wrong
    (61 % off, cond 2e3–6e5 against a true 97–876)."""
    N, k, _ = X.shape
    sv = np.linalg.svd(W, compute_uv=False)
    cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else math.inf
    rec.figures["cond"] = cond
    u = _uncertainty(X, Y, W, s, rec)
    low = cond_lower_bound(W, u)
    rec.figures["cond_lower"] = low
    # the improved estimator ran (its single-token fit is meaningful) and the estimate is ill-conditioned, the
    # only case in which the failure texts here and in the route read it: a pass over every row spared otherwise
    if "trimmed_steps" in rec.figures and cond > min(s.warn_cond, s.max_cond):
        q = float(np.quantile(single_token_residuals(X, Y, W)[1], SINGLE_TOKEN_QUANTILE))
        rec.figures["single_token_residual_q005"] = q
    if cond > s.warn_cond:
        rec.message = f"Σ W estimate ill-conditioned (condition number {cond:.3g}, uncertain by about {u:.0%}); " + (
            "Σ W_i may be singular" if low > s.warn_cond else f"Σ W_i's own may be as low as {low:.3g}"
        )
    if cond <= s.max_cond:
        return
    q005 = rec.figures.get("single_token_residual_q005", 0.0)
    if s.max_single_residual is not None and q005 > s.max_single_residual:
        # no single-token row: a singular Σ W_i and nearly uniform heads both leave none, and both make the
        # estimate noise (its uncertainty is large either way), so the text names both
        raise PhaseFailed(
            "1-sum-w",
            f"degenerate instance or nearly uniform attention: the estimated Σ W_i has "
            f"condition number {cond:.3g} > max_cond = {s.max_cond:g} and no output row is explained "
            f"by a single token (the best 0.5 % are fitted to {q005:.2g} relative residual > "
            f"{s.max_single_residual:g}); either Σ W_i is singular, or attention is nearly uniform "
            "in every head (small ‖Θ_i‖, e.g. torch.nn.MultiheadAttention's own initialisation), which "
            "the single-token estimator cannot tell apart (method='gradient' needs no Σ W)",
        )
    if low > s.max_cond:
        raise PhaseFailed(
            "1-sum-w",
            f"degenerate instance: the estimated Σ W_i has condition number {cond:.3g} > max_cond = "
            f"{s.max_cond:g}, and above {low:.3g} allowing for its uncertainty (about {u:.0%}, from held-out "
            "rows); the sculpting phases need Σ W_i invertible and well-conditioned (method='gradient' does not)",
        )
    raise PhaseFailed(
        "1-sum-w",
        f"too few examples for phase 1 at k = {k} ({N:,} examples) to tell: the estimated Σ W_i has condition number "
        f"{cond:.3g} > max_cond = {s.max_cond:g}, but it is uncertain by about {u:.0%} (held-out single-token "
        f"criterion {rec.figures['criterion']:.2g}), within which Σ W_i's could be as low as {low:.3g}: the data "
        f"do not show a degenerate instance; {_needs(N, k, u, s)}",
    )


def _needs(N: int, k: int, u: float, s: SumWSettings) -> str:
    """What would bring the uncertainty below ``target_error``: examples (taking the error to shrink like N^(−1/2),
    as it does up to k = ``bias_limited_k``) or, beyond, not more examples (the single-token estimator's bias does
    not shrink with N there)."""
    if k > s.bias_limited_k:
        return (
            f"at k = {k} > {s.bias_limited_k} the single-token estimator is biased by the attention its rows leave "
            "on other tokens and more examples do not help (docs/method.md#phase-1); use method='auto'"
        )
    n_need = math.ceil(N * (u / s.target_error) ** 2)
    return f"needs about N = {n_need:,} examples for {s.target_error:.0%} (error ∝ N^(−1/2)), or method='auto'"


def estimate_sum_w(
    X: ArrayLike,
    Y: ArrayLike,
    settings: SumWSettings | None = None,
    *,
    truth: MultiHeadAttention | None = None,
) -> tuple[np.ndarray, PhaseRecord]:
    """Phase 1: Σ̂W, an estimate of Σ_i W_i from single-token rows (module docstring).

    The crude Ŵ⁰ = (1/kN) Σ_n s_n t_nᵀ; then (``improve``) trimmed single-token least squares rounds keeping
    the ``fractions`` of rows, then ``vp_rounds`` agreement refits on the ``vp_rows`` best agreeing rows.

    Parameters
    ----------
    X, Y : array_like, shape (N, k, d)
        Inputs and the layer's outputs.
    settings : SumWSettings, optional
        Phase 1's settings (default: ``SumWSettings()``, what ``learn`` uses); "auto" fields are resolved here.
    truth : MultiHeadAttention, optional
        The true layer: errors against its Σ_i W_i go to the record's ``truth``.

    Returns
    -------
    W_sum : np.ndarray, shape (d, d)
        Σ̂W.
    record : PhaseRecord
        "1-sum-w"; ``figures["exact_agreement"]`` is True when one pattern fits every agreeing row to rounding
        (one head: phase 3 then has nothing to refine); ``refit_accepted`` says whether the refit was kept,
        ``rel_uncertainty`` is the error model's relative error and ``cond_lower`` the lowest condition number
        within it.

    Raises
    ------
    ValueError
        Malformed data, or ``min_rows`` or ``vp_rows`` below d.
    PhaseFailed
        cond(Σ̂W) > ``max_cond``: a degenerate instance when even the lowest condition number within the
        estimate's uncertainty (``figures["cond_lower"]``) is above it (the later phases divide by Σ W_i; <= 10
        for planted layers, 52–6e7 when W_2 = −W_1); else nearly uniform attention or too few examples (or too
        long sequences) for phase 1.
    """
    t0 = time.perf_counter()
    X, Y = check_data(X, Y)
    N, k, d = X.shape
    s = (settings or SumWSettings()).resolve(ProblemSize.of(X, m=1))  # phase 1 does not depend on m
    assert s.min_rows is not None  # resolved
    if s.min_rows < d:
        raise ValueError(f"min_rows must be >= d = {d}, got {s.min_rows}")
    if s.vp_rows < d:
        raise ValueError(f"vp_rows must be >= d = {d}, got {s.vp_rows}")
    rec = PhaseRecord("1-sum-w")
    S = None if truth is None else truth.ws.sum(0)
    W0 = crude_sum_w(X, Y)
    rec.figures.update(n_examples=N, crude_norm=float(np.linalg.norm(W0)))
    if S is not None:
        rec.truth["err_crude"] = _rel_err(W0, S)
    if s.improve and N * k >= s.min_rows:
        W = _improve(X, Y, W0, s, rec, S)
    else:
        W = W0
        rec.figures["estimator"] = "crude (1/kN) Σ s tᵀ"
        if s.improve:
            rec.message = f"too few rows ({N * k}) for the trimmed refit (need {s.min_rows}); crude estimate kept"
    if S is not None:
        rec.truth["err_sum_w"] = _rel_err(W, S)
    _check_conditioning(X, Y, W, s, rec)
    rec.time = time.perf_counter() - t0
    return W, rec
