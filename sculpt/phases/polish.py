"""Polish: all parameters to machine precision by nonlinear least squares (variable-projection LM).

The projections are eliminated exactly, W(Θ) = Z(Θ)⁺Y, and Levenberg–Marquardt runs on the Θ_i alone with
Kaufman's Jacobian (I − P_Z) ∂(Z W)/∂Θ, where for head i
∂y_{ac}/∂Θ_{pq} = x_{ap} Σ_j P_{aj} (v_{jc} − ȳ_{ac}) x_{jq}, v = X W_i, ȳ = P X W_i.
The normal equations are accumulated over chunks of examples, so memory stays bounded; once Gauss–Newton
converges quadratically the next steps reuse the last factorisation with a fresh Jᵀr (chord steps); far from the
fit, JᵀJ is formed and factorised in single precision (``F32_ABOVE``). It runs on
a small subset first and grows the subset (×4) only while the held-out validation error is not yet tiny.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from ..result import PhaseRecord
from .projections import attention, head_errors, relative_mse, solve_projections

# LM iterations after which a subset still fitted above ``stuck`` is given up: starts in the right basin fit
# their subset to ~1e-30 in 6-15 iterations (generic layers, (8,4,2) to (32,8,2)) and 15-24 for heads 3 %
# apart at m = 4, below 1e-3 well before; a stuck start at d = 32 spent 60 iterations, 37 s, at 0.53
STUCK_AFTER = 25
# Chord steps: once a full step cuts the cost by CHORD_START or more, Gauss–Newton is converging quadratically and
# the next steps reuse that step's factorised JᵀJ, computing only Jᵀr (a chord step costs 1/4 of a full one at
# (8,4,3), 1/13 at (16,4,2), 1/20 at (32,8,2)), for as long as each cuts the cost by CHORD_RATIO; the first that
# does not is dropped and a full step is taken. Measured (LM from Θ 5–20 % off, 64 examples, 2–6 seeds):
# (16,4,2) 0.167 → 0.119 s, (32,8,2) 3.0 → 2.1 s, (8,4,1) and (8,4,3) unchanged; starting chords at a cut of
# 1e-2 instead slowed (8,4,3) by a third (chords from a point too far out converge only linearly)
CHORD_RATIO = 1e-2
# A chord trial that fails at a relative MSE at or below this ends LM: float64 fits bottom out at 5e-31–1e-30
# relative MSE here, so the full step that would follow gains a factor of 1–2 (one whole build at (16,4,2))
ROUNDING_LEVEL = 1e-26
# Single precision for the far steps: while the relative MSE is above F32_ABOVE, JᵀJ's three large products and its
# Cholesky factor are float32 (2× BLAS throughput; JᵀJ agrees with float64 to 3e-7 at (16,4,2)); Jᵀr and the
# triangular solves with it stay float64. A single-precision step that finds no real descent hands the point to
# float64 (with the damping it came in with), and no chord reuses a float32 factor. Measured (5 seeds, best of 3,
# same iterations ±2): polish (16,4,2) 106 → 77 ms, (16,4,3) 241 → 176 ms, heads 3 % apart at m = 4 314 → 228 ms;
# VP-LM on the torch row 2.9 → 1.6 s and 1.4 → 1.2 s; at 1e-7 instead the (16,4,2) polish took 91 ms
F32_ABOVE = 1e-10
CHORD_START = 1e-6
# validation examples the start is screened on before the full validation error is computed
SCREEN_EXAMPLES = 128


@dataclass
class PolishResult:
    """Polished ``thetas``/``ws`` (m, d, d); relative MSE on the last fitting subset (``train_error``) and
    on the validation split; LM ``iterations``; ``examples`` in the last subset; ``converged``."""

    thetas: np.ndarray
    ws: np.ndarray
    train_error: float
    validation_error: float
    iterations: int
    examples: int
    converged: bool


def _state(thetas: np.ndarray, X: np.ndarray, Yf: np.ndarray):
    """Attention P (m,N,k,k), features Zi (m,N,k,d), orthonormal Q of Z, W (m,d,d), residual (Nk, d)."""
    m, d = thetas.shape[0], X.shape[2]
    P = attention(thetas, X)
    Zi = P @ X
    Z = np.moveaxis(Zi, 0, 2).reshape(-1, m * d)
    Q, Rz = np.linalg.qr(Z)
    diag = np.abs(np.diag(Rz))
    if diag.min() > 1e-12 * max(diag.max(), 1e-300):
        coef = np.linalg.solve(Rz, Q.T @ Yf)
    else:  # rank-deficient design (merged heads): minimum-norm solution, projector from the SVD
        U, s, _ = np.linalg.svd(Z, full_matrices=False)
        Q = U[:, s > 1e-12 * s[0]]
        coef = np.linalg.lstsq(Z, Yf, rcond=None)[0]
    res = Yf - Z @ coef
    return P, Zi, Q, coef.reshape(m, d, d), res


def _g_blocks(X: np.ndarray, P: np.ndarray, Zi: np.ndarray, ws: np.ndarray, sl: slice) -> np.ndarray:
    """G[(n, a), c, (i, q)] = Σ_j P_i[a, j] (v_{jc} − ȳ_{ac}) x_{jq} for the examples ``sl`` (module docstring)."""
    Xs = X[sl]
    n, k, d = Xs.shape
    m = ws.shape[0]
    Gs = np.empty((n * k, d, m * d))
    for i in range(m):
        V = Xs @ ws[i]  # (n, k, d)
        Ybar = Zi[i, sl] @ ws[i]  # (n, k, d)
        Gi = np.einsum("naj,njc,njq->nacq", P[i, sl], V, Xs, optimize=True) - (
            Ybar[..., None] * Zi[i, sl][:, :, None, :]
        )
        Gs[:, :, i * d : (i + 1) * d] = Gi.reshape(n * k, d, d)
    return Gs


def _g_gradient(Gs: np.ndarray, Xr: np.ndarray, rs: np.ndarray, m: int) -> np.ndarray:
    """Jᵀr (m, d, d) of one chunk: Σ_a x_a ⊗ Σ_c G[a, c] r[a, c] (r ⊥ range Z, so the projection drops out)."""
    u = np.einsum("rcz,rc->rz", Gs, rs).reshape(Xr.shape[0], m, -1)
    return np.einsum("rp,riq->ipq", Xr, u)


def _gradient(X: np.ndarray, P: np.ndarray, Zi: np.ndarray, ws: np.ndarray, res: np.ndarray, chunk: int) -> np.ndarray:
    """Jᵀr alone (npar,), for steps that reuse an earlier factorisation of JᵀJ: about m·k²·d² flops per example."""
    N, k, d = X.shape
    m = ws.shape[0]
    g = np.zeros((m, d, d))
    for s in range(0, N, chunk):
        sl = slice(s, min(s + chunk, N))
        n = X[sl].shape[0]
        g += _g_gradient(_g_blocks(X, P, Zi, ws, sl), X[sl].reshape(n * k, d), res[s * k : (s + n) * k], m)
    return g.reshape(-1)


def _normal_equations(
    thetas: np.ndarray,
    X: np.ndarray,
    P: np.ndarray,
    Zi: np.ndarray,
    Q: np.ndarray,
    ws: np.ndarray,
    res: np.ndarray,
    chunk: int,
    dtype: type[np.floating[Any]] = np.float64,
) -> tuple[np.ndarray, np.ndarray]:
    """JᵀJ and Jᵀr of the Kaufman VP Jacobian, accumulated over chunks of examples; ``dtype`` is the precision
    of JᵀJ's three large products (Jᵀr is always float64).

    The Jacobian never exists: its row (token a, output c) for head i is x_a ⊗ G_i[a, c] (G from the module
    docstring), so JᵀJ = Σ_a (x_a x_aᵀ) ⊗ (Σ_c G[a, c] G[a, c]ᵀ) is one product of (x_a x_aᵀ) against
    H_a = Σ_c G[a, c] G[a, c]ᵀ, at k·m²·d⁴ flops per example instead of k·m²·d⁵ with the dense Jacobian
    (measured 46 → 6 ms per call at (16,4,2) on 64 examples, and 1 GB → 70 MB per chunk at d = 32). The
    projection term Σ_c (Qᵀ J_c)ᵀ(Qᵀ J_c) is built the same way from (Q ⊗ x) against G."""
    m, d = thetas.shape[0], X.shape[2]
    N, k = X.shape[0], X.shape[1]
    md, rq = m * d, Q.shape[1]
    npar = m * d * d
    M = np.zeros((d * d, md * md), dtype=dtype)  # Σ_a vec(x_a x_aᵀ) vec(H_a)ᵀ, indices [(p, p'), (i, q, i', q')]
    g = np.zeros((m, d, d))
    T = np.zeros((rq * d, d * md), dtype=dtype)  # Σ_a vec(Q_a ⊗ x_a) vec(G_a)ᵀ, indices [(j, p), (c, i, q)]
    for s in range(0, N, chunk):
        sl = slice(s, min(s + chunk, N))
        Xs = X[sl]
        n = Xs.shape[0]
        Gs = _g_blocks(X, P, Zi, ws, sl)
        Xr = Xs.reshape(n * k, d)
        g += _g_gradient(Gs, Xr, res[s * k : (s + n) * k], m)
        Gl: np.ndarray = Gs.astype(dtype, copy=False)
        H = np.matmul(Gl.transpose(0, 2, 1), Gl)  # (nk, md, md)
        Xl: np.ndarray = Xr.astype(dtype, copy=False)
        XX = (Xl[:, :, None] * Xl[:, None, :]).reshape(n * k, d * d)
        M += XX.T @ H.reshape(n * k, md * md)
        Qs: np.ndarray = Q[s * k : (s + n) * k].astype(dtype, copy=False)
        QX = (Qs[:, :, None] * Xl[:, None, :]).reshape(n * k, rq * d)
        T += QX.T @ Gl.reshape(n * k, d * md)
    # JᵀJ[(i, p, q), (i', p', q')] = M[(p, p'), (i, q, i', q')]
    S = M.reshape(d, d, m, d, m, d).transpose(2, 0, 3, 4, 1, 5).reshape(npar, npar)
    # (Qᵀ J_c)[j, (i, p, q)] = T[(j, p), (c, i, q)]
    Tc = T.reshape(rq, d, d, m, d).transpose(2, 0, 3, 1, 4).reshape(d * rq, npar)
    S -= Tc.T @ Tc
    return S, g.reshape(npar)


def lm_vp(
    thetas: np.ndarray,
    X: np.ndarray,
    Y: np.ndarray,
    *,
    max_iter: int = 50,
    tol: float = 1e-30,
    chunk: int = 256,
    give_up: tuple[int, float] | None = None,
) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Variable-projection Levenberg–Marquardt from ``thetas`` on (X, Y): (thetas, ws, rel MSE, iterations).

    Stops when the relative MSE falls below ``tol``, the step stalls, after ``max_iter`` iterations, or, with
    ``give_up = (i, f)``, after i iterations still above f (a local minimum)."""
    m, d = thetas.shape[0], X.shape[2]
    Yf = Y.reshape(-1, d)
    yy = max(float(np.sum(Yf * Yf)), 1e-300)
    th = np.array(thetas, dtype=float)
    P, Zi, Q, ws, res = _state(th, X, Yf)
    cost = float(np.sum(res * res)) / yy
    lam = 1e-3
    it = 0
    factor = None  # the last full step's factorised damped JᵀJ, while it still buys fast (chord) steps
    single_failed = False
    while it < max_iter and cost > tol:
        it += 1
        if factor is not None:
            th_new = th + cho_solve(factor, _gradient(X, P, Zi, ws, res, chunk)).reshape(m, d, d)
            state = _state(th_new, X, Yf)
            new_cost = float(np.sum(state[4] ** 2)) / yy
            if np.isfinite(new_cost) and new_cost <= CHORD_RATIO * cost:
                th, (P, Zi, Q, ws, res), cost = th_new, state, new_cost
                continue
            if cost <= ROUNDING_LEVEL:  # a full step here would only chase rounding (it gained 1–2× when tried)
                if np.isfinite(new_cost) and new_cost < cost:
                    th, (P, Zi, Q, ws, res), cost = th_new, state, new_cost
                break
            factor = None  # the trial is dropped; this iteration takes a full step instead
        single = cost > F32_ABOVE and not single_failed
        S, g = _normal_equations(th, X, P, Zi, Q, ws, res, chunk, np.float32 if single else np.float64)
        # a float32 JᵀJ can round a diagonal entry of the projected matrix below zero: the scaling uses |diag|
        dS = np.abs(np.diag(S)).astype(np.float64)
        lam_in, improved, rel_drop = lam, False, 0.0
        for _ in range(12):
            A = S.copy()
            A[np.diag_indices_from(A)] += lam * dS + 1e-14 * dS.max()  # Marquardt scaling
            try:
                fac = cho_factor(A)
            except np.linalg.LinAlgError:
                lam *= 10.0
                continue
            # the factor may be float32; the solve with Jᵀr is float64 against it
            step = cho_solve((fac[0].astype(np.float64, copy=False), fac[1]), g)
            th_new = th + step.reshape(m, d, d)
            state = _state(th_new, X, Yf)
            new_cost = float(np.sum(state[4] ** 2)) / yy
            if np.isfinite(new_cost) and new_cost < cost:
                rel_drop = (cost - new_cost) / cost
                factor = fac if new_cost <= CHORD_START * cost and not single else None
                th, (P, Zi, Q, ws, res), cost = th_new, state, new_cost
                # ÷30 after an accepted step: (16,4,2) from Θ error 0.08 takes 5 iterations instead of 6 (÷5),
                # polish median 0.19 → 0.16 s over 5 seeds; m = 3–4, weak and near-identical heads: iterations ±2
                lam = max(lam / 30.0, 1e-12)
                improved = True
                break
            lam *= 8.0
        if single and (not improved or rel_drop < 1e-9):
            # JᵀJ in single precision found no (or no real) descent: this point gets a float64 build, with the
            # damping it came in with (the failed trials raised λ by up to 8¹²)
            single_failed, lam = True, lam_in
            continue
        if not improved or rel_drop < 1e-9:  # no descent left (a noisy or non-attention fit has stalled)
            break
        if give_up is not None and it >= give_up[0] and cost > give_up[1]:
            break
    return th, ws, cost, it


