"""(Private.) Facets certified many at a time from one LP vertex: the simplex ratio test, checked by a point.

At a basic feasible solution v of an LP over P (all rows not found redundant enforced; optimal or where an
iteration cap stopped the simplex), a row j that is tight and nonbasic (a variable at its bound, or a row's
activity at its right-hand side) has an edge direction e: move that one nonbasic away from its bound, keep
every other nonbasic where it is, and let the basic variables follow (x_B changes by -B⁻¹ a_j per unit, B the
basis matrix, factored once by SuperLU). Along e the equations hold, row j is violated and every other
nonbasic row stays tight; a basic variable moves with it, so the step t is limited by the ratio test over the
other rows. When t > 0, the point v + t e satisfies every row except j, which it violates: j is irredundant
(a facet). Where a degenerate basic row r blocks e at once, the direction e + μ (x0 - v) with
g_r·e / s0_r <= μ < g_j·e / s0_j frees it (r moves inward, j still outward; the rows e does not move hold as
a convex combination of v and x0); where no μ does, the row is left to the LPs: a pyramid's apex, tight on
rows that are not all facets, is the case. Along the same edges into P, the row hit first and alone is a
facet too (ray shooting from the vertex).

The basis only proposes e; the certificate is the point. The vertex is first polished onto the equations
(nonbasic values snapped to their bounds, basic ones solved from the LU: HiGHS meets its tolerance on the
scaled model), then each witness is formed and checked independently of HiGHS:
w = (1 - λ)((1 - τ) v + τ x0 + t e) + λ x0, with λ just enough that every other row holds exactly where v's
round-off left one violated, and F w = f to 1e-8. Its margin g_j w - h_j is a lower bound on how far P
reaches beyond row j without it; a row whose margin is at most tol is not certified here (Clarkson's LPs
decide it, and flag it as a near tie when it is one).

Also here: redundant bounds by bound propagation over the equations with only kept rows at the leaves
(``implied_bounds``), with the multipliers of their derivation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from ._clarkson import KeptLP, Outcome, Problem

Highs = Any  # highspy's Highs (the model that found the vertex: its basis proposes the edge directions)

_STEP_CAP = 1.0  # longest step along an edge (distance units): the witness's margin is a lower bound anyway
_TIE = 1e-9  # two hits within this relative distance along an edge are a tie (no certificate)
_MOVE = 1e-12  # |g_r · e| below this is round-off: row r does not move along e (its slack is checked instead)
_EQ_RESIDUAL = 1e-8  # |F w - f| allowed, relative to max(1, |f|): 10x the LPs' feasibility tolerance (1e-9)
_TARGETS = 1  # undecided rows aimed at by one vertex LP (1: 20 facets per LP at 3,000 reactions, 4: 8.5)
_MIN_GAIN = 2.0  # facets per vertex LP (mean over the last _WINDOW) below which Clarkson's LPs are cheaper
_WINDOW = 4
_VERTEX_MIN = 32  # undecided rows below which the vertex phase is skipped
_VERTEX_ROUNDS = 10_000  # at most this many vertex LPs in all
_ITER_CAP = 4.0  # a vertex LP stops at this many times the median simplex iterations of the phase's earlier
# ones (at least 2,000): its basis is still a vertex to certify at (a 10,000-reaction LP stalled > 400 s)


@dataclass
class Witnesses:
    """Rows of G certified at vertices, per vertex LP r: ``rows[r]``, each with its witness point
    w = (1 - λ)((1 - τ) v + τ x0 + t e) + λ x0: v = ``vertices[r]``, the step ``t[r]`` (negative: into P),
    the pulls toward x0 ``tau[r]`` (frees an edge a degenerate row blocks) and ``lam[r]`` (round-off), and e
    the edge that leaves tight row ``edge[r]`` at basis ``bases[r]`` (HiGHS's basic variables),
    formed again on demand (directions are dense: not kept, except ``E[r]`` where SuperLU could not factor
    the basis); ``margin[r]`` = g_j w - h_j (> tol). ``model``: (problem, model matrix, row slots)."""

    rows: list[np.ndarray] = field(default_factory=list)
    margin: list[np.ndarray] = field(default_factory=list)
    t: list[np.ndarray] = field(default_factory=list)
    tau: list[np.ndarray] = field(default_factory=list)
    lam: list[np.ndarray] = field(default_factory=list)
    edge: list[np.ndarray] = field(default_factory=list)
    vertices: list[np.ndarray] = field(default_factory=list)
    bases: list[np.ndarray] = field(default_factory=list)
    E: dict[int, sp.csc_matrix] = field(default_factory=dict)
    model: tuple[Problem, sp.csc_matrix, np.ndarray] | None = None
    n_lps: int = 0

    def point(self, j: int, x0: np.ndarray) -> np.ndarray | None:
        """The witness point of row j of G, or None when j was not certified here."""
        for r, rows in enumerate(self.rows):
            hit = np.flatnonzero(rows == j)
            if hit.size:
                k = int(hit[0])
                e = self._direction(r, k)
                lam, tau = float(self.lam[r][k]), float(self.tau[r][k])
                u = (1.0 - tau) * self.vertices[r] + tau * x0 + self.t[r][k] * e
                return (1.0 - lam) * u + lam * x0
        return None

    def _direction(self, r: int, k: int) -> np.ndarray:
        """The edge direction of witness k of vertex LP r, oriented to leave its tight row."""
        if r in self.E:
            return np.asarray(self.E[r][:, [k]].toarray()).ravel()
        assert self.model is not None
        pb, A, row_slot = self.model
        q = int(self.edge[r][k])
        e = np.asarray(_edge_directions(pb, A, row_slot, np.array([q]), self.bases[r]).toarray()).ravel()
        return e if float((pb.G[[q]] @ e)[0]) > 0 else -e


def _tight_nonbasic(lp: KeptLP, hs: Highs, x: np.ndarray, rows: np.ndarray, basic: np.ndarray) -> np.ndarray:
    """The rows among ``rows`` that are tight at x through a nonbasic variable (a column at that bound, or a
    row's activity at its right-hand side)."""
    pb = lp.pb
    n = pb.n
    is_basic_col = np.zeros(n, dtype=bool)
    is_basic_col[basic[basic >= 0]] = True
    nrow = hs.getNumRow()
    is_basic_row = np.zeros(nrow, dtype=bool)
    is_basic_row[-1 - basic[basic < 0]] = True
    kind, var = pb.kind[rows], pb.var[rows]
    ok = np.zeros(rows.size, dtype=bool)
    b = kind != 0
    v = var[b]
    at = np.where(kind[b] > 0, x[v] >= lp.hi[v], x[v] <= lp.lo[v])
    ok[b] = ~is_basic_col[v] & at & ~pb.pinned[v]
    r = ~b
    if np.any(r):
        slot = lp.row_slot[rows[r]]
        gx = pb.G[rows[r]] @ x
        ok[r] = ~is_basic_row[slot] & (gx >= pb.h[rows[r]] - 1e-12 * np.maximum(1.0, np.abs(pb.h[rows[r]])))
    return rows[ok]


_CHUNK = 256  # right-hand sides solved at a time with the basis factors (a rows x 256 dense block)
_DROP = 1e-14  # direction entries below this fraction of the column's largest are dropped (round-off fill)


def _directions(lp: KeptLP, hs: Highs, rows: np.ndarray, basic: np.ndarray, lu: Any) -> tuple[sp.csc_matrix, bool]:
    """Edge directions at the basis (``_edge_directions`` with the factors ``lu``), and whether SuperLU
    factored it; HiGHS's own basis solves, one call per row, when it could not (``lu`` None)."""
    if lu is None:
        return _directions_highs(lp, hs, rows, basic), False
    return _edge_directions(lp.pb, lp.A, lp.row_slot, rows, basic, lu), True


def _edge_directions(
    pb: Problem, A: sp.csc_matrix, row_slot: np.ndarray, rows: np.ndarray, basic: np.ndarray, lu: Any = None
) -> sp.csc_matrix:
    """Edge directions (n x |rows|, sparse): for a bound of column c, Δx_c = 1 and Δx_B = -B⁻¹ a_c on the
    basic columns; for a row at its right-hand side (model row s), Δx_B = B⁻¹ e_s (B: the basic columns of
    [A | I], A the model's matrix), from one sparse LU of B (SuperLU), solved in blocks. Signs are set by
    the caller. Raises RuntimeError when B is singular to SuperLU (factored here unless ``lu`` is given)."""
    nrow, n = A.shape
    lu = _factor(A, basic) if lu is None else lu
    is_b = pb.kind[rows] != 0
    struct = np.flatnonzero(basic >= 0)
    parts = []
    for a in range(0, rows.size, _CHUNK):
        J = rows[a : a + _CHUNK]
        bnd = is_b[a : a + _CHUNK]
        R = np.zeros((nrow, J.size))
        R[:, bnd] = -A[:, pb.var[J[bnd]]].toarray()  # Δx_B = -B⁻¹ a_c
        R[row_slot[J[~bnd]], np.flatnonzero(~bnd)] = 1.0
        X = lu.solve(R)[struct]
        X[np.abs(X) <= _DROP * np.max(np.abs(X), axis=0, initial=0.0)] = 0.0
        rr, cc = np.nonzero(X)
        D = sp.csc_matrix((X[rr, cc], (basic[struct][rr], cc)), shape=(n, J.size))
        unit = sp.csc_matrix((np.ones(int(bnd.sum())), (pb.var[J[bnd]], np.flatnonzero(bnd))), shape=(n, J.size))
        parts.append(D + unit)
    return sp.csc_matrix(sp.hstack(parts, format="csc"))


def _factor(A: sp.csc_matrix, basic: np.ndarray) -> Any:
    """SuperLU factors of the basis matrix B (the basic columns of [A | I]); RuntimeError when singular."""
    from scipy.sparse.linalg import splu

    nrow, n = A.shape
    AI = sp.hstack([A, sp.identity(nrow, format="csc")], format="csc")
    return splu(sp.csc_matrix(AI[:, np.where(basic >= 0, basic, n - 1 - basic)]))


def _polish(lp: KeptLP, hs: Highs, x: np.ndarray, basic: np.ndarray) -> tuple[np.ndarray, Any]:
    """The vertex of the basis, exactly on the equations: the nonbasic columns and rows at their bounds, the
    basic columns solved from B (HiGHS meets its tolerance on the scaled model: its point can miss an
    equation by 1e-6 unscaled), and the factors (x itself and None when B cannot be factored)."""
    A = lp.A
    nrow, n = A.shape
    try:
        lu = _factor(A, basic)
    except RuntimeError:  # singular to SuperLU's test
        return x, None
    m = hs.getLp()
    rlo, rhi = np.asarray(m.row_lower_), np.asarray(m.row_upper_)
    r = np.asarray(hs.getSolution().row_value)
    r = np.where(np.abs(r - rlo) <= np.abs(r - rhi), rlo, rhi)  # a nonbasic row sits at its nearer bound
    xs = np.where(np.abs(x - lp.lo) <= np.abs(x - lp.hi), lp.lo, lp.hi)  # and a nonbasic column
    xn = np.where(np.isfinite(xs), xs, x)
    is_b = np.zeros(n, dtype=bool)
    is_b[basic[basic >= 0]] = True
    xn[is_b] = 0.0
    row_basic = np.zeros(nrow, dtype=bool)
    row_basic[-1 - basic[basic < 0]] = True
    rhs = np.where(row_basic, 0.0, np.nan_to_num(r)) - A @ xn  # A_B x_B + (basic rows' -activity) = r_N - A_N x_N
    z = lu.solve(rhs)
    out = xn.copy()
    out[basic[basic >= 0]] = z[basic >= 0]
    return out, lu


def _directions_highs(lp: KeptLP, hs: Highs, rows: np.ndarray, basic: np.ndarray) -> sp.csc_matrix:
    """The edge directions of ``_directions`` from HiGHS's basis solves, one call per row."""
    pb = lp.pb
    n, nrow = pb.n, hs.getNumRow()
    cols_i, cols_v, ptr = [], [], [0]
    unit = np.zeros(nrow)
    for j in rows:
        if pb.kind[j] != 0:
            c = int(pb.var[j])
            _, vals, nnz, idx = hs.getReducedColumnSparse(c)
            idx = np.asarray(idx[:nnz])
            bv = basic[idx]
            s = bv >= 0
            ci = np.concatenate([[c], bv[s]])
            cv = np.concatenate([[1.0], -np.asarray(vals)[idx[s]]])
        else:
            slot = int(lp.row_slot[j])
            unit[slot] = 1.0
            _, vals, nnz, idx = hs.getBasisSolveSparse(unit)
            unit[slot] = 0.0
            idx = np.asarray(idx[:nnz])
            bv = basic[idx]
            s = bv >= 0
            ci, cv = bv[s], np.asarray(vals)[idx[s]]
        cols_i.append(ci)
        cols_v.append(cv)
        ptr.append(ptr[-1] + ci.size)
    return sp.csc_matrix((np.concatenate(cols_v), np.concatenate(cols_i), np.array(ptr)), shape=(n, rows.size))


def _first_hits(GE: sp.csc_matrix, slack: np.ndarray, skip: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column k of GE (alive rows x directions, rate of each row along the direction): the row hit first
    (-1: none), its step and the next row's step (inf: none), over the rows other than ``skip[k]`` that move
    outward (rate > _MOVE), each hit at slack / rate (negative slacks, round-off, read as 0)."""
    C = GE.tocoo()
    mv = (C.row != skip[C.col]) & (C.data > _MOVE)
    col, row = C.col[mv], C.row[mv]
    ratio = np.maximum(slack[row], 0.0) / C.data[mv]
    order = np.lexsort((ratio, col))
    col, row, ratio = col[order], row[order], ratio[order]
    k = GE.shape[1]
    first, t1, t2 = np.full(k, -1), np.full(k, np.inf), np.full(k, np.inf)
    if col.size == 0:
        return first, t1, t2
    start = np.r_[True, col[1:] != col[:-1]]
    f = np.flatnonzero(start)
    first[col[f]], t1[col[f]] = row[f], ratio[f]
    sec = f + 1
    sec = sec[(sec < col.size)]
    sec = sec[col[sec] == col[sec - 1]]
    t2[col[sec]] = ratio[sec]
    return first, t1, t2


def _outward(
    GE: sp.csc_matrix, slack: np.ndarray, s0: np.ndarray, own: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Witnesses w = (1 - τ) v + τ x0 + t e_k along the edges e_k that leave the tight rows ``own`` (GE's
    columns, oriented so that own's row is violated). The pull τ = μ t toward x0 frees an edge that a
    degenerate basic row r blocks at once (slack 0, g_r e > 0): r's rate g_r e - μ s0_r is <= 0 once
    μ >= g_r e / s0_r, while own's row still leaves if μ < g_j e / s0_j; μ is their geometric mean (0 when
    nothing blocks). Every row not moved by e holds at w as a convex combination of v and x0 (τ <= 1).
    Returns (t, τ, margin g_j w - h_j); t = 0 where no μ frees the edge."""
    C = GE.tocoo()
    k = GE.shape[1]
    other = C.row != own[C.col]
    rate_j = np.asarray(GE[own, np.arange(k)]).ravel()
    blk = other & (C.data > _MOVE) & (slack[C.row] <= 0.0)
    mu_lo = np.zeros(k)
    np.maximum.at(mu_lo, C.col[blk], C.data[blk] / s0[C.row[blk]])
    mu_hi = rate_j / s0[own]
    mu = np.where(mu_lo > 0, np.sqrt(mu_lo * mu_hi), 0.0)
    rate = C.data + mu[C.col] * (slack[C.row] - s0[C.row])  # each moving row's rate along e + μ (x0 - v)
    mv = other & (rate > _MOVE)
    t = np.where(mu > 0, np.minimum(_STEP_CAP, 1.0 / np.where(mu > 0, mu, 1.0)), _STEP_CAP)
    np.minimum.at(t, C.col[mv], np.maximum(slack[C.row[mv]], 0.0) / rate[mv])
    t = np.where(mu_lo < mu_hi, t, 0.0)
    tau = mu * t
    return t, tau, t * rate_j - (1.0 - tau) * slack[own] - tau * s0[own]


def _inward(
    GE: sp.csc_matrix, slack: np.ndarray, own: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Ray shooting along each edge into P (the reverse of the edge that leaves tight row own[k]): the row
    hit first, alone, is a facet, with witness step t between the first and second hits. Returns (columns,
    rows hit (indices into the alive rows), t (negative: against the column's direction), margins)."""
    first, t1, t2 = _first_hits(sp.csc_matrix(-GE), slack, own)
    ok = (first >= 0) & (t2 > t1 * (1.0 + _TIE) + 1e-12)
    k = np.flatnonzero(ok)
    t = np.minimum(0.5 * (t1[k] + t2[k]), t1[k] + _STEP_CAP)
    rate = -np.asarray(GE[first[k], k]).ravel()
    return k, first[k], -t, rate * t - slack[first[k]]


@dataclass
class Certified:
    """Rows certified at one vertex v, each with its witness (1 - λ)((1 - τ) v + τ x0 + t e) + λ x0: margin,
    step t, pull toward x0 τ, round-off pull λ, direction e (column of E), the tight row whose edge it is
    (``edge``); the basis (HiGHS's basic variables) and whether SuperLU factored it."""

    rows: np.ndarray
    margin: np.ndarray
    t: np.ndarray
    tau: np.ndarray
    lam: np.ndarray
    E: sp.csc_matrix
    edge: np.ndarray
    basic: np.ndarray
    factored: bool
    x: np.ndarray  # the vertex, polished onto the equations


def certify_at_vertex(
    lp: KeptLP, hs: Highs, x: np.ndarray, rows: np.ndarray, alive: np.ndarray, s0: np.ndarray, tol: float
) -> Certified:
    """Rows among ``rows`` (undecided) certified as facets at the LP's vertex x, among the rows not found
    redundant (``alive``): along the edge that leaves each tight nonbasic undecided row (that row is the
    one violated; pulled toward x0 where a degenerate row blocks it), and along the same edges into P (ray
    shooting: the row hit first, alone); the witnesses that hold, the widest one per row."""
    pb = lp.pb
    _, basic = hs.getBasicVariables()
    basic = np.asarray(basic)
    x, lu = _polish(lp, hs, x, basic)
    tight = _tight_nonbasic(lp, hs, x, rows, basic)  # edges of undecided rows only (directions are dense)
    empty = np.zeros(0)
    if tight.size == 0:
        return Certified(tight, empty, empty, empty, empty, sp.csc_matrix((pb.n, 0)), tight, basic, True, x)
    E, factored = _directions(lp, hs, tight, basic, lu)
    Ga = pb.G[alive]
    own = np.searchsorted(alive, tight)
    sign = np.sign(np.asarray(pb.G[tight].multiply(E.T).sum(axis=1)).ravel())
    E = sp.csc_matrix(E @ sp.diags(np.where(sign == 0, 1.0, sign)))
    GE = sp.csc_matrix(Ga @ E)
    slack, s0a = pb.h[alive] - Ga @ x, s0[alive]
    c_out = np.flatnonzero(sign != 0)
    t_out, tau_out, m_out = _outward(sp.csc_matrix(GE[:, c_out]), slack, s0a, own[c_out])
    c_in, r_in, t_in, m_in = _inward(GE, slack, own)
    col = np.concatenate([c_out, c_in])
    row = np.concatenate([own[c_out], r_in])
    t = np.concatenate([t_out, t_in])
    tau = np.concatenate([tau_out, np.zeros(c_in.size)])
    margin = np.concatenate([m_out, m_in])
    sel = np.isin(alive[row], rows) & (np.abs(t) > 0)
    col, row, t, tau, margin = col[sel], row[sel], t[sel], tau[sel], margin[sel]
    lam = _round_off_pull(GE[:, col], slack, s0a, row, t, tau)
    margin = (1.0 - lam) * margin - lam * s0a[row]
    Ek = sp.csc_matrix(E[:, col])
    resid = _equation_residual(pb, x, Ek, np.abs(t))
    ok = (margin > tol) & (resid <= _EQ_RESIDUAL * max(1.0, float(np.max(np.abs(pb.f), initial=0.0))))
    k = np.flatnonzero(ok)
    k = k[np.lexsort((-margin[k], row[k]))]
    k = k[np.r_[True, row[k][1:] != row[k][:-1]]] if k.size else k  # the widest witness per row
    Ek = sp.csc_matrix(Ek[:, k])
    return Certified(alive[row[k]], margin[k], t[k], tau[k], lam[k], Ek, tight[col[k]], basic, factored, x)


def _round_off_pull(
    GE: sp.csc_matrix, slack: np.ndarray, s0: np.ndarray, own: np.ndarray, t: np.ndarray, tau: np.ndarray
) -> np.ndarray:
    """Per witness u = (1 - τ) v + τ x0 + t e_k: the least λ with which (1 - λ) u + λ x0 satisfies every row
    other than own[k] exactly, where v's round-off (HiGHS's tolerance) left some violated: a row violated
    by δ at u needs λ >= δ / (δ + s0_r). Rows e_k moves are computed exactly; the others keep (1 - τ) of
    their violation at v (bounded by the worst such row)."""
    C = GE.tocoo()
    o = C.row != own[C.col]
    r, c = C.row[o], C.col[o]
    d = C.data[o] * t[c] - (1.0 - tau[c]) * slack[r] - tau[c] * s0[r]
    lam = np.zeros(GE.shape[1])
    pos = d > 0
    np.maximum.at(lam, c[pos], d[pos] / (d[pos] + s0[r[pos]]))
    bad = slack < 0
    still = float(np.max(-slack[bad] / (-slack[bad] + s0[bad]), initial=0.0))
    return np.maximum(lam, still)


def _equation_residual(pb: Problem, x: np.ndarray, E: sp.csc_matrix, t: np.ndarray) -> np.ndarray:
    """An upper bound on max |F w - f| per witness w (a combination of x, x0 and t e with weights in [0, 1]):
    |F x - f| + |F x0 - f| + t |F e|, each term's largest entry; inf where a pinned column would move."""
    base = float(np.max(np.abs(pb.F @ x - pb.f), initial=0.0))
    base0 = float(np.max(np.abs(pb.F @ pb.x0 - pb.f), initial=0.0))
    FE = abs(sp.csc_matrix(pb.F @ E))
    fe = FE.max(axis=0).toarray().ravel() if FE.shape[0] else np.zeros(E.shape[1])
    res = base + base0 + t * fe
    moves_pinned = np.asarray(abs(E[np.flatnonzero(pb.pinned)]).sum(axis=0)).ravel() > 0
    return np.where(moves_pinned, np.inf, res)


def _objective(G: sp.csr_matrix, und: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random positive combination of the normals of _TARGETS random undecided rows: its optimal vertex
    lies where they are tight, if they are facets, and is tight on other facets near them."""
    pick = rng.choice(und, size=min(_TARGETS, und.size), replace=False)
    return np.asarray(G[pick].T @ rng.exponential(size=pick.size)).ravel()


def _record(wit: Witnesses, c: Certified) -> None:
    """Keep what forms each witness again: the vertex, the basis, the edges (their dense directions only
    when SuperLU could not factor the basis)."""
    if c.rows.size == 0:
        return
    r = len(wit.rows)
    wit.rows.append(c.rows)
    wit.margin.append(c.margin)
    wit.t.append(c.t)
    wit.tau.append(c.tau)
    wit.lam.append(c.lam)
    wit.edge.append(c.edge)
    wit.vertices.append(c.x)
    wit.bases.append(c.basic)
    if not c.factored:
        wit.E[r] = c.E


def vertex_phase(
    lp: KeptLP,
    out: Outcome,
    decided: np.ndarray,
    s0: np.ndarray,
    rng: np.random.Generator,
    wit: Witnesses,
    min_rate: float | None = None,
) -> float:
    """Facets certified at LP vertices of P (every row not found redundant enforced): each round maximises
    the normal of a random undecided row (the vertex lies on it, if it is a facet, near other facets) and
    certifies the tight nonbasic undecided rows whose witness holds (at the basis the simplex reached when
    it stops at its iteration cap: certificates need a vertex, not an optimum). Stops when the last _WINDOW rounds
    certified fewer than _MIN_GAIN rows per LP (a Clarkson LP decides at least one) or, given ``min_rate``
    (Clarkson's rows decided per CPU second), when they certified fewer rows per CPU second (checked from
    the first round). Skipped with fewer than _VERTEX_MIN undecided rows. The undecided rows are free again
    afterwards. Returns the rate of the last rounds (0 when none ran)."""
    import time

    pb = lp.pb
    cand = np.zeros(decided.size, dtype=bool)
    cand[pb.candidates] = True
    alive = np.flatnonzero(cand & (out.how != "redundant"))
    open_ = np.flatnonzero(cand & ~decided)
    if open_.size < _VERTEX_MIN or float(np.min(s0[alive])) <= 0:
        return 0.0  # few rows left (Clarkson's LPs are as cheap), or x0 not strictly inside (the pull needs it)
    for j in open_:
        lp.keep(int(j))
    gains: list[int] = []
    secs: list[float] = []
    iters: list[int] = []
    try:
        while wit.n_lps < _VERTEX_ROUNDS:
            und = np.flatnonzero(cand & ~decided)
            if und.size < _VERTEX_MIN:
                break
            t0 = time.process_time()
            cap = None if not iters else int(_ITER_CAP * max(2000.0, float(np.median(iters))))
            x, hs, _ = lp.solve_cost(_objective(pb.G, und, rng), cap)
            wit.n_lps += 1
            iters.append(int(hs.getInfo().simplex_iteration_count))
            if np.max(pb.Gx(x) - pb.h - pb.rho, initial=0.0) <= 0.0:
                lp.seen(x)  # a point of P: its coordinates may settle a redundant bound's tightened value
            c = certify_at_vertex(lp, hs, x, np.flatnonzero(cand & ~decided), alive, s0, pb.tol)
            _record(wit, c)
            out.kept[c.rows], decided[c.rows], out.margin[c.rows], out.how[c.rows] = True, True, c.margin, "vertex"
            gains.append(c.rows.size)
            secs.append(time.process_time() - t0)
            rate = sum(gains[-_WINDOW:]) / max(sum(secs[-_WINDOW:]), 1e-9)
            if min_rate is not None and rate < min_rate:
                break
            if len(gains) >= _WINDOW and np.mean(gains[-_WINDOW:]) < _MIN_GAIN:
                break
    finally:
        for j in np.flatnonzero(cand & ~decided):
            lp.release(int(j))
    return sum(gains[-_WINDOW:]) / max(sum(secs[-_WINDOW:]), 1e-9) if gains else 0.0


_PROP_ROUNDS = 50  # sweeps of bound propagation (each: one pass over the equations' non-zeros)


@dataclass
class _Derivation:
    """Bounds derived by propagation, as a tree: node k (of side 0 = upper, 1 = lower) is variable ``var[k]``'s
    bound from equation entry ``entry[k]`` and the bounds current at round ``round_[k]`` - 1 (``current``:
    per round, each variable's node per side; -1 a kept row or pinned value, no node)."""

    var: list[int] = field(default_factory=list)
    side: list[int] = field(default_factory=list)
    entry: list[int] = field(default_factory=list)
    round_: list[int] = field(default_factory=list)
    current: list[np.ndarray] = field(default_factory=list)


def _propagate(C: sp.coo_matrix, f: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> _Derivation:
    """Tighten lo / hi in place by bound propagation over the equations C x = f to a fixpoint (at most
    _PROP_ROUNDS sweeps); the bounds used are valid for every x with C x = f within the starting bounds."""
    n = lo.size
    der = _Derivation(current=[np.full((2, n), -1)])
    for r in range(1, _PROP_ROUNDS + 1):
        x_hi, x_lo = _activity_limits(C, f, lo, hi)
        cur = der.current[-1].copy()
        changed = False
        for side, lim, bound in ((0, x_hi, hi), (1, -x_lo, -lo)):
            order = np.lexsort((lim, C.col))  # per column, its tightest limit first
            first = order[np.r_[True, C.col[order][1:] != C.col[order][:-1]]]
            cols, vals = C.col[first], lim[first]
            with np.errstate(invalid="ignore"):
                better = vals < bound[cols] - 1e-9 * np.maximum(1.0, np.abs(vals))
            cols, vals, ent = cols[better], vals[better], first[better]
            if cols.size:
                changed = True
                (hi if side == 0 else lo)[cols] = vals if side == 0 else -vals
                k0 = len(der.var)
                der.var += cols.tolist()
                der.side += [side] * cols.size
                der.entry += ent.tolist()
                der.round_ += [r] * cols.size
                cur[side, cols] = np.arange(k0, k0 + cols.size)
        der.current.append(cur)
        if not changed:
            break
    return der


def implied_bounds(lp: KeptLP, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Bound rows among ``rows`` implied by the flat's equations and the kept bounds (bound propagation, as
    presolve does, with only kept rows at the leaves): for s x_c <= h on an equation Σ_k a_k x_k = f_r,
    max s x_c <= s (f_r - Σ_{k≠c} a_k x_k) / a_c over the other variables' bounds, kept or so derived.
    Returns the rows decided redundant (their bound <= h), those bounds, and each one's multipliers on
    the kept rows (G-row indices, values >= 0): s e_c = Σ y_k g_k + (a combination of the equations)."""
    pb = lp.pb
    b = rows[pb.kind[rows] != 0]
    if b.size == 0 or pb.F.shape[0] == 0:
        return b[:0], np.zeros(0), []
    C = pb.F_coo
    lo, hi = lp.lo.copy(), lp.hi.copy()
    der = _propagate(C, pb.f, lo, hi)
    kind, var = pb.kind[b], pb.var[b]
    value = np.where(kind > 0, hi[var], -lo[var])
    ok = np.flatnonzero(value <= pb.h[b])  # within round-off above h: left to the LPs (no spurious near tie)
    memo: dict[int, dict[int, float]] = {}
    final = der.current[-1]
    mult = []
    for k in ok:
        y = _expand(lp, C, der, int(final[0 if kind[k] > 0 else 1, var[k]]), memo)
        mult.append((np.fromiter(y, dtype=int, count=len(y)), np.fromiter(y.values(), dtype=float, count=len(y))))
    return b[ok], value[ok], mult


def _expand(
    lp: KeptLP, C: sp.coo_matrix, der: _Derivation, node: int, memo: dict[int, dict[int, float]]
) -> dict[int, float]:
    """The multipliers on kept rows behind derived bound ``node`` (memoised): on its equation r,
    s x_c = s f_r / a_c - Σ_{k≠c} (s a_k / a_c) x_k; a positive coefficient -s a_k / a_c uses x_k's upper
    bound, a negative one its lower bound, each a kept row or a node of the round before."""
    if node in memo:
        return memo[node]
    pb = lp.pb
    e, sgn = der.entry[node], 1 - 2 * der.side[node]
    r, c, a = int(C.row[e]), int(C.col[e]), float(C.data[e])
    F = pb.F
    ks = F.indices[F.indptr[r] : F.indptr[r + 1]]
    ak = F.data[F.indptr[r] : F.indptr[r + 1]]
    other = (ks != c) & ~pb.pinned[ks]
    ks, alpha = ks[other], -sgn * ak[other] / a
    before = der.current[der.round_[node] - 1]
    y: dict[int, float] = {}
    for k, al in zip(ks.tolist(), alpha.tolist()):
        side = 0 if al > 0 else 1
        child = int(before[side, k])
        sub = {int(lp.bound_row[side][k]): 1.0} if child < 0 else _expand(lp, C, der, child, memo)
        for row, v in sub.items():
            y[row] = y.get(row, 0.0) + abs(al) * v
    memo[node] = y
    return y


def _activity_limits(C: sp.coo_matrix, f: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per entry (r, c) of the equations C x = f: the largest and smallest x_c that equation r allows when
    every other x_k stays within [lo_k, hi_k] (inf where a needed bound is infinite)."""
    m = C.shape[0]
    big = np.where(C.data > 0, C.data * hi[C.col], C.data * lo[C.col])  # largest a_k x_k
    small = np.where(C.data > 0, C.data * lo[C.col], C.data * hi[C.col])

    def rest(v: np.ndarray) -> np.ndarray:
        """Σ over the row's other entries of v (inf / -inf when one of them is infinite)."""
        fin = np.isfinite(v)
        tot = np.bincount(C.row[fin], weights=v[fin], minlength=m)
        n_inf = np.bincount(C.row[~fin], minlength=m)
        others_inf = n_inf[C.row] - ~fin
        return np.where(others_inf == 0, tot[C.row] - np.where(fin, v, 0.0), np.inf)

    rest_hi, rest_lo = rest(big), -rest(-small)
    fr = f[C.row]
    with np.errstate(invalid="ignore", over="ignore"):
        x_hi = np.where(C.data > 0, (fr - rest_lo) / C.data, (fr - rest_hi) / C.data)
        x_lo = np.where(C.data > 0, (fr - rest_hi) / C.data, (fr - rest_lo) / C.data)
    return np.where(np.isnan(x_hi), np.inf, x_hi), np.where(np.isnan(x_lo), -np.inf, x_lo)
