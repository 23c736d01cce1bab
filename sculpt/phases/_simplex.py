"""Batched affine-simplex least squares: q̂ = argmin_{1ᵀq = 1} ‖y − qᵀB‖² for many (B, y) at once.

Solved through the (k+1)×(k+1) KKT system [[B Bᵀ + ρI, 1], [1ᵀ, 0]] [q; λ] = [B y; 1] with a tiny ridge ρ
(docs/method.md#recon-prototype: without it the solve can be singular). The sign constraint q >= 0 is not imposed: a
row whose q̂ leaves the simplex by more than a tolerance is rejected by the caller, and when q̂ >= 0 it is
also the simplex-constrained minimiser. One solve per example serves all its k query rows (B = X ΣW is
shared), so the cost is one batched (N, k+1, k+1) solve with k right-hand sides. ``agreement_blind_dims`` counts
the head disagreements this regression's residual cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SimplexFit", "simplex_lstsq", "token_gram_ok", "token_distances", "agreement_blind_dims"]


@dataclass
class SimplexFit:
    """q (N, k, k): q[n, a] fits output row a of example n; residual (N, k) = ‖y_a − q̂ᵀ X ΣW‖;
    rel (N, k) = residual / ‖y_a‖."""

    q: np.ndarray
    residual: np.ndarray
    rel: np.ndarray


def simplex_lstsq(X: np.ndarray, Y: np.ndarray, W_sum: np.ndarray, *, ridge: float = 1e-12) -> SimplexFit:
    """For every example n and row a: q̂ = argmin_{Σq = 1} ‖y_a − qᵀ X_n ΣW‖ (vectorised over n)."""
    N, k, d = X.shape
    B = X @ W_sum  # (N, k, d): rows x_jᵀ ΣW
    G = B @ B.transpose(0, 2, 1)  # (N, k, k)
    scale = np.maximum(np.einsum("nii->n", G) / k, 1e-300)
    K = np.zeros((N, k + 1, k + 1))
    K[:, :k, :k] = G + (ridge * scale)[:, None, None] * np.eye(k)
    K[:, :k, k] = 1.0
    K[:, k, :k] = 1.0
    R = np.empty((N, k + 1, k))
    R[:, :k, :] = B @ Y.transpose(0, 2, 1)
    R[:, k, :] = 1.0
    S = np.linalg.solve(K, R)  # column a: (q for row a; λ)
    q = S[:, :k, :].transpose(0, 2, 1)  # (N, a, j)
    res = np.linalg.norm(Y - q @ B, axis=-1)
    rel = res / np.maximum(np.linalg.norm(Y, axis=-1), 1e-300)
    return SimplexFit(q, res, rel)


def token_gram_ok(X: np.ndarray, *, tol: float = 1e-6) -> np.ndarray:
    """(N,) mask of examples whose k tokens are linearly independent (smallest eigenvalue of X Xᵀ/d > tol)."""
    G = X @ X.transpose(0, 2, 1) / X.shape[2]
    return np.linalg.eigvalsh(G)[:, 0] > tol


def token_distances(X: np.ndarray) -> np.ndarray:
    """(N, k, k) Euclidean distances ‖x_j − x_r‖ (for ±1 tokens, 2·sqrt(Hamming distance))."""
    sq = np.einsum("nkd,nkd->nk", X, X)
    D2 = sq[:, :, None] + sq[:, None, :] - 2.0 * X @ X.transpose(0, 2, 1)
    return np.sqrt(np.maximum(D2, 0.0))


def agreement_blind_dims(m: int, k: int, d: int) -> int:
    """min(max(0, m(k−1) − d), (m−1)(k−1)): the dimension of the head disagreements an output row cannot reveal.
    A row's pattern deviations δ_i (Σ_j δ_ij = 0, k − 1 each) reach the output only through Σ_i δ_iᵀ X W_i; the
    common part is absorbed by the shared pattern q̂ (k − 1 directions of X Σ W), leaving d − (k − 1) directions
    for (m − 1)(k − 1) unknowns; with k − 1 > d every disagreement is invisible (docs/method.md#agreement-blind)."""
    m, k, d = int(m), int(k), int(d)
    return min(max(0, m * (k - 1) - d), (m - 1) * (k - 1))