def _validates_at_start(th: np.ndarray, ws: np.ndarray, X_val: np.ndarray, Y_val: np.ndarray, tol: float) -> float:
    """The validation relative MSE of (th, ws), or inf when a prefix of the validation set already rules out
    ≤ ``tol``: the prefix's squared error over ‖Y_val‖² bounds the full relative MSE from below, so the full
    forward pass runs only for a start that might validate (at (16,4,2): 0.13 against 3.1 ms on 2,000 examples)."""
    pre = min(X_val.shape[0], SCREEN_EXAMPLES)
    yy = float(np.sum(Y_val * Y_val))
    y_pre = float(np.sum(Y_val[:pre] * Y_val[:pre]))
    if pre < X_val.shape[0] and relative_mse(th, ws, X_val[:pre], Y_val[:pre]) * y_pre > tol * yy:
        return float("inf")
    return relative_mse(th, ws, X_val, Y_val)


def polish(
    thetas: np.ndarray,
    X: np.ndarray,
    Y: np.ndarray,
    X_val: np.ndarray,
    Y_val: np.ndarray,
    *,
    first_examples: int | None = None,
    max_examples: int = 4096,
    growth: int = 4,
    max_iter: int = 60,
    stuck: float = 1e-2,
    tol: float = 1e-12,
    rng: np.random.Generator | int | None = None,
    truth: Any = None,
    callback: Callable[[str], None] | None = None,
) -> tuple[PolishResult, PhaseRecord]:
    """LM-VP polish of ``thetas`` on a growing random subset of (X, Y) until the validation relative MSE is
    ≤ ``tol`` (converged) or the subset reaches ``max_examples`` (or all of X) with no further gain.

    The first subset has ``first_examples`` examples (default max(64, 4·2md²/(kd))). A stage whose LM ends
    with the subset's own relative MSE above ``stuck`` has found a local minimum, not an overfit: more examples
    do not move it (measured at (16,4,3): 0.070 → 0.088 → 0.093 → 0.094 on 96 → 4,096 examples, 34 s), so the
    polish stops there and says so; a start in the right basin fits its subset to ~1e-30 in 6-15 iterations.
    Every stuck stage measured ended at 0.06-0.53; 1e-2 leaves room for label noise up to ~10 % of the signal's
    amplitude, whose fits level off at the noise instead (those still grow the subset)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(rng)
    th = np.array(thetas, dtype=float)
    m, d = th.shape[0], th.shape[1]
    N, k = X.shape[0], X.shape[1]
    if first_examples is None:
        first_examples = max(64, int(np.ceil(4 * 2 * m * d * d / (k * d))))
    perm = rng.permutation(N)
    n_use = min(N, first_examples, max_examples)
    stages, total_it, stuck_stop = [], 0, False
    best = None
    # a start that already validates needs no LM: the argmax route's heads arrive at validation relative MSE
    # 1e-17-ish, and LM on peaked data then cost 61 s (d = 16, 64 → 4,096 examples) or 349 s (1,024 at once)
    ws0 = solve_projections(th, X[perm[:n_use]], Y[perm[:n_use]])[0]
    verr0 = _validates_at_start(th, ws0, X_val, Y_val, tol)
    if verr0 <= tol:
        stages.append(
            {
                "examples": int(n_use),
                "iterations": 0,
                "train_error": None,
                "validation_error": verr0,
                "note": "the start already validates: no LM",
            }
        )
        best = (th.copy(), ws0, float("nan"), verr0, n_use)
    while best is None or best[3] > tol:
        Xs, Ys = X[perm[:n_use]], Y[perm[:n_use]]
        th, ws, cost, it = lm_vp(th, Xs, Ys, max_iter=max_iter, give_up=(STUCK_AFTER, stuck))
        total_it += it
        verr = relative_mse(th, ws, X_val, Y_val)
        stages.append({"examples": int(n_use), "iterations": it, "train_error": cost, "validation_error": verr})
        if callback is not None:
            callback(f"polish: {n_use} examples, {it} LM iterations, validation rel MSE {verr:.2e}")
        if best is None or verr < best[3]:
            best = (th.copy(), ws.copy(), cost, verr, n_use)
        if verr <= tol or n_use >= min(N, max_examples):
            break
        if cost > stuck:
            stages[-1]["note"] = (
                f"stuck: LM ended at training relative MSE {cost:.2e} > {stuck:.0e} on its own subset, a local "
                "minimum that more examples do not move; the polish stops"
            )
            stuck_stop = True
            break
        n_use = min(N, max_examples, n_use * growth)
    assert best is not None
    th, ws, cost, verr, n_use = best
    res = PolishResult(th, ws, cost, verr, total_it, int(n_use), bool(verr <= tol))
    rec = PhaseRecord(
        "polish",
        figures={
            "stages": stages,
            "iterations": total_it,
            "examples": int(n_use),
            "train_error": cost,
            "validation_error": verr,
            "tol": tol,
        },
    )
    if truth is not None:
        rec.truth.update(head_errors(th, ws, truth))
    if not res.converged:
        rec.message = f"validation relative MSE {verr:.3e} > tol {tol:.1e} after {total_it} LM iterations"
        if stuck_stop:
            rec.message += " (stuck in a local minimum)"
    rec.time = time.perf_counter() - t0
    return res, rec
