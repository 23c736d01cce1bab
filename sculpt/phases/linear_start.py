"""Heads from the near-uniform (linear-attention) regime: a start for the polish where the agreement test is blind.

Around uniform attention softmax_j(ℓ) ≈ (1 + ℓ_j − ℓ̄)/k, so the layer becomes linear attention,

    y_a ≈ x̄ᵀ Σ_i W_i + x_aᵀ Σ_i Θ_i C W_i,   C = (1/k) Σ_j x_j x_jᵀ − x̄ x̄ᵀ,

linear in the lifted parameter L = Σ_i vec(Θ_i) ⊗ W_i (Yau et al., arXiv 2410.10101). ``fit_lifted`` learns
Σ W_i and the part of L the data see (symmetric in the two middle indices, since C is symmetric) by one least
squares in d + d²(d + 1)/2 features per output coordinate (convex; its normal equations, accumulated per example,
cost about N·d⁶/4 flops and d⁶/4 · 8 bytes: 38 MB at d = 16, 2.3 GB at d = 32). ``split_lifted`` splits it into m heads
by alternating least squares (each half-step is a small linear least squares), and ``linear_start`` returns
those heads as a start (docs/method.md#linear-lead).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..result import PhaseRecord
from ..settings import LinearSettings, Settings

__all__ = [
    "lifted_features",
    "lifted_feature_count",
    "fit_lifted",
    "split_lifted",
    "linear_start",
    "linear_examples",
    "linear_route_applies",
    "LiftedFit",
]


def lifted_feature_count(d: int) -> int:
    """Features of the lifted regression: d + d·d(d + 1)/2 (2,192 at d = 16, 16,928 at d = 32)."""
    return d + d * d * (d + 1) // 2


def linear_examples(d: int, k: int, settings: LinearSettings) -> int:
    """Examples the lifted regression reads at most: ⌈rows_per_feature · features / k⌉."""
    return -(-settings.rows_per_feature * lifted_feature_count(d) // k)


def _pairs(d: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(d)


def lifted_features(X: np.ndarray) -> np.ndarray:
    """The linear-attention features of every output row: [x̄, x_a ⊗ C_sym] with C_sym the upper triangle of
    C = (1/k) Σ_j x_j x_jᵀ − x̄ x̄ᵀ, off-diagonal entries doubled.

    Parameters
    ----------
    X : np.ndarray, shape (N, k, d)
        Inputs.

    Returns
    -------
    np.ndarray, shape (N·k, d + d·d(d + 1)/2)
        One row per output row (n, a), in that order.
    """
    n, k, d = X.shape
    iq, ir = _pairs(d)
    xb = X.mean(1)
    C = np.einsum("njq,njr->nqr", X, X) / k - xb[:, :, None] * xb[:, None, :]
    Cs = C[:, iq, ir] * np.where(iq == ir, 1.0, 2.0)
    Q = (X[:, :, :, None] * Cs[:, None, None, :]).reshape(n, k, -1)
    return np.concatenate([np.repeat(xb[:, None], k, 1), Q], -1).reshape(n * k, -1)


@dataclass(frozen=True)
class LiftedFit:
    """The lifted regression: ``sum_w`` (d, d), the coefficient of x̄; ``lifted`` (d, T, d), T = d(d+1)/2, with
    lifted[p, (q, r), e] = ½ Σ_i (Θ_i[p,q] W_i[r,e] + Θ_i[p,r] W_i[q,e]) for q <= r; ``rel_residual``: the
    held-out relative MSE of the linear model (how linear the layer is); ``examples`` read."""

    sum_w: np.ndarray
    lifted: np.ndarray
    rel_residual: float
    examples: int


#: an alternating least-squares run stops when a sweep lowers the relative residual by less than this fraction
ALS_STALL = 1e-4
#: examples per block of the lifted normal equations (a block's features: 500·k rows × 2,192 at d = 16)
CHUNK = 500
#: Tikhonov ridge of the lifted normal equations, relative to their mean diagonal (keeps them solvable when
#: the tokens leave a feature unseen, e.g. ±1 tokens' constant diagonal of x xᵀ)
RIDGE = 1e-9


def linear_route_applies(d: int, k: int, m: int, settings: Settings) -> bool:
    """Whether the linear route runs phases 2–5: it is enabled, its lifted regression is affordable
    (``max_features``) and the body route is refused for (d, k, m) (``sculpt.routes.sculpting.refusal``).

    Parameters
    ----------
    d, k, m : int
        Token dimension, tokens per example, heads.
    settings : Settings
        The call's settings.

    Returns
    -------
    bool
    """
    from ..routes.sculpting import refusal

    s = settings.linear
    if not s.enabled or lifted_feature_count(d) > s.max_features:
        return False
    return refusal(d, k, m, settings) is not None


def _triu_index(n: int) -> np.ndarray:
    """(n, n) map from (i, j) to the position of (min, max) in ``np.triu_indices(n)``."""
    iu = np.triu_indices(n)
    idx = np.empty((n, n), dtype=np.intp)
    idx[iu] = np.arange(iu[0].size)
    idx[iu[1], iu[0]] = idx[iu]
    return idx


def _normal_equations(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FᵀF and FᵀY for F = ``lifted_features(X)``, accumulated in blocks of ``CHUNK`` examples without forming F:
    an example's rows share x̄ and C, so its x_a ⊗ C block contributes (Σ_a x_a x_aᵀ) ⊗ (c cᵀ), and both
    factors are symmetric: one (d(d+1)/2, T(T+1)/2) product per block, unpacked once at the end (k times fewer
    flops than from the rows, and 4 times fewer than the full (d², T²) product)."""
    n_all, k, d = X.shape
    iq, ir = _pairs(d)
    T = iq.size
    id_, it_ = np.triu_indices(d), np.triu_indices(T)
    nf = lifted_feature_count(d)
    G, B = np.zeros((nf, nf)), np.zeros((nf, d))
    P = np.zeros((id_[0].size, it_[0].size))
    for s0 in range(0, n_all, CHUNK):
        Xc, Yc = X[s0 : s0 + CHUNK], Y[s0 : s0 + CHUNK]
        n = Xc.shape[0]
        xb = Xc.mean(1)
        A = Xc.transpose(0, 2, 1) @ Xc  # Σ_a x_a x_aᵀ, (n, d, d)
        c = (A / k - xb[:, :, None] * xb[:, None, :])[:, iq, ir] * np.where(iq == ir, 1.0, 2.0)  # (n, T)
        P += A[:, id_[0], id_[1]].T @ (c[:, it_[0]] * c[:, it_[1]])
        sx = Xc.sum(1)  # Σ_a x_a = k x̄
        cross = (c.T @ (sx[:, :, None] * xb[:, None, :]).reshape(n, d * d)).reshape(T, d, d).transpose(1, 0, 2)
        G[d:, :d] += cross.reshape(d * T, d)
        G[:d, :d] += k * xb.T @ xb
        B[:d] += xb.T @ Yc.sum(1)
        XY = (Xc.transpose(0, 2, 1) @ Yc).reshape(n, d * d)  # X_nᵀ Y_n
        B[d:] += (c.T @ XY).reshape(T, d, d).transpose(1, 0, 2).reshape(d * T, d)
    G[:d, d:] = G[d:, :d].T
    jd, jt = _triu_index(d), _triu_index(T)
    G[d:, d:] = P[jd[:, None, :, None], jt[None, :, None, :]].reshape(d * T, d * T)
    return G, B


