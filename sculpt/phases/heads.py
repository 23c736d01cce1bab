"""Phase 5: candidate heads on the estimated flat aff{Θ_i}: a grid (net), then local refinement.

Heads are parametrised on the (m−1)-dimensional flat, Θ_i = p + U c_i. For every m-subset of grid points the
projections are eliminated (variable projection): φ(c) = min_W ‖Y − Z(c) W‖², evaluated for all subsets at
once from the grid points' cross-Gram matrices, φ = ‖Y‖² − tr(Bᵀ H⁻¹ B). The best subsets are refined by
Levenberg–Marquardt on the m(m−1) flat coordinates. The number of subsets is exponential in m, as in the
paper's net. m = 1: the single head is the flat's point.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import combinations, product
from math import comb
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import least_squares

from ..result import PhaseRecord
from ..settings import HeadsSettings, ProblemSize
from .projections import CholeskyFactor, attention, features, head_errors, least_squares_solve, normal_factor
from .span import SpanEstimate

if TYPE_CHECKING:
    from ..model import MultiHeadAttention

__all__ = ["HeadCandidates", "flat_grid", "candidate_heads"]


@dataclass
class HeadCandidates:
    """Phase 5's candidate head sets, best (smallest relative VP residual on the search examples) first.

    Attributes
    ----------
    thetas : np.ndarray
        (n, m, d, d), each a candidate set of heads.
    objective : np.ndarray
        (n,), relative residual φ/‖Y‖² with the projections eliminated.
    coords : np.ndarray
        (n, m, m−1), the heads' coordinates on the flat.
    grid_points, tuples, evaluations : int
        The search's size: grid points, m-subsets evaluated, objective evaluations including LM's.
    """

    thetas: np.ndarray
    objective: np.ndarray
    coords: np.ndarray
    grid_points: int
    tuples: int
    evaluations: int


def flat_grid(dim: int, radius: float, per_axis: int) -> np.ndarray:
    """The regular grid with ``per_axis`` points on [−radius, radius]^dim, cut to the ball of that radius.

    Parameters
    ----------
    dim : int
        The flat's dimension, m − 1.
    radius : float
        Half the side of the cube and the radius of the ball.
    per_axis : int
        Grid points per axis.

    Returns
    -------
    np.ndarray
        (G, dim) points; the centre alone if no grid point is inside the ball.
    """
    axis = np.linspace(-radius, radius, per_axis)
    pts = np.array(list(product(axis, repeat=dim)), dtype=float).reshape(-1, dim)
    pts = pts[np.linalg.norm(pts, axis=1) <= radius * (1 + 1e-12)]
    return pts if pts.shape[0] else np.zeros((1, dim))


def _subset_objectives(Z: np.ndarray, Yf: np.ndarray, tuples: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Relative VP residual φ/‖Y‖² for each tuple of grid indices, from Gram blocks: Z (G, Nk, d)."""
    G, _, d = Z.shape
    m = tuples.shape[1]
    C = np.einsum("gnp,hnq->ghpq", Z, Z, optimize=True)  # (G, G, d, d)
    Bg = np.einsum("gnp,nq->gpq", Z, Yf, optimize=True)  # (G, d, d)
    yy = float(np.sum(Yf * Yf))
    out = np.empty(tuples.shape[0])
    for s in range(0, tuples.shape[0], chunk):
        t = tuples[s : s + chunk]
        H = C[t[:, :, None], t[:, None, :]]  # (T, m, m, d, d)
        H = H.transpose(0, 1, 3, 2, 4).reshape(-1, m * d, m * d)
        B = Bg[t].reshape(-1, m * d, d)
        tr = np.trace(H, axis1=1, axis2=2) / (m * d)
        H = H + (1e-10 * tr + 1e-300)[:, None, None] * np.eye(m * d)
        try:
            sol = np.linalg.solve(H, B)
        except np.linalg.LinAlgError:
            sol = np.stack([np.linalg.lstsq(h, b, rcond=None)[0] for h, b in zip(H, B)])
        out[s : s + chunk] = (yy - np.einsum("tij,tij->t", B, sol)) / max(yy, 1e-300)
    return out


