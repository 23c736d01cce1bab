"""(Private.) Redundancy certified on a neighbourhood of the row: one small LP per row instead of one over P.

Dropping constraints relaxes a polytope, so for row i of G x <= h on the flat F x = f

    max g_i x  over the constraints within _HOPS hops of i (the others dropped), without row i
        >=  max g_i x  over P without row i,

and a neighbourhood maximum <= h_i + rho (round-off) proves row i redundant; its duals are multipliers on the rows in
the neighbourhood (zero on the dropped ones), so the certificate is the one an LP over P would give. The
hops run in the bipartite graph of variables and constraints (the flat's equations and the inequality rows
of A; bounds are column bounds): from the variables of g_i to every constraint on them, to every variable of
those, _HOPS times. On sparse systems (flux networks: a reaction meets 2-4 metabolites) a neighbourhood
has a few hundred variables, so the LP costs about a millisecond where one over P costs a second.

Rows are tested one at a time, widest slack at x0 first, against every row not yet found redundant: a row
found redundant leaves the system before the next test (removing rows one at a time, each implied by the
rows left, never changes P, and of two rows that imply each other only one goes). Its multipliers may then
name rows that later leave too; ``expanded_multipliers`` rewrites every certificate on the kept rows alone.
A test that fails decides nothing: the row goes on to the rays, vertex and Clarkson LPs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from .solvers.backend_highs import HighsBackend, run

if TYPE_CHECKING:
    from highspy import Highs

    from ._clarkson import KeptLP, Outcome

_HOPS = 2  # constraint layers around the row (one hop: the equations on the row's own variables)
WIDER_HOPS = 3  # a second pass, after the bent rays, on the rows still undecided
_HUB = 32  # constraints on more variables than this are dropped from neighbourhoods (hub metabolites)
_MAX_SHARE = 0.25  # a neighbourhood over this share of the free variables is a job for an LP over P
WIDER_SHARE = 0.6  # the second pass's cap: its rows are the few left, each else an LP over P at full price
_PROBE = 16  # rows whose neighbourhoods decide whether the system is sparse enough to try
_MIN_BUDGET = 5e-4  # seconds: HiGHS's fixed cost per solve; a lower budget per LP cannot be met, so no LP runs


@dataclass
class _Graph:
    """The variable-constraint incidence: equations F (rows and columns) and the inequality rows of A."""

    Fr: sp.csr_matrix  # equations on at most _HUB variables (the others are dropped: a weaker relaxation)
    Fc: sp.csc_matrix
    Ar: sp.csr_matrix  # kind-0 rows of G, in G order of ``a_rows``
    Ac: sp.csc_matrix
    a_rows: np.ndarray
    pinned: np.ndarray


@dataclass
class LocalResult:
    """Rows found redundant (in the order found) and the LPs solved."""

    rows: list[int] = field(default_factory=list)
    n_lps: int = 0


def _graph(lp: KeptLP) -> _Graph:
    pb = lp.pb
    a_rows = np.flatnonzero(pb.kind == 0)
    Ar = sp.csr_matrix(pb.G[a_rows])
    Ar = sp.diags((np.diff(Ar.indptr) <= _HUB).astype(float)) @ Ar  # hub rows: emptied (never reached)
    F = sp.csr_matrix(pb.F)
    F = sp.diags((np.diff(F.indptr) <= _HUB).astype(float)) @ F
    Ar.eliminate_zeros()
    F.eliminate_zeros()
    return _Graph(F, F.tocsc(), Ar, Ar.tocsc(), a_rows, pb.pinned)


def _neighbourhood(
    g: _Graph, i: int, lp: KeptLP, a_alive: np.ndarray, cap: int, hops: int
) -> tuple[np.ndarray, ...] | None:
    """Variables V, equations E and alive A-rows R within ``hops`` constraint layers of G row i (row i
    itself excluded); None when V grows past ``cap``."""
    pb = lp.pb
    G = pb.G
    V = G.indices[G.indptr[i] : G.indptr[i + 1]]
    E = R = np.zeros(0, dtype=np.int64)
    for _ in range(hops):
        front = V[~g.pinned[V]]  # a pinned variable is a constant: nothing reaches past it
        E = np.unique(g.Fc.indices[_csc_slices(g.Fc, front)])
        R = np.unique(g.Ac.indices[_csc_slices(g.Ac, front)]) if g.Ar.shape[0] else R
        R = R[a_alive[R] & (g.a_rows[R] != i)]
        V = np.unique(np.concatenate([V, g.Fr.indices[_csr_slices(g.Fr, E)], g.Ar.indices[_csr_slices(g.Ar, R)]]))
        if V.size > cap:
            return None
    return V, E, R


def _csc_slices(M: sp.csc_matrix, cols: np.ndarray) -> np.ndarray:
    """Positions of the entries of columns ``cols`` in M.indices (vectorised ranges)."""
    return _ranges(M.indptr[cols], M.indptr[cols + 1])


def _csr_slices(M: sp.csr_matrix, rows: np.ndarray) -> np.ndarray:
    return _ranges(M.indptr[rows], M.indptr[rows + 1])


def _ranges(start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """The concatenation of range(start[k], stop[k]) over k, without a Python loop."""
    lens = stop - start
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.repeat(start - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return np.arange(total, dtype=np.int64) + offs


def _sparse_enough(g: _Graph, lp: KeptLP, rows: np.ndarray, a_alive: np.ndarray, cap: int, hops: int) -> bool:
    """Most of a few rows' neighbourhoods stay under the cap (dense systems: skip the stage at once)."""
    probe = rows[:: max(1, rows.size // _PROBE)][:_PROBE]
    small = sum(_neighbourhood(g, int(i), lp, a_alive, cap, hops) is not None for i in probe)
    return 2 * small >= probe.size


class _Bounds:
    """Per variable, the bounds of the rows not found redundant (pinned variables: their value)."""

    def __init__(self, lp: KeptLP, alive: np.ndarray) -> None:
        pb = lp.pb
        self.lp = lp
        up, lo = lp.bound_row
        self.hi = np.where((up >= 0) & alive[np.maximum(up, 0)], pb.h[np.maximum(up, 0)], np.inf)
        self.lo = np.where((lo >= 0) & alive[np.maximum(lo, 0)], -pb.h[np.maximum(lo, 0)], -np.inf)
        self.hi[pb.pinned] = pb.pin[pb.pinned]
        self.lo[pb.pinned] = pb.pin[pb.pinned]

    def drop(self, i: int) -> None:
        pb = self.lp.pb
        if pb.kind[i] > 0:
            self.hi[pb.var[i]] = np.inf
        elif pb.kind[i] < 0:
            self.lo[pb.var[i]] = -np.inf


def _solve(
    lp: KeptLP, g: _Graph, i: int, nb: tuple[np.ndarray, ...], bd: _Bounds, highs: Highs
) -> tuple[float, np.ndarray, np.ndarray] | None:
    """max g_i x over the neighbourhood ``nb`` with row i relaxed by _RELAX: (value, multiplier rows of G,
    values), or None when HiGHS does not reach an optimum."""
    import highspy as hp

    from ._clarkson import _RELAX

    pb = lp.pb
    V, E, R = nb
    lo, hi = bd.lo[V].copy(), bd.hi[V].copy()
    k = pb.kind[i]
    if k != 0:
        c = int(np.searchsorted(V, pb.var[i]))
        if k > 0:
            hi[c] = pb.h[i] + _RELAX
        else:
            lo[c] = -(pb.h[i] + _RELAX)
        rows_i, rhs_i = sp.csr_matrix((0, V.size)), np.zeros(0)
    gi_row = pb.G[[i]][:, V]
    if k == 0:
        rows_i = gi_row
        rhs_i = np.array([pb.h[i] + _RELAX])
    A = sp.vstack([g.Fr[E][:, V], g.Ar[R][:, V], rows_i], format="csc")
    ne = E.size
    gi = gi_row.toarray().ravel()
    m = A.shape[0]
    model = hp.HighsLp()
    model.num_col_, model.num_row_ = V.size, m
    model.col_cost_ = -gi
    model.col_lower_, model.col_upper_ = lo, hi
    model.row_lower_ = np.concatenate([pb.f[E], np.full(m - ne, -np.inf)])
    model.row_upper_ = np.concatenate([pb.f[E], pb.h[g.a_rows[R]], rhs_i])
    model.a_matrix_.format_ = hp.MatrixFormat.kColwise
    model.a_matrix_.start_, model.a_matrix_.index_, model.a_matrix_.value_ = A.indptr, A.indices, A.data
    model.a_matrix_.num_col_, model.a_matrix_.num_row_ = V.size, m
    highs.passModel(model)
    run(highs)
    if highs.getModelStatus() != hp.HighsModelStatus.kOptimal:
        return None
    sol = highs.getSolution()
    x = np.asarray(sol.col_value)
    rd = np.abs(np.asarray(sol.row_dual)[ne : ne + R.size])
    cd = np.asarray(sol.col_dual)
    # minimising -g_i x: a reduced cost < 0 holds a column at its upper bound, > 0 at its lower one
    free = ~pb.pinned[V]
    up = free & (cd < 0) & np.isfinite(hi)
    dn = free & (cd > 0) & np.isfinite(lo)
    if k != 0:
        up[c] = dn[c] = False
    rows = np.concatenate([g.a_rows[R], lp.bound_row[0][V[up]], lp.bound_row[1][V[dn]]])
    vals = np.concatenate([rd, -cd[up], cd[dn]])
    keep = (vals > 0) & (rows >= 0)
    return float(gi @ x), rows[keep], vals[keep]


def local_redundant(
    lp: KeptLP,
    out: Outcome,
    decided: np.ndarray,
    cand: np.ndarray,
    s0: np.ndarray,
    rho: np.ndarray,
    hops: int = _HOPS,
    max_seconds_per_lp: float = np.inf,
    max_share: float | None = None,
) -> LocalResult:
    """Decide redundant, one neighbourhood LP each (``hops`` constraint layers; module docstring), the
    undecided candidate rows that are; the others stay undecided. Marks ``out`` and ``decided`` and stores
    each row's multipliers. Stops after _PROBE LPs if they took over ``max_seconds_per_lp`` each (CPU), and
    runs none when that is under _MIN_BUDGET.
    Neighbourhoods over ``max_share`` (default _MAX_SHARE) of the free variables are skipped."""
    import time

    res = LocalResult()
    pb = lp.pb
    rows = np.flatnonzero(cand & ~decided)
    if rows.size == 0 or max_seconds_per_lp < _MIN_BUDGET:
        return res
    rows = rows[np.argsort(-s0[rows], kind="stable")]  # widest slack first: the nearer of two rows stays
    alive = cand & (out.how != "redundant")
    g = _graph(lp)
    a_alive = alive[g.a_rows]
    cap = int((_MAX_SHARE if max_share is None else max_share) * np.sum(~pb.pinned))
    if not _sparse_enough(g, lp, rows, a_alive, cap, hops):
        return res
    a_pos = np.full(pb.G.shape[0], -1)
    a_pos[g.a_rows] = np.arange(g.a_rows.size)
    bd = _Bounds(lp, alive)
    highs = HighsBackend.new_model(algorithm="simplex")
    highs.setOptionValue("primal_feasibility_tolerance", 1e-9)
    highs.setOptionValue("dual_feasibility_tolerance", 1e-9)
    store = out.info.setdefault("_mult", {})
    assert isinstance(store, dict)
    c0 = time.process_time()
    for i in rows.tolist():
        if res.n_lps == _PROBE and time.process_time() - c0 > _PROBE * max_seconds_per_lp:
            break  # an LP over P costs little more here
        nb = _neighbourhood(g, i, lp, a_alive, cap, hops)
        if nb is None:
            continue
        r = _solve(lp, g, i, nb, bd, highs)
        res.n_lps += 1
        if r is None or r[0] - pb.h[i] > rho[i]:
            continue
        v, idx, vals = r
        decided[i], out.kept[i], out.how[i] = True, False, "redundant"
        out.value[i], out.margin[i] = v, v - pb.h[i]
        store[i] = (idx, vals)
        bd.drop(i)
        if a_pos[i] >= 0:
            a_alive[a_pos[i]] = False
        res.rows.append(i)
    return res
