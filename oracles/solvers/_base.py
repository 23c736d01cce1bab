"""Shared pieces of the solver layer: result types, validated problem data, the adapter interface.

Every backend solves   min ½ xᵀP x + cᵀx  s.t.  A_ub x <= b_ub,  A_eq x = b_eq,  lb <= x <= ub
(P = 0 for an LP) and reports multipliers in one convention: ``dual_ub >= 0`` and free ``dual_eq`` with
P x + c + A_ubᵀ dual_ub + A_eqᵀ dual_eq + (bound multipliers) = 0.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..errors import SolverError, UnboundedError

Matrix = Any  # a dense ndarray or a scipy.sparse matrix (scipy ships no type information)
OptionValue = bool | int | float | str
Options = Mapping[str, OptionValue]  # backend options by name, as the backend spells them

# None (all free), (lo, hi) with scalars, arrays or None, or one (lo, hi) pair per variable
Bounds = tuple[ArrayLike | None, ArrayLike | None] | Sequence[tuple[float | None, float | None]] | None


@dataclass
class LPSolution:
    """Result of one LP: minimiser x, value c @ x, backend name, status text, raw extras, multipliers."""

    x: np.ndarray
    value: float
    backend: str
    status: str
    info: dict[str, object] = field(default_factory=dict)
    dual_ub: np.ndarray | None = None
    dual_eq: np.ndarray | None = None


@dataclass
class QPSolution(LPSolution):
    """Result of one QP min ½ xᵀP x + cᵀx (value includes the quadratic term)."""


@dataclass
class ProblemData:
    """Validated data of min ½ xᵀP x + cᵀx s.t. A_ub x <= b_ub, A_eq x = b_eq, lb <= x <= ub."""

    c: np.ndarray
    A_ub: Matrix
    b_ub: np.ndarray
    A_eq: Matrix
    b_eq: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    P: Matrix | None = None

    @property
    def n(self) -> int:
        return self.c.shape[0]

    @property
    def m_ub(self) -> int:
        return self.b_ub.shape[0]

    @property
    def m_eq(self) -> int:
        return self.b_eq.shape[0]

    @property
    def is_sparse(self) -> bool:
        return any(sp.issparse(M) for M in (self.A_ub, self.A_eq, self.P) if M is not None)

    def with_cost(self, c: np.ndarray) -> ProblemData:
        return ProblemData(c, self.A_ub, self.b_ub, self.A_eq, self.b_eq, self.lb, self.ub, self.P)

    def csc(self, which: str) -> sp.csc_matrix:
        A = self.A_ub if which == "ub" else self.A_eq
        return A.tocsc() if sp.issparse(A) else sp.csc_matrix(A)

    def stacked_csc(self) -> sp.csc_matrix:
        """[A_ub; A_eq] in CSC (stacked as CSR, converted once: half the time of stacking two CSC blocks)."""
        blocks = [M if sp.issparse(M) else sp.csr_matrix(M) for M in (self.A_ub, self.A_eq)]
        return sp.vstack(blocks, format="csr").tocsc()

    def bound_rows(self) -> tuple[sp.csc_matrix, np.ndarray, np.ndarray, np.ndarray]:
        """Finite bounds as extra rows G x <= h: returns (G, h, column index, sign (+1 upper, -1 lower))."""
        up = np.flatnonzero(np.isfinite(self.ub))
        lo = np.flatnonzero(np.isfinite(self.lb))
        cols = np.concatenate([up, lo])
        sign = np.concatenate([np.ones(up.size), -np.ones(lo.size)])
        G = sp.csc_matrix((sign, (np.arange(cols.size), cols)), shape=(cols.size, self.n))
        h = np.concatenate([self.ub[up], -self.lb[lo]])
        return G, h, cols, sign

    def max_violation(self, x: np.ndarray) -> float:
        """Largest violation of x (absolute) over all constraints."""
        v = [0.0]
        if self.m_ub:
            v.append(float(np.max(self.A_ub @ x - self.b_ub)))
        if self.m_eq:
            v.append(float(np.max(np.abs(self.A_eq @ x - self.b_eq))))
        v.append(float(np.max(self.lb - x, initial=0.0)))
        v.append(float(np.max(x - self.ub, initial=0.0)))
        return max(v)


def _finite_matrix(A: Matrix, name: str, n: int | None) -> Matrix:
    if sp.issparse(A):
        M = A.astype(float)
        data = M.data
    else:
        M = np.asarray(A, dtype=float)
        if M.ndim == 1 and n is not None and M.shape[0] == n:
            M = M[None, :]
        if M.ndim != 2:
            raise ValueError(f"{name} must be a 2-D array, got shape {M.shape}")
        data = M
    if n is not None and M.shape[1] != n:
        raise ValueError(f"{name} must have {n} columns (the length of c), got {M.shape[1]}")
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{name} contains NaN or inf")
    return M


def _rhs(b: ArrayLike | None, name: str, rows: int) -> np.ndarray:
    if b is None:
        raise ValueError(f"{name} is required when its matrix has rows")
    arr = np.asarray(b, dtype=float).reshape(-1) if np.ndim(b) <= 1 else np.asarray(b, dtype=float)
    if arr.ndim != 1 or arr.shape[0] != rows:
        raise ValueError(f"{name} must have shape ({rows},), got {np.shape(b)}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def _bounds(bounds: Bounds, n: int) -> tuple[np.ndarray, np.ndarray]:
    """None: free; (lo, hi) with scalars/arrays/None; or a length-n sequence of (lo, hi) pairs."""
    if bounds is None:
        return np.full(n, -np.inf), np.full(n, np.inf)
    given = cast("Sequence[Any]", bounds)  # user input: its form is checked here, entry by entry
    try:
        if len(given) == 2 and not (n == 2 and all(isinstance(p, (tuple, list)) for p in given)):
            lo_in, hi_in = given
            lo = np.full(n, -np.inf) if lo_in is None else np.broadcast_to(np.asarray(lo_in, dtype=float), (n,)).copy()
            hi = np.full(n, np.inf) if hi_in is None else np.broadcast_to(np.asarray(hi_in, dtype=float), (n,)).copy()
        else:
            if len(given) != n:
                raise ValueError(f"bounds must be None, (lo, hi) or {n} (lo, hi) pairs, got {len(given)} entries")
            lo = np.array([-np.inf if p[0] is None else p[0] for p in given], dtype=float)
            hi = np.array([np.inf if p[1] is None else p[1] for p in given], dtype=float)
    except (TypeError, IndexError) as e:
        raise ValueError(f"bounds must be None, (lo, hi) or a sequence of (lo, hi) pairs: {e}") from None
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo == np.inf) or np.any(hi == -np.inf):
        raise ValueError("bounds contain NaN or an infinite bound on the wrong side")
    if np.any(lo > hi):
        raise ValueError("bounds have lo > hi for some variable")
    return lo, hi


def prepare(
    c: ArrayLike,
    A_ub: Matrix | None = None,
    b_ub: ArrayLike | None = None,
    A_eq: Matrix | None = None,
    b_eq: ArrayLike | None = None,
    bounds: Bounds = None,
    P: Matrix | None = None,
) -> ProblemData:
    """Validate and normalise problem data (ValueError naming the offending argument)."""
    c = np.asarray(c, dtype=float)
    if c.ndim != 1 or c.shape[0] < 1:
        raise ValueError(f"c must be a non-empty 1-D array, got shape {c.shape}")
    if not np.all(np.isfinite(c)):
        raise ValueError("c contains NaN or inf")
    n = c.shape[0]
    out = []
    for A, b, an, bn in ((A_ub, b_ub, "A_ub", "b_ub"), (A_eq, b_eq, "A_eq", "b_eq")):
        if A is None or (not sp.issparse(A) and np.size(A) == 0):
            if b is not None and np.size(b) != 0:
                raise ValueError(f"{bn} given without {an}")
            out += [np.zeros((0, n)), np.zeros(0)]
            continue
        M = _finite_matrix(A, an, n)
        out += [M, _rhs(b, bn, M.shape[0])]
    lo, hi = _bounds(bounds, n)
    Pm = None
    if P is not None:
        Pm = _finite_matrix(P, "P", n)
        if Pm.shape[0] != n:
            raise ValueError(f"P must be {n}x{n}, got {Pm.shape}")
    return ProblemData(c, out[0], out[1], out[2], out[3], lo, hi, Pm)


class KeptModel(Protocol):
    """A model kept across solves (``Backend.kept_model``): new costs and added rows without a rebuild."""

    data: ProblemData

    def minimize(self, c: np.ndarray) -> LPSolution: ...

    def add_rows(self, A: Matrix, b: np.ndarray) -> None: ...


class Backend(ABC):
    """One solver adapter (abstract), in the manner of cvxpy's solver interface: a subclass sets ``name``,
    declares what it can do in the capability attributes below, and implements ``probe`` and ``solve``.
    The engine asks these attributes (``supports``, ``WARM_START``, ...), never a backend's name.

    Capabilities (class attributes):

    * ``SUPPORTS_LP`` / ``SUPPORTS_QP``: ``solve`` handles P = 0 / a PSD P.
    * ``SUPPORTS_CONIC``: conic problems through cvxpy (needs ``cvxpy_name``).
    * ``SUPPORTS_SPARSE``: takes scipy.sparse constraint matrices as they are.
    * ``INTERIOR_SOLUTIONS``: ``solve(..., interior=True)`` returns a central point of the optimal face (an
      interior-point method that can stop without crossover); first-order methods cannot.
    * ``WARM_START``: ``kept_model(data)`` keeps one model across solves that change only the costs or add
      rows (``solvers.LPModel`` uses it; others re-solve from the kept data).
    * ``FIRST_ORDER_LP``: ``first_order_options(max_iter)`` turns an LP solve into a capped first-order run
      (cheap, approximate points that a caller must check).
    * ``SMALL_LP_OPTIONS``: options measured best for many small dense LPs re-solved in a row.
    * ``SPARSE_LP_OPTIONS``: options measured best for one large sparse LP (the affine hull's FRT LP on flux
      polytopes).
    * ``VERTEX_LP_OPTIONS``: options measured best for one tall LP (thousands of rows, few structural
      columns plus one slack per row) whose answer is a vertex, e.g. an L1 outlier fit.
    * ``COST_CHANGE_OPTIONS``: options for a kept simplex model re-solved with new costs only (the last basis
      stays primal feasible), e.g. flux variability analysis.
    """

    name: str = ""
    cvxpy_name: str | None = None
    SUPPORTS_LP: bool = False
    SUPPORTS_QP: bool = False
    SUPPORTS_CONIC: bool = False
    SUPPORTS_SPARSE: bool = True
    INTERIOR_SOLUTIONS: bool = False
    WARM_START: bool = False
    FIRST_ORDER_LP: bool = False
    SMALL_LP_OPTIONS: Options = {}
    SPARSE_LP_OPTIONS: Options = {}
    VERTEX_LP_OPTIONS: Options = {}
    COST_CHANGE_OPTIONS: Options = {}

    @property
    def kinds(self) -> frozenset[str]:
        """The problem kinds ("lp", "qp", "conic") this backend declares."""
        return frozenset(
            k
            for k, ok in (
                ("lp", self.SUPPORTS_LP),
                ("qp", self.SUPPORTS_QP),
                ("conic", self.SUPPORTS_CONIC and self.cvxpy_name is not None),
            )
            if ok
        )

    def supports(self, problem: str | ProblemData) -> bool:
        """Whether this backend can solve ``problem``: a kind ("lp", "qp", "conic") or a ``ProblemData``
        (an LP when ``P`` is None, else a QP; sparse matrices need ``SUPPORTS_SPARSE``)."""
        if isinstance(problem, str):
            return problem in self.kinds
        if not isinstance(problem, ProblemData):
            raise TypeError(f"problem must be a kind or a ProblemData, got {type(problem).__name__}")
        if problem.is_sparse and not self.SUPPORTS_SPARSE:
            return False
        return self.SUPPORTS_LP if problem.P is None else self.SUPPORTS_QP

    def kept_model(self, data: ProblemData, *, algorithm: str = "ipm", options: Options | None = None) -> KeptModel:
        """A model kept across solves (only when ``WARM_START``): ``minimize(c)`` re-solves with new costs,
        ``add_rows(A, b)`` appends rows A x <= b, ``data`` is the current ProblemData."""
        raise NotImplementedError(f"{self.name} keeps no model between solves (WARM_START is False)")

    def first_order_options(self, max_iter: int) -> dict[str, OptionValue]:
        """Solver options for a first-order LP run capped at ``max_iter`` iterations (only when
        ``FIRST_ORDER_LP``)."""
        raise NotImplementedError(f"{self.name} has no first-order LP mode (FIRST_ORDER_LP is False)")

    @abstractmethod
    def probe(self) -> tuple[bool, str]:
        """(usable, reason): whether the backend imports and runs here; reason says why not."""

    @abstractmethod
    def solve(self, data: ProblemData, *, interior: bool = False, options: Options | None = None) -> LPSolution:
        """Solve the LP/QP in ``data``. ``interior=True`` asks for a central (relative-interior) optimum
        where the backend can give one (an IPM without crossover)."""

    @staticmethod
    def import_probe(module: str) -> tuple[bool, str]:
        """The usual probe: the backend is usable when its Python module imports."""
        try:
            __import__(module)
        except Exception as e:  # pragma: no cover - depends on the environment
            return False, f"{module} cannot be imported: {e}"
        return True, "ok"

    def unbounded(self, data: ProblemData, message: str) -> UnboundedError:
        """An unbounded report (a dual-infeasibility certificate) says nothing about primal feasibility:
        confirm feasibility by a zero-objective solve, so an empty body is reported as empty."""
        if np.any(data.c != 0) or data.P is not None:
            self.solve(ProblemData(np.zeros(data.n), data.A_ub, data.b_ub, data.A_eq, data.b_eq, data.lb, data.ub))
        return UnboundedError(message)

    def cvxpy_options(self) -> dict[str, OptionValue]:
        return {}

    def fail(self, status: str, message: str = "") -> SolverError:
        return SolverError(
            f"{self.name} returned status {status!r}{': ' + message if message else ''}",
            backend=self.name,
            status=status,
        )