class _FlatVP:
    """The refine's variable-projection least squares on the flat: residual r(c) = vec(Y − Z Ŵ), Ŵ = Z⁺Y, with
    Θ_i = p + U c_i, and Kaufman's Jacobian −(I − Z Z⁺) ∂(Z Ŵ)/∂c, where
    ∂(Z Ŵ)_{ac}/∂c_{il} = Σ_j P_i[a, j] (v_{jc} − ȳ_{ac}) s_{ajl}, s_{ajl} = x_aᵀ U_l x_j, v = X W_i, ȳ = P_i X W_i.

    The analytic Jacobian replaces MINPACK's finite differences (m(m−1) + 1 residuals per Jacobian) and reaches
    the same minimiser in two thirds of the time. The last state is cached, as ``least_squares`` asks for the
    Jacobian at the point whose residual it has just evaluated."""

    def __init__(self, flat_point: np.ndarray, U: np.ndarray, m: int, X: np.ndarray, Yf: np.ndarray) -> None:
        self.p, self.U, self.m, self.X, self.Yf = flat_point, U, m, X, Yf
        N, k, d = X.shape
        r = U.shape[1]
        # S[n, a, l, j] = x_aᵀ U_l x_j: the logits' derivatives along the flat's directions (fixed)
        XU = X.reshape(N * k, d) @ U.T.reshape(r, d, d).transpose(1, 0, 2).reshape(d, r * d)  # (Nk, (l, q))
        self.S = (XU.reshape(N, k * r, d) @ X.transpose(0, 2, 1)).reshape(N, k, r, k)
        self._key: np.ndarray | None = None
        self._cache: tuple[np.ndarray, np.ndarray, np.ndarray, CholeskyFactor | None, np.ndarray] | None = None
        self._res = np.empty((0, d))

    def _state(
        self, c: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, CholeskyFactor | None, np.ndarray, np.ndarray]:
        """(P (m, N, k, k), Zi = P X, Z (Nk, md), Cholesky factor of ZᵀZ or None, Ŵ, residual) at ``c``, cached."""
        if self._key is None or not np.array_equal(self._key, c):
            m, d = self.m, self.X.shape[2]
            th = (self.p + c.reshape(m, -1) @ self.U.T).reshape(m, d, d)
            P = attention(th, self.X)  # (m, N, k, k)
            Zi = P @ self.X
            Z = np.moveaxis(Zi, 0, 2).reshape(-1, m * d)
            fac = normal_factor(Z)  # kept: the Jacobian projects its columns with it
            W = least_squares_solve(Z, self.Yf, fac)
            self._cache = (P, Zi, Z, fac, W)
            self._res = self.Yf - Z @ W
            self._key = np.array(c, copy=True)
        assert self._cache is not None
        return (*self._cache, self._res)

    def residual(self, c: np.ndarray) -> np.ndarray:
        """r(c) = vec(Y − Z Ŵ) (rows (n, a), columns c), Ŵ the least-squares projections at c."""
        return self._state(c)[5].ravel()

    def jacobian(self, c: np.ndarray) -> np.ndarray:
        """Kaufman's Jacobian of ``residual`` at c: (N k d, m r), columns (head i, flat direction l). Its size is
        N·k·d·m·r floats (phase 5 uses at most ``max_examples`` examples)."""
        P, Zi, Z, fac, W, _ = self._state(c)
        m, (N, k, d), r = self.m, self.X.shape, self.U.shape[1]
        ws = W.reshape(m, d, d)
        D = np.empty((N, k, d, m, r))
        for i in range(m):
            PS = P[i][:, :, None, :] * self.S  # (N, a, l, j)
            term = (PS.reshape(N, k * r, k) @ (self.X @ ws[i])).reshape(N, k, r, d)  # Σ_j P s v_j
            term -= PS.sum(3)[..., None] * (Zi[i] @ ws[i])[:, :, None, :]  # − ȳ_a Σ_j P s
            D[:, :, :, i, :] = term.transpose(0, 1, 3, 2)
        Df = D.reshape(N * k, d * m * r)
        # Kaufman: the columns' components in range(Z) are removed (W follows Θ exactly)
        Df -= Z @ least_squares_solve(Z, Df, fac)
        return -Df.reshape(N * k * d, m * r)


