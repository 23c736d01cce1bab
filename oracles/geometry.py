"""Metric questions about a convex body: min-norm point, Chebyshev centre, widths.

* ``min_norm_point``: argmin ‖x‖ over K, one entry with a ``method`` per kind of body (closed form, dense
  IPM guess polished and KKT-verified, backend QP, working-set QP, conic program, ellipsoid on the
  epigraph for separation-only bodies).
* ``chebyshev_center``: the centre and radius of the largest ball inside K
  (LP max r s.t. a_i x + r ‖a_i‖ <= b_i). A flat body has radius 0; its centre is then the *relative*
  Chebyshev centre, the centre of the largest ball inside K within aff(K).
* ``width(K, u) = max u·x - min u·x`` over K (two LPs or two maximize calls); ``widths`` for many u.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.optimize import nnls

from . import solvers
from ._dense_ipm import min_norm_ipm
from ._separation_only import _min_norm_by_cuts, _width_by_cuts
from ._sparse import row_norms
from ._validate import MAX_MAGNITUDE, RANGE_TEXT, as_matrix, as_vector, check_real
from ._validate import radius as check_radius
from .affine import _as_polytope, _check_tol, _normalised_rows, _objective_model, _System, _system, affine_hull
from .affine_subspace import AffineSubspace
from .bodies import Ball, ConvexBody, Intersection, Polytope
from .errors import MissingOracleError, UnboundedError
from .solvers import Matrix
from .working_set import _WORKING_SET_DEFAULTS, WorkingSetOptions, _min_norm_working_set

Body = ConvexBody | AffineSubspace  # what the metric questions accept

_POLISH_FLOPS = 3e8  # the sparse form's polish: its dense least squares (r active rows x n) up to this


def _check_body(body: object) -> None:
    if not isinstance(body, (ConvexBody, AffineSubspace)):
        raise TypeError(f"body must be a ConvexBody or AffineSubspace, got {type(body).__name__}")


def _check_search_ball(body: ConvexBody, center: ArrayLike | None, radius: float | None, *, epigraph: bool) -> None:
    """The caller's ``center`` and ``radius`` of a separation-only search, checked under their own names before
    the cutting-plane run derives its own ball from them. min_norm_point searches the epigraph
    {(x, t) : ‖x‖ <= t} from the ball of radius 1.01·hypot(radius, ‖center‖ + radius) around
    (center, ‖center‖ + radius), which must stay in the engine's range too."""
    if radius is None:
        return  # the run itself says that radius= is needed
    r = check_radius(radius, "radius")
    c = np.zeros(body.dim) if center is None else as_vector(center, "center", body.dim)
    top = float(np.linalg.norm(c)) + r
    if epigraph and not 1.01 * math.hypot(r, top) <= MAX_MAGNITUDE:
        raise ValueError(
            f"radius = {r:.3g} with ‖center‖ = {float(np.linalg.norm(c)):.3g} is too large for min_norm_point on "
            f"a separation-only body: it searches the norm's epigraph up to height ‖center‖ + radius, and the "
            f"engine accepts {RANGE_TEXT} (radius + ‖center‖ up to about 7e149)"
        )


MIN_NORM_METHODS = ("auto", "closed_form", "ipm", "qp", "working_set", "conic", "ellipsoid")


def _min_norm_method(body: Body, poly: Polytope | None, method: str, solver: str | None) -> str:
    """The method ``min_norm_point`` runs: "auto" resolved (see its docstring), an explicit one checked."""
    if method not in MIN_NORM_METHODS:
        raise ValueError(f"method must be one of {MIN_NORM_METHODS}, got {method!r}")
    closed = isinstance(body, (AffineSubspace, Ball))
    if method == "auto":
        if closed:
            return "closed_form"
        if poly is not None:
            return "ipm" if solver is None and not poly.is_sparse and (poly.A.shape[0] or poly.has_bounds) else "qp"
        return "conic" if isinstance(body, ConvexBody) and body.is_explicit else "ellipsoid"
    dense_poly = poly is not None and not poly.is_sparse
    fits = {
        "closed_form": closed,
        "ipm": dense_poly,
        "qp": poly is not None,
        "working_set": dense_poly,
        "conic": isinstance(body, ConvexBody) and body.is_explicit,
        "ellipsoid": isinstance(body, ConvexBody),
    }
    if not fits[method]:
        ok = [m for m in MIN_NORM_METHODS[1:] if fits[m]]
        raise ValueError(f"method={method!r} does not apply to a {type(body).__name__}; its methods are {ok}")
    return method


