"""(Private.) Clarkson's redundancy removal on unit rows, with one kept LP model and ray shooting.

The system is G x <= h (unit rows: P's inequality rows, then its finite bounds) on the flat F x = f of the
implicit and explicit equalities, with x0 a relative-interior point. Every candidate row starts outside the
kept set K. Rows parallel within the flat to another row (g_i N ∝ g_k N, N the flat's basis) are decided first,
without an LP: only the one nearest x0 stays a candidate. Rays from x0 inside the flat find facets cheaply: a
ray whose first hit is one row alone hits a facet, so that row is kept (no LP); random rays first, then one
ray per undecided row along its normal projected onto the flat. Then, for each row i not yet decided, one LP
over K (in blocks of _PROPAGATE_EVERY LPs; between blocks, bounds implied by the equations and the kept rows
are decided with no LP, and LP vertices of P certify facets many at a time while that is the cheaper way:
``oracles._vertex_certificates``):
v = max g_i x s.t. K, F x = f, g_i x <= h_i + 1. When v - h_i <= rho the row is implied (redundant); else the
LP's point x* lies beyond it, and the ray x0 -> x* first hits a row j of the undecided ones: j is kept and i
is tried again. Each LP decides a row, so there are at most (rows) LPs, each over only the kept rows (the
others are free rows, or free columns for bounds, in the same HiGHS model: a row joins K by a bound change).

Margins (distance units, rows being unit): for a kept row, how far the polytope would reach beyond it without
it (a lower bound from the ray: (t2 - t1) g_j·d, t2 the ray's second hit; or the exact LP value over the other
kept rows when that bound is below tol); for a redundant row, v - h_i over the kept rows at the time (an upper
bound on the true one, at most rho). A redundant bound's exact max over P (for tightening) comes from its LP
when the LP's point lies in P, or from the extremes of the points of P seen so far when one of them reaches
the LP's value within rho; otherwise from one more LP over the final kept rows.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._bent_rays import bent_rays
from ._group_redundancy import BoundGroups
from ._local_redundancy import WIDER_HOPS, WIDER_SHARE, local_redundant
from ._sparse import take_rows
from ._vertex_certificates import Witnesses, implied_bounds, vertex_phase
from .errors import EmptyBodyError, SolverError, UnboundedError
from .solvers.backend_highs import run

Solution = Any  # highspy's HighsSolution (col_value, row_dual, col_dual as lists)
_RELAX = 1.0  # the tested row is relaxed by this much (distance units) so that its LP is bounded
_RAY_BATCH = 128  # random rays per batch of the ray-shooting phase
_RAY_FLOPS = 200_000_000  # a batch of rays costs at most this many flops in N g (fewer rays when n d is large)
_PROBE_LPS = 8  # Clarkson steps that price an LP before the bent rays (which run while they are cheaper)
_PROBE_SECONDS = 2.0  # ... two only, once they took this many CPU seconds (on a large P the first alone may)
_LOCAL_ADVANTAGE = 10.0  # neighbourhood LPs run where one costs under a tenth of an LP over P
_RAYS_FROM = 0.25  # seconds: bent rays are tried when one LP per row left would take longer than this
_BENT_SHARE = 0.25  # bent rays run while they certify at least this share of the rows an LP per row decides
_STALL_FACTOR = 20.0  # a warm LP running this many times the recent median is stopped and solved cold
_STALL_FLOOR = 10.0  # seconds: a warm LP is never stopped sooner
_COLD_FIRST_FROM = 500  # variables: above, the first LP is solved cold with presolve (below, either way < 1 ms)
_REBASE_AFTER = 1000  # rows kept since the last solve past which the next LP is solved cold (not from its basis)
_STALL_HISTORY = 16  # warm LPs the median is taken over
_STALL_MIN_HISTORY = 4  # warm LPs timed before any is stopped
_PROPAGATE_EVERY = 64  # Clarkson LPs between two passes of the implied-bound test (cheap: one sparse sweep)
_RAY_TIE = 1e-9  # two hits within this relative distance along a ray are a tie (the ray is not used)
_DENSE_PRODUCT = 250_000  # entries: a G this small is also kept dense, for its products with single vectors
# a simplex vertex is exact to round-off, but HiGHS accepts a basis up to its feasibility tolerance: held to 1e-9
LP_OPTIONS: dict[str, bool | int | float | str] = {
    "presolve": "off",
    "primal_feasibility_tolerance": 1e-9,
    "dual_feasibility_tolerance": 1e-9,
    "simplex_strategy": 4,  # primal simplex: a new cost keeps the basis primal feasible
}


@dataclass
class Problem:
    """Unit rows G x <= h (``kind`` 0: a row of A, +1 / -1: an upper / lower bound of ``var``), the flat's
    equations F x = f (rows of A_eq and implicit rows), pinned variables (value in ``pin``), x0."""

    G: sp.csr_matrix
    h: np.ndarray
    kind: np.ndarray
    var: np.ndarray
    F: sp.csr_matrix
    f: np.ndarray
    pinned: np.ndarray  # bool (n,)
    pin: np.ndarray  # values of pinned variables (NaN elsewhere)
    x0: np.ndarray
    candidates: np.ndarray  # rows of G to decide (the others are implicit equalities)
    tol: float
    rho: np.ndarray = field(init=False, repr=False)  # round_off(h, tol)
    s0: np.ndarray = field(init=False, repr=False)  # slacks at x0, h - G x0
    _dense: np.ndarray | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        self.rho = round_off(self.h, self.tol)
        if self.G.shape[0] * self.G.shape[1] <= _DENSE_PRODUCT:
            self._dense = self.G.toarray()
        self.s0 = self.h - self.Gx(self.x0)

    @property
    def n(self) -> int:
        return self.G.shape[1]

    @cached_property
    def F_coo(self) -> sp.coo_matrix:
        """F as COO (the implied-bound propagation's entry lists), formed once."""
        return sp.coo_matrix(self.F)

    def rows(self, idx: np.ndarray) -> np.ndarray | sp.csr_matrix:
        """G[idx]: dense rows of a small G (its dense copy), else CSR."""
        return self._dense[idx] if self._dense is not None else self.G[idx]

    def Gx(self, x: np.ndarray) -> np.ndarray:
        """G @ x (through a dense copy of a small G: scipy's sparse product costs ~20 us of dispatch)."""
        return self._dense @ x if self._dense is not None else self.G @ x


@dataclass
class Outcome:
    """Per G row: ``kept`` (bool), ``margin`` (NaN for non-candidates), ``how`` ("ray", "lp", "recheck",
    "redundant"); LP value ``value`` for redundant rows, their multipliers on kept rows (``mult``, CSR rows
    aligned with ``G``), ``exact_value`` True when the LP's point lay in P (then value is the max over P)."""

    kept: np.ndarray
    margin: np.ndarray
    value: np.ndarray
    exact_value: np.ndarray
    how: np.ndarray
    mult: sp.csr_matrix
    n_lps: int = 0
    n_rays: int = 0
    lp_seconds: float = 0.0
    info: dict[str, object] = field(default_factory=dict)


def round_off(h: np.ndarray, tol: float) -> np.ndarray:
    """rho per row: margins up to this are round-off (1e-10 of the row's scale, at most tol/10)."""
    return np.minimum(1e-10 * np.maximum(1.0, np.abs(h)), 0.1 * tol)


class KeptLP:
    """One HiGHS model over all rows of G (rows of A as free rows until kept; bounds as column bounds) and
    the flat's equations; ``solve(i, K)`` maximises g_i x with row i relaxed by _RELAX."""

    def __init__(self, pb: Problem) -> None:
        from .solvers.backend_highs import HighsBackend

        self.pb = pb
        self.is_row = pb.kind == 0
        self.row_slot = np.cumsum(self.is_row) - 1 + pb.F.shape[0]  # HiGHS row of each A-row of G
        n = pb.n
        lo = np.where(pb.pinned, pb.pin, -np.inf)
        hi = np.where(pb.pinned, pb.pin, np.inf)
        self.lo, self.hi = lo.copy(), hi.copy()
        # per G row, what setting its right-hand side changes: the HiGHS row of a row of A, the variable of a
        # bound, -1 for a pinned variable's bound (nothing); also as Python scalars, for ``_set_row``
        self._target = np.where(self.is_row, self.row_slot, np.where(pb.pinned[np.maximum(pb.var, 0)], -1, pb.var))
        self._kind_target = list(zip(pb.kind.tolist(), self._target.tolist()))
        Grows = take_rows(pb.G, np.flatnonzero(self.is_row))
        A = sp.vstack([pb.F, Grows], format="csr")
        inf = np.full(Grows.shape[0], np.inf)
        self.backend = HighsBackend()
        self.h = self.backend.new_model(LP_OPTIONS, algorithm="simplex")
        hp = __import__("highspy")
        lp = hp.HighsLp()
        Ac = A.tocsc()
        lp.num_col_ = n
        lp.num_row_ = A.shape[0]
        lp.col_cost_ = np.zeros(n)
        lp.col_lower_ = lo
        lp.col_upper_ = hi
        lp.row_lower_ = np.concatenate([pb.f, -inf])
        lp.row_upper_ = np.concatenate([pb.f, inf])
        lp.a_matrix_.format_ = hp.MatrixFormat.kColwise
        lp.a_matrix_.start_ = Ac.indptr
        lp.a_matrix_.index_ = Ac.indices
        lp.a_matrix_.value_ = Ac.data
        lp.a_matrix_.num_col_ = n
        lp.a_matrix_.num_row_ = A.shape[0]
        self.h.passModel(lp)
        self.A = Ac  # the model's matrix (CSC): its basic columns factor the vertices' edge directions
        self._cost_idx = np.zeros(0, dtype=np.int32)
        self.bound_row = np.full((2, n), -1)  # G row of each variable's upper (0) and lower (1) bound
        b = np.flatnonzero(pb.kind != 0)
        self.bound_row[(pb.kind[b] < 0).astype(int), pb.var[b]] = b
        self.hi_seen, self.lo_seen = pb.x0.copy(), pb.x0.copy()  # extremes of each variable over points of P
        self.n_solves = 0
        self.n_cold = 0
        self.n_stalled = 0  # warm solves stopped at the stall limit (each then solved cold)
        self._warm_seconds: list[float] = []
        self._kept_since = 0  # rows kept since the last solve
        self.n_keeps = 0  # rows kept so far (``_implied`` has nothing new to find while this stays put)
        self.implied_at = -1  # n_keeps at the last implied-bound pass

    def _set_row(self, j: int, upper: float | None) -> None:
        """Row j of G in the model with right-hand side ``upper`` (None: free). (On Python scalars: it runs
        a few times per LP.)"""
        kind, v = self._kind_target[j]
        if kind == 0:
            self.h.changeRowBounds(v, -np.inf, np.inf if upper is None else float(upper))
            return
        if v < 0:  # a pinned variable
            return
        if kind > 0:
            self.hi[v] = np.inf if upper is None else upper
        else:
            self.lo[v] = -np.inf if upper is None else -upper
        self.h.changeColBounds(v, float(self.lo[v]), float(self.hi[v]))

    def set_rows(self, rows: np.ndarray, upper: np.ndarray | None) -> None:
        """Rows of G in the model with right-hand sides ``upper`` (None: free): ``_set_row`` for many rows, the
        bounds in one HiGHS call."""
        rows = np.asarray(rows, dtype=int)
        up = np.full(rows.size, np.inf) if upper is None else np.asarray(upper, dtype=float)
        kind, t = self.pb.kind[rows], self._target[rows]
        for slot, u in zip(t[kind == 0].tolist(), up[kind == 0].tolist()):  # (rows of A: rare here)
            self.h.changeRowBounds(slot, -np.inf, u)
        b = (kind != 0) & (t >= 0)
        if b.any():
            v, hi, u = t[b], kind[b] > 0, up[b]
            self.hi[v[hi]] = u[hi]
            self.lo[v[~hi]] = -u[~hi]
            cols = np.sort(v).astype(np.int32)  # (HiGHS takes an ascending set)
            if np.any(cols[1:] == cols[:-1]):
                cols = np.unique(cols)
            self.h.changeColsBounds(cols.size, cols, self.lo[cols], self.hi[cols])

    def keep(self, j: int) -> None:
        self._set_row(j, float(self.pb.h[j]))
        self._kept_since += 1
        self.n_keeps += 1

    def release(self, j: int) -> None:
        self._set_row(j, None)

    def maximize(self, j: int) -> tuple[float, np.ndarray, Solution]:
        """max g_j x over the model as it stands: (value, x, HiGHS's solution with the duals)."""
        G = self.pb.G
        idx = G.indices[G.indptr[j] : G.indptr[j + 1]].astype(np.int32)
        gv = G.data[G.indptr[j] : G.indptr[j + 1]]
        x, sol = self._maximize(idx, gv)
        return float(gv @ x[idx]), x, sol

    def maximize_rows(self, rows: np.ndarray) -> tuple[np.ndarray, Solution]:
        """max Σ_{k in rows} g_k x over the model as it stands: (x, HiGHS's solution with the duals)."""
        G = self.pb.G
        lens = G.indptr[rows + 1] - G.indptr[rows]
        pos = np.repeat(G.indptr[rows] - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))  # rows' entries
        idx, val = G.indices[pos], G.data[pos]
        cols, at = np.unique(idx, return_inverse=True)
        return self._maximize(cols.astype(np.int32), np.bincount(at, weights=val, minlength=cols.size))

    def _maximize(self, idx: np.ndarray, gv: np.ndarray) -> tuple[np.ndarray, Solution]:
        if self._cost_idx.size:
            self.h.changeColsCost(self._cost_idx.size, self._cost_idx, np.zeros(self._cost_idx.size))
        self.h.changeColsCost(idx.size, idx, -gv)
        self._cost_idx = idx
        sol = self._run().getSolution()
        return np.array(sol.col_value), sol

    def solve_cost(self, c: np.ndarray, max_iterations: int | None = None) -> tuple[np.ndarray, Any, bool]:
        """max c x over the model as it stands: (x, the HiGHS model that solved it, with its basis, and
        whether it is optimal). With ``max_iterations``, a solve that reaches it stops there: x is then the
        basic solution it had reached (feasible once the simplex is past its phase 1)."""
        hp = __import__("highspy")
        idx = np.arange(self.pb.n, dtype=np.int32)
        self.h.changeColsCost(idx.size, idx, -np.asarray(c, dtype=float))
        self._cost_idx = idx
        if max_iterations is None:
            h = self._run()
            return np.array(h.getSolution().col_value), h, True
        self.h.setOptionValue("simplex_iteration_limit", int(max_iterations))
        try:
            run(self.h)
        finally:
            self.h.setOptionValue("simplex_iteration_limit", hp.kHighsIInf)
        st = self.h.getModelStatus()
        if st in (hp.HighsModelStatus.kIterationLimit, hp.HighsModelStatus.kOptimal):
            self.n_solves += 1
            return np.array(self.h.getSolution().col_value), self.h, st == hp.HighsModelStatus.kOptimal
        h = self._run()  # another status: _run's cold restart and typed errors
        return np.array(h.getSolution().col_value), h, True

    def _run(self) -> Any:
        """Solve from the current basis; returns the HiGHS model holding the optimum (typed errors otherwise).
        A warm solve that runs over _STALL_FACTOR times the median of the recent ones (and _STALL_FLOOR s) is
        stopped and the LP solved cold: a warm start can stall in HiGHS's primal simplex where a fresh solve
        with presolve does not. The first LP (on over _COLD_FIRST_FROM variables), and one after more than
        _REBASE_AFTER rows were kept (the rays' stages), is solved cold with presolve at once (at 10,600
        reactions 0.3 s against 7 s from no basis without presolve, and 11 s against 26 s from the basis the
        probe left)."""
        hp = __import__("highspy")
        first = self.n_solves == 0 and self.pb.n > _COLD_FIRST_FROM  # no basis yet, on a P large enough to matter
        rebase = self._kept_since > _REBASE_AFTER or first  # (or a basis far from P as it now is)
        self._kept_since = 0
        if rebase:
            fresh = self._cold()
            if fresh.getModelStatus() == hp.HighsModelStatus.kOptimal:
                return self._checked(fresh)  # (else the kept model's own solve, as below)
        limit = None
        if len(self._warm_seconds) >= _STALL_MIN_HISTORY:
            limit = max(_STALL_FLOOR, _STALL_FACTOR * statistics.median(self._warm_seconds))
            self.h.setOptionValue("time_limit", self.h.getRunTime() + limit)  # (HiGHS's clock sums all runs)
        t = time.perf_counter()
        try:
            run(self.h)
        finally:
            if limit is not None:
                self.h.setOptionValue("time_limit", hp.kHighsInf)
        st = self.h.getModelStatus()
        h = self.h
        if st == hp.HighsModelStatus.kOptimal:
            self._warm_seconds = self._warm_seconds[-_STALL_HISTORY + 1 :] + [time.perf_counter() - t]
        else:
            self.n_stalled += int(st == hp.HighsModelStatus.kTimeLimit)
            h = self._cold()  # a warm start can stall ("Unknown", or past the limit) where a fresh solve works
        return self._checked(h)

    def _checked(self, h: Any) -> Any:
        """``h`` if it holds an optimum (counted as a solve); typed errors otherwise."""
        hp = __import__("highspy")
        st = h.getModelStatus()
        self.n_solves += 1
        if st == hp.HighsModelStatus.kInfeasible:
            raise EmptyBodyError("simplify: the kept rows became infeasible (the polytope is empty)")
        if st == hp.HighsModelStatus.kUnbounded:
            raise UnboundedError("simplify: a relaxed row's LP is unbounded")
        if st != hp.HighsModelStatus.kOptimal:
            raise SolverError(f"simplify: HiGHS status {h.modelStatusToString(st)}", backend="HIGHS", status="failed")
        return h

    def seen(self, x: np.ndarray) -> None:
        """Record a point of P: its coordinates widen the extremes seen (lower bounds on each max / min)."""
        np.maximum(self.hi_seen, x, out=self.hi_seen)
        np.minimum(self.lo_seen, x, out=self.lo_seen)

    def attained(self, j: int, v: float, rho: float) -> bool:
        """Bound row j's value v (an upper bound on its max over P) is reached, within rho, by a point of P seen."""
        pb = self.pb
        if pb.kind[j] == 0:
            return False
        var = int(pb.var[j])
        best = self.hi_seen[var] if pb.kind[j] > 0 else -self.lo_seen[var]
        return bool(best >= v - rho)

    def _cold(self) -> Any:
        """The current LP solved from scratch in a fresh model (presolve on, default tolerances); the kept
        model's basis becomes that optimum's (dropped when there is none), so that the next warm start does
        not begin from a stalled or distant one."""
        fresh = self.backend.new_model({"presolve": "on"}, algorithm="simplex")
        fresh.passModel(self.h.getLp())
        run(fresh)
        self.h.clearSolver()
        hp = __import__("highspy")
        if fresh.getModelStatus() == hp.HighsModelStatus.kOptimal and fresh.getBasis().valid:
            self.h.setBasis(fresh.getBasis())  # the next warm start begins at this optimum
        self.n_cold += 1
        return fresh

    def test(self, i: int) -> tuple[float, np.ndarray, Solution]:
        """max g_i x with row i relaxed to h_i + _RELAX; row i is free again afterwards."""
        self._set_row(i, float(self.pb.h[i]) + _RELAX)
        try:
            return self.maximize(i)
        finally:
            self.release(i)