def _tuples(G: int, m: int, max_tuples: int, rng: np.random.Generator) -> np.ndarray:
    """The m-subsets of G grid points, sorted: all of them, or ``max_tuples`` random ones (duplicates removed)."""
    if comb(G, m) <= max_tuples:
        return np.array(list(combinations(range(G), m)), dtype=np.intp)
    # m distinct grid points per tuple: the m smallest of G random keys (vectorised over tuples)
    keys = rng.random((max_tuples, G))
    tuples = np.sort(np.argpartition(keys, m - 1, axis=1)[:, :m], axis=1).astype(np.intp)
    return np.unique(tuples, axis=0)


def _refine(vp: _FlatVP, starts: np.ndarray, max_nfev: int, yy: float) -> tuple[list[np.ndarray], list[float], int]:
    """LM on the flat coordinates from each start (n, m, m−1): (coordinates, relative objectives, evaluations)."""
    refined, robj, nfev = [], [], 0
    for c0 in starts:
        sol = least_squares(vp.residual, c0.ravel(), jac=vp.jacobian, method="lm", max_nfev=max_nfev, x_scale=1.0)
        nfev += int(sol.nfev)
        refined.append(sol.x.reshape(c0.shape))
        robj.append(2.0 * float(sol.cost) / yy)
    return refined, robj, nfev


def _single_head(p: np.ndarray, X: np.ndarray, Yf: np.ndarray, yy: float, rec: PhaseRecord) -> HeadCandidates:
    """m = 1: the flat is a point, the one candidate."""
    d = X.shape[2]
    th = p.reshape(1, 1, d, d)
    Z = features(th[0], X)
    W = least_squares_solve(Z, Yf)
    obj = np.array([float(np.sum((Yf - Z @ W) ** 2)) / yy])
    rec.figures.update(
        {"grid_points": 1, "tuples": 1, "evaluations": 1, "best_objective": float(obj[0]), "examples": int(X.shape[0])}
    )
    return HeadCandidates(th, obj, np.zeros((1, 1, 0)), 1, 1, 1)


def _net(
    span: SpanEstimate,
    X: np.ndarray,
    Yf: np.ndarray,
    m: int,
    s: HeadsSettings,
    rng: np.random.Generator,
    rec: PhaseRecord,
) -> HeadCandidates:
    """m >= 2: the grid's m-subsets by their VP objective, LM from the ``n_refine`` best; the refined subsets and
    the raw grid winners together, best first."""
    flat, d, r = span.flat, X.shape[2], m - 1
    p, U = flat.point, flat.basis
    yy = float(np.sum(Yf * Yf))
    R = float(span.radius if s.radius is None else s.radius)
    assert s.grid is not None and s.n_refine is not None  # resolved
    pts = flat_grid(r, R, s.grid)
    G = pts.shape[0]
    Zg = (attention((p + pts @ U.T).reshape(G, d, d), X) @ X).reshape(G, -1, d)  # (G, Nk, d)
    tuples = _tuples(G, m, s.max_tuples, rng)
    obj = _subset_objectives(Zg, Yf, tuples)
    order = np.argsort(obj)
    starts = tuples[order[: max(1, s.n_refine)]]
    lm_starts = pts[starts[: s.n_refine]]
    if s.n_refine == 0:
        rec.figures["refine_skipped"] = "n_refine = 0: the grid's best subset goes to phase 6 as it is"
    refined: list[np.ndarray] = []
    robj: list[float] = []
    nfev = 0
    if lm_starts.shape[0]:
        # the logits' derivatives along U are shared by every start
        refined, robj, nfev = _refine(_FlatVP(p, U, m, X, Yf), lm_starts, s.max_nfev, yy)
    # keep the raw grid winners too: phase 6 validates them all
    coords = np.concatenate([np.array(refined).reshape(-1, m, r), pts[starts]])
    objective = np.concatenate([np.array(robj, dtype=float), obj[order[: starts.shape[0]]]])
    o = np.argsort(objective)
    coords, objective = coords[o], objective[o]
    thetas = (p + coords.reshape(-1, r) @ U.T).reshape(-1, m, d, d)
    n_tuples = comb(G, m)
    rec.figures.update(
        {
            "grid_points": int(G),
            "per_axis": s.grid,
            "radius": R,
            "tuples": int(tuples.shape[0]),
            "tuples_total": int(n_tuples),
            "subsampled": bool(n_tuples > s.max_tuples),
            "refined": int(lm_starts.shape[0]),
            "lm_evaluations": nfev,
            "examples": int(X.shape[0]),
            "best_grid_objective": float(obj[order[0]]),
            "best_objective": float(objective[0]),
        }
    )
    return HeadCandidates(thetas, objective, coords, G, int(tuples.shape[0]), int(tuples.shape[0]) + nfev)