def min_norm_point(
    body: Body,
    *,
    method: str = "auto",
    solver: str | None = None,
    center: ArrayLike | None = None,
    radius: float | None = None,
    tol: float = 1e-8,
    max_iter: int | None = None,
    options: WorkingSetOptions | None = None,
) -> np.ndarray:
    """argmin_{x in K} ‖x‖₂, one entry for every body.

    Methods:

    * ``"closed_form"`` (Ball, AffineSubspace): the projection of 0.
    * ``"ipm"`` (Polytope, or an intersection of polytopes): a dense numpy interior-point guess of the QP
      min ½‖x‖², polished to the min-norm point of its active flat and accepted only if it passes the exact
      KKT test; otherwise (or with no inequality rows) the ``"qp"`` answer, on ``solver``'s QP backend.
    * ``"qp"`` (Polytope): the QP on a backend (``solver``; Clarabel by default), polished the same way
      (a sparse polytope, bounds as bounds: while the polish's dense least squares cost <= 3e8 flops).
    * ``"working_set"`` (Polytope): constraint generation on the QP for many rows in few dimensions when
      the point is cut off by a small share of them: rows with a single non-zero entry are kept as
      variable bounds; the QP is solved over the ``start`` rows most violated at 0 and re-solved with the
      ``add`` most violated rows at each iterate until the iterate meets every row within
      ``feasibility_tol`` (then it is exact: a relaxation's minimiser that is feasible is optimal); after
      ``max_rounds`` rounds an iterate still off by 1e-6 is replaced by the full QP. The answer is the
      backend's, not KKT-polished.
    * ``"conic"`` (other explicit bodies, e.g. a Polytope & Ball): a conic program through cvxpy.
    * ``"ellipsoid"`` (any body with a separation oracle; what a separation-only body gets): the ellipsoid
      method on the epigraph {(x, t) : x in K, ‖x‖ <= t} (``NormEpigraph``) from the ball B(center, radius)
      that must contain the body, cuts read within 1e-9 (so flat bodies work).
    * ``"auto"``: closed_form for a Ball or flat; for a polytope "ipm" when ``solver`` is None and it has
      inequality rows, else "qp"; "conic" for other explicit bodies; "ellipsoid" otherwise. It never picks
      "working_set", whose accuracy is the QP backend's and whose speed depends on how many rows cut the
      point off: choose it where it pays (on 3,000 random rows: 3-9x faster than "ipm" for n = 20-256; on
      bodies with thousands of near-redundant rows 5-7x faster up to n = 100, slower at n = 256).

    Parameters
    ----------
    body : ConvexBody or AffineSubspace
        The body K.
    method : str
        One of ``MIN_NORM_METHODS`` (above); an explicit method that does not apply to the body is a
        ValueError.
    solver : str, optional
        Backend of the QP, LP or conic program (default: the engine's choice for the kind).
    center, radius : array_like, float, optional
        ``"ellipsoid"`` only: a ball B(center, radius) containing the body (center defaults to 0).
    tol : float
        ``"ellipsoid"`` only: ‖x‖ within tol of the minimum.
    max_iter : int, optional
        ``"ellipsoid"`` only: the ellipsoid method's update budget.
    options : dict, optional
        ``"working_set"`` only: ``start``, ``add``, ``max_rounds``, ``feasibility_tol`` (defaults 256, 256,
        20, 1e-7); an unknown key is a TypeError.

    Returns
    -------
    ndarray of shape (n,)
        The min-norm point. An empty body raises EmptyBodyError.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Polytope, min_norm_point
    >>> half = Polytope(np.array([[-1.0, -1.0]]), np.array([-2.0]))  # x + y >= 2
    >>> np.round(min_norm_point(half), 8)
    array([1., 1.])
    """
    _check_body(body)
    poly = _as_polytope(body) if isinstance(body, ConvexBody) else None
    method = _min_norm_method(body, poly, method, solver)
    opts = _min_norm_options(method, options)
    if isinstance(body, AffineSubspace):  # "closed_form" is the only method of a flat
        return body.point.copy()
    if method == "closed_form":
        assert isinstance(body, Ball)  # the only other body with a closed form
        nc = float(np.linalg.norm(body.center))
        return np.zeros(body.dim) if nc <= body.radius else body.center * (1.0 - body.radius / nc)
    if method == "ellipsoid":
        _check_search_ball(body, center, radius, epigraph=True)
        return _min_norm_by_cuts(body, center=center, radius=radius, tol=tol, max_iter=max_iter, solver=solver)
    if method == "conic":
        import cvxpy as cp

        x = cp.Variable(body.dim)
        solvers.solve_cvxpy(cp.Problem(cp.Minimize(cp.sum_squares(x)), body.cvxpy_constraints(x)), solver=solver)
        return np.asarray(x.value, dtype=float)
    assert poly is not None  # the remaining methods apply to polytopes only
    if method == "working_set":
        A_all, b_all = poly.dense_rows()
        return _min_norm_working_set(A_all, b_all, poly.A_eq, poly.b_eq, solver=solver, **opts)[0]
    return _min_norm_qp(poly, method, solver)


