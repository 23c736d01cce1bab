"""The argmax route for peaked heads (phases 2, 3 and 5 when most rows are one-hot in every head).

With ‖Θ_i‖ large every head's attention row is one-hot to machine precision in most rows, so the log-ratio
equalities that the sculpted body needs (rows where all heads share a non-trivial pattern) are almost absent:
two peaked heads have log-ratios that differ by tens of nats. Such rows carry their information in *which*
token each head picks. On a one-hot row, y_a = Σ_i x_{j_i}ᵀ W_i for an unknown label (j_1, …, j_m), so with
Σ̂W from phase 1 (exact on the rows where all heads pick the same token)

    y_a − x_{j_m}ᵀ Σ̂W = Σ_{i<m} (x_{j_i} − x_{j_m})ᵀ W_i,

a mixed linear regression over the k^m labels. ``split_projections`` solves it by alternating (label every
row by its best label, least squares on the best fraction of rows) from a few random starts, keeping the
first start that explains a set fraction of the rows exactly (none: ``PhaseFailed``); ``refine_projections``
then fits all W_i jointly on the rows its labels explain. With the W_i known and m·k <= d, every output row determines each head's attention row
separately (``head_attention``: one small constrained least-squares problem per example), and each head's
log-ratios log(p_ij / p_ir) = x_aᵀΘ_i(x_j − x_r) are linear equations in Θ_i alone (``heads_from_attention``),
as in the exact m = 1 route. Its settings are ``sculpt.settings.ArgmaxSettings``; measured in docs/method.md
("Peaked attention").
"""

from __future__ import annotations

import time
from itertools import permutations, product
from typing import TYPE_CHECKING

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from ..errors import PhaseFailed
from ..result import PhaseRecord
from ..settings import ArgmaxSettings
from .projections import head_errors, solve_projections
from .sum_w import single_token_residuals

if TYPE_CHECKING:
    from ..model import MultiHeadAttention

__all__ = [
    "onehot_fraction",
    "robust_sum_w",
    "argmax_route_applies",
    "split_projections",
    "refine_projections",
    "head_attention",
    "heads_from_attention",
    "argmax_heads",
]

#: relative ridge of ``head_attention``'s KKT Gram matrix: keeps the solve defined on examples whose stacked
#: rows x_jᵀ W_i are rank-deficient (``ok`` flags them; their rows are not used)
_KKT_RIDGE = 1e-14


def onehot_fraction(X: np.ndarray, Y: np.ndarray, W_sum: np.ndarray, tol: float) -> float:
    """Fraction of output rows fitted by one token under Σ̂W (rows where every head picks the same token).

    Parameters
    ----------
    X, Y : np.ndarray
        Examples, (N, k, d).
    W_sum : np.ndarray
        Σ̂W, (d, d).
    tol : float
        Relative single-token residual of a one-hot row (``ArgmaxSettings.onehot_tol``).

    Returns
    -------
    float
        The fraction of the N·k output rows with min_j ‖y_a − x_jᵀ Σ̂W‖/‖y_a‖ <= tol.
    """
    return float(np.mean(single_token_residuals(X, Y, W_sum)[1] <= tol))


