"""Constraint generation (working sets) over a polytope with many rows: LPs with sound lower bounds, and the
min-norm point.

- ``WorkingSetMinimizer``: min cᵀx over P = {A x <= b, lo <= x <= hi} (a box keeps every LP bounded). It
  solves the LP over a working set of rows (the rows most aligned with -c, then the most violated ones),
  which is a relaxation of P, so every intermediate value is a **valid lower bound** on min_P cᵀx; it stops
  as soon as the bound clears a caller's threshold, the iterate is feasible for all of P (exact optimum), or
  the round budget is spent. Useful when many LPs over one large polytope only need to be bounded (is
  min cᵀx above γ?), e.g. to certify margins.
- ``oracles.min_norm_point(P, method="working_set")`` (implemented here): argmin ‖x‖ over P by the same
  generation on the QP min ½‖x‖²; a relaxation's minimiser that is feasible for P is P's min-norm point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
from numpy.typing import ArrayLike

from . import solvers
from ._validate import as_matrix, as_rhs, as_vector
from .results import CompactResult

__all__ = ["WorkingSetMinimizer", "BoundResult"]

BoxSide = float | np.ndarray | Sequence[float]  # one bound for every variable, or one per variable


def _box(lo: BoxSide, hi: BoxSide, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-variable (lo, hi) arrays from scalars or length-p arrays: finite with lo < hi."""
    try:
        lo_a = np.broadcast_to(np.asarray(lo, dtype=float), (p,)).copy()
        hi_a = np.broadcast_to(np.asarray(hi, dtype=float), (p,)).copy()
    except ValueError:
        raise ValueError(f"lo and hi must be scalars or arrays of length {p}") from None
    if not (np.all(np.isfinite(lo_a)) and np.all(np.isfinite(hi_a))) or np.any(lo_a >= hi_a):
        raise ValueError(f"the box must be finite with lo < hi, got lo={lo}, hi={hi}")
    return lo_a, hi_a


@dataclass(repr=False)
class BoundResult(CompactResult):
    """A bound on min_P cᵀx: ``lower`` is always valid (an LP over a relaxation of P); ``exact`` says the
    working-set optimum ``x`` is feasible for all of P, so ``lower`` is the true minimum; ``lps`` counts
    the LP solves used."""

    lower: float
    x: np.ndarray
    exact: bool
    lps: int


