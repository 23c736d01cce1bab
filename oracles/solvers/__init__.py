"""Solver backends behind one registry (the cvxpy pattern: one adapter module per backend).

Backends: HIGHS (LPs; highspy directly, IPM + crossover), CLARABEL (QPs and conic problems), SCS (large
conic problems, eps tightened to 1e-9), MOSEK (only when its licence checks out). ``available()`` lists
the ones that work here; ``default(kind)`` picks one per problem kind; every solve takes ``solver=``.
Each adapter class declares what it can do (``SUPPORTS_LP``, ``SUPPORTS_QP``, ``SUPPORTS_CONIC``,
``SUPPORTS_SPARSE``, ``INTERIOR_SOLUTIONS``, ``WARM_START``, ``FIRST_ORDER_LP``, ``SMALL_LP_OPTIONS``,
``supports(problem)``; see ``Backend``); callers ask those, never a backend's name.

``solve_lp`` minimises cᵀx s.t. A_ub x <= b_ub, A_eq x = b_eq, bounds; ``solve_qp`` minimises
½ xᵀP x + cᵀx over the same constraints. Infeasible -> EmptyBodyError, unbounded -> UnboundedError,
any other untrusted status -> SolverError(backend=..., status=...).
"""

from __future__ import annotations

import logging

import numpy as np

from ..errors import SolverError
from ._base import Backend, LPSolution, ProblemData, QPSolution, prepare
from ._cvx import solve_problem
from .backend_clarabel import ClarabelBackend
from .backend_highs import HighsBackend
from .backend_mosek import MosekBackend
from .backend_mosek import licence_status as mosek_licence_status
from .backend_scs import ScsBackend

_log = logging.getLogger("oracles.solvers")
KINDS = ("lp", "qp", "conic")
_REGISTRY: dict[str, Backend] = {b.name: b for b in (HighsBackend(), ClarabelBackend(), ScsBackend(), MosekBackend())}
_PREFERENCE = {
    "lp": ("HIGHS", "MOSEK", "CLARABEL", "SCS"),
    "qp": ("CLARABEL", "MOSEK", "SCS", "HIGHS"),
    "conic": ("MOSEK", "CLARABEL", "SCS"),
}
_probe_cache: dict[str, tuple[bool, str]] = {}


def _probe(name: str) -> tuple[bool, str]:
    """(usable, reason) for one backend, probed once per process and cached."""
    if name not in _probe_cache:
        try:
            _probe_cache[name] = _REGISTRY[name].probe()
        except Exception as e:  # a probe must never raise
            _probe_cache[name] = (False, f"probe failed: {type(e).__name__}: {e}")
        ok, why = _probe_cache[name]
        if not ok and "not installed" not in why:  # installed but broken/unlicensed: say so once
            _log.warning("solver %s is installed but unusable, falling back to other backends: %s", name, why)
    return _probe_cache[name]


def registered() -> list[str]:
    """Every backend the engine knows about (usable here or not)."""
    return list(_REGISTRY)


def available(kind: str | None = None) -> list[str]:
    """Backends that actually work here (MOSEK only with a valid licence), optionally for one kind."""
    if kind is not None:
        _check_kind(kind)
    return [n for n in _REGISTRY if _probe(n)[0] and (kind is None or _REGISTRY[n].supports(kind))]


def capabilities(name: str) -> frozenset:
    """The problem kinds ("lp", "qp", "conic") a registered backend handles (its ``SUPPORTS_*`` attributes;
    ``get(name)`` gives the adapter itself, whose class declares the other capabilities)."""
    return _REGISTRY[_canonical(name)].kinds


def unavailable_reason(name: str) -> str | None:
    """Why a registered backend is unusable here (None when it is usable)."""
    ok, why = _probe(_canonical(name))
    return None if ok else why


