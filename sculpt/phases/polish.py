"""Polish: all parameters to machine precision by nonlinear least squares (variable-projection LM).

The projections are eliminated exactly, W(Θ) = Z(Θ)⁺Y, and Levenberg–Marquardt runs on the Θ_i alone with
Kaufman's Jacobian (I − P_Z) ∂(Z W)/∂Θ, where for head i
∂y_{ac}/∂Θ_{pq} = x_{ap} Σ_j P_{aj} (v_{jc} − ȳ_{ac}) x_{jq}, v = X W_i, ȳ = P X W_i.
The normal equations are accumulated over chunks of examples, so memory stays bounded; once Gauss–Newton
converges quadratically the next steps reuse the last factorisation with a fresh Jᵀr (chord steps); far from the
fit, JᵀJ is formed and factorised in single precision (``PolishSettings.f32_above``). Past
``PolishSettings.matrix_free_above`` parameters (m·d²) JᵀJ is never formed: each damped step is solved by
Jacobi-preconditioned conjugate gradients with matrix-free Jacobian products (``sculpt.phases.polish_cg``),
truncated at a trust region, so memory is linear in m·d² plus the data. It runs on a small subset first and grows
the subset (×``growth``) only while the held-out validation error is not yet at tol. Its tuned constants are
``sculpt.settings.PolishSettings``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from ..noise import NoiseVerdict, assess_fit
from ..result import PhaseRecord
from ..settings import PolishSettings, ProblemSize
from .polish_cg import VPProducts, pcg
from .projections import CholeskyFactor, attention, head_errors, layer_relative_mse, solve_projections

if TYPE_CHECKING:
    from ..model import MultiHeadAttention

__all__ = ["PolishResult", "lm_vp", "polish"]

#: ``_state``'s outcome: attention P (m, N, k, k), features Zi = P X (m, N, k, d), an orthonormal basis Q of
#: range Z, the eliminated projections W (m, d, d) and the residual Y − Z W (Nk, d)
_VPState = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclass
class PolishResult:
    """The polish's fit.

    Attributes
    ----------
    thetas, ws : np.ndarray
        Polished heads and projections, (m, d, d).
    train_error : float
        Relative MSE on the last fitting subset (NaN when the start validated without LM).
    validation_error : float
        Relative MSE on the validation split.
    iterations : int
        LM iterations over every stage.
    examples : int
        Examples in the fitting subset of the returned fit.
    converged : bool
        validation_error <= tol.
    noise : NoiseVerdict or None
        The noise-floor test of the returned fit (``sculpt.noise``): "exact", "noise" (with σ̂) or "failed".
    """

    thetas: np.ndarray
    ws: np.ndarray
    train_error: float
    validation_error: float
    iterations: int
    examples: int
    converged: bool
    noise: NoiseVerdict | None = None


def _state(thetas: np.ndarray, X: np.ndarray, Yf: np.ndarray) -> _VPState:
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
    dtype: type[np.float32] | type[np.float64] = np.float64,
) -> tuple[np.ndarray, np.ndarray]:
    """JᵀJ and Jᵀr of the Kaufman VP Jacobian, accumulated over chunks of examples; ``dtype`` is the precision
    of JᵀJ's three large products (Jᵀr is always float64).

    The Jacobian never exists: its row (token a, output c) for head i is x_a ⊗ G_i[a, c] (G from the module
    docstring), so JᵀJ = Σ_a (x_a x_aᵀ) ⊗ (Σ_c G[a, c] G[a, c]ᵀ) is one product of (x_a x_aᵀ) against
    H_a = Σ_c G[a, c] G[a, c]ᵀ, at k·m²·d⁴ flops per example instead of k·m²·d⁵ with the dense Jacobian
    (6 against 46 ms per call at (16,4,2) on 64 examples; 70 MB against 1 GB per chunk at d = 32). The
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


@dataclass
class _Point:
    """A point of LM: the heads, their ``_state`` and relative cost ‖Y − Z W‖²/‖Y‖²."""

    th: np.ndarray
    state: _VPState
    cost: float