def _min_norm_qp(poly: Polytope, method: str, solver: str | None) -> np.ndarray:
    """``min_norm_point`` on a polytope by "ipm" (dense) or "qp": the QP (or the IPM guess), KKT-polished."""
    n = poly.dim
    eq = (poly.A_eq, poly.b_eq) if poly.A_eq.shape[0] else (None, None)
    if poly.is_sparse:  # the QP as it is (sparse, bounds as bounds), then the same polish as the dense form's
        A, b = (poly.A, poly.b) if poly.A.shape[0] else (None, None)
        xq = solvers.solve_qp(
            sp.identity(n, format="csc"),
            np.zeros(n),
            A,
            b,
            eq[0],
            eq[1],
            poly.bounds if poly.has_bounds else None,
            solver=solver,
        ).x
        return _polish_min_norm(poly, xq, max_flops=_POLISH_FLOPS)[0]
    A_all, b_all = poly.dense_rows()
    A, b = (A_all, b_all) if A_all.shape[0] else (None, None)
    if method == "ipm" and A is not None:
        # a dense numpy IPM guess, kept only if its polished form passes the exact KKT test
        S = _system(poly, 1e-12, sparse=False)
        guess = min_norm_ipm(S.G, S.h, S.Ae if S.be.shape[0] else None, S.be if S.be.shape[0] else None)
        if np.all(np.isfinite(guess.x)):
            xp, ok = _polish_min_norm(poly, guess.x)
            if ok:
                return xp
    sol = solvers.solve_qp(np.eye(n), np.zeros(n), A, b, *eq, solver=solver)
    return _polish_min_norm(poly, sol.x)[0]


def _min_norm_options(method: str, options: WorkingSetOptions | None) -> WorkingSetOptions:
    if not options:
        return _WORKING_SET_DEFAULTS.copy() if method == "working_set" else {}
    if not isinstance(options, dict):
        raise TypeError(f"options must be a dict, got {type(options).__name__}")
    if method != "working_set":
        raise TypeError(f"min_norm_point method={method!r} takes no options, got {sorted(options)}")
    unknown = sorted(set(options) - set(_WORKING_SET_DEFAULTS))
    if unknown:
        raise TypeError(f"unknown working_set option(s) {unknown}; valid: {sorted(_WORKING_SET_DEFAULTS)}")
    return {**_WORKING_SET_DEFAULTS, **options}