def default(kind: str = "lp") -> str:
    """The preferred usable backend for ``kind`` in {"lp", "qp", "conic"}."""
    _check_kind(kind)
    for n in _PREFERENCE[kind]:
        if _probe(n)[0]:
            return n
    raise SolverError(f"no usable backend for {kind} problems", backend=None, status="unavailable")


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def _canonical(name) -> str:
    if not isinstance(name, str):
        raise ValueError(f"solver must be a backend name (str) or None, got {type(name).__name__}")
    key = name.upper()
    if key not in _REGISTRY:
        raise ValueError(f"solver must be one of {registered()}, got {name!r}")
    return key


def get(solver: str | None = None, kind: str = "lp") -> Backend:
    """The adapter for ``solver`` (default for ``kind`` when None). Unknown name -> ValueError; known but
    unusable here (e.g. MOSEK without a licence) or unable to do ``kind`` -> SolverError saying why."""
    name = default(kind) if solver is None else _canonical(solver)
    ok, why = _probe(name)
    if not ok:
        raise SolverError(f"solver {name!r} is not usable here: {why}", backend=name, status="unavailable")
    be = _REGISTRY[name]
    if not be.supports(kind):
        raise SolverError(
            f"solver {name!r} cannot solve {kind} problems (it handles {sorted(be.kinds)})",
            backend=name,
            status="unsupported",
        )
    return be


def solve_lp(
    c,
    A_ub=None,
    b_ub=None,
    A_eq=None,
    b_eq=None,
    bounds=None,
    *,
    solver: str | None = None,
    interior: bool = False,
    options: dict | None = None,
) -> LPSolution:
    """min cᵀx s.t. A_ub x <= b_ub, A_eq x = b_eq, bounds (None: all free; (lo, hi); or per-variable pairs).

    ``interior=True`` asks for a central point of the optimal face (HiGHS IPM without crossover).
    """
    data = prepare(c, A_ub, b_ub, A_eq, b_eq, bounds)
    return get(solver, "lp").solve(data, interior=interior, options=options)


def solve_qp(
    P,
    c,
    A_ub=None,
    b_ub=None,
    A_eq=None,
    b_eq=None,
    bounds=None,
    *,
    solver: str | None = None,
    options: dict | None = None,
) -> LPSolution:
    """min ½ xᵀP x + cᵀx (P symmetric PSD) s.t. A_ub x <= b_ub, A_eq x = b_eq, bounds.

    The backends return a QPSolution (an LPSolution) when P is given, a plain LPSolution for P = None.
    """
    data = prepare(c, A_ub, b_ub, A_eq, b_eq, bounds, P=P)
    return get(solver, "qp").solve(data, options=options)


def solve_cvxpy(problem, *, solver: str | None = None, kind: str = "conic", options: dict | None = None) -> float:
    """Solve a cvxpy Problem on one of our backends with the engine's status mapping; returns its value."""
    return solve_problem(problem, get(solver, kind), options)


def maximize_explicit(body, c, *, solver: str | None = None) -> tuple[float, np.ndarray]:
    """max cᵀx over an explicit body (cvxpy constraints; conic backend). Returns (value, maximiser)."""
    import cvxpy as cp

    c = np.asarray(c, dtype=float)
    if c.shape != (body.dim,) or not np.all(np.isfinite(c)):
        raise ValueError(f"c must be a finite vector of length {body.dim}, got shape {c.shape}")
    x = cp.Variable(body.dim)
    value = solve_cvxpy(cp.Problem(cp.Maximize(c @ x), body.cvxpy_constraints(x)), solver=solver)
    return value, np.asarray(x.value, dtype=float)