def candidate_heads(
    span: SpanEstimate,
    X: np.ndarray,
    Y: np.ndarray,
    m: int,
    settings: HeadsSettings | None = None,
    *,
    rng: np.random.Generator | int | None = None,
    truth: MultiHeadAttention | None = None,
) -> tuple[HeadCandidates, PhaseRecord]:
    """Phase 5: a net over m-subsets of grid points on ``span.flat``, VP least squares for W, LM on the best
    ``settings.n_refine`` subsets.

    Parameters
    ----------
    span : SpanEstimate
        Phase 4's flat aff{Θ_i} (dimension m − 1) and its radius.
    X, Y : np.ndarray
        Training examples, (N, k, d); at most ``settings.max_examples`` of them are used, drawn at random.
    m : int
        Number of heads.
    settings : HeadsSettings, optional
        Grid, radius, refine and size limits (defaults: ``learn``'s; "auto" fields resolved for m).
    rng : np.random.Generator or int, optional
        The examples' subset and, beyond ``settings.max_tuples`` subsets, their subsample.
    truth : MultiHeadAttention, optional
        The true layer, for the record's ``truth`` figures.

    Returns
    -------
    candidates : HeadCandidates
        Every refined subset and the raw grid winners, best first.
    record : PhaseRecord
        "5-heads", with the search's size figures.
    """
    t0 = time.perf_counter()
    gen = np.random.default_rng(rng)
    N, k, d = X.shape
    s = (settings or HeadsSettings()).resolve(ProblemSize.of(X, m))
    rec = PhaseRecord("5-heads")
    flat = span.flat
    if flat.dim != m - 1:
        raise ValueError(f"the flat has dimension {flat.dim}, expected m − 1 = {m - 1}")
    if N > s.max_examples:
        idx = gen.choice(N, size=s.max_examples, replace=False)
        X, Y = X[idx], Y[idx]
    Yf = Y.reshape(-1, d)
    if m == 1:
        cands = _single_head(flat.point, X, Yf, float(np.sum(Yf * Yf)), rec)
    else:
        cands = _net(span, X, Yf, m, s, gen, rec)
    if truth is not None:
        rec.truth.update({f"best_{key}": v for key, v in head_errors(cands.thetas[0], None, truth).items()})
        T = np.asarray(truth.thetas, dtype=float).reshape(len(truth.thetas), -1)
        on_flat = flat.project(T)
        rec.truth["flat_projection_theta_error"] = float(
            np.max(np.linalg.norm(on_flat - T, axis=1) / np.linalg.norm(T, axis=1))
        )
    rec.time = time.perf_counter() - t0
    return cands, rec