def fit_lifted(X: np.ndarray, Y: np.ndarray) -> LiftedFit:
    """Least squares of Y on the linear-attention features (``lifted_features``), accumulated in chunks of
    examples; the last tenth of the examples is held out to measure the model's relative MSE.

    Parameters
    ----------
    X, Y : np.ndarray, shape (N, k, d)
        Inputs and outputs.

    Returns
    -------
    LiftedFit
        Σ̂W, the lifted parameter's visible part and the held-out relative MSE.
    """
    n, _, d = X.shape
    held = max(1, n // 10)
    nf = lifted_feature_count(d)
    G, B = _normal_equations(X[: n - held], Y[: n - held])
    coef = np.linalg.solve(G + RIDGE * np.trace(G) / nf * np.eye(nf), B)
    Fh = lifted_features(X[n - held :])
    Yh = Y[n - held :].reshape(-1, d)
    res = Yh - Fh @ coef
    rel = float((res**2).sum() / max(float((Yh**2).sum()), 1e-300))
    return LiftedFit(coef[:d], coef[d:].reshape(d, -1, d), rel, n)


def _theta_design(ws: np.ndarray) -> np.ndarray:
    """D (T·d, m·d) with lifted[p, t, e] = Σ_{i,q'} D[(t,e), (i,q')] Θ_i[p,q'] given the W_i:
    D[(t,e), (i,q')] = ½(δ_{q',q_t} W_i[r_t,e] + δ_{q',r_t} W_i[q_t,e])."""
    m, d, _ = ws.shape
    iq, ir = _pairs(d)
    T, ar = iq.size, np.arange(iq.size)
    D = np.zeros((T, d, m, d))
    for i in range(m):
        D[ar, :, i, iq] += 0.5 * ws[i][ir]
        D[ar, :, i, ir] += 0.5 * ws[i][iq]
    return D.reshape(T * d, m * d)


def _w_design(thetas: np.ndarray) -> np.ndarray:
    """H (d·T, m·d) with lifted[p, t, e] = Σ_{i,r'} H[(p,t), (i,r')] W_i[r',e] given the Θ_i:
    H[(p,t), (i,r')] = ½(Θ_i[p,q_t] δ_{r',r_t} + Θ_i[p,r_t] δ_{r',q_t})."""
    m, d, _ = thetas.shape
    iq, ir = _pairs(d)
    T, ar = iq.size, np.arange(iq.size)
    H = np.zeros((d, T, m, d))
    for i in range(m):
        H[:, ar, i, ir] += 0.5 * thetas[i][:, iq]
        H[:, ar, i, iq] += 0.5 * thetas[i][:, ir]
    return H.reshape(d * T, m * d)


def _als(lifted: np.ndarray, ws: np.ndarray, iters: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Alternating least squares for lifted ≈ sym(Σ_i Θ_i ⊗ W_i) from the W_i ``ws``; (Θ, W, relative
    residual)."""
    d, T, _ = lifted.shape
    m = ws.shape[0]
    target_p = lifted.reshape(d, T * d).T  # (T·d, d): one column per p
    target_e = lifted.reshape(d * T, d)  # (d·T, d): one column per e
    norm = float(np.linalg.norm(lifted))
    thetas = np.zeros((m, d, d))
    rel = np.inf
    for _ in range(iters):
        sol = np.linalg.lstsq(_theta_design(ws), target_p, rcond=None)[0]  # (m·d, d): [(i,q'), p]
        thetas = sol.reshape(m, d, d).transpose(0, 2, 1)
        Hd = _w_design(thetas)
        ws = np.linalg.lstsq(Hd, target_e, rcond=None)[0].reshape(m, d, d)
        new = float(np.linalg.norm(Hd @ ws.reshape(m * d, d) - target_e)) / max(norm, 1e-300)
        if new > (1 - ALS_STALL) * rel:
            rel = new
            break
        rel = new
    return thetas, ws, rel


def split_lifted(
    fit: LiftedFit, m: int, settings: LinearSettings | None = None, *, rng: np.random.Generator
) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """m heads (Θ_i, W_i) whose lifted parameter matches ``fit.lifted`` (alternating least squares from each of
    ``starts`` random W starts), each head's scale fixed by Σ_i W_i ≈ ``fit.sum_w`` (the lifted parameter only
    sees Θ_i ⊗ W_i).

    Parameters
    ----------
    fit : LiftedFit
        The lifted regression.
    m : int
        Heads.
    settings : LinearSettings, optional
        ``starts`` random starts of at most ``iters`` sweeps each.
    rng : np.random.Generator
        Draws the starts.

    Returns
    -------
    list of (thetas, ws, rel)
        One split per start, best (smallest relative residual on the lifted parameter) first; thetas and ws of
        shape (m, d, d).
    """
    s = settings or LinearSettings()
    d = fit.sum_w.shape[0]
    out = []
    for _ in range(s.starts):
        thetas, ws, rel = _als(fit.lifted, rng.standard_normal((m, d, d)) / np.sqrt(d), s.iters)
        # Σ_i c_i W_i ≈ Σ W: each head's scale (Θ_i / c_i, c_i W_i keeps Θ_i ⊗ W_i)
        c = np.linalg.lstsq(ws.reshape(m, -1).T, fit.sum_w.reshape(-1), rcond=None)[0]
        c = np.where(np.abs(c) > 1e-3, c, 1.0)
        out.append((thetas / c[:, None, None], ws * c[:, None, None], rel))
    return sorted(out, key=lambda t: t[2])


def linear_start(
    fit: LiftedFit, m: int, settings: LinearSettings | None = None, *, rng: np.random.Generator
) -> tuple[np.ndarray, PhaseRecord]:
    """Phase 5 on the linear route: the splits of the lifted regression into m heads, as phase 6's candidates
    (phase 6 keeps the one that fits held-out examples best, and the polish starts from it).

    Parameters
    ----------
    fit : LiftedFit
        Phase 1's lifted regression (``fit_lifted``).
    m : int
        Heads.
    settings : LinearSettings, optional
        The split's starts and sweeps.
    rng : np.random.Generator
        Draws the split's starts.

    Returns
    -------
    thetas : np.ndarray, shape (starts, m, d, d)
        The candidates, best split first.
    record : PhaseRecord
        "5-heads": each split's relative residual on the lifted parameter.
    """
    t0 = time.perf_counter()
    splits = split_lifted(fit, m, settings, rng=rng)
    rec = PhaseRecord("5-heads")
    rec.figures.update(
        split_rel_residual=[rel for _, _, rel in splits], start="linear-attention splits (docs/method.md#linear-lead)"
    )
    rec.time = time.perf_counter() - t0
    return np.stack([th for th, _, _ in splits]), rec