class WorkingSetMinimizer:
    """min cᵀx over P = {A x <= b, lo <= x <= hi} by constraint generation, giving sound lower bounds.

    ``lo``/``hi``: scalars or per-variable arrays (finite). The first query seeds a working set with the
    ``working`` rows whose unit normals are most aligned with -c (the rows that stop motion along -c first);
    later queries add their ``seed_rows`` most aligned rows. The relaxation is solved on one kept engine
    ``solvers.LPModel`` (simplex, warm-started as rows are added and costs change, on a backend that declares
    ``WARM_START``); the ``add`` most violated rows of P are added and the solve repeated, at most
    ``max_rounds`` times per query. With ``shared=False`` every query starts afresh from its own ``working``
    most aligned rows (with ``max_rounds=1``: one small LP whose value is a sound, possibly conservative,
    bound).

    Parameters
    ----------
    A, b : array_like of shape (m, n), array_like of shape (m,)
        The rows of P.
    lo, hi : float or array_like of shape (n,)
        The box (finite, lo < hi).
    working, add, seed_rows, max_rounds : int
        The first working set's size, rows added per round, rows seeded per later query, rounds per query.
    shared : bool
        One working set for all queries (False: each query starts afresh).
    tol : float
        Row violation counted as met.
    solver : str, optional
        LP backend.
    options : mapping, optional
        Backend options (default: its ``SMALL_LP_OPTIONS``).
    """

    def __init__(
        self,
        A: ArrayLike,
        b: ArrayLike,
        lo: BoxSide,
        hi: BoxSide,
        *,
        working: int = 64,
        add: int = 32,
        seed_rows: int = 0,
        max_rounds: int = 8,
        shared: bool = True,
        tol: float = 1e-7,
        solver: str | None = None,
        options: solvers.Options | None = None,
    ) -> None:
        self.A = as_matrix(A, "A")
        self.b = as_rhs(b, "b", self.A.shape[0])
        self.lo, self.hi = _box(lo, hi, self.A.shape[1])
        if working < 1 or add < 1 or max_rounds < 1:
            raise ValueError("working, add and max_rounds must be >= 1")
        self.working, self.add, self.max_rounds, self.tol = int(working), int(add), int(max_rounds), float(tol)
        self.seed_rows = int(seed_rows)
        self.shared = bool(shared)
        backend = solvers.get(solver, "lp")
        self.options = dict(backend.SMALL_LP_OPTIONS) or None if options is None else options
        norms = np.linalg.norm(self.A, axis=1)
        self._An = self.A / np.where(norms > 0, norms, 1.0)[:, None]
        self._norms = norms
        self.solver = solver
        self.n_lps = 0
        self._in_ws = np.zeros(self.A.shape[0], bool)
        self._model: solvers.LPModel | None = None

    @property
    def dim(self) -> int:
        return self.A.shape[1]

    def bound(self, c: ArrayLike, *, stop_above: float = np.inf) -> BoundResult:
        """A valid lower bound on min_P cᵀx (exact when ``exact``).

        The working set is shared by all queries of this object (one kept LPModel, warm-started simplex):
        rows found binding for one objective are usually binding for the next, so the set settles at a
        small fraction of P and most queries need one or two solves.

        Parameters
        ----------
        c : array_like of shape (n,)
            The cost.
        stop_above : float
            Stop as soon as the bound reaches this value.

        Returns
        -------
        BoundResult
            The lower bound, the relaxation's optimum, whether it is exact, and the LP solves used.
        """
        c = as_vector(c, "c", self.dim)
        n = self.A.shape[0]
        if n == 0:
            x = np.where(c > 0, self.lo, self.hi)
            return BoundResult(float(c @ x), x, True, 0)
        if not self.shared:  # a fresh relaxation per query
            self._in_ws[:] = False
            self._model = None
        score = self._An @ (-c)
        score[self._in_ws] = -np.inf
        w = min(self.working if self._model is None else self.seed_rows, n - int(self._in_ws.sum()))
        if w > 0:
            new = np.argpartition(-score, w - 1)[:w]
            new = new[np.isfinite(score[new])]
            self._grow(new)
        assert self._model is not None
        lps = 0
        lower, x = -np.inf, np.zeros(self.dim)
        safe = np.where(self._norms > 0, self._norms, 1.0)
        for _ in range(self.max_rounds):
            sol = self._model.minimize(c)
            lps += 1
            lower, x = float(sol.value), np.asarray(sol.x)
            viol = (self.A @ x - self.b) / safe
            viol[self._in_ws] = -np.inf
            bad = np.flatnonzero(viol > self.tol)
            if bad.size == 0:
                self.n_lps += lps
                return BoundResult(lower, x, True, lps)
            if lower >= stop_above:
                break
            self._grow(bad[np.argsort(-viol[bad])[: self.add]])
        self.n_lps += lps
        return BoundResult(lower, x, False, lps)

    @property
    def working_rows(self) -> int:
        """Rows of P currently in the shared working set."""
        return int(self._in_ws.sum())

    def _grow(self, rows: np.ndarray) -> None:
        if rows.size == 0:
            return
        self._in_ws[rows] = True
        if self._model is None:
            self._model = solvers.LPModel(
                self.A[rows],
                self.b[rows],
                bounds=(self.lo, self.hi),
                solver=self.solver,
                algorithm="simplex",
                options=self.options,
            )
        else:
            self._model.add_halfspaces(self.A[rows], self.b[rows])