def _polish_min_norm(P: Polytope, x: np.ndarray, max_flops: float | None = None) -> tuple[np.ndarray, bool]:
    """Sharpen an interior-point answer: x* is the min-norm point of its active flat {a_i x = b_i}.

    An IPM stops at objective gap ε, i.e. ‖x - x*‖ ~ sqrt(ε); guess the active rows, take the min-norm
    solution of their equations, and keep it only if it passes the full KKT test (feasible, x = -Aᵀλ with
    λ >= 0 on the active inequality rows, found by non-negative least squares). The guess is the rows with
    slack <= 1e-5·max(1, ‖x‖), then (if the test fails) 1e-4 and 1e-3 times that: a backend answer can sit
    farther than 1e-5 from a row active at x* (2e-5 on a polytope with a hidden equality),
    and the KKT test, sufficient for this strictly convex problem, rejects every wrong guess.
    The rows are P's inequality rows and its finite bounds (as unit rows); a sparse P stays sparse except
    for its active rows and its equalities, which the dense least squares take. ``max_flops``: give up
    (return x unpolished) when that least-squares system (r rows, n columns: r·n·min(r, n) flops) is larger.
    Returns (point, True) when the KKT test passed, else (x, False)."""
    if P.is_sparse:
        Gb, h, _, _ = P.bound_rows()
        A = sp.vstack([P.A, Gb], format="csr") if Gb.shape[0] else P.A
        b = np.concatenate([P.b, h])
        na = row_norms(A)
    else:
        A, b = P.dense_rows()
        na = np.linalg.norm(A, axis=1)
    safe = np.where(na > 0, na, 1.0)
    slack = (b - A @ x) / safe
    scale = max(1.0, float(np.linalg.norm(x)))
    n, Ae = P.dim, None
    tried: np.ndarray | None = None
    for level in (1e-5, 1e-4, 1e-3):
        act = np.flatnonzero((slack <= level * scale) & (na > 0))
        if tried is not None and np.array_equal(act, tried):
            continue
        tried = act
        r = act.size + P.A_eq.shape[0]
        if max_flops is not None and float(r) * n * min(r, n) > max_flops:
            return x, False
        if Ae is None:
            Ae = P.A_eq.toarray() if sp.issparse(P.A_eq) else P.A_eq
        xp = _kkt_point(P, A, b, safe, act, Ae, x, scale)
        if xp is not None:
            return xp, True
    return x, False


def _kkt_point(
    P: Polytope,
    A: Matrix,
    b: np.ndarray,
    safe: np.ndarray,
    act: np.ndarray,
    Ae: np.ndarray,
    x: np.ndarray,
    scale: float,
) -> np.ndarray | None:
    """The min-norm point of the flat {a_i x = b_i, i in act; A_eq x = b_eq} if it passes the KKT test of
    min ½‖x‖² over P (and lies within 1e-3·scale of x), else None."""
    be = P.b_eq
    A_act = A[act].toarray() if sp.issparse(A) else A[act]
    M = np.vstack([A_act / safe[act, None], Ae])
    if M.shape[0] == 0:
        zero = np.zeros_like(x)
        return zero if P.contains(zero) else None
    rhs = np.concatenate([b[act] / safe[act], be])
    xp = np.linalg.lstsq(M, rhs, rcond=None)[0]  # the min-norm solution of the active equations
    if np.max(np.abs(M @ xp - rhs)) > 1e-9 * max(1.0, float(np.max(np.abs(rhs)))):
        return None
    if np.max((A @ xp - b) / safe, initial=0.0) > 1e-9 * scale or (
        Ae.shape[0] and np.max(np.abs(Ae @ xp - be)) > 1e-9 * scale
    ):
        return None
    # multipliers λ >= 0 (inequalities) and free μ (equalities, split as μ+ - μ-) with x = -(Aᵀλ + A_eqᵀμ):
    # non-negative least squares, since the active rows may be dependent (hidden equalities)
    G = np.vstack([M, -Ae]).T
    _, resid = nnls(G, -xp, maxiter=50 * G.shape[1])
    if resid > 1e-8 * scale:
        return None
    if np.linalg.norm(xp - x) > 1e-3 * scale:
        return None
    return xp


