"""Affine hull and linear span of convex bodies, chosen by the oracle the body offers.

* ``method="lp"`` (explicit Polytope, dense or sparse, with or without variable bounds): the implicit
  equalities I = {i : a_i x = b_i on all of K} among the inequality rows and the bounds;
  aff(K) = {x : a_i x = b_i (i in I), A_eq x = b_eq, x_j = bound (implicit bounds)}. Paths (``fast=``):

  - ``"dense-ipm"``: a dense numpy interior-point feasibility solve (``oracles._dense_ipm``: each
    iteration costs ~(m + n) n² flops, at most 60 iterations) gives a near-analytic-centre point x̂ whose
    slack is ~0 exactly on I; the candidates C = {slack <= θ} are certified by a small dual LP
    (min bᵀz s.t. A_Cᵀz + A_eqᵀμ = 0, z >= 1, whose value bounds every candidate row's width);
  - ``"backend-ipm"``: the same with the backend's interior-point solve without crossover (one sparse LP);
  - ``"off"``: one Freund-Roundy-Todd LP (max Σt s.t. A x + t <= s b, A_eq x = s b_eq, 0 <= t <= 1,
    1 <= s <= 1/tol; t_i < ½ marks an equality), sparse when the polytope is; its duals are the certificate;
  - ``"auto"`` (default): "dense-ipm" when the polytope is dense and an iteration is cheap
    ((m + n) n² <= 3e8 flops), else "backend-ipm". An uncertified fast path falls back to the FRT LP
    restricted to its candidates (the rows with slack <= θ at a feasible IPM point; the others are not
    equalities), or to the full FRT LP when the point is not feasible. On sparse flux polytopes the IPM point
    rarely certifies by itself, but its candidates shrink the FRT LP: iJO1366 0.43 s against 0.80 s.
* ``method="directions"`` (any body with ``maximize``): the GLS recipe, at most 2k+1 LPs where k is the
  dimension left by the explicit equalities.
* ``method="ellipsoid"`` (separation only): the ellipsoid's thin axes (``oracles.hull_ellipsoid``); refused at
  once when its predicted oracle calls exceed the budget.

Units of ``tol``: every row is scaled to a unit normal, so ``tol`` is a Euclidean distance in x's units: a
row (or bound) is an implicit equality when the body's extent from its hyperplane, max_x (b_i - a_i x)/‖a_i‖,
is at most ~tol. Each detected equality carries that extent's certified upper bound (``row_widths`` etc.).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from . import solvers
from ._dense_ipm import central_point, single_thread_blas
from ._sparse import row_norms, scale_rows, sparse_null_space
from ._validate import as_vector, real_array
from .affine_subspace import AffineSubspace
from .bodies import Ball, ConvexBody, Intersection, Polytope, _merge_polytopes
from .errors import EmptyBodyError, MissingOracleError, SolverError, UnboundedError
from .results import CompactResult
from .solvers import Matrix

METHODS = ("auto", "lp", "directions", "ellipsoid")
FAST = ("auto", "dense-ipm", "backend-ipm", "off")
_RANK_TOL = 1e-9
_DENSE_IPM_FLOPS = 3e8  # "auto" runs the dense IPM only when one iteration (m n² flops) stays below this
EXACT_MAX_DIM = 40  # the rational check (pycddlib) refuses larger inputs: its LPs are exact, and slow
EXACT_MAX_ROWS = 400


@dataclass
class ExactCheck:
    """The implicit equalities recomputed in rational arithmetic (pycddlib's gmp build) on the exact values of
    the float data: ``rows``/``lower``/``upper`` as in ``ImplicitEqualities``; ``agrees`` says the float
    answer was the same; ``seconds`` the time it took."""

    rows: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    agrees: bool
    seconds: float


@dataclass(repr=False)
class ImplicitEqualities(CompactResult):
    """Implicit equalities of P = {A x <= b, A_eq x = b_eq, lb <= x <= ub}.

    ``rows``: indices of the inequality rows that hold with equality on the whole body; ``lower``/``upper``:
    variables whose lower/upper bound does (variables with lb = ub are explicit and listed only in
    ``fixed_variables``); ``interior_point``: a point of the body where every other row and bound has
    normalised slack >= ``min_slack`` (a Euclidean distance: how clearly the others are not equalities).
    Evidence, per detected equality: ``row_widths``/``lower_widths``/``upper_widths`` bound the body's
    extent from that hyperplane, max_x (b_i - a_i x)/‖a_i‖ (from the certificate; NaN when none was
    found), and ``tol`` is the threshold they were held to, so a near tie shows as a width close to tol or
    a ``min_slack`` close to it. ``method``: "dense-ipm+certificate", "<BACKEND>+certificate",
    "<BACKEND>+frt" (FRT restricted to the candidates) or "frt"; ``n_solves``: LP solves (the dense IPM not
    counted); ``certificate``: multipliers z >= 1 on ``rows`` with A_rowsᵀz ∈ range(A_eqᵀ) and bᵀz ~ 0 when
    the dense fast path certified rows only; ``exact``: the rational check when asked for (``exact=True``).
    """

    rows: np.ndarray
    interior_point: np.ndarray
    min_slack: float
    method: str
    n_solves: int
    certificate: np.ndarray | None = None
    info: dict[str, object] = field(default_factory=dict)
    lower: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    upper: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    row_widths: np.ndarray = field(default_factory=lambda: np.zeros(0))
    lower_widths: np.ndarray = field(default_factory=lambda: np.zeros(0))
    upper_widths: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tol: float = 1e-7
    fixed_explicit: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    exact: ExactCheck | None = None

    @property
    def fixed_variables(self) -> np.ndarray:
        """Variables pinned by a bound on the whole body: lb = ub, or an implicit lower or upper bound."""
        return np.unique(np.concatenate([self.lower, self.upper, self.fixed_explicit]).astype(int))

    @property
    def max_width(self) -> float:
        """The largest certified extent among the detected equalities (0 when none; NaN when some had no
        certificate): compare with ``tol``."""
        w = np.concatenate([self.row_widths, self.lower_widths, self.upper_widths])
        return float(np.max(w)) if w.size else 0.0


def _check_tol(tol: float) -> float:
    t = float(tol)
    if not np.isfinite(t) or t <= 0:
        raise ValueError(f"tol must be positive and finite, got {tol}")
    return t


def _check_fast(fast: bool | str) -> str:
    if fast is True:
        return "auto"
    if fast is False:
        return "off"
    if fast not in FAST:
        raise ValueError(f"fast must be True, False or one of {FAST}, got {fast!r}")
    return fast


@dataclass
class _System:
    """P's inequalities as unit rows G x <= h (A's rows, then the finite bounds of the non-fixed variables),
    its equalities as unit rows (A_eq's, then x_j = lb_j for lb = ub), and where each G row came from."""

    G: Matrix  # dense array or CSR
    h: np.ndarray
    Ae: Matrix
    be: np.ndarray
    row: np.ndarray  # for each G row: the index into P.A, or -1 for a bound
    var: np.ndarray  # for each G row: the variable of a bound, or -1
    side: np.ndarray  # +1 upper bound, -1 lower bound, 0 a row of A
    fixed: np.ndarray  # variables with lb = ub
    sparse: bool
    zero_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # 0·x <= b, |b| <= tol

    @property
    def m(self) -> int:
        return self.h.shape[0]


def _normalised_rows(P: Polytope, tol: float) -> tuple[Matrix, np.ndarray, Matrix, np.ndarray, np.ndarray]:
    """P.A's rows scaled to unit norm. Zero rows: 0 <= b (dropped) or 0 <= b < 0 (empty body).
    Returns (An, bn, Ae, be, keep) with A_eq likewise; dense arrays or CSR as P stores them."""
    A, b = P.A, P.b
    na = row_norms(A)
    zero = na == 0
    if np.any(b[zero] < -tol):
        raise EmptyBodyError("a zero row 0 @ x <= b with b < 0: the body is empty")
    keep = np.flatnonzero(~zero)
    Ae, be = P.A_eq, P.b_eq
    ne = row_norms(Ae)
    if np.any(np.abs(be[ne == 0]) > tol):
        raise EmptyBodyError("a zero equality row 0 @ x = b with b != 0: the body is empty")
    ke = np.flatnonzero(ne > 0)
    if sp.issparse(A):
        # (scipy's fancy row indexing costs ~0.1 ms: skipped when every row stays, the common case)
        An = scale_rows(A if keep.size == A.shape[0] else A[keep], 1.0 / na[keep])
        Aen = scale_rows(Ae if ke.size == Ae.shape[0] else Ae[ke], 1.0 / ne[ke])
    else:
        An, Aen = A[keep] / na[keep, None], Ae[ke] / ne[ke, None]
    return An, b[keep] / na[keep], Aen, be[ke] / ne[ke], keep


def _system(P: Polytope, tol: float, sparse: bool) -> _System:
    An, bn, Ae, be, keep = _normalised_rows(P, tol)
    n = P.dim
    lb, ub = P.lb, P.ub
    fixed = np.flatnonzero(lb == ub)
    up = np.flatnonzero(np.isfinite(ub) & (lb < ub))
    lo = np.flatnonzero(np.isfinite(lb) & (lb < ub))
    k = up.size + lo.size
    row = np.concatenate([keep, -np.ones(k, dtype=int)])
    var = np.concatenate([-np.ones(keep.size, dtype=int), up, lo])
    side = np.concatenate([np.zeros(keep.size, dtype=int), np.ones(up.size, dtype=int), -np.ones(lo.size, dtype=int)])
    h = np.concatenate([bn, ub[up], -lb[lo]])
    be = np.concatenate([be, lb[fixed]])
    if sparse:
        B = sp.csr_matrix(
            (np.concatenate([np.ones(up.size), -np.ones(lo.size)]), (np.arange(k), np.concatenate([up, lo]))),
            shape=(k, n),
        )
        F = sp.csr_matrix((np.ones(fixed.size), (np.arange(fixed.size), fixed)), shape=(fixed.size, n))
        G = sp.vstack([sp.csr_matrix(An), B], format="csr") if k else sp.csr_matrix(An)
        E = sp.vstack([sp.csr_matrix(Ae), F], format="csr") if fixed.size else sp.csr_matrix(Ae)
    else:
        An, Ae = (
            np.asarray(An.toarray() if sp.issparse(An) else An),
            np.asarray(Ae.toarray() if sp.issparse(Ae) else Ae),
        )
        if k:
            B = np.zeros((k, n))
            B[np.arange(up.size), up] = 1.0
            B[up.size + np.arange(lo.size), lo] = -1.0
            G = np.vstack([An, B])
        else:
            G = An
        if fixed.size:
            F = np.zeros((fixed.size, n))
            F[np.arange(fixed.size), fixed] = 1.0
            E = np.vstack([Ae, F])
        else:
            E = Ae
    zero = np.setdiff1d(np.arange(P.A.shape[0]), keep) if keep.size < P.A.shape[0] else np.zeros(0, dtype=int)
    zero = zero[np.abs(P.b[zero]) <= tol]
    return _System(G, h, E, be, row, var, side, fixed, sparse, zero)


def _pick_path(P: Polytope, fast: str) -> tuple[bool, str]:
    """(sparse linear algebra?, fast path). "auto": the dense IPM for a cheap dense polytope, else the backend's
    sparse IPM, whose slacks shrink the FRT LP to the candidate rows (iJO1366: 0.43 s against 0.80 s for the
    full FRT LP; the same rows)."""
    m = P.A.shape[0] + P.n_bounds
    n = P.dim
    cheap = not P.is_sparse and float(m + n) * n * n <= _DENSE_IPM_FLOPS
    if fast == "auto":
        return (not cheap), ("dense-ipm" if cheap else "backend-ipm")
    if fast == "dense-ipm":
        return False, fast
    return (P.is_sparse or not cheap), fast


def implicit_equalities(
    P: Polytope, *, tol: float = 1e-7, solver: str | None = None, fast: bool | str = "auto", exact: bool = False
) -> ImplicitEqualities:
    """The implicit equalities of an explicit Polytope (rows and bounds) and a relative-interior point.

    Parameters
    ----------
    P : Polytope
        The polytope (dense or sparse, with or without variable bounds).
    tol : float
        Euclidean distance (x's units) below which a row's extent from its hyperplane counts as zero.
    solver : str, optional
        LP backend (default: the engine's LP default).
    fast : bool or {"auto", "dense-ipm", "backend-ipm", "off"}
        The path (True = "auto", False = "off"); the module docstring says what each costs.
    exact : bool
        Also recompute the answer in rational arithmetic (pycddlib, the ``exact`` extra; inputs up to
        EXACT_MAX_DIM variables and EXACT_MAX_ROWS rows) into ``.exact``.

    Returns
    -------
    ImplicitEqualities
        The rows and bounds that hold with equality on all of P, a relative-interior point and the evidence.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Polytope, implicit_equalities
    >>> P = Polytope(np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]]), np.array([1.0, -1.0, 5.0]))  # x0 = 1
    >>> implicit_equalities(P).rows.tolist()
    [0, 1]
    """
    if not isinstance(P, Polytope):
        raise TypeError(f"implicit_equalities needs a Polytope, got {type(P).__name__}")
    tol = _check_tol(tol)
    fast = _check_fast(fast)
    if exact:
        _check_exact_size(P)
    backend = solvers.get(solver, "lp")
    sparse, path = _pick_path(P, fast)
    S = _system(P, tol, sparse)
    with single_thread_blas():
        res = _implicit(S, P.dim, tol, backend, path)
    _check_interior_point(S, res, backend.name)
    zero = S.zero_rows
    if zero.size:  # 0·x <= b with |b| <= tol holds with equality (up to tol) everywhere: listed, width |b|
        rows = np.concatenate([res.rows, zero])
        order = np.argsort(rows, kind="stable")
        res.rows = rows[order]
        res.row_widths = np.concatenate([res.row_widths, np.abs(P.b[zero])])[order]
        if res.certificate is not None:
            res.certificate = None
    res.tol = tol
    res.fixed_explicit = S.fixed
    res._system = S  # type: ignore[attr-defined]  # reused by affine_hull (not part of the result's API)
    if exact:
        res.exact = _exact_check(P, res)
    return res


_POINT_TOL = 1e-9  # P.contains's default tolerance: a unit row or bound the interior point may miss by this much


def _check_interior_point(S: _System, res: ImplicitEqualities, solver: str) -> None:
    """The point returned must lie in P (every unit row, bound and equality to _POINT_TOL, or 1e-13·‖x‖∞ where
    round-off alone exceeds that): a last check, so that a solver point accepted on a looser tolerance (an IPM
    point can miss an equality by 1.1e-8) is a SolverError, never a wrong answer."""
    x = res.interior_point
    limit = max(_POINT_TOL, 1e-13 * float(np.max(np.abs(x), initial=0.0)))
    viol = float(np.max(S.G @ x - S.h, initial=0.0)) if S.m else 0.0
    if S.be.shape[0]:
        viol = max(viol, float(np.max(np.abs(S.Ae @ x - S.be))))
    if not np.isfinite(viol) or viol > limit:
        raise SolverError(
            f"implicit_equalities: the relative-interior point found ({res.method}) misses a row or bound of the "
            f"polytope by {viol:.3g} (> {limit:.3g})",
            backend=solver,
            status="inaccurate",
        )


def _result(
    S: _System,
    eq: np.ndarray,
    x: np.ndarray,
    slack: float,
    method: str,
    n_solves: int,
    widths: np.ndarray,
    certificate: np.ndarray | None = None,
    info: dict[str, object] | None = None,
) -> ImplicitEqualities:
    """Split detected G rows ``eq`` into A rows / lower / upper bounds with their widths."""
    eq = np.asarray(eq, dtype=int)
    w = np.asarray(widths, dtype=float)
    r, sd, v = S.row[eq], S.side[eq], S.var[eq]
    o_r, o_l, o_u = (
        np.argsort(r[sd == 0], kind="stable"),
        np.argsort(v[sd < 0], kind="stable"),
        np.argsort(v[sd > 0], kind="stable"),
    )
    return ImplicitEqualities(
        rows=r[sd == 0][o_r],
        interior_point=x,
        min_slack=slack,
        method=method,
        n_solves=n_solves,
        certificate=None if certificate is None else np.asarray(certificate)[o_r],
        info=info or {},
        lower=v[sd < 0][o_l],
        upper=v[sd > 0][o_u],
        row_widths=w[sd == 0][o_r],
        lower_widths=w[sd < 0][o_l],
        upper_widths=w[sd > 0][o_u],
    )


def _implicit(S: _System, n: int, tol: float, backend: solvers.Backend, path: str) -> ImplicitEqualities:
    m = S.m
    me = S.be.shape[0]
    eq = (S.Ae, S.be) if me else (None, None)
    if m == 0:
        x = solvers.solve_lp(np.zeros(n), None, None, *eq, solver=backend.name).x
        return _result(S, np.zeros(0, dtype=int), x, np.inf, "lp", 1, np.zeros(0))
    n_solves = 0
    cand = np.arange(m)
    x_hat = None
    method = "frt"
    ipm_failed = None
    if path in ("dense-ipm", "backend-ipm"):
        # 1) a central feasible point: the dense numpy IPM (cheap on small dense data), then the backend's
        #    interior-point solve without crossover (only a backend that declares INTERIOR_SOLUTIONS)
        sources = (["dense-ipm"] if path == "dense-ipm" else []) + (
            [backend.name] if backend.INTERIOR_SOLUTIONS else []
        )
        for source in sources:
            if source == "dense-ipm":
                G = S.G.toarray() if sp.issparse(S.G) else S.G
                Ae = S.Ae.toarray() if sp.issparse(S.Ae) else S.Ae
                cp = central_point(G, S.h, Ae if me else None, S.be if me else None)
                if not np.all(np.isfinite(cp.x)):
                    continue
                x_hat = cp.x
            else:
                try:
                    x_hat = solvers.solve_lp(np.zeros(n), S.G, S.h, *eq, solver=backend.name, interior=True).x
                except SolverError as exc:
                    # HiGHS's IPM without crossover stops on a residual relative to the bounds' norm; with bounds
                    # of 1000 its point can miss an equality by 1.5e-5, and HiGHS's own absolute check (1e-7) then
                    # reports status 'Unknown' (a 17-flux network does this). The point is only a shortcut: go
                    # on to the FRT LP (simplex), which needs none.
                    n_solves += 1
                    ipm_failed = f"{type(exc).__name__}: {exc}"
                    continue
                n_solves += 1
            # 2) candidates by slack, certified by the small dual LP
            done, cand, n_cert = _classify(S, x_hat, tol, backend.name, source)
            n_solves += n_cert
            if done is not None:
                done.n_solves = n_solves
                return done
        if sources:
            method = f"{sources[-1]}+frt"
        viol = (
            np.inf
            if x_hat is None
            else max(
                float(np.max(S.G @ x_hat - S.h, initial=0.0)), float(np.max(np.abs(S.Ae @ x_hat - S.be), initial=0.0))
            )
        )
        if viol > tol:  # no trustworthy feasible point: the slack rows are not certified, use the full FRT
            cand, x_hat, method = np.arange(m), None, "frt"
    # 3) Freund-Roundy-Todd LP with t only on the candidate rows; its duals certify what it finds
    in_c = np.zeros(m, dtype=bool)
    in_c[cand] = True
    try:
        t, x_frt, s, lam, mu = _frt(S, in_c, tol, backend.name)
    except SolverError:
        # an inaccurate solver may stall on the homogenised LP of an empty body: say "empty" when it is
        solvers.solve_lp(np.zeros(n), S.G, S.h, *eq, solver=backend.name)
        raise
    n_solves += 1
    eq_rows = cand[t < 0.5]
    x_ri = x_frt if x_hat is None else 0.5 * (x_frt + x_hat)
    x_ri = _onto_equalities(S, x_ri, eq_rows)
    slack = _min_slack(S, x_ri, eq_rows)
    widths = _dual_widths(S, lam, mu, eq_rows, x_ri)
    info: dict[str, object] = {"frt_scale": s}
    if ipm_failed is not None:
        info["ipm_failed"] = ipm_failed
    if np.isfinite(slack) and slack < _CENTRED_SLACK and s > 1.0 + 1e-9:
        # the FRT LP is degenerate in s (any scale that keeps every t = 1 is optimal) and the simplex may end
        # at s = 1/tol, i.e. a point with slack ~tol: one more LP, min s with the classification fixed, gives
        # the point whose smallest slack is largest (1/s_min)
        try:
            x_c, s_min = _recentre(S, eq_rows, tol, backend.name)
            x_c = _onto_equalities(S, x_c, eq_rows)
            slack_c = _min_slack(S, x_c, eq_rows)
            n_solves += 1
            info["recentred_scale"] = s_min
            if slack_c > slack:
                x_ri, slack = x_c, slack_c
        except (SolverError, EmptyBodyError, UnboundedError) as exc:  # the FRT point stays: still interior
            info["recentre_failed"] = f"{type(exc).__name__}: {exc}"
    return _result(S, eq_rows, x_ri, slack, method, n_solves, widths, info=info)


_CENTRED_SLACK = 1e-3  # an FRT point whose smallest other slack is below this is re-centred (one more LP)


def _recentre(S: _System, eq_rows: np.ndarray, tol: float, solver: str) -> tuple[np.ndarray, float]:
    """min s s.t. g_i x + 1 <= s h_i (rows not in eq_rows), g_i x <= s h_i (eq_rows), A_eq x = s b_eq,
    1 <= s <= 1/tol: x/s has slack >= 1/s on every other row, the largest such floor."""
    m, n = S.m, S.G.shape[1]
    me = S.be.shape[0]
    rhs = -np.ones(m)
    rhs[eq_rows] = 0.0
    if S.sparse:
        A_ub = sp.hstack([S.G, sp.csr_matrix(-S.h[:, None])], format="csr")
        A_eq = sp.hstack([S.Ae, sp.csr_matrix(-S.be[:, None])], format="csr") if me else None
        options = solvers.get(solver, "lp").SPARSE_LP_OPTIONS or None
    else:
        A_ub = np.hstack([S.G, -S.h[:, None]])
        A_eq = np.hstack([S.Ae, -S.be[:, None]]) if me else None
        options = None
    c = np.zeros(n + 1)
    c[-1] = 1.0
    lo = np.concatenate([np.full(n, -np.inf), [1.0]])
    hi = np.concatenate([np.full(n, np.inf), [1.0 / tol]])
    sol = solvers.solve_lp(c, A_ub, rhs, A_eq, np.zeros(me) if me else None, (lo, hi), solver=solver, options=options)
    return sol.x[:n] / sol.x[-1], float(sol.x[-1])


def _min_slack(S: _System, x: np.ndarray, eq_rows: np.ndarray) -> float:
    others = np.ones(S.m, dtype=bool)
    others[eq_rows] = False
    return float(np.min((S.h - S.G @ x)[others])) if others.any() else np.inf


def _onto_equalities(S: _System, x: np.ndarray, eq_rows: np.ndarray) -> np.ndarray:
    """Put x on the detected flat: dense, the orthogonal projection; sparse, implicit bounds are snapped
    (x_j = bound) and the rest is left as the LP gave it (feasible to the LP's tolerance)."""
    if not S.sparse:
        E = np.vstack([S.G[eq_rows], S.Ae])
        return _project_to_flat(x, E, np.concatenate([S.h[eq_rows], S.be])) if E.shape[0] else x
    x = x.copy()
    b = eq_rows[S.side[eq_rows] != 0]
    x[S.var[b]] = S.side[b] * S.h[b]
    if S.fixed.size:
        x[S.fixed] = S.be[S.be.shape[0] - S.fixed.size :]
    # then the least-norm correction of the other coordinates onto the equality rows (sparse LSQR)
    r_rows = eq_rows[S.side[eq_rows] == 0]
    E = (
        sp.vstack([sp.csr_matrix(S.G[r_rows]), sp.csr_matrix(S.Ae)], format="csr")
        if r_rows.size
        else sp.csr_matrix(S.Ae)
    )
    if E.shape[0]:
        e = np.concatenate([S.h[r_rows], S.be])
        resid = e - E @ x
        if float(np.max(np.abs(resid))) > 1e-13 * max(1.0, float(np.max(np.abs(x)))):
            from scipy.sparse.linalg import lsqr

            pinned = np.zeros(x.shape[0], dtype=bool)
            pinned[S.var[b]] = True
            pinned[S.fixed] = True
            free = np.flatnonzero(~pinned)
            x[free] += lsqr(E[:, free], resid, atol=1e-15, btol=1e-15, iter_lim=10 * x.shape[0])[0]
    return x


def _dual_widths(
    S: _System, lam: np.ndarray | None, mu: np.ndarray | None, eq_rows: np.ndarray, x: np.ndarray
) -> np.ndarray:
    """Width bounds from LP multipliers λ >= 0 (rows) and μ (equalities): for every body point y,
    Σ λ_i (h_i - g_i y) = V - rᵀy with V = hᵀλ + b_eqᵀμ and r = Gᵀλ + A_eqᵀμ, so each detected row's extent is
    at most (V + ‖r‖₁ (1 + ‖x‖∞)) / λ_i (r ~ 0: the residual is charged at the scale of the point found)."""
    if eq_rows.size == 0:
        return np.zeros(0)
    if lam is None or lam.shape[0] != S.m:
        return np.full(eq_rows.size, np.nan)
    lam = np.maximum(lam, 0.0)
    mu = np.zeros(S.be.shape[0]) if mu is None or mu.shape[0] != S.be.shape[0] else mu
    r = S.G.T @ lam + (S.Ae.T @ mu if S.be.shape[0] else 0.0)
    V = float(S.h @ lam + S.be @ mu)
    bound = max(V, 0.0) + float(np.sum(np.abs(r))) * (1.0 + float(np.max(np.abs(x), initial=0.0)))
    z = lam[eq_rows]
    with np.errstate(divide="ignore"):
        return np.where(z > 0, bound / np.where(z > 0, z, 1.0), np.nan)


def _classify(
    S: _System, x_hat: np.ndarray, tol: float, solver: str, source: str
) -> tuple[ImplicitEqualities | None, np.ndarray, int]:
    """Candidates {slack <= θ} at x_hat; certified when the dual LP bounds their widths by tol and the
    projection of x_hat onto their flat keeps every other row slack. Returns (result or None, cand, n_lps)."""
    s = S.h - S.G @ x_hat
    viol = max(0.0, float(-s.min()), float(np.max(np.abs(S.Ae @ x_hat - S.be), initial=0.0)))
    scale = max(1.0, float(np.max(np.abs(x_hat))), float(np.max(np.abs(S.h))))
    theta = 1e3 * max(tol, viol, 1e-9 * scale)
    cand = np.flatnonzero(s <= theta)
    if cand.size == 0:
        if viol <= tol:
            # an IPM point meets the equalities only to its own relative tolerance (HiGHS without crossover, bounds
            # of 1000: a unit equality row missed by 1.1e-8, outside P.contains(tol=1e-8)): put it on them first,
            # a correction of the size of viol against slacks > theta
            x_ri = _onto_equalities(S, x_hat, cand)
            slack = _min_slack(S, x_ri, cand)
            if slack > 0.5 * theta:
                return _result(S, cand, x_ri, slack, source, 0, np.zeros(0), info={"theta": theta}), cand, 0
        return None, cand, 0
    z, v, ok = _certify(S, cand, x_hat, tol, solver)
    if not ok or z is None:  # (z is None only when the certificate LP failed, ok False)
        return None, cand, 1
    x_ri = _onto_equalities(S, x_hat, cand)
    slack = _min_slack(S, x_ri, cand)
    if np.isfinite(slack) and slack <= 0.5 * theta:
        return None, cand, 1
    cert = z if np.all(S.side[cand] == 0) else None
    return (
        _result(
            S, cand, x_ri, slack, f"{source}+certificate", 1, v / z, cert, {"theta": theta, "certificate_value": v}
        ),
        cand,
        1,
    )


def _certify(
    S: _System, cand: np.ndarray, x_hat: np.ndarray, tol: float, solver: str
) -> tuple[np.ndarray | None, float, bool]:
    """min h_Cᵀz + b_eqᵀμ s.t. G_Cᵀz + A_eqᵀμ = 0, z >= 1. Its value bounds the width of each row in C."""
    k, n = cand.size, S.G.shape[1]
    me = S.be.shape[0]
    GC = S.G[cand]
    if S.sparse:
        M = sp.hstack([sp.csr_matrix(GC).T, sp.csr_matrix(S.Ae).T], format="csc")
    else:
        M = np.hstack([GC.T, S.Ae.T])
    c = np.concatenate([S.h[cand], S.be])
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


def _frt(
    S: _System, in_c: np.ndarray, tol: float, solver: str
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray | None, np.ndarray | None]:
    """Freund-Roundy-Todd: max Σ t_C s.t. g_i x + t_i <= s h_i (i in C), g_i x <= s h_i (others),
    A_eq x = s b_eq, 0 <= t <= 1, 1 <= s <= 1/tol. Returns (t on C, x/s, s, row multipliers, eq multipliers)."""
    m, n = S.m, S.G.shape[1]
    C = np.flatnonzero(in_c)
    k = C.size
    me = S.be.shape[0]
    if S.sparse:
        T = sp.csr_matrix((np.ones(k), (C, np.arange(k))), shape=(m, k))
        A_ub = sp.hstack([S.G, T, sp.csr_matrix(-S.h[:, None])], format="csr")
        A_eq = sp.hstack([S.Ae, sp.csr_matrix((me, k)), sp.csr_matrix(-S.be[:, None])], format="csr") if me else None
        options = solvers.get(solver, "lp").SPARSE_LP_OPTIONS or None
    else:
        T = np.zeros((m, k))
        T[C, np.arange(k)] = 1.0
        A_ub = np.hstack([S.G, T, -S.h[:, None]])
        A_eq = np.hstack([S.Ae, np.zeros((me, k)), -S.be[:, None]]) if me else None
        options = None
    c = np.concatenate([np.zeros(n), -np.ones(k), [0.0]])
    lo = np.concatenate([np.full(n, -np.inf), np.zeros(k), [1.0]])
    hi = np.concatenate([np.full(n, np.inf), np.ones(k), [1.0 / tol]])
    sol = solvers.solve_lp(
        c, A_ub, np.zeros(m), A_eq, np.zeros(me) if A_eq is not None else None, (lo, hi), solver=solver, options=options
    )
    x, t, s = sol.x[:n], sol.x[n : n + k], sol.x[-1]
    return t, x / s, float(s), sol.dual_ub, sol.dual_eq


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


def _hull_lp(P: Polytope, tol: float, solver: str | None, fast: str) -> AffineSubspace:
    res = implicit_equalities(P, tol=tol, solver=solver, fast=fast)
    S: _System = res._system  # type: ignore[attr-defined]
    x = res.interior_point
    g = np.flatnonzero((S.side == 0) & np.isin(S.row, res.rows))  # the detected rows of A (unit rows)
    if not S.sparse and not P.has_bounds:
        E = np.vstack([S.G[g], S.Ae])
        x = _project_to_flat(x, E, np.concatenate([S.h[g], S.be]))
        hull = _flat_from_equations(x, E)
    else:
        # sparse: null space of [A_eq; implicit rows] with the pinned variables' columns removed
        pinned = np.zeros(P.dim, dtype=bool)
        pinned[res.fixed_variables] = True
        E = sp.vstack([sp.csr_matrix(S.Ae), sp.csr_matrix(S.G[g])], format="csr") if g.size else sp.csr_matrix(S.Ae)
        with single_thread_blas():
            B = sparse_null_space(E, rank_tol=_RANK_TOL, fixed=pinned)
        hull = AffineSubspace(x, B, orthonormal=True)
    hull.interior_point = res.interior_point.copy()
    hull.info = {"implicit_equalities": res}
    return hull


def _known_flat(body: ConvexBody) -> tuple[np.ndarray, np.ndarray] | None:
    """(a point, orthonormal basis) of the flat of a polytope's explicit equalities (and lb = ub), or None
    when it has none: GLS and the ellipsoid then work inside it instead of rediscovering it."""
    if not isinstance(body, Polytope):
        return None
    fixed = np.flatnonzero(body.lb == body.ub)
    if body.A_eq.shape[0] == 0 and fixed.size == 0:
        return None
    n = body.dim
    pinned = np.zeros(n, dtype=bool)
    pinned[fixed] = True
    E = sp.csr_matrix(body.A_eq) if body.A_eq.shape[0] else sp.csr_matrix((0, n))
    with single_thread_blas():
        B = sparse_null_space(E, rank_tol=_RANK_TOL, fixed=pinned)
    # a point of the flat: least squares on the equalities with the fixed values substituted
    p = np.zeros(n)
    p[fixed] = body.lb[fixed]
    if body.A_eq.shape[0]:
        from scipy.sparse.linalg import lsqr

        rhs = body.b_eq - E @ p
        free = np.flatnonzero(~pinned)
        p[free] = lsqr(E[:, free], rhs, atol=1e-14, btol=1e-14, iter_lim=20 * n)[0]
    return p, B


# HiGHS accepts a basis whose rows and bounds are violated by up to its feasibility tolerance (1e-7 by default);
# on flux polytopes (values up to 1000, long chains of equalities) that slack makes flat directions look wide:
# salmonella is 743-dimensional for "directions" at 1e-7 and 738 at 1e-9, as FVA and the "lp" method say
_TIGHT_HIGHS = {"primal_feasibility_tolerance": 1e-9, "dual_feasibility_tolerance": 1e-9}


def _objective_model(P: Polytope, solver: str | None) -> solvers.LPModel:
    """One kept LP model for many objectives over P: on a sparse P a warm-started simplex with the backend's
    COST_CHANGE_OPTIONS (HiGHS: primal simplex; iJO1366: 7.8 ms per LP against 120 ms for IPM + crossover),
    else IPM + crossover (measured fastest for unrelated objectives on dense data). HiGHS runs with its
    feasibility tolerances at 1e-9 (``_TIGHT_HIGHS``): the widths are differences of such LP values."""
    from .solvers.backend_highs import HighsBackend

    backend = solvers.get(solver, "lp")
    tight = dict(_TIGHT_HIGHS) if isinstance(backend, HighsBackend) else {}
    if P.is_sparse:
        return solvers.LPModel(
            P, solver=solver, algorithm="simplex", options={**backend.COST_CHANGE_OPTIONS, **tight} or None
        )
    return solvers.LPModel(P, solver=solver, options=tight or None)


_DIRECTION_TIE = 10.0  # a direction wider than the threshold by less than this factor is listed as a near tie


def _hull_directions(body: ConvexBody, tol: float, solver: str | None, rng: np.random.Generator) -> AffineSubspace:
    """GLS: grow point differences D and normals N until |D| + |N| = k; <= 2k+1 maximize calls, k the
    dimension of the explicit equalities' flat (n when there are none)."""
    n = body.dim
    model = _objective_model(body, solver) if isinstance(body, Polytope) else None
    known = _known_flat(body)
    W = np.eye(n) if known is None else known[1]  # directions live in span(W)
    k = W.shape[1]

    def maximize(c: np.ndarray) -> tuple[float, np.ndarray]:
        try:
            return model.maximize(c) if model is not None else body.maximize(c, solver=solver)
        except UnboundedError as e:
            raise UnboundedError(
                "affine_hull(method='directions') needs a bounded body; use method='lp' for an explicit Polytope"
            ) from e

    _, p0 = maximize(W @ rng.standard_normal(k))
    ties: list[tuple[float, float]] = []  # (width, threshold) of wide verdicts within _DIRECTION_TIE of the line
    D = np.zeros((k, 0))
    N = np.zeros((k, 0))
    while D.shape[1] + N.shape[1] < k:
        c = rng.standard_normal(k)
        Q = np.hstack([D, N])
        for _ in range(2):  # twice is enough (re-orthogonalisation)
            c -= Q @ (Q.T @ c)
        c /= np.linalg.norm(c)
        cg = W @ c
        vmax, xp = maximize(cg)
        vmin_neg, xm = maximize(-cg)
        width = vmax + vmin_neg
        threshold = tol * max(1.0, abs(vmax), abs(vmin_neg))
        if threshold < width <= _DIRECTION_TIE * threshold:  # wide, but close to the line: reported
            ties.append((width, threshold))
        if width > threshold:
            x = xp if vmax - cg @ p0 >= cg @ p0 + vmin_neg else xm
            d = W.T @ (x - p0)
            for _ in range(2):
                d -= D @ (D.T @ d)
            D = np.hstack([D, (d / np.linalg.norm(d))[:, None]])
        else:
            N = np.hstack([N, c[:, None]])
    hull = AffineSubspace(p0, W @ D, orthonormal=known is not None)
    hull.interior_point = None
    hull.info["near_ties"] = ties
    return hull


def _bounding_ball(body: ConvexBody, solver: str | None) -> tuple[np.ndarray, float]:
    """A ball containing the body from its bounding box (2n maximize calls; one kept LP model for a
    polytope)."""
    n = body.dim
    model = _objective_model(body, solver) if isinstance(body, Polytope) else None
    mx = model.maximize if model is not None else (lambda c: body.maximize(c, solver=solver))
    hi = np.array([mx(e)[0] for e in np.eye(n)])
    lo = -np.array([mx(-e)[0] for e in np.eye(n)])
    return 0.5 * (hi + lo), max(0.5 * float(np.linalg.norm(hi - lo)) * 1.01, 1e-6)


ELLIPSOID_MAX_CALLS = 200_000


def _hull_ellipsoid(
    body: ConvexBody,
    tol: float,
    solver: str | None,
    center: ArrayLike | None,
    radius: float | None,
    max_calls: int | None,
) -> AffineSubspace:
    try:
        from .hull_ellipsoid import affine_hull_by_ellipsoid, predicted_calls
    except ImportError as e:
        raise ImportError(
            f"affine_hull(method='ellipsoid') needs oracles.hull_ellipsoid, which is not available: {e}"
        ) from e
    budget = ELLIPSOID_MAX_CALLS if max_calls is None else int(max_calls)
    known = _known_flat(body)
    k = body.dim if known is None else known[1].shape[1]

    def refuse(r: float, how: str) -> None:
        need = predicted_calls(k, r, tol)
        if need > budget:
            raise SolverError(
                f"affine_hull(method='ellipsoid') refused: in dimension {k} with radius/tol {how}"
                f"{r / tol:.2g} the ellipsoid needs about {need:,} oracle calls (budget {budget:,}, "
                f"max_calls=); use method='lp' for an explicit polytope or 'directions' for a body with maximize",
                backend=None,
                status="refused",
            )

    if radius is None:
        if isinstance(body, Ball):
            center, radius = body.center, body.radius * 1.01 + 1e-9
        elif isinstance(body, Polytope) and np.all(np.isfinite(body.lb)) and np.all(np.isfinite(body.ub)):
            center = 0.5 * (body.lb + body.ub)  # the bounding box is free: no LPs
            radius = max(0.5 * float(np.linalg.norm(body.ub - body.lb)) * 1.01, 1e-6)
        elif body.has_maximize:
            refuse(1e3 * tol, ">= ")  # before 2n LPs: even a ball 1e3 x tol wide would be too costly
            center, radius = _bounding_ball(body, solver)
        else:
            raise ValueError(
                "method='ellipsoid' needs radius= (a ball around center= known to contain the "
                "body) when the body has no maximize oracle"
            )
    center = np.zeros(body.dim) if center is None else as_vector(center, "center", body.dim)
    radius = float(radius)
    if not np.isfinite(radius) or radius <= 0:
        raise ValueError(f"radius must be positive and finite, got {radius}")
    refuse(radius, "= ")
    flat = None
    if known is not None:
        p, B = known
        p = p + B @ (B.T @ (center - p))  # the centre's projection onto the known flat
        flat = (p, B)
        # on that flat the equalities hold by construction: the oracle only needs the rows and bounds
        assert isinstance(body, Polytope)
        body = Polytope(body.A, body.b, lb=body.lb, ub=body.ub, dim=body.dim)
    return affine_hull_by_ellipsoid(body, center, radius, tol=tol, max_iter=budget, flat=flat)


def _as_polytope(body: ConvexBody) -> Polytope | None:
    if isinstance(body, Polytope):
        return body
    if isinstance(body, Intersection) and all(isinstance(p, Polytope) for p in body.parts):
        return _merge_polytopes([p for p in body.parts if isinstance(p, Polytope)])
    return None


def affine_hull(
    body: ConvexBody | AffineSubspace,
    *,
    method: str = "auto",
    tol: float = 1e-7,
    solver: str | None = None,
    center: ArrayLike | None = None,
    radius: float | None = None,
    seed: int | np.random.Generator | None = 0,
    fast: bool | str = "auto",
    max_calls: int | None = None,
) -> AffineSubspace:
    """aff(K): the smallest flat containing the body.

    Parameters
    ----------
    body : ConvexBody or AffineSubspace
        The body K (a flat is returned as it is).
    method : {"auto", "lp", "directions", "ellipsoid"}
        "auto": explicit polytope -> "lp"; maximize oracle -> "directions"; separation only -> "ellipsoid".
    tol : float
        Extent (Euclidean, x's units) below which a direction counts as flat.
    solver : str, optional
        LP backend, checked before any work (unknown: ValueError; unusable here: SolverError).
    center, radius : array_like, float, optional
        A ball containing the body, for "ellipsoid" (found by 2n LPs when the body can maximize).
    seed : int or numpy.random.Generator, optional
        The random directions of "directions".
    fast : bool or str
        The "lp" path (see ``implicit_equalities``).
    max_calls : int, optional
        The oracle-call budget of "ellipsoid" (default ELLIPSOID_MAX_CALLS); a run predicted to need more is
        refused at once with SolverError.

    Returns
    -------
    AffineSubspace
        The hull; ``.interior_point`` is a point of K in its relative interior when the method finds one
        ("lp"), else None; with "directions", ``.info["near_ties"]`` lists (width, threshold) of the
        directions counted wide by less than _DIRECTION_TIE times their threshold (thin, not flat: a
        different tol may count them flat). An empty body raises EmptyBodyError.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Polytope, affine_hull
    >>> segment = Polytope(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([1.0, 1.0]), lb=[-5.0, 2.0], ub=[5.0, 2.0])
    >>> affine_hull(segment).dim
    1
    """
    if isinstance(body, AffineSubspace):
        return body
    if not isinstance(body, ConvexBody):
        raise TypeError(f"body must be a ConvexBody or AffineSubspace, got {type(body).__name__}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    tol = _check_tol(tol)
    fast = _check_fast(fast)
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
        with single_thread_blas():  # n x n SVDs: threaded LAPACK is 20x slower on shared cores
            return _hull_lp(poly, tol, solver, fast)
    if method == "directions":
        if not body.has_maximize:
            raise MissingOracleError(f"method='directions' needs a maximize oracle; {type(body).__name__} has none")
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        return _hull_directions(poly if poly is not None else body, tol, solver, rng)
    if not body.has_separate:
        raise MissingOracleError(f"method='ellipsoid' needs a separation oracle; {type(body).__name__} has none")
    return _hull_ellipsoid(poly if poly is not None else body, tol, solver, center, radius, max_calls)


def linear_span(
    body_or_points: ConvexBody | AffineSubspace | ArrayLike,
    *,
    tol: float = 1e-9,
    hull_tol: float = 1e-7,
    method: str = "auto",
    solver: str | None = None,
) -> np.ndarray:
    """Orthonormal basis of the linear span of a point set or of a body.

    Points (rows of a k x n array): SVD, keeping singular values > tol * σ_max. A body (or flat): the
    span of its affine hull, i.e. the hull's directions plus its min-norm point when that is nonzero.

    Parameters
    ----------
    body_or_points : ConvexBody, AffineSubspace or array_like of shape (k, n)
        The body, or the points as rows.
    tol : float
        Relative singular-value cut for points; for a body, the norm above which the hull's point counts.
    hull_tol, method, solver
        ``affine_hull``'s ``tol``, ``method`` and ``solver`` for a body.

    Returns
    -------
    ndarray of shape (n, r)
        Orthonormal columns spanning the points.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import linear_span
    >>> linear_span(np.array([[1.0, 1.0, 0.0], [2.0, 2.0, 0.0]])).shape
    (3, 1)
    """
    if isinstance(body_or_points, (ConvexBody, AffineSubspace)):
        tol = _check_tol(tol)
        hull = affine_hull(body_or_points, method=method, solver=solver, tol=hull_tol)
        B, p = hull.basis, hull.point
        pn = float(np.linalg.norm(p))
        if pn > tol:
            q = p / pn
            if B.shape[1]:
                q = q - B @ (B.T @ q)  # point ⟂ basis already; once more against round-off
                q /= np.linalg.norm(q)
            B = np.hstack([B, q[:, None]])
        return B
    X = real_array(body_or_points, "body_or_points")
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


# ------------------------------------------------------------------------------------- exact check
def _check_exact_size(P: Polytope) -> None:
    rows = P.A.shape[0] + P.A_eq.shape[0] + P.n_bounds
    if P.dim > EXACT_MAX_DIM or rows > EXACT_MAX_ROWS:
        raise ValueError(
            f"exact=True is for small inputs (at most {EXACT_MAX_DIM} variables and {EXACT_MAX_ROWS} "
            f"rows and bounds); this polytope has {P.dim} variables and {rows}"
        )


def _exact_check(P: Polytope, res: ImplicitEqualities) -> ExactCheck:
    """cdd (gmp) on the exact rational values of the float data: which rows and bounds are implicit
    equalities. The float answer ``res`` agrees when both give the same sets."""
    import time
    from fractions import Fraction

    try:
        import cdd
        import cdd.gmp as cddgmp
    except ImportError as e:
        raise ImportError(
            "exact=True needs pycddlib with its gmp module (pip install 'sculpt-attention[exact]'; it builds "
            "against the system's cddlib and GMP, e.g. the Debian packages libcdd-dev and "
            f"libgmp-dev): {e}"
        ) from e
    t0 = time.perf_counter()
    A = P.A.toarray() if sp.issparse(P.A) else P.A
    Ae = P.A_eq.toarray() if sp.issparse(P.A_eq) else P.A_eq
    n = P.dim
    rows: list[list[Fraction]] = []
    for a, bi in zip(A, P.b):  # cdd's form: b - a x >= 0, row [b, -a]
        rows.append([Fraction(float(bi))] + [Fraction(-float(v)) for v in a])
    up = np.flatnonzero(np.isfinite(P.ub) & (P.lb < P.ub))
    lo = np.flatnonzero(np.isfinite(P.lb) & (P.lb < P.ub))
    for j in up:
        rows.append([Fraction(float(P.ub[j]))] + [Fraction(-1 if i == j else 0) for i in range(n)])
    for j in lo:
        rows.append([Fraction(-float(P.lb[j]))] + [Fraction(1 if i == j else 0) for i in range(n)])
    n_ineq = len(rows)
    for a, bi in zip(Ae, P.b_eq):
        rows.append([Fraction(float(bi))] + [Fraction(-float(v)) for v in a])
    for j in np.flatnonzero(P.lb == P.ub):
        rows.append([Fraction(float(P.lb[j]))] + [Fraction(-1 if i == j else 0) for i in range(n)])
    if not rows:
        return ExactCheck(
            np.zeros(0, dtype=int),
            np.zeros(0, dtype=int),
            np.zeros(0, dtype=int),
            res.rows.size == 0 and res.lower.size == 0 and res.upper.size == 0,
            0.0,
        )
    mat = cddgmp.matrix_from_array(rows, lin_set=set(range(n_ineq, len(rows))), rep_type=cdd.RepType.INEQUALITY)
    found = np.array(sorted(cddgmp.implicit_linearity_rows(mat)), dtype=int)
    m = A.shape[0]
    rows_x = found[found < m]
    upper = up[found[(found >= m) & (found < m + up.size)] - m]
    lower = lo[found[(found >= m + up.size) & (found < n_ineq)] - m - up.size]
    agrees = (
        np.array_equal(np.sort(res.rows), rows_x)
        and np.array_equal(np.sort(res.upper), np.sort(upper))
        and np.array_equal(np.sort(res.lower), np.sort(lower))
    )
    return ExactCheck(rows_x, lower, upper, bool(agrees), time.perf_counter() - t0)


__all__ = ["affine_hull", "linear_span", "implicit_equalities", "ImplicitEqualities", "ExactCheck"]
