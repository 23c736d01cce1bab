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
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..errors import SolverError
from ._base import (
    Backend,
    Bounds,
    KeptModel,
    LPSolution,
    Matrix,
    Options,
    OptionValue,
    ProblemData,
    QPSolution,
    prepare,
)
from ._cvx import solve_problem
from .backend_clarabel import ClarabelBackend
from .backend_highs import HighsBackend
from .backend_mosek import MosekBackend
from .backend_mosek import licence_status as mosek_licence_status
from .backend_scs import ScsBackend

if TYPE_CHECKING:
    import cvxpy as cp

    from ..bodies import ConvexBody, Polytope

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


class Registration:
    """A backend added by ``register``: ``remove()`` takes it out again and restores the preferences it
    changed; as a context manager it does so on exit."""

    def __init__(self, backend: Backend, prefer: tuple[str, ...]) -> None:
        self.backend = backend
        self.name = str(backend.name).upper()
        self._saved = {kind: _PREFERENCE[kind] for kind in prefer}

    def remove(self) -> None:
        if _REGISTRY.get(self.name) is self.backend:
            del _REGISTRY[self.name]
            _probe_cache.pop(self.name, None)
            _PREFERENCE.update(self._saved)

    def __enter__(self) -> Backend:
        return self.backend

    def __exit__(self, *exc: object) -> None:
        self.remove()


def register(backend: Backend, *, prefer: tuple[str, ...] = ()) -> Registration:
    """Add ``backend`` to the registry: a new ``solver=`` name for every engine call and for ``sculpt.learn``,
    until ``remove()`` of the returned registration (or the end of its ``with`` block).

    Parameters
    ----------
    backend : Backend
        An adapter instance; ``backend.name`` (case-insensitive) must not be registered already.
    prefer : tuple of str
        Problem kinds ("lp", "qp", "conic") for which it becomes the default while registered.

    Returns
    -------
    Registration
        A context manager whose exit (or ``remove()``) takes the backend out and restores the preferences.

    Raises
    ------
    TypeError
        ``backend`` is not a ``Backend``.
    ValueError
        Its name is registered already, or ``prefer`` names an unknown kind.

    Examples
    --------
    >>> from oracles import solvers
    >>> class Relay(solvers.Backend):
    ...     name, SUPPORTS_LP = "RELAY", True
    ...     def probe(self): return (True, "")
    ...     def solve(self, data, *, interior=False, options=None):
    ...         return solvers.get("HIGHS").solve(data, interior=interior, options=options)
    >>> with solvers.register(Relay()):
    ...     print("RELAY" in solvers.registered())
    True
    >>> "RELAY" in solvers.registered()
    False
    """
    if not isinstance(backend, Backend):
        raise TypeError(f"backend must be an oracles.solvers.Backend, got {type(backend).__name__}")
    name = str(backend.name).upper()
    if name in _REGISTRY:
        raise ValueError(f"a backend named {name!r} is registered already")
    for kind in prefer:
        _check_kind(kind)
    reg = Registration(backend, tuple(prefer))
    _REGISTRY[name] = backend
    _probe_cache.pop(name, None)
    for kind in prefer:
        _PREFERENCE[kind] = (name, *_PREFERENCE[kind])
    return reg


def registered() -> list[str]:
    """Every backend the engine knows about (usable here or not)."""
    return list(_REGISTRY)


def available(kind: str | None = None) -> list[str]:
    """Backends that actually work here (MOSEK only with a valid licence), optionally for one kind."""
    if kind is not None:
        _check_kind(kind)
    return [n for n in _REGISTRY if _probe(n)[0] and (kind is None or _REGISTRY[n].supports(kind))]


def capabilities(name: str) -> frozenset[str]:
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


def _canonical(name: object) -> str:
    if not isinstance(name, str):
        raise ValueError(f"solver must be a backend name (str) or None, got {type(name).__name__}")
    key = name.upper()
    if key not in _REGISTRY:
        raise ValueError(f"solver must be one of {registered()}, got {name!r}")
    return key


def get(solver: str | None = None, kind: str = "lp") -> Backend:
    """The adapter for ``solver``.

    Parameters
    ----------
    solver : str, optional
        A backend name, any case (None: ``default(kind)``).
    kind : {"lp", "qp", "conic"}
        The problem kind it must handle.

    Returns
    -------
    Backend
        The adapter. Unknown name: ValueError; known but unusable here (e.g. MOSEK without a licence) or
        unable to do ``kind``: SolverError saying why. ``oracles.backend_name`` gives just its name.
    """
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
    c: ArrayLike,
    A_ub: Matrix | None = None,
    b_ub: ArrayLike | None = None,
    A_eq: Matrix | None = None,
    b_eq: ArrayLike | None = None,
    bounds: Bounds = None,
    *,
    solver: str | None = None,
    interior: bool = False,
    options: Options | None = None,
) -> LPSolution:
    """min cᵀx s.t. A_ub x <= b_ub, A_eq x = b_eq, bounds.

    Parameters
    ----------
    c : array_like of shape (n,)
        The cost.
    A_ub, b_ub, A_eq, b_eq : array_like or scipy.sparse matrix, optional
        Inequality and equality rows with their right-hand sides.
    bounds : optional
        None (all free), (lo, hi) with scalars, arrays or None, or one (lo, hi) pair per variable.
    solver : str, optional
        Backend (default: ``default("lp")``).
    interior : bool
        Ask for a central point of the optimal face (HiGHS: IPM without crossover).
    options : mapping, optional
        Backend options by the backend's own names.

    Returns
    -------
    LPSolution
        x, value, backend, status, multipliers. Infeasible: EmptyBodyError; unbounded: UnboundedError; any
        other untrusted status: SolverError.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import solvers
    >>> sol = solvers.solve_lp(np.array([1.0, 1.0]), -np.eye(2), -np.ones(2))   # min x0 + x1, x >= 1
    >>> round(sol.value, 9), sol.backend
    (2.0, 'HIGHS')
    """
    data = prepare(c, A_ub, b_ub, A_eq, b_eq, bounds)
    return get(solver, "lp").solve(data, interior=interior, options=options)