def _cheb_lp(
    An: np.ndarray, bn: np.ndarray, Ae: np.ndarray | None, be: np.ndarray | None, solver: str | None
) -> tuple[np.ndarray, float]:
    """max r s.t. An x + r <= bn (unit rows), Ae x = be, r >= 0."""
    n = An.shape[1]
    A_ub = np.hstack([An, np.ones((An.shape[0], 1))])
    A_eq = np.hstack([Ae, np.zeros((Ae.shape[0], 1))]) if Ae is not None and Ae.shape[0] else None
    c = np.concatenate([np.zeros(n), [-1.0]])
    lo = np.concatenate([np.full(n, -np.inf), [0.0]])
    try:
        sol = solvers.solve_lp(c, A_ub, bn, A_eq, be if A_eq is not None else None, (lo, None), solver=solver)
    except UnboundedError as e:
        raise UnboundedError("the body contains balls of every radius (no Chebyshev centre)") from e
    return sol.x[:n], float(sol.x[n])


def chebyshev_center(
    body: Body, *, solver: str | None = None, tol: float = 1e-9, relative: bool = False
) -> tuple[np.ndarray, float]:
    """(centre, radius) of the largest Euclidean ball inside the body.

    When the body is flat (radius <= tol) the radius is 0 and the centre returned is the relative
    Chebyshev centre: the centre of the largest ball inside K within aff(K) (a relative-interior point
    as far as possible from the relative boundary).

    Parameters
    ----------
    body : ConvexBody or AffineSubspace
        An explicit body (polytope, ball, their intersection) or a flat.
    solver : str, optional
        LP or conic backend.
    tol : float
        Radius at or below which the body counts as flat.
    relative : bool
        For a flat body, return the radius within aff(K) instead of 0.

    Returns
    -------
    tuple of (ndarray, float)
        The centre and the radius. Unbounded radius: UnboundedError; empty body: EmptyBodyError.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Polytope, chebyshev_center
    >>> square = Polytope(np.vstack([np.eye(2), -np.eye(2)]), np.array([1.0, 1.0, 0.0, 0.0]))  # [0, 1]²
    >>> c, r = chebyshev_center(square)
    >>> np.round(c, 9).tolist(), round(r, 9)
    ([0.5, 0.5], 0.5)
    """
    _check_body(body)
    tol = _check_tol(tol)
    if isinstance(body, AffineSubspace):
        if body.dim == body.ambient_dim or relative and body.dim > 0:
            raise UnboundedError("an affine subspace of positive dimension contains arbitrarily large balls")
        return body.point.copy(), 0.0
    if isinstance(body, Ball):
        return body.center.copy(), body.radius
    poly = _as_polytope(body)
    if poly is not None and (poly.is_sparse or poly.has_bounds):
        return _cheb_sparse(poly, solver, tol, relative)
    if poly is not None:
        An, bn, Ae, be, _ = _normalised_rows(poly, tol)
        if An.shape[0] == 0:
            raise UnboundedError("a polytope without inequality rows contains arbitrarily large balls")
        x, r = _cheb_lp(An, bn, Ae, be, solver)
        if r > tol * max(1.0, float(np.max(np.abs(x)))):
            return x, r
        hull = affine_hull(poly, solver=solver)
        if hull.dim == 0:
            return hull.point.copy(), 0.0
        N = hull.basis
        G = An @ N
        g = bn - An @ hull.point
        gn = np.linalg.norm(G, axis=1)
        live = gn > 1e-9
        y, rr = _cheb_lp(G[live] / gn[live, None], g[live] / gn[live], None, None, solver)
        return hull.to_global(y), (rr if relative else 0.0)
    if isinstance(body, Intersection) and body.is_explicit:
        return _cheb_conic(body, solver)
    raise MissingOracleError(f"chebyshev_center needs an explicit body; got {type(body).__name__}")