def _trial(th: np.ndarray, X: np.ndarray, Yf: np.ndarray, yy: float) -> _Point:
    state = _state(th, X, Yf)
    return _Point(th, state, float(np.sum(state[4] ** 2)) / yy)


def _chord_step(
    at: _Point, factor: CholeskyFactor, X: np.ndarray, Yf: np.ndarray, yy: float, s: PolishSettings
) -> tuple[_Point, str]:
    """A step with the last full step's factorised JᵀJ and a fresh Jᵀr: ("kept", new point) when it leaves at
    most ``chord_ratio`` of the cost; ("end", best point) when it does not but the cost is at rounding level (a
    full step there would only chase rounding); else ("dropped", ``at``)."""
    P, Zi, _, ws, res = at.state
    m, d = at.th.shape[0], X.shape[2]
    new = _trial(at.th + cho_solve(factor, _gradient(X, P, Zi, ws, res, s.chunk)).reshape(m, d, d), X, Yf, yy)
    if np.isfinite(new.cost) and new.cost <= s.chord_ratio * at.cost:
        return new, "kept"
    if at.cost <= s.rounding_level:
        return (new if np.isfinite(new.cost) and new.cost < at.cost else at), "end"
    return at, "dropped"


def _full_step(
    at: _Point, lam: float, single: bool, X: np.ndarray, Yf: np.ndarray, yy: float, s: PolishSettings
) -> tuple[_Point, float, float, CholeskyFactor | None]:
    """One Marquardt-scaled LM step from the normal equations (float32 JᵀJ when ``single``), raising the damping
    λ (×8; ×10 when the damped matrix has no Cholesky factor) for up to 12 trials until the cost falls.

    Returns (point, λ, relative cost drop (0: no descent, point unchanged), factor for chord steps: the damped
    float64 JᵀJ's when the step left at most ``chord_start`` of the cost, else None)."""
    m, d = at.th.shape[0], X.shape[2]
    P, Zi, Q, ws, res = at.state
    S, g = _normal_equations(at.th, X, P, Zi, Q, ws, res, s.chunk, np.float32 if single else np.float64)
    # a float32 JᵀJ can round a diagonal entry of the projected matrix below zero: the scaling uses |diag|
    dS = np.abs(np.diag(S)).astype(np.float64)
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
        new = _trial(at.th + step.reshape(m, d, d), X, Yf, yy)
        if np.isfinite(new.cost) and new.cost < at.cost:
            rel_drop = (at.cost - new.cost) / at.cost
            factor = fac if new.cost <= s.chord_start * at.cost and not single else None
            return new, max(lam / s.damping_down, 1e-12), rel_drop, factor
        lam *= 8.0
    return at, lam, 0.0, None


