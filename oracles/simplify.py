"""A minimal H-representation of a polytope, with certificates: ``simplify(P)``.

P = {A x <= b, A_eq x = b_eq, lb <= x <= ub}. ``simplify`` finds (1) the implicit equalities, with
``affine_hull``'s machinery (rows and bounds that hold with equality on all of P, each with a certified
width); (2) the redundant inequality rows and bounds, by Clarkson's algorithm (``oracles._clarkson``: random
rays from a relative-interior point keep facets without an LP, then one LP per undecided row over only the
rows kept so far, with ray shooting to find the facet to add); (3) tightened bounds: a redundant bound is set
to the extreme value the kept rows imply (one LP over the kept rows when Clarkson's LP point was outside P).

Every row is scaled to a unit normal before any decision, so ``tol`` is a Euclidean distance in x's units and
rescaling a row (by 1e-8 or 1e8) changes no verdict. A row's **margin** is how far P would reach beyond its
hyperplane without it: > 0 for a kept row (a facet), <= 0 (up to round-off, rho = 1e-10 of the row's scale)
for a redundant one. Verdicts within ``tol`` of a tie are flagged in ``near_ties``, never silently decided:
a kept row whose margin is at most ``tol`` (it cuts off a sliver; it is kept, so P is unchanged), and an
implicit equality whose certified width is above round-off (it is an equality at ``tol``, not exactly).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from . import _clarkson as ck
from ._dense_ipm import single_thread_blas
from ._sparse import take_rows
from ._vertex_certificates import Witnesses
from .affine import ImplicitEqualities, _check_tol, affine_hull
from .bodies import Polytope

BOUNDS = ("tighten", "drop")
_SMALL = 500  # variables: up to this, the relative-interior point comes from the FRT LP alone (affine_hull's
# fast="off"): one LP whose point has every slack >= 1/s, where the interior-point shortcut's point (averaged
# with the FRT point when its certificate fails) can sit near some rows; the rays then find fewer facets
RAY_BATCHES = 40  # at most 40 x 128 random rays before the LPs (they stop at a batch that finds nothing new)


@dataclass
class NearTie:
    """A verdict within ``tol`` of a tie. ``kind``: "row" (a row of P.A), "upper"/"lower" (a variable's
    bound); ``index``: the row or the variable; ``verdict``: "equality" (certified width ``value`` in
    (round-off, tol]), "kept" (margin ``value`` in (round-off, tol]: kept, so P is unchanged) or "redundant"
    (margin ``value`` in (0, round-off]: removed, so P widens by at most that much along the row)."""

    kind: str
    index: int
    verdict: str
    value: float
    tol: float


@dataclass
class Transformed:
    """P in the coordinates of its affine hull: x = ``shift`` + ``basis`` @ z, ``basis`` n x d orthonormal;
    ``polytope`` = {z : A' z <= b'} full-dimensional (its kept rows and bounds, mapped)."""

    polytope: Polytope
    shift: np.ndarray
    basis: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.basis.shape[1])

    def to_original(self, z: ArrayLike) -> np.ndarray:
        """x = shift + basis z (z of shape (d,) or (d, k))."""
        Z = np.asarray(z, dtype=float)
        return (self.shift if Z.ndim == 1 else self.shift[:, None]) + self.basis @ Z

    def from_original(self, x: ArrayLike) -> np.ndarray:
        """z = basisᵀ (x - shift) (x of shape (n,) or (n, k))."""
        X = np.asarray(x, dtype=float)
        return self.basis.T @ (X - (self.shift if X.ndim == 1 else self.shift[:, None]))

    def center(self, *, solver: str | None = None) -> tuple[np.ndarray, float]:
        """(Chebyshev centre z, radius) of the transformed polytope, on unit rows (so rescaling P's rows
        moves nothing); when the centre is not unique, the central point of the optimal face (an
        interior-point solve without crossover), the same for the same data."""
        from . import solvers
        from ._sparse import row_norms

        A, b = self.polytope.A, self.polytope.b
        A = A.toarray() if sp.issparse(A) else np.asarray(A)
        nr = row_norms(A)
        keep = nr > 0
        An, bn = A[keep] / nr[keep, None], b[keep] / nr[keep]
        d = self.dim
        c = np.zeros(d + 1)
        c[-1] = -1.0
        sol = solvers.solve_lp(
            c, np.hstack([An, np.ones((An.shape[0], 1))]), bn, bounds=(None, None), solver=solver, interior=True
        )
        return sol.x[:d], float(sol.x[-1])


@dataclass
class Simplified:
    """What ``simplify`` found. Index sets refer to P's inequality rows (rows of ``P.A``); bounds are per
    variable. The per-inequality arrays ``margin``, ``value`` and the ``multipliers`` matrix are laid out over
    L = [rows of A; x_j <= ub_j for j = 0..n-1; -x_j <= -lb_j for j = 0..n-1] (NaN / empty for an infinite
    bound), on unit rows (each row divided by its norm): ``margin`` is, for a kept row, a lower bound on how
    far P reaches beyond it without it (for an equality: its certified width); for a redundant one, max over
    the rows kept at the time minus the right-hand side (<= round-off); ``value`` that LP maximum;
    ``multipliers`` (CSR, (m + 2n) x (m + 2n)): row i holds y >= 0 on kept inequalities with
    â_i = Σ y_k â_k + (a combination of the equalities) and b̂_i >= Σ y_k b̂_k (hats: unit rows), which a user
    can re-check."""

    polytope: Polytope
    redundant: np.ndarray
    equalities: np.ndarray
    kept: np.ndarray
    dim: int
    redundant_lower: np.ndarray
    redundant_upper: np.ndarray
    fixed_variables: np.ndarray
    kept_lower: np.ndarray
    kept_upper: np.ndarray
    margin: np.ndarray
    value: np.ndarray
    multipliers: sp.csr_matrix
    near_ties: list[NearTie]
    tol: float
    interior_point: np.ndarray
    n_lps: int
    seconds: float
    implicit: ImplicitEqualities
    basis: np.ndarray = field(repr=False)
    info: dict[str, object] = field(default_factory=dict)

    def transform(self) -> Transformed:
        """The full-dimensional polytope in coordinates of the affine hull, x = x0 + N z (PolyRound's
        transform): its kept rows and kept bounds (the facets) mapped to z."""
        Q = self.polytope
        N, x0 = self.basis, self.interior_point
        if N.shape[1] == 0:
            raise ValueError("P is one point (dimension 0, see interior_point): there is no polytope in z to return")
        AN = np.asarray(Q.A @ N) if Q.A.shape[0] else np.zeros((0, N.shape[1]))
        # a row on pinned coordinates only is constant on the flat: left out
        live_a, nz = np.any(AN != 0, axis=1), np.any(N != 0, axis=1)
        up, lo = self.kept_upper[nz[self.kept_upper]], self.kept_lower[nz[self.kept_lower]]
        rhs = np.concatenate([(Q.b - Q.A @ x0)[live_a], Q.ub[up] - x0[up], x0[lo] - Q.lb[lo]])
        # the rows gathered once into the result's own array (at 20,000 reactions the stacked pieces, a
        # filtered copy and the polytope's copy took three times the result: 4.8 GB for 1.6 GB)
        rows = np.empty((rhs.size, N.shape[1]))
        a, u = int(np.sum(live_a)), up.size
        rows[:a] = AN[live_a]
        del AN
        np.take(N, up, axis=0, out=rows[a : a + u], mode="clip")  # (indices valid; "raise" would buffer out)
        np.take(N, lo, axis=0, out=rows[a + u :], mode="clip")
        np.negative(rows[a + u :], out=rows[a + u :])
        return Transformed(Polytope._adopting(rows, rhs, dim=N.shape[1]), x0.copy(), N)

    def certificate(self, i: int) -> dict[str, object]:
        """Row i of P.A: its verdict, margin, LP value, multipliers on the kept rows (indices into L) and tol."""
        m = self.polytope_rows
        if not 0 <= i < m:
            raise ValueError(f"i must be a row of P.A (0..{m - 1}), got {i}")
        verdict = (
            "equality"
            if i in set(self.equalities.tolist())
            else "redundant"
            if i in set(self.redundant.tolist())
            else "kept"
        )
        y = self.multipliers.getrow(i)
        return {
            "verdict": verdict,
            "margin": float(self.margin[i]),
            "value": float(self.value[i]),
            "multipliers": dict(zip(y.indices.tolist(), y.data.tolist())),
            "tol": self.tol,
        }

    def witness(self, k: int) -> np.ndarray | None:
        """For a facet certified at an LP vertex (index k into L, as ``margin``): a point that satisfies P's
        equalities (implicit ones included) and every kept row and bound except k, which it violates by
        ``margin[k]`` (unit rows): removing k would change the polytope. None for rows decided otherwise."""
        wit, pos = self.info.get("witnesses"), self.info.get("g_rows")
        if not isinstance(wit, Witnesses) or not isinstance(pos, np.ndarray):
            return None
        j = np.flatnonzero(pos == k)
        return wit.point(int(j[0]), self.interior_point) if j.size else None

    @property
    def polytope_rows(self) -> int:
        return int(self.info.get("rows", 0))  # type: ignore[call-overload]

    def summary(self) -> str:
        """A few lines: sizes before and after, the dimension, near ties, LPs and time."""
        i = self.info
        lines = [
            f"simplify (tol {self.tol:g}): {i['rows']} rows, {i['bounds']} bounds, {i['equations']} equalities "
            f"in {i['n']} variables",
            f"  implicit equalities: {self.equalities.size} rows, {self.fixed_variables.size} fixed variables; "
            f"dimension {self.dim}",
            f"  redundant: {self.redundant.size} rows, {self.redundant_lower.size + self.redundant_upper.size} bounds; "
            f"kept {self.kept.size} rows, {i['kept_bounds']} bounds",
            f"  near ties: {len(self.near_ties)}"
            + (
                f" (e.g. {self.near_ties[0].kind} {self.near_ties[0].index}: {self.near_ties[0].verdict}, "
                f"{self.near_ties[0].value:.3g})"
                if self.near_ties
                else ""
            ),
            f"  {self.n_lps} LPs ({i['rays']} rays), {self.seconds:.3g} s",
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"Simplified(dim={self.dim}, kept={self.kept.size}, redundant={self.redundant.size}, "
            f"equalities={self.equalities.size}, fixed={self.fixed_variables.size}, near_ties={len(self.near_ties)}, "
            f"tol={self.tol:g})"
        )


def simplify(
    P: Polytope,
    *,
    tol: float = 1e-7,
    solver: str | None = None,
    bounds: str = "tighten",
    seed: int | np.random.Generator | None = 0,
) -> Simplified:
    """The minimal H-representation of an explicit polytope, with a certificate for every verdict.

    Parameters
    ----------
    P : Polytope
        {A x <= b, A_eq x = b_eq, lb <= x <= ub}, dense or sparse.
    tol : float
        Euclidean distance (x's units, rows scaled to unit normals): a row whose extent is at most tol is an
        implicit equality; verdicts within tol of a tie are listed in ``near_ties``.
    solver : str, optional
        LP backend for the implicit equalities; the redundancy LPs run on one kept HiGHS model.
    bounds : {"tighten", "drop"}
        A redundant finite bound is set to the extreme value the other rows imply ("tighten") or removed
        ("drop": the strictly minimal representation; PolyRound's simplify removes redundant bounds too).
    seed : int or numpy.random.Generator, optional
        The random rays.

    Returns
    -------
    Simplified
        ``.polytope`` (the simplified polytope in the original coordinates), ``.redundant``, ``.equalities``,
        ``.kept`` (rows of P.A), ``.dim``, per-row certificates, ``.near_ties``, ``.transform()``.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Polytope, simplify
    >>> A = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0], [1.0, 1.0], [2.0, 0.0]])
    >>> s = simplify(Polytope(A, np.array([1.0, 1.0, 1.0, 1.0, 5.0, 2.0])))   # a square, two extra rows
    >>> s.redundant.tolist(), s.dim
    ([4, 5], 2)
    """
    if not isinstance(P, Polytope):
        raise TypeError(f"simplify needs a Polytope, got {type(P).__name__}")
    tol = _check_tol(tol)
    if bounds not in BOUNDS:
        raise ValueError(f"bounds must be one of {BOUNDS}, got {bounds!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    t0 = time.perf_counter()
    with single_thread_blas():
        fast = "off" if P.dim <= _SMALL else "auto"  # (a small P: the FRT LP alone centres x0 best, in one LP)
        hull = affine_hull(P, tol=tol, solver=solver, method="lp", fast=fast)
        ie = hull.info["implicit_equalities"]
        assert isinstance(ie, ImplicitEqualities)
        pb, pinned_rows = _problem(P, ie, hull.basis, tol)
        out = ck.clarkson(pb, hull.basis, rng, RAY_BATCHES, local_bounds=bounds == "drop")
    _pinned_bounds(out, pb, pinned_rows)
    lp = out.info.pop("lp")
    assert isinstance(lp, ck.KeptLP)
    red_bounds = np.flatnonzero((pb.kind != 0) & ~out.kept & (out.how == "redundant"))
    if bounds == "tighten":
        ck.tighten(out, lp, red_bounds, pb.s0)
    res = _assemble(P, ie, hull.basis, hull.dim, pb, out, tol, bounds)
    res.n_lps = lp.n_solves + ie.n_solves + int(out.info.get("local_lps", 0))  # type: ignore[call-overload]
    res.seconds = time.perf_counter() - t0
    how, counts = np.unique(out.how.astype(str), return_counts=True)
    res.info.update(
        rays=out.n_rays,
        lp_seconds=out.lp_seconds,
        implicit_method=ie.method,
        decided_by=dict(zip(how.tolist(), counts.tolist())),
        cold_restarts=lp.n_cold,
        stalled=lp.n_stalled,
        witnesses=out.info.get("witnesses"),
        implied=out.info.get("implied", 0),
        local=out.info.get("local", 0),
        local_lps=out.info.get("local_lps", 0),
        local_seconds=out.info.get("local_seconds", 0.0),
        group_lps=out.info.get("group_lps", 0),
        group_rows=out.info.get("group_rows", 0),
        bent_seconds=out.info.get("bent_seconds", 0.0),
        lp_probe_seconds=out.info.get("lp_probe_seconds"),
    )
    return res


def _problem(P: Polytope, ie: ImplicitEqualities, basis: np.ndarray, tol: float) -> tuple[ck.Problem, np.ndarray]:
    """The unit system of ``ie`` as a Clarkson problem; also the bound rows of pinned variables (decided
    without an LP: the other side of a fixed variable is redundant)."""
    S = ie._system  # type: ignore[attr-defined]
    G = sp.csr_matrix(S.G)
    n = P.dim
    kind = S.side.astype(int)
    eq = np.zeros(S.m, dtype=bool)
    eq[(kind == 0) & np.isin(S.row, ie.rows)] = True
    eq[(kind < 0) & np.isin(S.var, ie.lower)] = True
    eq[(kind > 0) & np.isin(S.var, ie.upper)] = True
    pin = np.full(n, np.nan)
    pin[ie.lower] = P.lb[ie.lower]
    pin[ie.upper] = P.ub[ie.upper]
    pin[S.fixed] = P.lb[S.fixed]
    x0 = ie.interior_point.copy()
    flat_fixed = np.flatnonzero((np.linalg.norm(basis, axis=1) <= 1e-9) & ~np.isfinite(pin))
    pin[flat_fixed] = x0[flat_fixed]  # constant on the flat (fixed through the equalities): fixed columns
    pinned = np.isfinite(pin)
    F = sp.vstack([sp.csr_matrix(S.Ae), take_rows(G, np.flatnonzero(eq & (kind == 0)))], format="csr")
    f = np.concatenate([S.be, S.h[eq & (kind == 0)]])
    entry_row = np.repeat(np.arange(F.shape[0]), np.diff(F.indptr))
    on_free = ~pinned[F.indices] & (F.data != 0)
    live = np.bincount(entry_row[on_free], minlength=F.shape[0]) > 0  # rows on pinned columns only hold at x0
    if not live.all():
        F, f = F[np.flatnonzero(live)], f[live]
    x0[pinned] = pin[pinned]
    on_pinned = (kind != 0) & ~eq & pinned[np.maximum(S.var, 0)]
    cand = np.flatnonzero(~eq & ~on_pinned)
    pb = ck.Problem(G, S.h.copy(), kind, S.var.copy(), F, f, pinned, pin, x0, cand, tol)
    return pb, np.flatnonzero(on_pinned)


def _pinned_bounds(out: ck.Outcome, pb: ck.Problem, rows: np.ndarray) -> None:
    """The other bound of a pinned variable: redundant, its value the pinned value (exact)."""
    v = pb.pin[pb.var[rows]] * pb.kind[rows]
    out.kept[rows] = False
    out.value[rows] = v
    out.margin[rows] = v - pb.h[rows]
    out.exact_value[rows] = True
    out.how[rows] = "redundant"


def _assemble(
    P: Polytope,
    ie: ImplicitEqualities,
    basis: np.ndarray,
    dim: int,
    pb: ck.Problem,
    out: ck.Outcome,
    tol: float,
    bounds: str,
) -> Simplified:
    S = ie._system  # type: ignore[attr-defined]
    m, n = P.A.shape[0], P.dim
    L = m + 2 * n
    pos = np.where(pb.kind == 0, S.row, np.where(pb.kind > 0, m + S.var, m + n + S.var))  # G row -> L index
    margin, value = np.full(L, np.nan), np.full(L, np.nan)
    margin[pos], value[pos] = out.margin, out.value
    Y = ck.multiplier_matrix(out).tocoo()
    mult = sp.csr_matrix((Y.data, (pos[Y.row], pos[Y.col])), shape=(L, L))
    rows_a = pb.kind == 0
    kept = np.sort(S.row[rows_a & out.kept])
    redundant = np.sort(S.row[rows_a & (out.how == "redundant")])
    zero = np.setdiff1d(np.arange(m), np.concatenate([S.row[rows_a], ie.rows]))  # 0·x <= b, b > tol
    redundant = np.union1d(redundant, zero)
    margin[zero] = -P.b[zero]
    red_up = np.sort(S.var[(pb.kind > 0) & (out.how == "redundant")])
    red_lo = np.sort(S.var[(pb.kind < 0) & (out.how == "redundant")])
    lb, ub = P.lb.copy(), P.ub.copy()
    lb[ie.upper] = ub[ie.upper]
    ub[ie.lower] = lb[ie.lower]
    tight_up, tight_lo = value[m + red_up], -value[m + n + red_lo]
    free_up = ~np.isin(red_up, ie.lower)
    free_lo = ~np.isin(red_lo, ie.upper)
    ju, jl = red_up[free_up], red_lo[free_lo]
    if bounds == "tighten":
        ub[ju] = np.clip(tight_up[free_up], lb[ju], ub[ju])
        lb[jl] = np.clip(tight_lo[free_lo], lb[jl], ub[jl])
    else:
        ub[ju], lb[jl] = np.inf, -np.inf
    A_eq = _vstack(P.A_eq, _rows(P.A, ie.rows), P.is_sparse)
    Q = Polytope(_rows(P.A, kept), P.b[kept], A_eq, np.concatenate([P.b_eq, P.b[ie.rows]]), lb=lb, ub=ub, dim=n)
    _equality_widths(margin, ie, m, n)
    ties = _near_ties(margin, pb, pos, out, ie, m, n, tol)
    info: dict[str, object] = {
        "rows": m,
        "bounds": P.n_bounds,
        "equations": P.A_eq.shape[0],
        "n": n,
        "kept_bounds": int(np.sum((pb.kind != 0) & out.kept)),
        "g_rows": pos,
    }
    return Simplified(
        polytope=Q,
        redundant=redundant,
        equalities=np.sort(ie.rows),
        kept=kept,
        dim=dim,
        redundant_lower=red_lo,
        redundant_upper=red_up,
        fixed_variables=np.union1d(ie.fixed_variables, np.flatnonzero(np.linalg.norm(basis, axis=1) <= 1e-9)),
        kept_lower=np.sort(S.var[(pb.kind < 0) & out.kept]),
        kept_upper=np.sort(S.var[(pb.kind > 0) & out.kept]),
        margin=margin,
        value=value,
        multipliers=mult,
        near_ties=ties,
        tol=tol,
        interior_point=pb.x0,
        n_lps=0,
        seconds=0.0,
        implicit=ie,
        basis=basis,
        info=info,
    )


def _rows(A: object, idx: np.ndarray) -> object:
    return take_rows(A, idx)  # type: ignore[arg-type]


def _vstack(A: object, B: object, sparse: bool) -> object:
    if sparse:
        return sp.vstack([sp.csr_matrix(A), sp.csr_matrix(B)], format="csr")
    return np.vstack([np.asarray(A.toarray() if sp.issparse(A) else A), np.asarray(B)])  # type: ignore[attr-defined]


def _equality_widths(margin: np.ndarray, ie: ImplicitEqualities, m: int, n: int) -> None:
    margin[ie.rows] = ie.row_widths if ie.row_widths.size == ie.rows.size else np.nan
    margin[m + ie.upper] = ie.upper_widths if ie.upper_widths.size == ie.upper.size else np.nan
    margin[m + n + ie.lower] = ie.lower_widths if ie.lower_widths.size == ie.lower.size else np.nan


def _near_ties(
    margin: np.ndarray,
    pb: ck.Problem,
    pos: np.ndarray,
    out: ck.Outcome,
    ie: ImplicitEqualities,
    m: int,
    n: int,
    tol: float,
) -> list[NearTie]:
    """Kept rows with margin <= tol, rows decided redundant with a positive margin, and implicit equalities
    shown to have a width above round-off."""
    ties: list[NearTie] = []

    def name(k: int) -> tuple[str, int]:
        return ("row", k) if k < m else ("upper", k - m) if k < m + n else ("lower", k - m - n)

    for k in np.sort(pos[out.kept & (out.margin <= tol)]):
        kind, idx = name(int(k))
        ties.append(NearTie(kind, idx, "kept", float(margin[k]), tol))
    # a row called redundant whose removal still widens P (0 < v - h <= round-off): a facet thinner than the
    # round-off allowance, decided redundant, so flagged (a weakly redundant row has v - h <= 0)
    for k in np.sort(pos[(out.how == "redundant") & (out.margin > 0.0)]):
        kind, idx = name(int(k))
        ties.append(NearTie(kind, idx, "redundant", float(margin[k]), tol))
    for j, w in _equality_slivers(ie).items():
        kind, idx = name(int(pos[j]))
        ties.append(NearTie(kind, idx, "equality", w, tol))
    return ties


_SLIVER_ROUNDS = 4  # LPs spent looking for implicit equalities whose width is above round-off
_ROUND_OFF = 64 * np.finfo(float).eps  # a slack below this times the row's scale is round-off


def _scale(G: sp.csr_matrix, h: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per row, the size of the numbers in h_i - g_i x: max(1, |h_i|, Σ_k |g_ik x_k|)."""
    return np.maximum(1.0, np.maximum(np.abs(h), abs(G) @ np.abs(x)))


