"""Affine hull and linear span of convex bodies, chosen by the oracle the body offers.

* ``method="lp"`` (explicit Polytope): the implicit equalities I = {i : a_i x = b_i on all of K};
  aff(K) = {x : a_i x = b_i (i in I), A_eq x = b_eq}. Fast path: an interior-point feasibility solve
  (``oracles._dense_ipm``, a few dense numpy iterations; else the backend's IPM without crossover) gives a
  near-analytic-centre point x̂ whose slack is ~0 exactly on I; the candidates
  C = {slack <= θ} are then certified by a tiny dual LP (min bᵀz s.t. A_Cᵀz + A_eqᵀμ = 0, z >= 1, whose
  value bounds every candidate row's width). Unclear cases fall back to a Freund-Roundy-Todd LP
  (max Σt s.t. A x + t <= s b, A_eq x = s b_eq, 0 <= t <= 1, 1 <= s <= 1/tol) restricted to C.
* ``method="directions"`` (any body with ``maximize``): the GLS recipe, at most 2n+1 LPs.
* ``method="ellipsoid"`` (separation only): the ellipsoid's thin axes (``oracles.hull_ellipsoid``).

Widths and slacks are measured on rows scaled to unit norm, so ``tol`` is a Euclidean distance:
a row is an implicit equality when the body's extent along its normal is at most ~tol.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import solvers
from ._validate import as_vector
from .affine_subspace import AffineSubspace
from .bodies import Ball, ConvexBody, Intersection, Polytope, _merge_polytopes
from .errors import EmptyBodyError, MissingOracleError, SolverError, UnboundedError
from ._dense_ipm import central_point, single_thread_blas

METHODS = ("auto", "lp", "directions", "ellipsoid")
_RANK_TOL = 1e-9


@dataclass
class ImplicitEqualities:
    """Implicit equalities of {A x <= b, A_eq x = b_eq}.

    ``rows``: indices of the inequality rows that hold with equality on the whole body (width <= ~tol);
    ``interior_point``: a point of the body where every other inequality row has slack >= ``min_slack``
    (normalised, i.e. a distance); ``method``: how they were found: "dense-ipm+certificate" (the dense
    numpy IPM point, certified), "<BACKEND>+certificate" (the backend's interior solve, certified),
    "<BACKEND>+frt" (FRT restricted to the candidate rows) or "frt" (the full FRT LP); ``n_solves``: the
    number of LP solves used (the dense IPM not counted); ``certificate``: multipliers z >= 1 on ``rows``
    with A_rowsᵀz ∈ range(A_eqᵀ)
    and bᵀz ~ 0 when the fast path certified them (None otherwise).
    """

    rows: np.ndarray
    interior_point: np.ndarray
    min_slack: float
    method: str
    n_solves: int
    certificate: np.ndarray | None = None
    info: dict = field(default_factory=dict)


def _check_tol(tol: float) -> float:
    t = float(tol)
    if not np.isfinite(t) or t <= 0:
        raise ValueError(f"tol must be positive and finite, got {tol}")
    return t


def _normalised_rows(P: Polytope, tol: float):
    """Rows scaled to unit norm. Zero rows: 0 <= b (dropped) or 0 <= b < 0 (empty body)."""
    A, b = P.A, P.b
    na = np.linalg.norm(A, axis=1)
    zero = na == 0
    if np.any(b[zero] < -tol):
        raise EmptyBodyError("a zero row 0 @ x <= b with b < 0: the body is empty")
    keep = np.flatnonzero(~zero)
    An, bn = A[keep] / na[keep, None], b[keep] / na[keep]
    Ae, be = P.A_eq, P.b_eq
    ne = np.linalg.norm(Ae, axis=1)
    if np.any(np.abs(be[ne == 0]) > tol):
        raise EmptyBodyError("a zero equality row 0 @ x = b with b != 0: the body is empty")
    ke = ne > 0
    return An, bn, Ae[ke] / ne[ke, None], be[ke] / ne[ke], keep


def implicit_equalities(P: Polytope, *, tol: float = 1e-7, solver: str | None = None,
                        fast: bool = True) -> ImplicitEqualities:
    """The implicit equalities of an explicit Polytope and a relative-interior point (see module doc)."""
    if not isinstance(P, Polytope):
        raise TypeError(f"implicit_equalities needs a Polytope, got {type(P).__name__}")
    tol = _check_tol(tol)
    backend = solvers.get(solver, "lp")
    An, bn, Ae, be, keep = _normalised_rows(P, tol)
    m, n = An.shape
    if m == 0:
        x = solvers.solve_lp(np.zeros(n), None, None, Ae if Ae.shape[0] else None, be if Ae.shape[0] else None,
                             solver=backend.name).x
        return ImplicitEqualities(np.zeros(0, dtype=int), x, np.inf, "lp", 1)
    eq = (Ae, be) if Ae.shape[0] else (None, None)
    n_solves = 0
    cand = np.arange(m)
    x_hat = None
    method = "frt"
    if fast:
        # 1) a central feasible point: the dense numpy IPM first (cheap), then the backend's interior-point
        #    solve without crossover (only a backend that declares INTERIOR_SOLUTIONS: a first-order
        #    method such as SCS gives no central points, so it is skipped)
        sources = ["dense-ipm"] + ([backend.name] if backend.INTERIOR_SOLUTIONS else [])
        for source in sources:
            if source == "dense-ipm":
                cp = central_point(An, bn, Ae if Ae.shape[0] else None, be if Ae.shape[0] else None)
                if not np.all(np.isfinite(cp.x)):
                    continue
                x_hat = cp.x
            else:
                x_hat = solvers.solve_lp(np.zeros(n), An, bn, *eq, solver=backend.name, interior=True).x
                n_solves += 1
            # 2) candidates by slack, certified by the small dual LP
            done, cand, n_cert = _classify(An, bn, Ae, be, x_hat, tol, backend.name, keep, source)
            n_solves += n_cert
            if done is not None:
                done.n_solves = n_solves
                return done
        method = f"{sources[-1]}+frt"
        viol = np.inf if x_hat is None else max(float(np.max(An @ x_hat - bn, initial=0.0)),
                                                float(np.max(np.abs(Ae @ x_hat - be), initial=0.0)))
        if viol > tol:  # no trustworthy feasible point: the slack rows are not certified, use the full FRT
            cand, x_hat, method = np.arange(m), None, "frt"
    # 3) Freund-Roundy-Todd LP with t only on the candidate rows
    in_c = np.zeros(m, dtype=bool)
    in_c[cand] = True
    try:
        t, x_frt = _frt(An, bn, Ae, be, in_c, tol, backend.name)
    except SolverError:
        # an inaccurate solver may stall on the homogenised LP of an empty body: say "empty" when it is
        solvers.solve_lp(np.zeros(n), An, bn, *eq, solver=backend.name)
        raise
    n_solves += 1
    eq_rows = cand[t < 0.5]
    x_ri = x_frt if x_hat is None else 0.5 * (x_frt + x_hat)
    E = np.vstack([An[eq_rows], Ae])
    x_ri = _project_to_flat(x_ri, E, np.concatenate([bn[eq_rows], be])) if E.shape[0] else x_ri
    others = np.setdiff1d(np.arange(m), eq_rows)
    slack = float(np.min(bn[others] - An[others] @ x_ri)) if others.size else np.inf
    return ImplicitEqualities(keep[eq_rows], x_ri, slack, method, n_solves)


def _classify(An, bn, Ae, be, x_hat, tol, solver, keep, source):
    """Candidates {slack <= θ} at x_hat; certified when the dual LP bounds their widths by tol and the
    projection of x_hat onto their flat keeps every other row slack. Returns (result or None, cand, n_lps)."""
    m = An.shape[0]
    s = bn - An @ x_hat
    viol = max(0.0, float(-s.min()), float(np.max(np.abs(Ae @ x_hat - be), initial=0.0)))
    scale = max(1.0, float(np.max(np.abs(x_hat))), float(np.max(np.abs(bn))))
    theta = 1e3 * max(tol, viol, 1e-9 * scale)
    cand = np.flatnonzero(s <= theta)
    if cand.size == 0:
        if viol <= tol:
            return ImplicitEqualities(keep[cand], x_hat, float(s.min()), source, 0, info={"theta": theta}), cand, 0
        return None, cand, 0
    z, v, ok = _certify(An[cand], bn[cand], Ae, be, x_hat, tol, solver)
    if not ok:
        return None, cand, 1
    x_ri = _project_to_flat(x_hat, np.vstack([An[cand], Ae]), np.concatenate([bn[cand], be]))
    others = np.setdiff1d(np.arange(m), cand)
    slack = float(np.min(bn[others] - An[others] @ x_ri)) if others.size else np.inf
    if others.size and slack <= 0.5 * theta:
        return None, cand, 1
    return (ImplicitEqualities(keep[cand], x_ri, slack, f"{source}+certificate", 1, z,
                               {"theta": theta, "certificate_value": v}), cand, 1)


def _certify(AC, bC, Ae, be, x_hat, tol, solver):
    """min b_Cᵀz + b_eqᵀμ s.t. A_Cᵀz + A_eqᵀμ = 0, z >= 1. Its value bounds the width of each row in C."""
    k, n = AC.shape
    me = Ae.shape[0]
    M = np.hstack([AC.T, Ae.T])
    c = np.concatenate([bC, be])
    bounds = (np.concatenate([np.ones(k), np.full(me, -np.inf)]), None)
    try:
        sol = solvers.solve_lp(c, None, None, M, np.zeros(n), bounds, solver=solver)
    except (EmptyBodyError, UnboundedError, SolverError):
        return None, np.inf, False
    y = sol.x
    resid = float(np.linalg.norm(M @ y))
    # for any body point x: Σ z_i (b_i - a_i x) = value - residualᵀx, so each candidate's slack is <= this
    bound = sol.value + resid * (1.0 + float(np.linalg.norm(x_hat)))
    return y[:k], bound, bound <= tol


def _frt(An, bn, Ae, be, in_c, tol, solver):
    """Freund-Roundy-Todd: max Σ t_C s.t. a_i x + t_i <= s b_i (i in C), a_i x <= s b_i (others),
    A_eq x = s b_eq, 0 <= t <= 1, 1 <= s <= 1/tol. Returns (t on C, x/s)."""
    m, n = An.shape
    C = np.flatnonzero(in_c)
    k = C.size
    T = np.zeros((m, k))
    T[C, np.arange(k)] = 1.0
    A_ub = np.hstack([An, T, -bn[:, None]])
    A_eq = np.hstack([Ae, np.zeros((Ae.shape[0], k)), -be[:, None]]) if Ae.shape[0] else None
    c = np.concatenate([np.zeros(n), -np.ones(k), [0.0]])
    lo = np.concatenate([np.full(n, -np.inf), np.zeros(k), [1.0]])
    hi = np.concatenate([np.full(n, np.inf), np.ones(k), [1.0 / tol]])
    sol = solvers.solve_lp(c, A_ub, np.zeros(m), A_eq, np.zeros(Ae.shape[0]) if A_eq is not None else None,
                           (lo, hi), solver=solver)
    x, t, s = sol.x[:n], sol.x[n:n + k], sol.x[-1]
    return t, x / s


def _project_to_flat(x: np.ndarray, E: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Orthogonal projection of x onto {E y = e} (least squares, rank-revealing)."""
    if E.shape[0] == 0:
        return x
    return x - np.linalg.lstsq(E, E @ x - e, rcond=_RANK_TOL)[0]


def _flat_from_equations(point: np.ndarray, E: np.ndarray) -> AffineSubspace:
    n = point.shape[0]
    if E.shape[0] == 0:
        return AffineSubspace(point, np.eye(n))
    _, s, Vt = np.linalg.svd(E, full_matrices=True)
    r = int(np.sum(s > _RANK_TOL * max(s[0], 1e-300)))
    return AffineSubspace(point, Vt[r:].T)


def _hull_lp(P: Polytope, tol: float, solver: str | None) -> AffineSubspace:
    res = implicit_equalities(P, tol=tol, solver=solver)
    An, bn, Ae, be, keep = _normalised_rows(P, tol)
    pos = np.searchsorted(keep, res.rows)
    E = np.vstack([An[pos], Ae])
    e = np.concatenate([bn[pos], be])
    x = _project_to_flat(res.interior_point, E, e)
    return _flat_from_equations(x, E)


def _hull_directions(body: ConvexBody, tol: float, solver: str | None,
                     rng: np.random.Generator) -> AffineSubspace:
    """GLS: grow point differences D and normals N until |D| + |N| = n; <= 2n+1 maximize calls."""
    n = body.dim
    model = solvers.LPModel(body, solver=solver) if isinstance(body, Polytope) else None

    def maximize(c):
        try:
            return model.maximize(c) if model is not None else body.maximize(c, solver=solver)
        except UnboundedError as e:
            raise UnboundedError("affine_hull(method='directions') needs a bounded body; "
                                 "use method='lp' for an explicit Polytope") from e

    _, p0 = maximize(rng.standard_normal(n))
    D = np.zeros((n, 0))
    N = np.zeros((n, 0))
    while D.shape[1] + N.shape[1] < n:
        c = rng.standard_normal(n)
        Q = np.hstack([D, N])
        for _ in range(2):  # twice is enough (re-orthogonalisation)
            c -= Q @ (Q.T @ c)
        c /= np.linalg.norm(c)
        vmax, xp = maximize(c)
        vmin_neg, xm = maximize(-c)
        width = vmax + vmin_neg
        if width > tol * max(1.0, abs(vmax), abs(vmin_neg)):
            x = xp if vmax - c @ p0 >= c @ p0 + vmin_neg else xm
            d = x - p0
            for _ in range(2):
                d -= D @ (D.T @ d)
            D = np.hstack([D, (d / np.linalg.norm(d))[:, None]])
        else:
            N = np.hstack([N, c[:, None]])
    return AffineSubspace(p0, D)


def _bounding_ball(body: ConvexBody, solver: str | None) -> tuple[np.ndarray, float]:
    """A ball containing the body from its bounding box (2n maximize calls)."""
    n = body.dim
    hi = np.array([body.maximize(e, solver=solver)[0] for e in np.eye(n)])
    lo = -np.array([body.maximize(-e, solver=solver)[0] for e in np.eye(n)])
    return 0.5 * (hi + lo), max(0.5 * float(np.linalg.norm(hi - lo)) * 1.01, 1e-6)


def _hull_ellipsoid(body: ConvexBody, tol: float, solver: str | None, center, radius) -> AffineSubspace:
    if radius is None:
        if isinstance(body, Ball):
            center, radius = body.center, body.radius * 1.01 + 1e-9
        elif body.has_maximize:
            center, radius = _bounding_ball(body, solver)
        else:
            raise ValueError("method='ellipsoid' needs radius= (a ball around center= known to contain the "
                             "body) when the body has no maximize oracle")
    center = np.zeros(body.dim) if center is None else as_vector(center, "center", body.dim)
    radius = float(radius)
    if not np.isfinite(radius) or radius <= 0:
        raise ValueError(f"radius must be positive and finite, got {radius}")
    try:
        from .hull_ellipsoid import affine_hull_by_ellipsoid
    except ImportError as e:
        raise ImportError(f"affine_hull(method='ellipsoid') needs oracles.hull_ellipsoid, which is not "
                          f"available: {e}") from e
    return affine_hull_by_ellipsoid(body, center, radius, tol=tol)


def _as_polytope(body: ConvexBody) -> Polytope | None:
    if isinstance(body, Polytope):
        return body
    if isinstance(body, Intersection) and all(isinstance(p, Polytope) for p in body.parts):
        return _merge_polytopes(body.parts)
    return None


def affine_hull(body, *, method: str = "auto", tol: float = 1e-7, solver: str | None = None,
                center=None, radius: float | None = None, seed: int | np.random.Generator | None = 0
                ) -> AffineSubspace:
    """aff(K): the smallest flat containing the body.

    method: "auto" (explicit polytope -> "lp"; maximize oracle -> "directions"; separation only ->
    "ellipsoid"), "lp", "directions" or "ellipsoid". ``tol``: extent (Euclidean) below which a direction
    counts as flat. ``center``/``radius``: a ball containing the body, for "ellipsoid" (found by 2n LPs
    when the body can maximize). ``seed``: the random directions of "directions". Empty -> EmptyBodyError.
    """
    if isinstance(body, AffineSubspace):
        return body
    if not isinstance(body, ConvexBody):
        raise TypeError(f"body must be a ConvexBody or AffineSubspace, got {type(body).__name__}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    tol = _check_tol(tol)
    if solver is not None:
        solvers.get(solver, "lp")  # unknown -> ValueError, unusable -> SolverError, before any work
    poly = _as_polytope(body)
    if method == "auto":
        if isinstance(body, Ball):
            return AffineSubspace(body.center, np.eye(body.dim) if body.radius > 0 else np.zeros((body.dim, 0)))
        method = "lp" if poly is not None else "directions" if body.has_maximize else "ellipsoid"
    if method == "lp":
        if poly is None:
            raise MissingOracleError(f"method='lp' needs an explicit Polytope, got {type(body).__name__}")
        with single_thread_blas():  # n x n SVDs: threaded LAPACK was measured 20x slower on shared cores
            return _hull_lp(poly, tol, solver)
    if method == "directions":
        if not body.has_maximize:
            raise MissingOracleError(f"method='directions' needs a maximize oracle; {type(body).__name__} has none")
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        return _hull_directions(poly if poly is not None else body, tol, solver, rng)
    if not body.has_separate:
        raise MissingOracleError(f"method='ellipsoid' needs a separation oracle; {type(body).__name__} has none")
    return _hull_ellipsoid(body, tol, solver, center, radius)


def linear_span(body_or_points, *, tol: float = 1e-9, hull_tol: float = 1e-7, method: str = "auto",
                solver: str | None = None) -> np.ndarray:
    """Orthonormal basis (columns, n x r) of the linear span of a point set or of a body.

    Points (rows of a k x n array): SVD, keeping singular values > tol * σ_max. A body (or flat): the
    span of its affine hull (computed with ``hull_tol``, ``method``, ``solver``), i.e. the hull's
    directions plus its min-norm point when that is nonzero (‖point‖ > tol).
    """
    if isinstance(body_or_points, (ConvexBody, AffineSubspace)):
        tol = _check_tol(tol)
        hull = affine_hull(body_or_points, method=method, solver=solver, tol=hull_tol)
        B, p = hull.basis, hull.point
        pn = float(np.linalg.norm(p))
        if pn > tol:
            B = np.hstack([B, (p / pn)[:, None]])
        return B
    X = np.asarray(body_or_points, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"body_or_points must be a body or a 2-D array of points (rows), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("body_or_points contains NaN or inf")
    tol = _check_tol(tol)
    n = X.shape[1]
    if X.shape[0] == 0:
        return np.zeros((n, 0))
    _, s, Vt = np.linalg.svd(X, full_matrices=False)
    if s[0] == 0:
        return np.zeros((n, 0))
    return Vt[s > tol * s[0]].T


__all__ = ["affine_hull", "linear_span", "implicit_equalities", "ImplicitEqualities"]