def _cg_step(
    at: _Point, lam: float, radius: float, X: np.ndarray, Yf: np.ndarray, yy: float, s: PolishSettings
) -> tuple[_Point, float, float, float]:
    """One Marquardt-scaled LM step solved matrix-free (``polish_cg``): (JᵀJ + λ·D) δ = Jᵀr by Jacobi-preconditioned
    CG to a relative residual of min(``cg_forcing``, max(√cost, ``cg_stop_margin``·√(stop/cost))) (no finer than
    reaching the stopping cost needs), D the unprojected diagonal of JᵀJ, truncated at the
    trust-region ``radius`` (Steihaug; in the preconditioner's norm). A trial that does not lower the cost raises λ
    ×8 and shrinks the radius to a quarter of its step, so the next solve stops early instead of repeating a long
    one; up to 12 trials (one at or below ``rounding_level``).

    Returns (point, λ, relative cost drop (0: no descent, point unchanged), radius: doubled when an accepted step
    reached it)."""
    m, d = at.th.shape[0], X.shape[2]
    P, Zi, Q, ws, res = at.state
    ops = VPProducts.at(X, P, Zi, Q, ws, s.cg_chunk_elements)
    g = ops.vjp(res.reshape(X.shape))
    D = ops.diagonal()
    if not np.any(g) or not D.max() > 0.0:  # a stationary point (e.g. every W_i zero): no step to take
        return at, lam, 0.0, radius
    stop = max(s.fit_tol, s.cg_fit_tol)
    tol = min(s.cg_forcing, max(s.cg_tol_min, math.sqrt(at.cost), s.cg_stop_margin * math.sqrt(stop / at.cost)))
    for _ in range(12):
        damp = lam * D + 1e-14 * D.max()
        step, _, edge = pcg(lambda v: ops.normal(v) + damp * v, g, 1.0 / (D + damp), tol, s.cg_max_iter, radius)
        new = _trial(at.th + step.reshape(m, d, d), X, Yf, yy)
        if np.isfinite(new.cost) and new.cost < at.cost:
            drop = (at.cost - new.cost) / at.cost
            return new, max(lam / s.damping_down, 1e-12), drop, 2.0 * radius if edge else radius
        if at.cost <= s.rounding_level:
            break
        radius = 0.25 * math.sqrt(float(np.vdot(step, (D + damp) * step)))
        lam *= 8.0
    return at, lam, 0.0, radius


def _lm_matrix_free(
    at: _Point, X: np.ndarray, Yf: np.ndarray, yy: float, s: PolishSettings, give_up: tuple[int, float] | None
) -> tuple[_Point, int]:
    """LM with every step solved by CG (``_cg_step``): memory linear in m·d² plus the data's forward quantities.
    It stops as ``lm_vp`` does, and at the relative MSE ``cg_fit_tol``. Returns (point, iterations)."""
    lam, radius, it = 1e-3, math.inf, 0
    while it < s.max_iter and at.cost > max(s.fit_tol, s.cg_fit_tol):
        it += 1
        at, lam, rel_drop, radius = _cg_step(at, lam, radius, X, Yf, yy, s)
        if rel_drop < 1e-9:  # no descent left
            break
        if give_up is not None and it >= give_up[0] and at.cost > give_up[1]:
            break
    return at, it