def _best_token(X: np.ndarray, Y: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Best single token per row and its relative residual, by direct subtraction (the expanded
    ‖y‖² − 2yᵀp + ‖p‖² form bottoms out near 1e-8 relative, too coarse for one-hot rows)."""
    P = X @ W
    diff = Y[:, :, None, :] - P[:, None, :, :]
    D2 = np.einsum("najc,najc->naj", diff, diff)  # (N, a, j) squared distances
    j = D2.argmin(-1)
    best = np.sqrt(np.take_along_axis(D2, j[..., None], -1)[..., 0])
    return j, best / np.maximum(np.sqrt(np.einsum("nac,nac->na", Y, Y)), 1e-300)


def _csteps(X: np.ndarray, Y: np.ndarray, W: np.ndarray, h: int, max_cond: float, iters: int) -> np.ndarray:
    """Concentration steps of least trimmed squares on single-token rows: refit on the best-fitted rows, at
    least ``h`` of them and as many more as make the token design's condition number <= ``max_cond`` (the
    best-fitted rows alone crowd onto the tokens the current error is small on, and their design is
    singular in every peaked seed tried)."""
    N, k, d = X.shape
    Yf = Y.reshape(-1, d)
    for _ in range(iters):
        j, rel = _best_token(X, Y, W)
        r = rel.reshape(-1)
        order = np.argpartition(r, h - 1)
        Z = np.take_along_axis(X, j[..., None], 1).reshape(-1, d)
        ev = np.linalg.eigvalsh(Z[order[:h]].T @ Z[order[:h]])
        if not (ev[0] > 0 and ev[-1] <= max_cond**2 * ev[0]):  # crowded: grow the prefix until it is not
            order = np.argsort(r, kind="stable")
            Zo = Z[order]
            ns = np.unique(np.geomspace(h, r.size, 12).astype(int))
            # Gram matrices of the prefixes Zo[:n], n in ns, summed block by block
            G = np.cumsum([Zo[a:b].T @ Zo[a:b] for a, b in zip(np.r_[0, ns[:-1]], ns)], axis=0)
            ev = np.linalg.eigvalsh(G)
            good = (ev[:, 0] > 0) & (ev[:, -1] <= max_cond**2 * np.maximum(ev[:, 0], 1e-300))
            n = int(ns[np.argmax(good)]) if good.any() else r.size
        else:
            n = h
        sel = order[:n]
        W_new = _normal_solve(Z[sel], Yf[sel])
        done = np.linalg.norm(W_new - W) <= 1e-13 * max(float(np.linalg.norm(W)), 1e-300)
        W = W_new
        if done:
            break
    return W


def robust_sum_w(
    X: np.ndarray,
    Y: np.ndarray,
    W_starts: list[np.ndarray],
    settings: ArgmaxSettings | None = None,
    *,
    rng: np.random.Generator,
) -> tuple[np.ndarray, dict[str, object]]:
    """Σ̂W exact on the one-hot rows, by least-trimmed-squares concentration steps from several starts.

    The starts are ``W_starts`` and ``settings.robust_perturbed`` random perturbations (30 % of ‖Σ̂W‖) of the
    first; the result explaining the most rows to relative residual ``settings.robust_exact_tol`` wins (phase
    1's trimmed rounds can stall 1e-4–0.4 off on peaked data).

    Parameters
    ----------
    X, Y : np.ndarray
        Examples, (N, k, d).
    W_starts : list of np.ndarray
        Starting estimates of Σ̂W, (d, d) each (phase 1's first).
    settings : ArgmaxSettings, optional
        The ``robust_*`` fields (defaults: ``learn``'s).
    rng : np.random.Generator
        The perturbations.

    Returns
    -------
    W_sum : np.ndarray
        Σ̂W, (d, d).
    figures : dict
        ``exact_row_fraction`` of the winner and of every start.
    """
    s = settings or ArgmaxSettings()
    N, k, d = X.shape
    h = max(3 * d, int(s.robust_h_fraction * N * k))
    starts = list(W_starts)
    scale = np.linalg.norm(starts[0]) / d
    starts += [starts[0] + 0.3 * scale * rng.standard_normal((d, d)) for _ in range(s.robust_perturbed)]
    best: tuple[float, np.ndarray] | None = None
    counts = []
    for W0 in starts:
        W = _csteps(X, Y, W0, h, s.robust_max_cond, s.robust_iters)
        c = float(np.mean(_best_token(X, Y, W)[1] <= s.robust_exact_tol))
        counts.append(c)
        if best is None or c > best[0]:
            best = (c, W)
    assert best is not None
    return best[1], {"exact_row_fraction": best[0], "exact_row_fraction_per_start": counts}


def argmax_route_applies(frac: float, m: int, k: int, d: int, min_fraction: float) -> bool:
    """Whether the argmax route applies: m >= 2, many one-hot rows, and m·k <= d (each row then determines
    every head's attention row).

    Parameters
    ----------
    frac : float
        ``onehot_fraction`` of the rows.
    m, k, d : int
        Heads, tokens, token dimension.
    min_fraction : float
        The one-hot fraction needed (``ArgmaxSettings.detect_fraction`` or ``min_fraction``).

    Returns
    -------
    bool
    """
    return m >= 2 and m * k <= d and frac >= min_fraction


def _labels(k: int, m: int) -> np.ndarray:
    """All label tuples (j_1..j_m) that are not constant: (L, m)."""
    L = np.array(list(product(range(k), repeat=m)), dtype=np.intp)
    return L[~np.all(L == L[:, :1], axis=1)]


def _design(
    X: np.ndarray, Y: np.ndarray, W_sum: np.ndarray, rows: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For every row and label: T (R, L, (m−1)d) = [x_{j_i} − x_{j_m}]_{i<m}, Z (R, L, d) = y − x_{j_m}ᵀ Σ̂W."""
    N, k, d = X.shape
    n_, a_ = np.divmod(rows, k)
    Xr = X[n_]  # (R, k, d)
    last = Xr[:, labels[:, -1]]  # (R, L, d)
    T = np.concatenate([Xr[:, labels[:, i]] - last for i in range(labels.shape[1] - 1)], axis=-1)
    Z = Y[n_, a_][:, None, :] - last @ W_sum
    return T, Z


def _split_rows(
    X: np.ndarray, Y: np.ndarray, W_sum: np.ndarray, m: int, s: ArgmaxSettings, rng: np.random.Generator
) -> np.ndarray:
    """The token rows (flat indices n·k + a) no single token explains under Σ̂W, at most ``s.max_rows`` of them;
    ``PhaseFailed`` when fewer than 2(m − 1)d remain."""
    d = X.shape[2]
    _, rel = single_token_residuals(X, Y, W_sum)
    rows = np.flatnonzero(rel.reshape(-1) > s.onehot_tol)
    if rows.size > s.max_rows:
        rows = np.sort(rng.choice(rows, size=s.max_rows, replace=False))
    if rows.size < 2 * (m - 1) * d:
        raise PhaseFailed(
            "2-sculpt",
            f"argmax route: only {rows.size} rows where the heads pick different tokens, fewer than {2 * (m - 1) * d}",
        )
    return rows


def _alternate(T: np.ndarray, Z: np.ndarray, V: np.ndarray, n_keep: int, max_iter: int) -> np.ndarray:
    """One start of the mixed regression: label every row by its best label under V, refit V by least squares on
    the ``n_keep`` best-explained rows; until V stops moving or ``max_iter`` alternations."""
    R = T.shape[0]
    for _ in range(max_iter):
        E = Z - T @ V
        res = np.einsum("rlc,rlc->rl", E, E)  # (R, L) squared residuals: same argmin and order
        lab = res.argmin(1)
        rr = res[np.arange(R), lab]
        sel = np.argpartition(rr, n_keep - 1)[:n_keep]
        Vn = _normal_solve(T[sel, lab[sel]], Z[sel, lab[sel]])
        done = np.linalg.norm(Vn - V) <= 1e-12 * max(float(np.linalg.norm(V)), 1e-300)
        V = Vn
        if done:
            break
    return V


def split_projections(
    X: np.ndarray,
    Y: np.ndarray,
    W_sum: np.ndarray,
    m: int,
    settings: ArgmaxSettings | None = None,
    *,
    rng: np.random.Generator,
) -> tuple[np.ndarray, dict[str, object]]:
    """W_1..W_{m−1} (W_m = Σ̂W − Σ the others) by alternating mixed regression over the one-hot labels of the
    rows that no single token explains.

    Restarts stop at the first start that explains at least ``settings.stop_fraction`` of the rows to relative
    residual ``settings.onehot_tol``; if none does, ``PhaseFailed`` (a wrong start explains <= 0.2 % of the
    rows at (8,4,2), a right one 34–37 %).

    Parameters
    ----------
    X, Y : np.ndarray
        Examples, (N, k, d).
    W_sum : np.ndarray
        Σ̂W exact on the one-hot rows (``robust_sum_w``), (d, d).
    m : int
        Number of heads.
    settings : ArgmaxSettings, optional
        onehot_tol, restarts, max_iter, keep_fraction, stop_fraction, max_rows (defaults: ``learn``'s).
    rng : np.random.Generator
        The rows' subsample and the starts.

    Returns
    -------
    ws : np.ndarray
        (m, d, d).
    figures : dict
        Rows, labels, starts tried, the fraction of rows explained.
    """
    s = settings or ArgmaxSettings()
    N, k, d = X.shape
    rows = _split_rows(X, Y, W_sum, m, s, rng)
    labels = _labels(k, m)
    T, Z = _design(X, Y, W_sum, rows, labels)
    ynorm = np.linalg.norm(Y.reshape(-1, d)[rows], axis=1)
    R = rows.size
    n_keep = max((m - 1) * d * 2, int(s.keep_fraction * R))
    scale = np.linalg.norm(W_sum) / d
    best: tuple[float, np.ndarray] | None = None
    tried = 0
    for _ in range(s.restarts):
        tried += 1
        V = np.tile(W_sum / m, (m - 1, 1)) + scale * rng.standard_normal(((m - 1) * d, d))
        V = _alternate(T, Z, V, n_keep, s.max_iter)
        res = np.linalg.norm(Z - T @ V, axis=-1).min(1) / np.maximum(ynorm, 1e-300)
        explained = float(np.mean(res <= s.onehot_tol))
        if best is None or explained > best[0]:
            best = (explained, V)
        if explained >= s.stop_fraction:
            break
    assert best is not None
    explained, V = best
    if explained < s.stop_fraction:
        raise PhaseFailed(
            "2-sculpt",
            f"argmax route: none of {tried} starts of the mixed regression explained "
            f"{s.stop_fraction:.0%} of the {R} rows (best {explained:.1%}); give more examples or "
            "raise argmax.restarts",
        )
    ws = np.concatenate([V.reshape(m - 1, d, d), (W_sum - V.reshape(m - 1, d, d).sum(0))[None]])
    return ws, {
        "split_rows": int(R),
        "labels": int(labels.shape[0]),
        "restarts_tried": tried,
        "explained_fraction": explained,
    }


def refine_projections(
    X: np.ndarray,
    Y: np.ndarray,
    ws: np.ndarray,
    settings: ArgmaxSettings | None = None,
    *,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, dict[str, object]]:
    """All W_i jointly: label every row by its best one-hot label (constant labels included) under the current
    W_i, keep the rows explained to 10 × the 20 % quantile of the relative residuals of rows whose heads pick
    different tokens, and solve y = Σ_i x_{j_i}ᵀ W_i for (W_1..W_m) by least squares (m d² unknowns).

    Parameters
    ----------
    X, Y : np.ndarray
        Examples, (N, k, d).
    ws : np.ndarray
        The W_i to start from (``split_projections``), (m, d, d).
    settings : ArgmaxSettings, optional
        ``refine_rounds`` relabel-and-refit rounds on at most ``refine_max_rows`` token rows.
    rng : np.random.Generator, optional
        The rows' subsample (without it every row is used).

    Returns
    -------
    ws : np.ndarray
        (m, d, d).
    figures : dict
        ``refine_rounds``: each round's rows, tolerance and median relative residual.
    """
    s = settings or ArgmaxSettings()
    m, d, _ = ws.shape
    N, k, _ = X.shape
    rows = np.arange(N * k)
    if rows.size > s.refine_max_rows and rng is not None:
        rows = np.sort(rng.choice(rows, size=s.refine_max_rows, replace=False))
    labels = np.array(list(product(range(k), repeat=m)), dtype=np.intp)  # (L, m), constant ones too
    n_, a_ = np.divmod(rows, k)
    Xr = X[n_]
    y = Y[n_, a_]
    ynorm = np.maximum(np.linalg.norm(y, axis=1), 1e-300)
    P = np.einsum("rjp,ipq->rijq", Xr, ws)  # (R, m, k, d): x_jᵀ W_i
    hist = []
    for _ in range(s.refine_rounds):
        pred = sum(P[:, i, labels[:, i]] for i in range(m))  # (R, L, d)
        res = np.linalg.norm(y[:, None] - pred, axis=-1)
        lab = res.argmin(1)
        rr = res[np.arange(rows.size), lab] / ynorm
        # the tolerance comes from rows whose heads pick different tokens: with an exact Σ̂W the constant-label
        # rows fit to 1e-14 and, alone, leave W_1 − W_2 undetermined
        mixed = ~np.all(labels[lab] == labels[lab][:, :1], axis=1)
        if not mixed.any():
            break
        tol = 10.0 * float(np.quantile(rr[mixed], 0.2))
        ok = rr <= tol
        if ok.sum() < m * d:
            break
        Dm = np.concatenate([Xr[ok][np.arange(ok.sum()), labels[lab[ok], i]] for i in range(m)], axis=1)
        sol = _normal_solve(Dm, y[ok])
        ws = sol.reshape(m, d, d)
        P = np.einsum("rjp,ipq->rijq", Xr, ws)
        hist.append({"rows": int(ok.sum()), "tol": float(tol), "median_rel_residual": float(np.median(rr[ok]))})
    return ws, {"refine_rounds": hist}


def head_attention(X: np.ndarray, Y: np.ndarray, ws: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every head's attention row from each output row, given the W_i: min Σ ‖y_a − Σ_i p_iᵀ X W_i‖² s.t.
    1ᵀ p_i = 1, one (mk + m)-KKT solve per example shared by its k rows.

    Parameters
    ----------
    X, Y : np.ndarray
        Examples, (N, k, d).
    ws : np.ndarray
        The projections W_i, (m, d, d).

    Returns
    -------
    P : np.ndarray
        (N, k_rows, m, k): row a of head i's attention in example n.
    residual : np.ndarray
        (N, k_rows), relative residual of each output row.
    ok : np.ndarray
        (N,) bool, examples whose stacked rows x_jᵀ W_i have full rank mk (the rows determine P).
    """
    N, k, d = X.shape
    m = ws.shape[0]
    mk = m * k
    B = np.einsum("njp,ipq->nijq", X, ws).reshape(N, mk, d)  # (N, mk, d)
    G = B @ B.transpose(0, 2, 1)
    tr = np.maximum(np.einsum("nii->n", G) / mk, 1e-300)
    ev = np.linalg.eigvalsh(G)
    ok = ev[:, 0] > 1e-10 * ev[:, -1]
    C = np.kron(np.eye(m), np.ones((1, k)))  # (m, mk): Σ_j p_ij = 1
    K = np.zeros((N, mk + m, mk + m))
    K[:, :mk, :mk] = G + (_KKT_RIDGE * tr)[:, None, None] * np.eye(mk)
    K[:, :mk, mk:] = C.T
    K[:, mk:, :mk] = C
    rhs = np.empty((N, mk + m, k))
    rhs[:, :mk] = B @ Y.transpose(0, 2, 1)
    rhs[:, mk:] = 1.0
    sol = np.linalg.solve(K, rhs)[:, :mk]  # (N, mk, k_rows)
    Pm = sol.transpose(0, 2, 1)  # (N, a, mk)
    res = np.linalg.norm(Y - Pm @ B, axis=-1) / np.maximum(np.linalg.norm(Y, axis=-1), 1e-300)
    return Pm.reshape(N, k, m, k), res, ok


def _head_theta(Xo: np.ndarray, p: np.ndarray, p_min: float, head: int) -> tuple[np.ndarray, int, int]:
    """Θ of one head from its attention rows p (n, a, j) on the examples Xo: (Θ (d, d), equations, rank)."""
    k, d = Xo.shape[1], Xo.shape[2]
    r = p.argmax(-1)
    pr = np.take_along_axis(p, r[..., None], -1)  # (n, a, 1)
    use = (p >= p_min) & (np.arange(k)[None, None, :] != r[..., None])
    nn, aa, jj = np.nonzero(use)
    rr = r[nn, aa]
    if nn.size < d * d:
        raise PhaseFailed(
            "5-heads",
            f"argmax route: head {head + 1} has {nn.size} measurable log-ratios, fewer "
            f"than d² = {d * d} (give more examples)",
        )
    xa = Xo[nn, aa]
    F = np.einsum("np,nq->npq", xa, Xo[nn, jj] - Xo[nn, rr]).reshape(nn.size, -1)
    g = np.log(p[nn, aa, jj] / pr[nn, aa, 0])
    w = p[nn, aa, jj]
    Fw = F * w[:, None]
    G = Fw.T @ Fw
    ev = np.linalg.eigvalsh(G)
    rank = int(np.sum(ev > 1e-12 * ev[-1]))
    sol = _normal_solve(Fw, g * w)
    if rank < d * d:
        raise PhaseFailed(
            "5-heads",
            f"argmax route: head {head + 1}'s {nn.size} log-ratio equations have rank "
            f"{rank} < d² = {d * d} (give more examples)",
        )
    return sol.reshape(d, d), int(nn.size), rank


def heads_from_attention(
    X: np.ndarray,
    P: np.ndarray,
    ok: np.ndarray,
    *,
    p_min: float,
) -> tuple[np.ndarray, dict[str, object]]:
    """Θ_i from head i's attention rows alone: for r = argmax_j p_ij and every j with p_ij >= ``p_min``,
    ⟨Θ_i, x_a (x_j − x_r)ᵀ⟩ = log(p_ij / p_ir), weighted by p_ij (the inverse of the log-ratio's error under a
    uniform absolute error of p).

    Parameters
    ----------
    X : np.ndarray
        Examples, (N, k, d).
    P : np.ndarray
        ``head_attention``'s attention rows, (N, k, m, k).
    ok : np.ndarray
        (N,) bool, the examples used.
    p_min : float
        Attention entries below this give no equation (``ArgmaxSettings.p_min``).

    Returns
    -------
    thetas : np.ndarray
        (m, d, d).
    figures : dict
        Each head's ``equations`` and their ``rank``; the ``examples`` used.

    Raises
    ------
    PhaseFailed
        When a head's equations are fewer than d² or have rank below d².
    """
    m = P.shape[2]
    Xo, Po = X[ok], P[ok]
    thetas, equations, ranks = [], [], []
    for i in range(m):
        th, n_eq, rank = _head_theta(Xo, Po[:, :, i, :], p_min, i)
        thetas.append(th)
        equations.append(n_eq)
        ranks.append(rank)
    return np.stack(thetas), {"equations": equations, "rank": ranks, "examples": int(Xo.shape[0])}


def _split_record(
    X: np.ndarray,
    Y: np.ndarray,
    W_sum: np.ndarray,
    m: int,
    s: ArgmaxSettings,
    rng: np.random.Generator,
    truth: MultiHeadAttention | None,
) -> tuple[np.ndarray, PhaseRecord]:
    """The route's phase 2: ``split_projections`` and its "2-sculpt" record."""
    t0 = time.perf_counter()
    ws, figs = split_projections(X, Y, W_sum, m, s, rng=rng)
    rec = PhaseRecord(
        "2-sculpt",
        figures={"route": "argmax", **figs},
        message="argmax route: per-head W_i by mixed regression over one-hot labels",
    )
    if truth is not None:
        rec.truth["w_error"] = _w_error(ws, truth)
    rec.time = time.perf_counter() - t0
    return ws, rec


def _refit_record(
    X: np.ndarray,
    Y: np.ndarray,
    ws: np.ndarray,
    s: ArgmaxSettings,
    rng: np.random.Generator,
    truth: MultiHeadAttention | None,
) -> tuple[np.ndarray, PhaseRecord]:
    """The route's phase 3: ``refine_projections`` and its "3-refine" record."""
    t0 = time.perf_counter()
    ws, figs = refine_projections(X, Y, ws, s, rng=rng)
    rec = PhaseRecord(
        "3-refine",
        figures={"route": "argmax", **figs},
        message="argmax route: all W_i jointly on the rows their one-hot labels explain",
    )
    if truth is not None:
        rec.truth["w_error"] = _w_error(ws, truth)
    rec.time = time.perf_counter() - t0
    return ws, rec


def _heads_record(
    X: np.ndarray, Y: np.ndarray, ws: np.ndarray, s: ArgmaxSettings, truth: MultiHeadAttention | None
) -> tuple[np.ndarray, np.ndarray, PhaseRecord]:
    """The route's phase 5: each head's Θ from its attention rows, then ``s.fixed_point_rounds`` rounds of W_i
    by least squares on every row under these Θ_i (exact attention, no one-hot labels) and each head's attention
    and Θ_i again (Θ error 2–8e-9, then 4e-11–3e-10, then 3–5e-11 at (8,4,2)); the "5-heads" record."""
    t0 = time.perf_counter()
    fit_tol = s.attention_factor * s.onehot_tol
    P, res, ok = head_attention(X, Y, ws)
    thetas, figs = heads_from_attention(X, P, ok & (res.max(1) <= fit_tol), p_min=s.p_min)
    theta_steps = []
    for _ in range(s.fixed_point_rounds):
        ws, _ = solve_projections(thetas, X, Y)
        P, res, ok = head_attention(X, Y, ws)
        thetas, f2 = heads_from_attention(X, P, ok & (res.max(1) <= fit_tol), p_min=s.p_min)
        figs["equations"] = f2["equations"]
        if truth is not None:
            theta_steps.append(float(head_errors(thetas, ws, truth)["theta_error"]))
    figs["theta_steps"] = theta_steps
    rec = PhaseRecord(
        "5-heads",
        figures={"route": "argmax", "attention_rel_residual_q50": float(np.median(res)), **figs},
        message="argmax route: each head's Θ from its own attention rows' log-ratios",
    )
    if truth is not None:
        rec.truth.update({f"best_{key}": v for key, v in head_errors(thetas, ws, truth).items()})
    rec.time = time.perf_counter() - t0
    return thetas, ws, rec


def argmax_heads(
    X: np.ndarray,
    Y: np.ndarray,
    W_sum: np.ndarray,
    m: int,
    settings: ArgmaxSettings | None = None,
    *,
    rng: np.random.Generator,
    truth: MultiHeadAttention | None = None,
) -> tuple[np.ndarray, np.ndarray, list[PhaseRecord]]:
    """The whole argmax route after the robust Σ̂W: the per-head W_i split, their joint refit, each head's Θ.

    Parameters
    ----------
    X, Y : np.ndarray
        Examples, (N, k, d).
    W_sum : np.ndarray
        Σ̂W exact on the one-hot rows (``robust_sum_w``), (d, d).
    m : int
        Number of heads.
    settings : ArgmaxSettings, optional
        The route's settings (defaults: ``learn``'s).
    rng : np.random.Generator
        The rows' subsamples and the mixed regression's starts.
    truth : MultiHeadAttention, optional
        The true layer, for the records' ``truth`` figures.

    Returns
    -------
    thetas, ws : np.ndarray
        (m, d, d).
    records : list of PhaseRecord
        "2-sculpt" (split), "3-refine" (joint W refit), "5-heads" (per-head log-ratio equations).
    """
    s = settings or ArgmaxSettings()
    ws, rec_split = _split_record(X, Y, W_sum, m, s, rng, truth)
    ws, rec_refit = _refit_record(X, Y, ws, s, rng, truth)
    thetas, ws, rec_heads = _heads_record(X, Y, ws, s, truth)
    return thetas, ws, [rec_split, rec_refit, rec_heads]


def _normal_solve(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """argmin ‖A x − B‖ through the normal equations (Cholesky; lstsq if the Gram is singular): the designs here
    are tall and thin, and an SVD per call cost seconds on the shared machine."""
    G = A.T @ A
    G[np.diag_indices_from(G)] += 1e-14 * max(float(np.trace(G)) / G.shape[0], 1e-300)
    try:
        return cho_solve(cho_factor(G, check_finite=False), A.T @ B, check_finite=False)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(A, B, rcond=None)[0]


def _w_error(ws: np.ndarray, truth: MultiHeadAttention) -> float:
    """Smallest relative error of the W_i over head permutations."""
    T = np.asarray(truth.ws, dtype=float)
    return float(min(np.linalg.norm(ws[list(p)] - T) for p in permutations(range(T.shape[0]))) / np.linalg.norm(T))
