"""Batched affine-simplex least squares: q̂ = argmin_{1ᵀq = 1} ‖y − qᵀB‖² for many (B, y) at once.

Solved through the (k+1)×(k+1) KKT system [[B Bᵀ + ρI, 1], [1ᵀ, 0]] [q; λ] = [B y; 1] with a tiny ridge ρ
(docs/method.md#recon-prototype: without it the solve can be singular). The sign constraint q >= 0 is not imposed: a
row whose q̂ leaves the simplex by more than a tolerance is rejected by the caller, and when q̂ >= 0 it is
also the simplex-constrained minimiser. One solve per example serves all its k query rows (B = X ΣW is
shared), so the cost is one batched solve with k right-hand sides (``affine_weights``: the Schur complement
of the KKT system through a batched Cholesky of B Bᵀ + ρI). ``agreement_blind_dims`` counts
the head disagreements this regression's residual cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..settings import ProblemSize
from ..toolkit.forward_pass import error_chunk
from ..toolkit.small_spd import batched_cholesky_solve, batched_positive_definite

__all__ = ["SimplexFit", "simplex_lstsq", "affine_weights", "token_gram_ok", "token_distances", "agreement_blind_dims"]


#: largest k solved by the batched Cholesky (measured on 4,096 systems: k = 4 in 1.4 against 3.0 ms for numpy's
#: solve, k = 8 in 8.1 against 7.9 ms)
SMALL_K = 6
#: min L_jj² / max L_jj² of G̃'s Cholesky factor below which ``affine_weights`` solves by LU instead
AFFINE_RCOND = 1e-10


@dataclass
class SimplexFit:
    """q (N, k, k): q[n, a] fits output row a of example n; residual (N, k) = ‖y_a − q̂ᵀ X ΣW‖;
    rel (N, k) = residual / ‖y_a‖."""

    q: np.ndarray
    residual: np.ndarray
    rel: np.ndarray


def simplex_lstsq(X: np.ndarray, Y: np.ndarray, W_sum: np.ndarray, *, ridge: float = 1e-12) -> SimplexFit:
    """For every example n and row a: q̂ = argmin_{Σq = 1} ‖y_a − qᵀ X_n ΣW‖ (vectorised over n, in chunks of
    ``error_chunk`` examples, so the (n, k, d) temporaries stay a few MB whatever N)."""
    N, k, d = X.shape
    q, res, y_norm = np.empty((N, k, k)), np.empty((N, k)), np.empty((N, k))
    step = error_chunk(k, d)
    for lo in range(0, N, step):
        x, y = X[lo : lo + step], Y[lo : lo + step]
        n = x.shape[0]
        B = (x.reshape(n * k, d) @ W_sum).reshape(n, k, d)  # rows x_jᵀ ΣW; one 2-D product, not n small ones
        qc = affine_weights(B, B @ y.transpose(0, 2, 1), ridge=ridge).transpose(0, 2, 1)  # (n, a, j)
        q[lo : lo + n] = qc
        res[lo : lo + n] = np.linalg.norm(y - qc @ B, axis=-1)
        y_norm[lo : lo + n] = np.linalg.norm(y, axis=-1)
    return SimplexFit(q, res, res / np.maximum(y_norm, 1e-300))


def affine_weights(B: np.ndarray, R: np.ndarray, *, ridge: float = 1e-12) -> np.ndarray:
    """Q (N, k, r) with column c = argmin_{1ᵀq = 1} qᵀ G̃ q − 2 qᵀ R[:, :, c], G̃ = B Bᵀ + ρ I (ρ = ``ridge``·tr/k):
    the KKT system [[G̃, 1], [1ᵀ, 0]] [q; λ] = [R_c; 1] for every system at once, solved through the Schur
    complement q = U − λ v, G̃ [U, v] = [R, 1], λ = (1ᵀU − 1)/(1ᵀv), with the batched Cholesky of
    ``sculpt.toolkit.small_spd`` (k <= SMALL_K); numpy's LU of the KKT matrix for larger k and for any system
    whose G̃ fails to factor, has pivots more than 1/AFFINE_RCOND apart, or gives a non-finite result."""
    N, k, _ = B.shape
    G = B @ B.transpose(0, 2, 1)  # (N, k, k)
    scale = np.maximum(np.einsum("nii->n", G) / k, 1e-300)
    Gr = G + (ridge * scale)[:, None, None] * np.eye(k)
    r = R.shape[2]
    if k <= SMALL_K:
        rhs = np.empty((N, k, r + 1))
        rhs[:, :, :r] = R
        rhs[:, :, r] = 1.0
        # systems whose pivots spread by more than AFFINE_RCOND (nearly dependent tokens, where the Schur
        # complement loses digits that the KKT matrix's LU keeps) go to the LU below
        sol, ok = batched_cholesky_solve(Gr, rhs, rcond=AFFINE_RCOND)
        U, v = sol[:, :, :r], sol[:, :, r]
        den = v.sum(1)
        ok &= np.isfinite(den) & (np.abs(den) > 0.0)
        with np.errstate(all="ignore"):
            lam = (U.sum(1) - 1.0) / np.where(ok, den, 1.0)[:, None]  # (N, r)
            out = U - lam[:, None, :] * v[:, :, None]
        ok &= np.isfinite(out).all((1, 2))
        bad = np.flatnonzero(~ok)
    else:
        out, bad = np.empty((N, k, r)), np.arange(N)
    if bad.size:
        K = np.zeros((bad.size, k + 1, k + 1))
        K[:, :k, :k] = Gr[bad]
        K[:, :k, k] = 1.0
        K[:, k, :k] = 1.0
        rhs = np.empty((bad.size, k + 1, r))
        rhs[:, :k] = R[bad]
        rhs[:, k] = 1.0
        out[bad] = np.linalg.solve(K, rhs)[:, :k]
    return out


def token_gram_ok(X: np.ndarray, *, tol: float = 1e-6) -> np.ndarray:
    """(N,) mask of examples whose k tokens are linearly independent (smallest eigenvalue of X Xᵀ/d > tol,
    tested as a Cholesky factor of X Xᵀ/d − tol·I: 6–9× faster than ``eigvalsh`` on k = 4–8)."""
    G = X @ X.transpose(0, 2, 1) / X.shape[2]
    return batched_positive_definite(G, tol)


def token_distances(X: np.ndarray) -> np.ndarray:
    """(N, k, k) Euclidean distances ‖x_j − x_r‖ (for ±1 tokens, 2·sqrt(Hamming distance))."""
    sq = np.einsum("nkd,nkd->nk", X, X)
    D2 = sq[:, :, None] + sq[:, None, :] - 2.0 * X @ X.transpose(0, 2, 1)
    return np.sqrt(np.maximum(D2, 0.0))


def agreement_blind_dims(m: int, k: int, d: int) -> int:
    """min(max(0, m(k−1) − d), (m−1)(k−1)): the dimension of the head disagreements an output row cannot reveal
    (``sculpt.settings.ProblemSize.blind``, which says why; docs/method.md#agreement-blind)."""
    return ProblemSize(int(d), int(k), int(m)).blind