class LPModel:
    """Many LPs over one fixed feasible set that differ only in the objective (Clarabel.py-style object).

    ``LPModel(polytope)`` (its rows, equalities and bounds; sparse stays sparse) or
    ``LPModel(A_ub, b_ub, A_eq, b_eq, bounds)``; then ``minimize(c)`` /
    ``maximize(c)``, ``update(c=...)`` + ``solve()``, and ``add_halfspaces(A, b)`` as the body grows.
    A backend that declares ``WARM_START`` (HiGHS) builds the model once and only the costs change
    (``algorithm="ipm"``: IPM + crossover, measured fastest for unrelated objectives; ``"simplex"``
    warm-starts from the previous basis). Other backends re-solve from the kept, validated data.
    """

    def __init__(
        self,
        A_ub=None,
        b_ub=None,
        A_eq=None,
        b_eq=None,
        bounds=None,
        *,
        solver: str | None = None,
        algorithm: str = "ipm",
        options: dict | None = None,
    ):
        from ..bodies import Polytope

        poly = None
        if isinstance(A_ub, Polytope):
            poly = A_ub
            A_ub, b_ub = (poly.A, poly.b) if poly.A.shape[0] else (None, None)
            A_eq, b_eq = (poly.A_eq, poly.b_eq) if poly.A_eq.shape[0] else (None, None)
            if bounds is None and poly.has_bounds:
                bounds = poly.bounds
        if isinstance(poly, Polytope):
            n = poly.dim
        elif A_ub is None and A_eq is None:
            raise ValueError("LPModel needs a Polytope or constraint matrices A_ub/A_eq")
        else:
            n = (A_ub if A_ub is not None else A_eq).shape[1]
        if algorithm not in ("ipm", "simplex"):
            raise ValueError(f"algorithm must be 'ipm' or 'simplex', got {algorithm!r}")
        self.data: ProblemData = prepare(np.zeros(n), A_ub, b_ub, A_eq, b_eq, bounds)
        self.backend = get(solver, "lp")
        self.options = options
        self._c = np.zeros(n)
        self._kept = (
            self.backend.kept_model(self.data, algorithm=algorithm, options=options)
            if self.backend.WARM_START
            else None
        )
        self.n_solves = 0

    @property
    def dim(self) -> int:
        return self.data.n

    def _cost(self, c) -> np.ndarray:
        c = np.asarray(c, dtype=float)
        if c.shape != (self.dim,) or not np.all(np.isfinite(c)):
            raise ValueError(f"c must be a finite vector of length {self.dim}, got shape {c.shape}")
        return c

    def update(self, *, c=None) -> LPModel:
        """Replace the objective (the only data an LPModel re-solve may change besides added rows)."""
        if c is not None:
            self._c = self._cost(c)
        return self

    def solve(self) -> LPSolution:
        """Minimise the current objective."""
        self.n_solves += 1
        if self._kept is not None:
            return self._kept.minimize(self._c)
        return self.backend.solve(self.data.with_cost(self._c), options=self.options)

    def minimize(self, c) -> LPSolution:
        return self.update(c=c).solve()

    def maximize(self, c) -> tuple[float, np.ndarray]:
        """max cᵀx: returns (value, maximiser) like ConvexBody.maximize."""
        sol = self.minimize(-self._cost(c))
        return -sol.value, sol.x

    def add_halfspaces(self, A, b) -> LPModel:
        """Append rows A x <= b to the kept model."""
        extra = prepare(np.zeros(self.dim), A, b)
        if self._kept is not None:
            self._kept.add_rows(extra.A_ub, extra.b_ub)
            self.data = self._kept.data
        else:
            import scipy.sparse as sp

            A_ub = (
                sp.vstack([sp.csr_matrix(self.data.A_ub), sp.csr_matrix(extra.A_ub)], format="csr")
                if sp.issparse(self.data.A_ub)
                else np.vstack([self.data.A_ub, extra.A_ub])
            )
            self.data = ProblemData(
                self.data.c,
                A_ub,
                np.concatenate([self.data.b_ub, extra.b_ub]),
                self.data.A_eq,
                self.data.b_eq,
                self.data.lb,
                self.data.ub,
            )
        return self


__all__ = [
    "Backend",
    "ProblemData",
    "LPSolution",
    "QPSolution",
    "LPModel",
    "available",
    "registered",
    "default",
    "get",
    "unavailable_reason",
    "capabilities",
    "mosek_licence_status",
    "solve_lp",
    "solve_qp",
    "solve_cvxpy",
    "maximize_explicit",
    "KINDS",
]