def lm_vp(
    thetas: np.ndarray,
    X: np.ndarray,
    Y: np.ndarray,
    settings: PolishSettings | None = None,
    *,
    give_up: tuple[int, float] | None = None,
) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Variable-projection Levenberg–Marquardt from ``thetas`` on (X, Y).

    It stops when the relative MSE falls below ``settings.fit_tol``, when no step descends, after
    ``settings.max_iter`` iterations, or with ``give_up = (i, f)`` after i iterations still above f (a local
    minimum). Past ``settings.matrix_free_above`` parameters (m·d²) the steps are solved matrix-free by
    conjugate gradients (``_lm_matrix_free``), below by factorising the normal equations.

    Parameters
    ----------
    thetas : np.ndarray
        The start, (m, d, d).
    X, Y : np.ndarray
        The examples fitted, (N, k, d).
    settings : PolishSettings, optional
        Iterations, stopping level, chunking, chord and single-precision thresholds (defaults: ``learn``'s).
    give_up : (int, float), optional
        Iterations after which a fit still above that relative MSE is abandoned.

    Returns
    -------
    thetas, ws : np.ndarray
        The fitted heads and their eliminated projections, (m, d, d).
    cost : float
        The relative MSE ‖Y − F(X)‖²/‖Y‖² on (X, Y).
    iterations : int
        LM iterations taken.
    """
    s = settings or PolishSettings()  # no size-dependent field is read here
    d = X.shape[2]
    Yf = Y.reshape(-1, d)
    yy = max(float(np.sum(Yf * Yf)), 1e-300)
    th = np.array(thetas, dtype=float)
    state = _state(th, X, Yf)
    at = _Point(th, state, float(np.sum(state[4] * state[4])) / yy)
    if th.shape[0] * d * d > s.matrix_free_above:
        at, it = _lm_matrix_free(at, X, Yf, yy, s, give_up)
        return at.th, at.state[3], at.cost, it
    lam, it = 1e-3, 0
    factor: CholeskyFactor | None = None  # the last full step's factorised damped JᵀJ, while chords pay
    single_failed = False
    while it < s.max_iter and at.cost > s.fit_tol:
        it += 1
        if factor is not None:
            at, outcome = _chord_step(at, factor, X, Yf, yy, s)
            if outcome == "kept":
                continue
            if outcome == "end":
                break
            factor = None  # the trial is dropped; this iteration takes a full step instead
        single = at.cost > s.f32_above and not single_failed
        at, lam_out, rel_drop, factor = _full_step(at, lam, single, X, Yf, yy, s)
        if single and rel_drop < 1e-9:
            # JᵀJ in single precision found no (or no real) descent: this point gets a float64 build, with the
            # damping it came in with (the failed trials raised λ by up to 8¹²)
            single_failed = True
            continue
        lam = lam_out
        if rel_drop < 1e-9:  # no descent left (a noisy or non-attention fit has stalled)
            break
        if give_up is not None and it >= give_up[0] and at.cost > give_up[1]:
            break
    return at.th, at.state[3], at.cost, it


def _validates_at_start(
    th: np.ndarray, ws: np.ndarray, X_val: np.ndarray, Y_val: np.ndarray, tol: float, screen: int
) -> float:
    """The validation relative MSE of (th, ws), or inf when its first ``screen`` examples already rule out
    ≤ ``tol``: the prefix's squared error over ‖Y_val‖² bounds the full relative MSE from below, so the full
    forward pass runs only for a start that might validate (at (16,4,2): 0.13 against 3.1 ms on 2,000 examples)."""
    pre = min(X_val.shape[0], screen)
    yy = float(np.sum(Y_val * Y_val))
    y_pre = float(np.sum(Y_val[:pre] * Y_val[:pre]))
    if pre < X_val.shape[0] and layer_relative_mse(th, ws, X_val[:pre], Y_val[:pre]) * y_pre > tol * yy:
        return float("inf")
    return layer_relative_mse(th, ws, X_val, Y_val)


class _Best(NamedTuple):
    """The best fit on validation so far and the size of the subset it was fitted on."""

    thetas: np.ndarray
    ws: np.ndarray
    train_error: float
    validation_error: float
    examples: int


@dataclass
class _Stages:
    """The polish's progress: each stage's figures, the best fit so far, LM iterations, a stuck stop."""

    stages: list[dict[str, object]] = field(default_factory=list)
    best: _Best | None = None
    iterations: int = 0
    stuck: bool = False


def _grow(
    run: _Stages,
    th: np.ndarray,
    data: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    perm: np.ndarray,
    n_use: int,
    s: PolishSettings,
    tol: float,
    callback: Callable[[str], None] | None,
) -> None:
    """LM stages on the subsets perm[:n_use], n_use growing ×``s.growth``, until the validation error is ≤ tol,
    the subset is the largest allowed, or a stage ends stuck above ``s.stuck`` on its own subset."""
    X, Y, X_val, Y_val = data
    N = X.shape[0]
    while True:
        Xs, Ys = X[perm[:n_use]], Y[perm[:n_use]]
        th, ws, cost, it = lm_vp(th, Xs, Ys, s, give_up=(s.stuck_after, s.stuck))
        run.iterations += it
        verr = layer_relative_mse(th, ws, X_val, Y_val)
        run.stages.append({"examples": int(n_use), "iterations": it, "train_error": cost, "validation_error": verr})
        if callback is not None:
            callback(f"polish: {n_use} examples, {it} LM iterations, validation rel MSE {verr:.2e}")
        if run.best is None or verr < run.best.validation_error:
            run.best = _Best(th.copy(), ws.copy(), cost, verr, n_use)
        if verr <= tol or n_use >= min(N, s.max_examples):
            return
        if cost > s.stuck:
            run.stages[-1]["note"] = (
                f"stuck: LM ended at training relative MSE {cost:.2e} > {s.stuck:.0e} on its own subset, a local "
                "minimum that more examples do not move; the polish stops"
            )
            run.stuck = True
            return
        n_use = min(N, s.max_examples, n_use * s.growth)


def _noise_cap(s: PolishSettings, X: np.ndarray, m: int) -> int:
    """The largest subset the noise stage fits: ``noise_max_examples``, all of X, and what ``noise_max_bytes``
    allows for LM's forward quantities (attention, features, the basis of range Z, residual: about
    k·(mk + 3md + 3d) floats per example)."""
    N, k, d = X.shape
    per_example = 8 * k * (m * k + 3 * m * d + 3 * d)
    return int(max(1, min(N, s.noise_max_examples, s.noise_max_bytes // per_example)))


def _verdict(
    run: _Stages,
    data: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    perm: np.ndarray,
    s: PolishSettings,
    tol: float,
    with_history: bool = True,
) -> NoiseVerdict:
    """The noise-floor test of the best stage, fitted on perm[:examples] (``with_history``: with the test of no
    further improvement over the stages too)."""
    assert run.best is not None
    X, Y, X_val, Y_val = data
    rows = perm[: run.best.examples]
    stages = run.stages if with_history else []
    history = [float(st["validation_error"]) for st in stages]  # type: ignore[arg-type]
    return assess_fit(
        run.best.thetas, run.best.ws, (X[rows], Y[rows]), (X_val, Y_val), tol=tol, history=history, settings=s
    )


def _noise_stage(
    run: _Stages,
    data: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    perm: np.ndarray,
    s: PolishSettings,
    tol: float,
    callback: Callable[[str], None] | None,
) -> NoiseVerdict:
    """The noise-floor test of the best stage; when it says "noise" and more training examples are allowed
    (``_noise_cap``), one more LM stage from it on that many: under noise the least-squares fit on more examples
    has the smaller error whatever the validation split's noise says, so it is kept while it stays at the floor."""
    verdict = _verdict(run, data, perm, s, tol)
    assert run.best is not None
    cap = _noise_cap(s, data[0], run.best.thetas.shape[0])
    if verdict.status != "noise" or run.best.examples >= cap:
        return verdict
    X, Y, X_val, Y_val = data
    prev = run.best
    refit = s.merged(max_iter=s.noise_max_iter)
    th, ws, cost, it = lm_vp(prev.thetas, X[perm[:cap]], Y[perm[:cap]], refit, give_up=(s.stuck_after, s.stuck))
    run.iterations += it
    verr = layer_relative_mse(th, ws, X_val, Y_val)
    note = f"at the noise floor on {prev.examples} examples: refit on {cap} (polish.noise_max_examples)"
    run.stages.append({"examples": cap, "iterations": it, "train_error": cost, "validation_error": verr, "note": note})
    if callback is not None:
        callback(f"polish: {cap} examples (noise floor), {it} LM iterations, validation rel MSE {verr:.2e}")
    run.best = _Best(th.copy(), ws.copy(), cost, verr, cap)
    again = _verdict(run, data, perm, s, tol)
    if again.status == "failed" and verr <= prev.validation_error:
        # the refit read every example it may (the cap): "still improving" has no larger stage to go to, so the
        # least-squares fit is judged by the F-test alone
        again = _verdict(run, data, perm, s, tol, with_history=False)
    if again.status in ("noise", "exact") or verr <= prev.validation_error:
        return again
    run.best = prev  # the refit left the floor (a different basin): the earlier fit stays
    return verdict