def solve_qp(
    P: Matrix,
    c: ArrayLike,
    A_ub: Matrix | None = None,
    b_ub: ArrayLike | None = None,
    A_eq: Matrix | None = None,
    b_eq: ArrayLike | None = None,
    bounds: Bounds = None,
    *,
    solver: str | None = None,
    options: Options | None = None,
) -> LPSolution:
    """min ½ xᵀP x + cᵀx (P symmetric PSD) s.t. A_ub x <= b_ub, A_eq x = b_eq, bounds.

    Parameters
    ----------
    P : array_like or scipy.sparse matrix of shape (n, n)
        The symmetric positive semidefinite Hessian.
    c, A_ub, b_ub, A_eq, b_eq, bounds, options
        As in ``solve_lp``.
    solver : str, optional
        Backend (default: ``default("qp")``).

    Returns
    -------
    LPSolution
        A QPSolution (value including the quadratic term); errors as in ``solve_lp``.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import solvers
    >>> np.round(solvers.solve_qp(np.eye(2), np.zeros(2), -np.eye(2), -np.ones(2)).x, 6).tolist()  # x >= 1
    [1.0, 1.0]
    """
    data = prepare(c, A_ub, b_ub, A_eq, b_eq, bounds, P=P)
    return get(solver, "qp").solve(data, options=options)


def solve_cvxpy(
    problem: cp.Problem, *, solver: str | None = None, kind: str = "conic", options: Mapping[str, object] | None = None
) -> float:
    """Solve a cvxpy Problem on one of our backends with the engine's status mapping; returns its value."""
    return solve_problem(problem, get(solver, kind), options)


def maximize_explicit(body: ConvexBody, c: ArrayLike, *, solver: str | None = None) -> tuple[float, np.ndarray]:
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

    Parameters
    ----------
    A_ub : Polytope or array_like or scipy.sparse matrix, optional
        A polytope (its rows, equalities and bounds), or the inequality rows.
    b_ub, A_eq, b_eq, bounds
        As in ``solve_lp`` (ignored parts of a polytope).
    solver : str, optional
        LP backend.
    algorithm : {"ipm", "simplex"}
        The kept model's algorithm on a ``WARM_START`` backend.
    options : mapping, optional
        Backend options.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Polytope, solvers
    >>> model = solvers.LPModel(Polytope(np.vstack([np.eye(2), -np.eye(2)]), np.ones(4)))
    >>> [round(model.maximize(u)[0], 9) for u in np.eye(2)]
    [1.0, 1.0]
    """

    def __init__(
        self,
        A_ub: Polytope | Matrix | None = None,
        b_ub: ArrayLike | None = None,
        A_eq: Matrix | None = None,
        b_eq: ArrayLike | None = None,
        bounds: Bounds = None,
        *,
        solver: str | None = None,
        algorithm: str = "ipm",
        options: Options | None = None,
    ) -> None:
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
        elif A_ub is not None:
            n = A_ub.shape[1]
        elif A_eq is not None:
            n = A_eq.shape[1]
        else:
            raise ValueError("LPModel needs a Polytope or constraint matrices A_ub/A_eq")
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

    def _cost(self, c: ArrayLike) -> np.ndarray:
        c = np.asarray(c, dtype=float)
        if c.shape != (self.dim,) or not np.all(np.isfinite(c)):
            raise ValueError(f"c must be a finite vector of length {self.dim}, got shape {c.shape}")
        return c

    def update(self, *, c: ArrayLike | None = None) -> LPModel:
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

    def minimize(self, c: ArrayLike) -> LPSolution:
        return self.update(c=c).solve()

    def maximize(self, c: ArrayLike) -> tuple[float, np.ndarray]:
        """max cᵀx: returns (value, maximiser) like ConvexBody.maximize."""
        sol = self.minimize(-self._cost(c))
        return -sol.value, sol.x

    def add_halfspaces(self, A: Matrix, b: ArrayLike) -> LPModel:
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
    "register",
    "Registration",
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
    "Options",
    "OptionValue",
    "Bounds",
    "Matrix",
    "KeptModel",
]
