"""LP tools for sculpting a polytope from noisy half-spaces, and cheap sound bounds over it.

All routines act on P = {x : A x <= b, lo <= x <= hi} (a box keeps every LP bounded):

- ``min_uniform_slack``: η* = min { t >= 0 : A x <= b + t·1, x in box } (one LP): how far the system is from
  feasible, in the units of b.
- ``l1_trim``: the L1 outlier fit min Σ_i s_i s.t. A x <= b + s, s >= 0 (one LP); rows with s_i > 0 at its
  optimum are the outliers.
- ``WorkingSetMinimizer``: min cᵀx over P by constraint generation. It solves the LP over a working set of
  rows (the rows most aligned with -c, then the most violated ones), which is a relaxation of P, so every
  intermediate value is a **valid lower bound** on min_P cᵀx; it stops as soon as the bound clears a
  caller's threshold, the iterate is feasible for all of P (exact optimum), or the round budget is spent.

The engine knows nothing of attention; these are generic convex-body steps.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from . import solvers
from ._validate import as_matrix, as_rhs, as_vector

__all__ = ["min_uniform_slack", "l1_trim", "L1Trim", "WorkingSetMinimizer", "BoundResult", "min_norm_point_generated"]


def _box(lo: float, hi: float) -> tuple[float, float]:
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo >= hi:
        raise ValueError(f"the box must be finite with lo < hi, got lo={lo}, hi={hi}")
    return lo, hi


def min_uniform_slack(A, b, lo: float, hi: float, *, solver: str | None = None) -> tuple[float, np.ndarray]:
    """η* = min t s.t. A x - t <= b, t >= 0, lo <= x <= hi. Returns (η*, x at the optimum)."""
    A = as_matrix(A, "A")
    b = as_rhs(b, "b", A.shape[0])
    lo, hi = _box(lo, hi)
    n, p = A.shape
    if n == 0:
        return 0.0, np.clip(np.zeros(p), lo, hi)
    c = np.zeros(p + 1)
    c[-1] = 1.0
    AA = sp.hstack([sp.csr_matrix(A), -sp.csr_matrix(np.ones((n, 1)))], format="csr")
    bounds = [(lo, hi)] * p + [(0.0, None)]
    sol = solvers.solve_lp(c, AA, b, bounds=bounds, solver=solver)
    return max(0.0, float(sol.x[-1])), np.asarray(sol.x[:p])


@dataclass
class L1Trim:
    """Outcome of the L1 fit: the fit point ``x``, per-row violations ``slack`` (>= 0) at it, ``keep`` mask
    (slack <= tol) and the optimal total violation ``total``."""

    x: np.ndarray
    slack: np.ndarray
    keep: np.ndarray
    total: float


def l1_trim(A, b, lo: float, hi: float, *, tol: float = 1e-7, solver: str | None = None) -> L1Trim:
    """min Σ s_i s.t. A x - s <= b, s >= 0, lo <= x <= hi; rows with s_i > tol are flagged as outliers."""
    A = as_matrix(A, "A")
    b = as_rhs(b, "b", A.shape[0])
    lo, hi = _box(lo, hi)
    n, p = A.shape
    if n == 0:
        return L1Trim(np.clip(np.zeros(p), lo, hi), np.zeros(0), np.zeros(0, bool), 0.0)
    c = np.concatenate([np.zeros(p), np.ones(n)])
    AA = sp.hstack([sp.csr_matrix(A), -sp.identity(n, format="csr")], format="csr")
    bounds = [(lo, hi)] * p + [(0.0, None)] * n
    sol = solvers.solve_lp(c, AA, b, bounds=bounds, solver=solver)
    x = np.asarray(sol.x[:p])
    slack = np.maximum(A @ x - b, 0.0)
    return L1Trim(x, slack, slack <= tol, float(slack.sum()))


@dataclass
class BoundResult:
    """A bound on min_P cᵀx: ``lower`` is always valid (an LP over a relaxation of P); ``exact`` says the
    working-set optimum ``x`` is feasible for all of P, so ``lower`` is the true minimum; ``lps`` counts
    the LP solves used."""

    lower: float
    x: np.ndarray
    exact: bool
    lps: int


class WorkingSetMinimizer:
    """min cᵀx over P = {A x <= b, lo <= x <= hi} by constraint generation, giving sound lower bounds.

    The first query seeds a working set with the ``working`` rows whose unit normals are most aligned with
    -c (the rows that stop motion along -c first); later queries add their ``seed_rows`` most aligned rows. The
    relaxation is solved on one kept engine ``solvers.LPModel`` (simplex, warm-started as rows are added
    and costs change); the ``add`` most violated rows of P are added and the solve repeated, at most
    ``max_rounds`` times per query. With ``shared=False`` every query starts afresh from its own ``working``
    most aligned rows (with ``max_rounds=1``: one small LP whose value is a sound, possibly conservative,
    bound).
    """

    def __init__(self, A, b, lo: float, hi: float, *, working: int = 64, add: int = 32, seed_rows: int = 0,
                 max_rounds: int = 8, shared: bool = True, tol: float = 1e-7, solver: str | None = None,
                 options: dict | None = None):
        self.A = as_matrix(A, "A")
        self.b = as_rhs(b, "b", self.A.shape[0])
        self.lo, self.hi = _box(lo, hi)
        if working < 1 or add < 1 or max_rounds < 1:
            raise ValueError("working, add and max_rounds must be >= 1")
        self.working, self.add, self.max_rounds, self.tol = int(working), int(add), int(max_rounds), float(tol)
        self.seed_rows = int(seed_rows)
        self.shared = bool(shared)
        # HiGHS presolve costs more than it saves on these small dense relaxations (measured 7 vs 11 ms)
        self.options = {"presolve": "off"} if options is None and (solver or "HIGHS").upper() == "HIGHS" \
            else options
        norms = np.linalg.norm(self.A, axis=1)
        self._An = self.A / np.where(norms > 0, norms, 1.0)[:, None]
        self._norms = norms
        self.solver = solver
        self.n_lps = 0
        self._in_ws = np.zeros(self.A.shape[0], bool)
        self._model = None

    @property
    def dim(self) -> int:
        return self.A.shape[1]

    def bound(self, c, *, stop_above: float = np.inf) -> BoundResult:
        """A valid lower bound on min_P cᵀx (exact when ``exact``); stops once it is >= ``stop_above``.

        The working set is shared by all queries of this object (one kept LPModel, warm-started simplex):
        rows found binding for one objective are usually binding for the next, so the set settles at a
        small fraction of P and most queries need one or two solves."""
        c = as_vector(c, "c", self.dim)
        n = self.A.shape[0]
        if n == 0:
            x = np.where(c > 0, self.lo, self.hi)
            return BoundResult(float(c @ x), x, True, 0)
        if not self.shared:        # a fresh relaxation per query
            self._in_ws[:] = False
            self._model = None
        score = self._An @ (-c)
        score[self._in_ws] = -np.inf
        w = min(self.working if self._model is None else self.seed_rows, n - int(self._in_ws.sum()))
        if w > 0:
            new = np.argpartition(-score, w - 1)[:w]
            new = new[np.isfinite(score[new])]
            self._grow(new)
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
            self._model = solvers.LPModel(self.A[rows], self.b[rows], bounds=(self.lo, self.hi),
                                          solver=self.solver, algorithm="simplex", options=self.options)
        else:
            self._model.add_halfspaces(self.A[rows], self.b[rows])


def min_norm_point_generated(A, b, lo: float, hi: float, *, start: int = 256, add: int = 256, max_rounds: int = 20,
                             tol: float = 1e-7, solver: str | None = None) -> tuple[np.ndarray, int]:
    """argmin ‖x‖₂ over P = {A x <= b, lo <= x <= hi} by constraint generation on the engine's QP
    (``solvers.solve_qp``): solve over the ``start`` rows most violated at 0, add the ``add`` most
    violated rows at the iterate, repeat until the iterate is feasible for all of P (then it is the exact
    min-norm point, since a relaxation's minimiser that is feasible is optimal). Returns (x, rows used)."""
    A = as_matrix(A, "A")
    b = as_rhs(b, "b", A.shape[0])
    lo, hi = _box(lo, hi)
    n, p = A.shape
    x = np.clip(np.zeros(p), lo, hi)
    if n == 0:
        return x, 0
    norms = np.where(np.linalg.norm(A, axis=1) > 0, np.linalg.norm(A, axis=1), 1.0)
    in_ws = np.zeros(n, bool)
    for _ in range(max_rounds):
        viol = (A @ x - b) / norms
        viol[in_ws] = -np.inf
        bad = np.flatnonzero(viol > tol)
        if bad.size == 0:
            return x, int(in_ws.sum())
        take = start if not in_ws.any() else add
        in_ws[bad[np.argsort(-viol[bad])[:take]]] = True
        sol = solvers.solve_qp(np.eye(p), np.zeros(p), A[in_ws], b[in_ws], bounds=(lo, hi), solver=solver)
        x = np.asarray(sol.x)
    viol = (A @ x - b) / norms
    if np.max(viol) > 1e-6:
        sol = solvers.solve_qp(np.eye(p), np.zeros(p), A, b, bounds=(lo, hi), solver=solver)
        x = np.asarray(sol.x)
    return x, int(in_ws.sum())