def _record(run: _Stages, tol: float, truth: MultiHeadAttention | None) -> tuple[PolishResult, PhaseRecord]:
    """The polish's result (its best stage) and record."""
    assert run.best is not None  # a stage always runs unless the start validated
    th, ws, cost, verr, n_use = run.best
    res = PolishResult(th, ws, cost, verr, run.iterations, int(n_use), bool(verr <= tol))
    figures = {
        "stages": run.stages,
        "iterations": run.iterations,
        "examples": int(n_use),
        "train_error": cost,
        "validation_error": verr,
        "tol": tol,
    }
    rec = PhaseRecord("polish", figures=figures)
    if truth is not None:
        rec.truth.update(head_errors(th, ws, truth))
    if not res.converged:
        rec.message = f"validation relative MSE {verr:.3e} > tol {tol:.1e} after {run.iterations} LM iterations"
        if run.stuck:
            rec.message += " (stuck in a local minimum)"
    return res, rec


def polish(
    thetas: np.ndarray,
    X: np.ndarray,
    Y: np.ndarray,
    X_val: np.ndarray,
    Y_val: np.ndarray,
    settings: PolishSettings | None = None,
    *,
    tol: float,
    rng: np.random.Generator | int | None = None,
    truth: MultiHeadAttention | None = None,
    callback: Callable[[str], None] | None = None,
) -> tuple[PolishResult, PhaseRecord]:
    """LM-VP polish of ``thetas`` on a growing random subset of (X, Y) until the validation relative MSE is
    ≤ ``tol`` (converged) or the subset reaches ``settings.max_examples`` (or all of X) with no further gain.

    A start that already validates gets no LM (the argmax route's heads arrive at 1e-17-ish, where LM on
    peaked data costs a minute). A stage whose LM ends with the subset's own relative MSE above
    ``settings.stuck`` has found a local minimum, not an overfit: more examples do not move it, so the polish
    stops there and says so.

    Parameters
    ----------
    thetas : np.ndarray
        The start, (m, d, d) (phase 6's winner, or a route's model).
    X, Y : np.ndarray
        Training examples, (N, k, d); the subsets are drawn from them in a random order.
    X_val, Y_val : np.ndarray
        Validation examples.
    settings : PolishSettings, optional
        Subset sizes, growth, LM limits (defaults: ``learn``'s; "auto" fields are resolved for X's size).
    tol : float
        Validation relative MSE counted as converged.
    rng : np.random.Generator or int, optional
        The subsets' order.
    truth : MultiHeadAttention, optional
        The true layer, for the record's ``truth`` figures.
    callback : callable, optional
        Called with a line of progress after each stage.

    Returns
    -------
    fit : PolishResult
        The stage with the smallest validation error.
    record : PhaseRecord
        "polish", with every stage's figures and ``matrix_free`` (whether LM's steps were solved by CG).
    """
    t0 = time.perf_counter()
    gen = np.random.default_rng(rng)
    th = np.array(thetas, dtype=float)
    s = (settings or PolishSettings()).resolve(ProblemSize.of(X, th.shape[0]))
    assert s.first_examples is not None  # resolved
    N = X.shape[0]
    perm = gen.permutation(N)
    n_use = min(N, s.first_examples, s.max_examples)
    run = _Stages()
    ws0 = solve_projections(th, X[perm[:n_use]], Y[perm[:n_use]])[0]
    verr0 = _validates_at_start(th, ws0, X_val, Y_val, tol, s.screen_examples)
    if verr0 <= tol:
        note = "the start already validates: no LM"
        run.stages.append(
            {"examples": int(n_use), "iterations": 0, "train_error": None, "validation_error": verr0, "note": note}
        )
        run.best = _Best(th.copy(), ws0, float("nan"), verr0, n_use)
    else:
        _grow(run, th, (X, Y, X_val, Y_val), perm, n_use, s, tol, callback)
    verdict = _noise_stage(run, (X, Y, X_val, Y_val), perm, s, tol, callback)
    res, rec = _record(run, tol, truth)
    res.noise = verdict
    rec.figures["noise"] = verdict.to_dict()
    if verdict.status == "noise":
        rec.message = f"{rec.message}; {verdict.reason}"
    rec.figures["matrix_free"] = bool(th.size > s.matrix_free_above)  # LM's steps by CG (m·d² parameters)
    rec.time = time.perf_counter() - t0
    return res, rec