def _cheb_sparse(poly: Polytope, solver: str | None, tol: float, relative: bool) -> tuple[np.ndarray, float]:
    """Rows and bounds as unit rows g_i x <= h_i (sparse): max r s.t. g_i x + r π_i <= h_i, A_eq x = b_eq, with
    π_i = 1 (full-dimensional test), then, when r ~ 0, π_i = ‖Bᵀg_i‖ for the hull's basis B: the largest ball
    inside K within aff(K) (rows constant on the hull get π_i = 0; x in K keeps x in aff(K))."""
    S = _system(poly, tol, sparse=True)
    if S.m == 0:
        raise UnboundedError("a polytope without inequality rows or bounds contains arbitrarily large balls")
    x, r = _cheb_rows(S, np.ones(S.m), solver)
    if r > tol * max(1.0, float(np.max(np.abs(x)))):
        return x, r
    hull = affine_hull(poly, solver=solver)
    if hull.dim == 0:
        return hull.point.copy(), 0.0
    pi = np.linalg.norm(S.G @ hull.basis, axis=1)
    pi[pi <= 1e-9] = 0.0
    x, rr = _cheb_rows(S, pi, solver)
    return x, (rr if relative else 0.0)


def _cheb_rows(S: _System, pi: np.ndarray, solver: str | None) -> tuple[np.ndarray, float]:
    n = S.G.shape[1]
    A_ub = sp.hstack([S.G, sp.csr_matrix(pi[:, None])], format="csr")
    me = S.be.shape[0]
    A_eq = sp.hstack([S.Ae, sp.csr_matrix((me, 1))], format="csr") if me else None
    c = np.zeros(n + 1)
    c[-1] = -1.0
    lo = np.concatenate([np.full(n, -np.inf), [0.0]])
    try:
        sol = solvers.solve_lp(c, A_ub, S.h, A_eq, S.be if me else None, (lo, None), solver=solver)
    except UnboundedError as e:
        raise UnboundedError("the body contains balls of every radius (no Chebyshev centre)") from e
    return sol.x[:n], float(sol.x[n])


def _cheb_conic(body: Intersection, solver: str | None) -> tuple[np.ndarray, float]:
    import cvxpy as cp

    x, r = cp.Variable(body.dim), cp.Variable(nonneg=True)
    cons = []
    for p in body.parts:
        if isinstance(p, Polytope):
            if p.A.shape[0]:
                cons.append(p.A @ x + r * row_norms(p.A) <= p.b)
            if p.A_eq.shape[0]:
                cons.append(p.A_eq @ x == p.b_eq)
            up, lo = np.flatnonzero(np.isfinite(p.ub)), np.flatnonzero(np.isfinite(p.lb))
            if up.size:
                cons.append(x[up] + r <= p.ub[up])
            if lo.size:
                cons.append(x[lo] - r >= p.lb[lo])
        else:
            assert isinstance(p, Ball)  # the explicit parts of a (flattened) Intersection: Polytope or Ball
            cons.append(cp.norm(x - p.center, 2) + r <= p.radius)
    solvers.solve_cvxpy(cp.Problem(cp.Maximize(r), cons), solver=solver)
    radius = r.value
    assert radius is not None  # solve_cvxpy raises unless the status is "optimal", which sets every variable
    return np.asarray(x.value, dtype=float), max(float(radius), 0.0)