def _certified_width(ie: ImplicitEqualities, S: object, E: np.ndarray) -> np.ndarray:
    """Per row of E (implicit equalities of the unit system ``S``), the width its certificate bounds (inf when
    there is none): an equality certified within round-off needs no sliver LP."""
    w = np.full(E.size, np.inf)
    side, row, var = S.side[E], S.row[E], S.var[E]  # type: ignore[attr-defined]
    for sd, idx, widths in (
        (0, ie.rows, ie.row_widths),
        (1, ie.upper, ie.upper_widths),
        (-1, ie.lower, ie.lower_widths),
    ):
        if widths.size != idx.size or idx.size == 0:
            continue
        at = (side == sd) if sd == 0 else (side * sd > 0)
        key = row[at] if sd == 0 else var[at]
        pos = np.searchsorted(idx, key)
        hit = (pos < idx.size) & (idx[np.minimum(pos, idx.size - 1)] == key)
        sub = np.full(key.size, np.inf)
        sub[hit] = widths[pos[hit]]
        w[at] = sub
    return w


def _equality_slivers(ie: ImplicitEqualities) -> dict[int, float]:
    """Implicit equalities (rows of the unit system) whose width is shown to be above round-off: the LP
    max Σ_E (h_i - g_i x) over P is 0 when every one is exact; its point's slacks are lower bounds on the
    widths. The rows found leave the objective and the LP runs again (at most _SLIVER_ROUNDS times)."""
    from . import solvers
    from .errors import OracleError

    S = ie._system  # type: ignore[attr-defined]
    E = np.flatnonzero(
        ((S.side == 0) & np.isin(S.row, ie.rows))
        | ((S.side < 0) & np.isin(S.var, ie.lower))
        | ((S.side > 0) & np.isin(S.var, ie.upper))
    )
    found: dict[int, float] = {}
    G = sp.csr_matrix(S.G)
    E = E[_certified_width(ie, S, E) > _ROUND_OFF * _scale(G, S.h, ie.interior_point)[E]]  # the others: exact
    eq = (S.Ae, S.be) if S.be.shape[0] else (None, None)
    for _ in range(_SLIVER_ROUNDS):
        live = np.setdiff1d(E, np.fromiter(found, dtype=int, count=len(found)))
        if live.size == 0:
            break
        c = np.asarray(G[live].sum(axis=0)).ravel()
        try:
            x = solvers.solve_lp(c, G, S.h, *eq, options=dict(ck.LP_OPTIONS, simplex_strategy=1)).x
        except OracleError:
            break
        gx = G @ x
        viol = max(float(np.max(gx - S.h, initial=0.0)), 0.0)
        s = S.h - gx
        new = live[s[live] > _ROUND_OFF * _scale(G, S.h, x)[live] + 10 * viol]
        if new.size == 0:
            break
        for j in new:
            found[int(j)] = float(s[j])
    return found


__all__ = ["simplify", "Simplified", "Transformed", "NearTie"]