def multipliers(lp: KeptLP, sol: Solution, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The LP's multipliers on the kept rows of G (>= 0): (indices into G, values)."""
    pb = lp.pb
    K = np.flatnonzero(kept)
    vals = np.zeros(K.size)
    r = lp.is_row[K]
    if r.any():  # (on a flux polytope every row is a bound: the row duals are not read)
        vals[r] = np.abs(np.asarray(sol.row_dual)[lp.row_slot[K[r]]])
    cd = np.asarray(sol.col_dual)
    b = ~r
    # HiGHS minimises -g_i x: a column's reduced cost is <= 0 at its upper bound and >= 0 at its lower one, so
    # its sign says which bound row carries it (a variable with both bounds kept has one multiplier, not two)
    vals[b] = np.maximum(-pb.kind[K[b]] * cd[pb.var[K[b]]], 0.0)
    nz = vals > 0
    return K[nz], vals[nz]


def random_rays(
    pb: Problem, basis: np.ndarray, rng: np.random.Generator, max_batches: int, rows: np.ndarray
) -> tuple[dict[int, float], int]:
    """Rows hit first, alone, by random rays from x0 inside the flat (x0 + t N g): {row: margin lower
    bound}, and the number of rays. Stops after a batch that finds nothing new."""
    d = basis.shape[1]
    cand = rows  # the undecided rows: a copy decided redundant would tie with its original
    if d == 0 or cand.size == 0:
        return {}, 0
    Gc = pb.rows(cand)
    s = pb.h[cand] - Gc @ pb.x0
    if np.min(s) <= 0:
        return {}, 0  # x0 is not strictly inside: the rays prove nothing
    found: dict[int, float] = {}
    rays = 0
    batch = int(min(_RAY_BATCH, max(8, _RAY_FLOPS // max(1, basis.shape[0] * d))))  # N g costs n d per ray
    for _ in range(max_batches):
        D = basis @ rng.standard_normal((d, batch))
        D /= np.linalg.norm(D, axis=0, keepdims=True)
        GD = np.asarray(Gc @ D)
        rays += batch
        with np.errstate(divide="ignore", invalid="ignore"):
            T = np.where(GD > 1e-12, s[:, None] / GD, np.inf)
        first, two, alone = _first_hits(T)
        ok = np.flatnonzero(alone)
        with np.errstate(invalid="ignore"):
            lb = np.where(np.isfinite(two[1, ok]), (two[1, ok] - two[0, ok]) * GD[first[ok], ok], np.inf)
        rows, at = np.unique(cand[first[ok]], return_inverse=True)
        best = np.full(rows.size, -np.inf)
        np.maximum.at(best, at, lb)
        n0 = len(found)
        for j, v in zip(rows.tolist(), best.tolist()):
            found[j] = max(found.get(j, 0.0), v)
        if len(found) == n0:
            break
    return found, rays


_DIRECTED_BATCH = 256  # rows whose directed rays are formed at a time (an n x 256 block of directions)


def _first_hits(T: np.ndarray, by_ray: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per ray, from hit times T (rows x rays, or rays x rows with ``by_ray``; inf where a row is not
    approached): the first row, its time and the second time (2 x rays); ``ok`` marks rays whose first hit is
    alone (no tie within _RAY_TIE). Reduced along contiguous memory (a ray's row of T): 40x faster than
    along the columns of a rows x rays array at 17,000 x 192."""
    Tr = T if by_ray else np.ascontiguousarray(T.T)
    if Tr.shape[1] == 0:
        return np.zeros(Tr.shape[0], dtype=int), np.full((2, Tr.shape[0]), np.inf), np.zeros(Tr.shape[0], bool)
    first = np.argmin(Tr, axis=1)
    c = np.arange(Tr.shape[0])
    t1 = Tr[c, first].copy()
    Tr[c, first] = np.inf  # (restored below: T may be the caller's)
    t2 = Tr.min(axis=1)
    Tr[c, first] = t1
    ok = np.isfinite(t1) & (t2 > t1 * (1.0 + _RAY_TIE) + 1e-15)
    return first, np.vstack([t1, t2]), ok


def directed_rays(
    pb: Problem, basis: np.ndarray, rows: np.ndarray, alive: np.ndarray, s0: np.ndarray
) -> dict[int, float]:
    """Facets found by one ray per undecided row, aimed along that row's normal projected onto the flat
    (d = N Nᵀ g_i, the steepest ascent of g_i x within the flat): the first row hit, when hit alone among
    the rows not found redundant (``alive``: kept and undecided), is a facet. {row: margin lower bound}."""
    found: dict[int, float] = {}
    if basis.shape[1] == 0 or rows.size == 0:
        return found
    s = s0[alive]
    if np.min(s) <= 0:
        return found  # x0 is not strictly inside: the rays prove nothing
    Ga = pb.rows(alive)
    for a in range(0, rows.size, _DIRECTED_BATCH):
        J = rows[a : a + _DIRECTED_BATCH]
        D = basis @ np.asarray(pb.rows(J) @ basis).T  # n x |J|: each row's normal projected onto the flat
        GD = np.asarray(Ga @ D)
        with np.errstate(divide="ignore", invalid="ignore"):
            T = np.where(GD > 1e-12, s[:, None] / GD, np.inf)
        first, two, ok = _first_hits(T)
        for k in np.flatnonzero(ok):
            j = int(alive[first[k]])
            lb = float((two[1, k] - two[0, k]) * GD[first[k], k]) if np.isfinite(two[1, k]) else np.inf
            found[j] = max(found.get(j, 0.0), lb)
    return found


def shoot(pb: Problem, s0: np.ndarray, x: np.ndarray, alive: np.ndarray, open_: np.ndarray) -> tuple[np.ndarray, float]:
    """The undecided rows (mask ``open_``) hit first by the segment x0 -> x among the rows not found
    redundant (``alive``; several when they tie), and a lower bound on the margin of the first one: how far
    past its hyperplane the ray goes before the next hit (0 when they tie)."""
    d = x - pb.x0
    gd = pb.Gx(d)[alive]  # (the whole product: cheaper than slicing the rows out first)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(gd > 0, np.maximum(s0[alive], 0.0) / np.where(gd > 0, gd, 1.0), np.inf)
    k = int(np.argmin(t))
    t1 = float(t[k])
    tied = np.flatnonzero(t <= t1 * (1.0 + _RAY_TIE) + 1e-15)
    hit = alive[tied][open_[alive[tied]]]
    if tied.size > 1 or hit.size != 1 or s0[alive[k]] <= 0:
        return hit, 0.0
    t[k] = np.inf  # (t is this call's own array)
    t2 = float(np.min(t))
    return hit, float((t2 - t1) * gd[k]) if np.isfinite(t2) else np.inf


def _redundant(out: Outcome, lp: KeptLP, j: int, v: float, x: np.ndarray, sol: Solution) -> None:
    pb = lp.pb
    out.kept[j] = False
    out.margin[j] = v - pb.h[j]
    out.value[j] = v
    out.how[j] = "redundant"
    out.exact_value[j] = bool(np.max(pb.Gx(x) - pb.h - pb.rho, initial=0.0) <= 0.0)
    if out.exact_value[j]:
        lp.seen(x)
    idx, vals = multipliers(lp, sol, out.kept)
    out.info.setdefault("_mult", {})[j] = (idx, vals)  # type: ignore[index]


_PARALLEL = 1e-12  # rows whose directions within the flat agree to this (unit vectors) are parallel there
_CHUNK = 2048  # rows of G N formed at a time (G N is dense: rows x dim)


def _flat_images(pb: Problem, basis: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Norms and unit directions of the rows' images in the flat (g N)."""
    GN = np.asarray(pb.rows(rows) @ basis)
    nr = np.linalg.norm(GN, axis=1)
    return nr, GN / np.where(nr > 0, nr, 1.0)[:, None]


def flat_duplicates(pb: Problem, basis: np.ndarray, out: Outcome, decided: np.ndarray, s0: np.ndarray) -> None:
    """Decide without LPs the rows that are constant on the flat (g N = 0: redundant, value g x0) and the
    rows parallel within the flat to another (g_i N ∝ g_k N): of each such group only the row closest to x0
    along that direction stays a candidate (ties: the lowest index); the others are implied by it."""
    cand = np.flatnonzero(~decided)
    if cand.size == 0:
        return
    norms = np.zeros(cand.size)
    keys = np.zeros(cand.size, dtype=np.int64)  # a hash of each unit image rounded to 9 digits (no n x d copy kept)
    for a in range(0, cand.size, _CHUNK):
        nr, U = _flat_images(pb, basis, cand[a : a + _CHUNK])
        norms[a : a + _CHUNK] = nr
        R = np.round(U, 9) + 0.0  # (+ 0.0 turns -0.0 into 0.0: the same key)
        keys[a : a + _CHUNK] = [hash(R[k].tobytes()) for k in range(R.shape[0])]
    const = norms <= 1e-9
    c = cand[const]
    decided[c], out.kept[c], out.how[c] = True, False, "redundant"
    out.value[c], out.margin[c], out.exact_value[c] = pb.h[c] - s0[c], -s0[c], True
    live = np.flatnonzero(~const)
    _, grp, count = np.unique(keys[live], return_inverse=True, return_counts=True)
    mem, gid = live[count[grp] > 1], grp[count[grp] > 1]
    dist = s0[cand[mem]] / norms[mem]
    order = np.lexsort((cand[mem], dist, gid))  # per group: the row closest to x0 first (ties: lowest index)
    mem, gid, dist = mem[order], gid[order], dist[order]
    first = np.r_[True, gid[1:] != gid[:-1]] if mem.size else np.zeros(0, dtype=bool)
    rep = np.flatnonzero(first)[np.cumsum(first) - 1]  # each member's representative (a position in mem)
    dup = np.zeros(mem.size, dtype=bool)
    for a in range(0, mem.size, _CHUNK):  # unit images compared exactly, _CHUNK members at a time
        sl = slice(a, a + _CHUNK)
        U, Ur = _flat_images(pb, basis, cand[mem[sl]])[1], _flat_images(pb, basis, cand[mem[rep[sl]]])[1]
        dup[sl] = ~first[sl] & (np.max(np.abs(U - Ur), axis=1) <= _PARALLEL)  # (else 9 digits only: the LPs')
    k, r = mem[dup], mem[rep[dup]]
    j, jr = cand[k], cand[r]
    decided[j], out.kept[j], out.how[j] = True, False, "redundant"
    out.margin[j] = (dist[rep[dup]] - s0[j] / norms[k]) * norms[k]
    scale = norms[k] / norms[r]
    out.info["dup"] = (j, jr, scale)
    store = out.info.setdefault("_mult", {})
    assert isinstance(store, dict)
    for i, ir, f in zip(j.tolist(), jr.tolist(), scale.tolist()):
        store[i] = (np.array([ir]), np.array([f]))


def clarkson(
    pb: Problem, basis: np.ndarray, rng: np.random.Generator, max_batches: int, local_bounds: bool = True
) -> Outcome:
    """Decide every candidate row of ``pb``: kept (a facet) or redundant, with margins (module docstring).
    ``local_bounds``: bounds may be decided by neighbourhood LPs and in groups (``oracles._group_redundancy``);
    False when each redundant bound's exact extreme is wanted: it would cost an LP over P again, which a
    Clarkson LP often gives on the way."""
    m = pb.G.shape[0]
    out = Outcome(
        kept=np.zeros(m, dtype=bool),
        margin=np.full(m, np.nan),
        value=np.full(m, np.nan),
        exact_value=np.zeros(m, dtype=bool),
        how=np.full(m, "equality", dtype=object),
        mult=sp.csr_matrix((m, m)),
    )
    lp = KeptLP(pb)
    rho, s0 = pb.rho, pb.s0
    decided = np.ones(m, dtype=bool)
    decided[pb.candidates] = False
    cand_mask = ~decided
    flat_duplicates(pb, basis, out, decided, s0)
    recheck = _ray_phase(pb, basis, rng, max_batches, out, decided, lp, s0, rho)
    t0 = time.perf_counter()
    wit = Witnesses(model=(pb, lp.A, lp.row_slot))
    out.info["witnesses"] = wit
    _implied(out, lp, decided, cand_mask)
    _priced_phase(out, lp, basis, decided, cand_mask, s0, rho, recheck, local_bounds)
    _implied(out, lp, decided, cand_mask)
    groups = BoundGroups(lp, _RELAX) if local_bounds else None
    _lp_loop(out, lp, decided, cand_mask, s0, rho, recheck, rng, groups)
    if groups is not None:
        out.info.update(group_lps=groups.n_lps, group_rows=groups.n_rows)
    _recheck(out, lp, sorted(recheck, reverse=True), rho)  # of tied duplicates the lowest index stays
    out.n_lps = lp.n_solves
    out.lp_seconds = time.perf_counter() - t0
    out.info["lp"] = lp
    return out


def _lp_loop(
    out: Outcome,
    lp: KeptLP,
    decided: np.ndarray,
    cand_mask: np.ndarray,
    s0: np.ndarray,
    rho: np.ndarray,
    recheck: set[int],
    rng: np.random.Generator,
    groups: BoundGroups | None = None,
) -> None:
    """One LP per undecided row, nearest x0 first, until every row is decided, in blocks of _PROPAGATE_EVERY
    LPs; with ``groups``, a bound whose opposite bound is decided is tested with others in one LP
    (``oracles._group_redundancy``). After each block the implied-bound test runs again (the rows kept since
    may imply more), and vertex LPs run while they certify more rows per CPU second than the block decided
    (a probe that loses doubles the blocks until the next one)."""
    wit = out.info["witnesses"]
    assert isinstance(wit, Witnesses)
    block = _PROPAGATE_EVERY
    while True:
        n0, c0, start = int(np.sum(decided)), time.process_time(), lp.n_solves
        while lp.n_solves - start < block:
            open_ = np.flatnonzero(cand_mask & ~decided)
            if open_.size == 0:
                return
            i = int(open_[np.argmin(s0[open_])])
            if groups is None or not groups.step(out, i, open_, decided, cand_mask, s0, rho, recheck):
                _decide(out, lp, i, decided, cand_mask, s0, rho, recheck)
        _implied(out, lp, decided, cand_mask)
        rate = (int(np.sum(decided)) - n0) / max(time.process_time() - c0, 1e-9)
        if vertex_phase(lp, out, decided, s0, rng, wit, min_rate=rate) < rate:
            block *= 2  # the vertices lost: probe again later


def _decide(
    out: Outcome,
    lp: KeptLP,
    i: int,
    decided: np.ndarray,
    cand_mask: np.ndarray,
    s0: np.ndarray,
    rho: np.ndarray,
    recheck: set[int],
) -> None:
    """Clarkson's step for row i (ties in s0: the lowest index): one LP over the kept rows; redundant, or
    the ray from x0 to the LP's point keeps the row it hits first."""
    pb = lp.pb
    v, x, sol = lp.test(i)
    if v - pb.h[i] <= rho[i]:
        decided[i] = True
        _redundant(out, lp, i, v, x, sol)
        return
    if not keep_hits(out, lp, x, decided, cand_mask, s0, recheck, tested=i):
        # round-off: the first hit is a kept row; keep row i, checked again at the end
        out.kept[i], decided[i], out.margin[i], out.how[i] = True, True, 0.0, "lp"
        lp.keep(i)
        recheck.add(i)


def keep_hits(
    out: Outcome,
    lp: KeptLP,
    x: np.ndarray,
    decided: np.ndarray,
    cand_mask: np.ndarray,
    s0: np.ndarray,
    recheck: set[int],
    tested: int = -1,
) -> bool:
    """Keep the undecided rows the ray x0 -> x (x outside P) hits first (``shoot``): "lp" for the row
    ``tested``, "ray" for the others; a tie or a margin bound below tol sends them to the recheck. False when
    the first hit is no undecided row (round-off)."""
    alive = np.flatnonzero(cand_mask & (out.how != "redundant"))
    hit, lb = shoot(lp.pb, s0, x, alive, ~decided)
    for j in hit:
        out.kept[j], decided[j], out.margin[j] = True, True, lb
        out.how[j] = "lp" if j == tested else "ray"
        lp.keep(int(j))
    if hit.size > 1 or lb < lp.pb.tol:
        recheck.update(int(j) for j in hit)
    return hit.size > 0


def _implied(out: Outcome, lp: KeptLP, decided: np.ndarray, cand: np.ndarray) -> None:
    """Undecided bounds implied by one equation and the kept bounds (no LP): redundant, with multipliers.
    Skipped when no row was kept since the last pass (it would find nothing more)."""
    if lp.implied_at == lp.n_keeps:
        return
    lp.implied_at = lp.n_keeps
    rows, values, mult = implied_bounds(lp, np.flatnonzero(cand & ~decided))
    h = lp.pb.h
    out.kept[rows], decided[rows], out.how[rows] = False, True, "redundant"
    out.value[rows], out.margin[rows] = values, values - h[rows]
    store = out.info.setdefault("_mult", {})
    assert isinstance(store, dict)
    for j, ym in zip(rows, mult):
        store[int(j)] = ym
    out.info["implied"] = int(out.info.get("implied", 0)) + rows.size  # type: ignore[call-overload]


def _ray_phase(
    pb: Problem,
    basis: np.ndarray,
    rng: np.random.Generator,
    max_batches: int,
    out: Outcome,
    decided: np.ndarray,
    lp: KeptLP,
    s0: np.ndarray,
    rho: np.ndarray,
) -> set[int]:
    """Facets found without an LP: random rays, then one directed ray per undecided row (and per facet whose
    margin bound is still below tol, to raise it), and bounds implied by the equations. Returns the facets
    whose margin bound stays below tol."""

    found, out.n_rays = random_rays(pb, basis, rng, max_batches, np.flatnonzero(~decided))
    _keep_found(out, decided, lp, found, "random ray")
    cand = np.isin(np.arange(decided.size), pb.candidates)
    alive = np.flatnonzero(cand & (out.how != "redundant"))
    thin = np.flatnonzero(out.kept & (out.margin < pb.tol))
    rows = np.union1d(np.flatnonzero(~decided), thin)
    _keep_found(out, decided, lp, directed_rays(pb, basis, rows, alive, s0), "directed ray")
    _implied(out, lp, decided, cand)  # propagation: it needs no LP at all
    return set(np.flatnonzero(out.kept & (out.margin < pb.tol)).tolist())


def _priced_phase(
    out: Outcome,
    lp: KeptLP,
    basis: np.ndarray,
    decided: np.ndarray,
    cand: np.ndarray,
    s0: np.ndarray,
    rho: np.ndarray,
    recheck: set[int],
    local_bounds: bool,
) -> None:
    """The LP-free stages that pay only where an LP over P is dear: a probe of _PROBE_LPS Clarkson steps (two
    once they took _PROBE_SECONDS) prices one; neighbourhood LPs run while one costs under 1/_LOCAL_ADVANTAGE
    of it (two hops, then three after the rays, up to WIDER_SHARE of the variables); bent rays, when a warm
    LP per row left would cost over _RAYS_FROM, while they certify at least _BENT_SHARE of the rows per
    second that one LP per row would decide (an early Clarkson LP is cheaper than a late one: the rays get a
    head start)."""
    probe: list[float] = []
    while len(probe) < _PROBE_LPS and (len(probe) < 2 or sum(probe) < _PROBE_SECONDS):
        open_ = np.flatnonzero(cand & ~decided)
        if open_.size == 0:
            return
        c = time.process_time()
        _decide(out, lp, int(open_[np.argmin(s0[open_])]), decided, cand, s0, rho, recheck)
        probe.append(time.process_time() - c)
    per_lp = float(np.mean(probe))  # the first LP (from no basis) included: later LPs grow towards it
    warm = float(np.median(probe[1:]))  # a warm-started LP as the loop would run it now
    t = time.perf_counter()
    budget = per_lp / _LOCAL_ADVANTAGE
    local = cand if local_bounds else cand & (lp.pb.kind == 0)
    loc = local_redundant(lp, out, decided, local, s0, rho, max_seconds_per_lp=budget)
    t_local = time.perf_counter() - t
    alive = np.flatnonzero(cand & (out.how != "redundant"))
    open_ = np.flatnonzero(cand & ~decided)
    t = time.perf_counter()
    if warm * open_.size > _RAYS_FROM:  # else the LPs left cost next to nothing
        found = bent_rays(lp.pb.G, basis, open_, alive, s0, min_rate=_BENT_SHARE / per_lp)
        _keep_found(out, decided, lp, found, "bent ray")
    t_bent, t = time.perf_counter() - t, time.perf_counter()
    wide = local_redundant(
        lp, out, decided, local, s0, rho, hops=WIDER_HOPS, max_seconds_per_lp=budget, max_share=WIDER_SHARE
    )
    out.info.update(
        local=len(loc.rows) + len(wide.rows),
        local_lps=loc.n_lps + wide.n_lps,
        local_seconds=t_local + time.perf_counter() - t,
        bent_seconds=t_bent,
        lp_probe_seconds=per_lp,
    )


def _keep_found(out: Outcome, decided: np.ndarray, lp: KeptLP, found: dict[int, float], how: str) -> None:
    """Keep the facets rays found ({row: margin lower bound}); a kept row's margin bound is raised."""
    for j, lb in found.items():
        if decided[j]:
            if out.kept[j]:
                out.margin[j] = max(out.margin[j], lb)
            continue
        out.kept[j], decided[j], out.margin[j], out.how[j] = True, True, lb, how
        lp.keep(j)


def _recheck(out: Outcome, lp: KeptLP, rows: list[int], rho: np.ndarray) -> None:
    """Kept rows whose margin is unknown or below tol: one LP each over the other kept rows, in turn."""
    for j in rows:
        if not out.kept[j]:
            continue
        lp.release(j)
        out.kept[j] = False
        v, x, sol = lp.test(j)
        if v - lp.pb.h[j] <= rho[j]:
            _redundant(out, lp, j, v, x, sol)
        else:
            out.kept[j], out.margin[j], out.how[j] = True, v - lp.pb.h[j], "recheck"
            lp.keep(j)


def tighten(out: Outcome, lp: KeptLP, rows: np.ndarray, s0: np.ndarray) -> None:
    """The exact max over P (= over the kept rows) of each redundant row in ``rows``: a row parallel on the
    flat to another takes it from that one's (its facet's right-hand side, or its own max); the others whose
    Clarkson LP point lay outside P get one LP each."""
    empty = np.zeros(0, dtype=int)
    dup = out.info.get("dup", (empty, empty, np.zeros(0)))
    assert isinstance(dup, tuple)
    dup_i: np.ndarray = dup[0]
    dup_k: np.ndarray = dup[1]
    scale: np.ndarray = dup[2]
    is_dup = np.zeros(out.kept.size, dtype=bool)
    is_dup[dup_i] = True
    h, rho = lp.pb.h, lp.pb.rho
    for j in rows:
        if out.exact_value[j] or is_dup[j]:
            continue
        if lp.attained(int(j), float(out.value[j]), float(rho[j])):  # its LP bound is reached by a point of P
            out.exact_value[j] = True
            continue
        v, x, _ = lp.maximize(int(j))
        lp.seen(x)
        out.value[j], out.exact_value[j] = v, True
    for j, k, f in zip(dup_i, dup_k, scale):
        vk = h[k] if out.kept[k] else out.value[k]
        if np.isfinite(vk) and (out.kept[k] or out.exact_value[k]):
            out.value[j] = (h[j] - s0[j]) + f * (vk - (h[k] - s0[k]))
            out.exact_value[j] = True
        elif not out.kept[k]:  # its representative's max is not known: one LP
            out.value[j], out.exact_value[j] = lp.maximize(int(j))[0], True


def multiplier_matrix(out: Outcome) -> sp.csr_matrix:
    """The multipliers of each redundant row on the kept rows, as an m x m CSR matrix (row j: row j's)."""
    store = out.info.pop("_mult", {})
    assert isinstance(store, dict)
    return expanded_multipliers(store, out.kept)


def _store_matrix(store: dict[int, tuple[np.ndarray, np.ndarray]], m: int) -> sp.csr_matrix:
    if not store:
        return sp.csr_matrix((m, m))
    sizes = [idx.size for idx, _ in store.values()]
    rows = np.repeat(np.fromiter(store, dtype=int, count=len(store)), sizes)
    cols = np.concatenate([idx for idx, _ in store.values()])
    vals = np.concatenate([v for _, v in store.values()])
    return sp.csr_matrix((vals, (rows, cols)), shape=(m, m))


def _expanded(Y: sp.csr_matrix, store: dict[int, tuple[np.ndarray, np.ndarray]], kept: np.ndarray) -> sp.csr_matrix:
    """Y with every multiplier on a row that left (redundant itself, with a certificate) replaced by that row's
    own multipliers, scaled: Y <- Y_K + Y_L Y (columns kept / left), until no column that left remains. A
    certificate names only rows present when it was found, so the rows form a DAG (no row names itself) and
    each product at least doubles the length of the chains resolved; a store that breaks this raises."""
    left = np.zeros(kept.size, dtype=bool)
    left[np.fromiter(store, dtype=int, count=len(store))] = True
    left &= ~kept
    m = Y.shape[0]
    for _ in range(64):
        Y.sum_duplicates()  # (canonical CSR: the masks below keep each row's entries sorted)
        row = np.repeat(np.arange(m), np.diff(Y.indptr))
        on_left = left[Y.indices]
        if not on_left.any():
            return Y
        if np.any(on_left & (Y.indices == row)):
            raise ValueError("multipliers: a redundant row's certificate names the row itself")
        K, L = (_masked_rows(Y, row, mask) for mask in (~on_left, on_left))
        Y = (K + L @ Y).tocsr()
    raise ValueError("multipliers: the certificates do not resolve onto kept rows (a cycle among them)")


def _masked_rows(Y: sp.csr_matrix, row: np.ndarray, mask: np.ndarray) -> sp.csr_matrix:
    """The entries of CSR ``Y`` where ``mask`` holds (``row``: each entry's row), as CSR without a sort."""
    indptr = np.concatenate([[0], np.cumsum(np.bincount(row[mask], minlength=Y.shape[0]))])
    return sp.csr_matrix((Y.data[mask], Y.indices[mask], indptr), shape=Y.shape)


def expanded_multipliers(store: dict[int, tuple[np.ndarray, np.ndarray]], kept: np.ndarray) -> sp.csr_matrix:
    """Each redundant row's multipliers (``store``: row -> (rows named, values)) rewritten on kept rows only, as
    an m x m CSR matrix: a multiplier on a row that left after it (itself redundant) is replaced by that row's
    own multipliers, scaled (y_r g_r <= y_r Σ y'_k g_k keeps the inequality; ``_expanded``)."""
    return _expanded(_store_matrix(store, kept.size), store, kept)