class WorkingSetOptions(TypedDict, total=False):
    """``min_norm_point(method="working_set", options=...)``: the rows solved first, the rows added per round,
    the round budget, and the relative row violation counted as met."""

    start: int
    add: int
    max_rounds: int
    feasibility_tol: float


_WORKING_SET_DEFAULTS: WorkingSetOptions = {"start": 256, "add": 256, "max_rounds": 20, "feasibility_tol": 1e-7}


def _split_bounds(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows with exactly one non-zero entry (s x_i <= b) become variable bounds (the tightest per variable);
    returns (the other rows A, b in their order, lo, hi)."""
    p = A.shape[1]
    lo, hi = np.full(p, -np.inf), np.full(p, np.inf)
    single = np.count_nonzero(A, axis=1) == 1
    for r in np.flatnonzero(single):
        i = int(np.flatnonzero(A[r])[0])
        v = b[r] / A[r, i]
        if A[r, i] > 0:
            hi[i] = min(hi[i], v)
        else:
            lo[i] = max(lo[i], v)
    return A[~single], b[~single], lo, hi


def _min_norm_working_set(
    A: np.ndarray,
    b: np.ndarray,
    A_eq: np.ndarray,
    b_eq: np.ndarray,
    *,
    solver: str | None = None,
    start: int = 256,
    add: int = 256,
    max_rounds: int = 20,
    feasibility_tol: float = 1e-7,
) -> tuple[np.ndarray, int]:
    """argmin ‖x‖₂ over {A x <= b, A_eq x = b_eq} by constraint generation on the engine's QP: single-entry
    rows are kept as variable bounds; solve over the ``start`` rows most violated at the current point (0
    clipped to the bounds), add the ``add`` most violated rows at the iterate, repeat until the iterate
    meets every row within ``feasibility_tol`` (relative to the row norm: then it is the exact min-norm
    point, since a relaxation's minimiser that is feasible is optimal). After ``max_rounds`` rounds, a point
    still violating a row by more than 1e-6 is replaced by the QP over all rows. Returns (x, rows used)."""
    if int(start) < 1 or int(add) < 1 or int(max_rounds) < 1:
        raise ValueError(f"start, add and max_rounds must be >= 1, got {start}, {add}, {max_rounds}")
    A, b, lo, hi = _split_bounds(A, b)
    n, p = A.shape
    eq: tuple[np.ndarray | None, np.ndarray | None] = (A_eq, b_eq) if A_eq.shape[0] else (None, None)
    bounds = (lo, hi)
    x = np.clip(np.zeros(p), lo, hi)
    if n == 0 and eq[0] is None:
        return x, 0
    norms = np.where(np.linalg.norm(A, axis=1) > 0, np.linalg.norm(A, axis=1), 1.0)
    in_ws = np.zeros(n, bool)
    solved = False
    for _ in range(int(max_rounds)):
        viol = (A @ x - b) / norms
        viol[in_ws] = -np.inf
        bad = np.flatnonzero(viol > feasibility_tol)
        if bad.size == 0 and (solved or eq[0] is None):
            return x, int(in_ws.sum())
        take = int(start) if not in_ws.any() else int(add)
        in_ws[bad[np.argsort(-viol[bad])[:take]]] = True
        rows: tuple[np.ndarray | None, np.ndarray | None] = (A[in_ws], b[in_ws]) if in_ws.any() else (None, None)
        sol = solvers.solve_qp(np.eye(p), np.zeros(p), *rows, *eq, bounds=bounds, solver=solver)
        x = np.asarray(sol.x)
        solved = True
    viol = (A @ x - b) / norms
    if n and np.max(viol) > 1e-6:
        sol = solvers.solve_qp(np.eye(p), np.zeros(p), A, b, *eq, bounds=bounds, solver=solver)
        x = np.asarray(sol.x)
    return x, int(in_ws.sum())