def width(
    body: Body,
    u: ArrayLike,
    *,
    solver: str | None = None,
    center: ArrayLike | None = None,
    radius: float | None = None,
    tol: float = 1e-8,
    max_iter: int | None = None,
) -> float:
    """max_{x in K} u·x - min_{x in K} u·x.

    Two LPs, or two calls of the body's maximize oracle; with only a separation oracle, two ellipsoid
    minimisations from the ball B(center, radius), each to ``tol``.

    Parameters
    ----------
    body : ConvexBody or AffineSubspace
        The body K.
    u : array_like of shape (n,)
        The direction.
    solver : str, optional
        LP backend.
    center, radius : array_like, float, optional
        Separation-only bodies: a ball containing K (center defaults to 0).
    tol : float
        Separation-only bodies: accuracy of each minimisation.
    max_iter : int, optional
        Separation-only bodies: the ellipsoid method's update budget.

    Returns
    -------
    float
        The width (>= 0); UnboundedError when it is infinite.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Ball, width
    >>> round(width(Ball(np.zeros(3), 2.0), np.array([1.0, 0.0, 0.0])), 9)
    4.0
    """
    _check_body(body)
    u = as_vector(u, "u", body.ambient_dim if isinstance(body, AffineSubspace) else body.dim)
    if isinstance(body, AffineSubspace):
        if np.linalg.norm(body.basis.T @ u) <= 1e-12 * max(1.0, float(np.linalg.norm(u))):
            return 0.0
        raise UnboundedError("u is not orthogonal to the flat: the width is infinite")
    if not body.has_maximize:
        if not np.any(u):
            return 0.0
        _check_search_ball(body, center, radius, epigraph=False)
        return _width_by_cuts(body, u, center=center, radius=radius, tol=tol, max_iter=max_iter, solver=solver)
    hi, _ = body.maximize(u, solver=solver)
    lo, _ = body.maximize(-u, solver=solver)
    return max(0.0, hi + lo)


def widths(
    body: Body,
    U: Matrix,
    *,
    solver: str | None = None,
    center: ArrayLike | None = None,
    radius: float | None = None,
    tol: float = 1e-8,
) -> np.ndarray:
    """width(body, u) for every row u of U.

    A Polytope uses one kept LP model (2 LPs per row; warm-started simplex when it is sparse);
    ``widths(P, I)`` is flux variability analysis, max x_j - min x_j.

    Parameters
    ----------
    body : ConvexBody or AffineSubspace
        The body K.
    U : array_like or scipy.sparse matrix of shape (k, n)
        The directions as rows (sparse for a polytope).
    solver, center, radius, tol
        As in ``width``.

    Returns
    -------
    ndarray of shape (k,)
        The widths.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Polytope, widths
    >>> box = Polytope(np.vstack([np.eye(2), -np.eye(2)]), np.array([1.0, 3.0, 1.0, 3.0]))  # [-1, 1] x [-3, 3]
    >>> np.round(widths(box, np.eye(2)), 9).tolist()
    [2.0, 6.0]
    """
    _check_body(body)
    check_real(U, "U")
    if isinstance(body, AffineSubspace):
        U = as_matrix(U, "U", body.ambient_dim)
        return np.array([width(body, u) for u in U])
    poly = _as_polytope(body)
    if sp.issparse(U) and poly is not None:  # e.g. the identity for flux variability analysis
        U = sp.csr_matrix(U, dtype=float)
        if U.shape[1] != body.dim or not np.all(np.isfinite(U.data)):
            raise ValueError(f"U must have {body.dim} columns and finite entries, got shape {U.shape}")
        rows = (U[i].toarray().ravel() for i in range(U.shape[0]))
    else:
        U = as_matrix(U.toarray() if sp.issparse(U) else U, "U", body.dim)
        rows = iter(U)
    if poly is None:
        return np.array([width(body, u, solver=solver, center=center, radius=radius, tol=tol) for u in rows])
    model = _objective_model(poly, solver)
    return np.array([max(0.0, model.maximize(u)[0] + model.maximize(-u)[0]) for u in rows])


__all__ = ["min_norm_point", "chebyshev_center", "width", "widths"]
