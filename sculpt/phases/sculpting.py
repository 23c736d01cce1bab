"""Phase 2: sculpt a convex body K ⊂ R^{d²} (over vec Θ, row-major) that contains every head Θ_i.

For every output row y_a the batched affine-simplex regression q̂ = argmin_{Σq=1} ‖y_a − qᵀ X ΣŴ‖ tests
whether all heads share one pattern (small residual, q̂ >= −tol): then p^{(i)}_a ≈ q̂ for every i, so
x_aᵀΘ_i(x_r − x_j) = log(p_r/p_j) ≈ log(q̂_r/q̂_j) with r = argmax q̂, a linear constraint met by every head.

mode="halfspaces" (docs/method.md#recon-certifying-design): the n_rows best rows give one-sided constraints
⟨Θ, x_a(x_r − x_j)ᵀ⟩ >= log(q̂_r / (q̂_j⁺ + q_f)) with an additive floor q_f (self-calibrated from the
negative q̂ entries), only for token pairs at distance >= dist_min; the L1 outlier trim drops the rows a
least-violation fit cannot satisfy, and the slack η = 2η* + η₀ (η* = the smallest uniform slack making K
non-empty) is added; |Θ_pq| <= R.
mode="slabs" (re-sculpt with an accurate ΣŴ, docs/method.md#recon-prototype): rows with relative residual <= τ and
q̂ >= −q_tol give equality-type constraints ⟨Θ, x_a(x_j − x_r)ᵀ⟩ ≈ log(q̂_j/q̂_r) for q̂_j >= q_min, weighted
by q̂_j (SculptedBody.F/g/weights, what phase 4 fits the flat to) and entered as slabs |F θ − g| <= η_s;
the small-q̂ tokens of those rows still give half-spaces.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg

from oracles import Polytope, solvers
from oracles.errors import OracleError

from .._checks import check_data, check_sum_w
from ..errors import PhaseFailed
from ..result import PhaseRecord
from ._rank import row_rank
from ._simplex import simplex_lstsq, token_distances, token_gram_ok
from ._slack import hinge_feasible_point, l1_trim, min_uniform_slack

__all__ = ["SculptedBody", "sculpt", "scan_span_rows", "default_dist_min", "default_rows"]


@dataclass
class SculptedBody:
    """The sculpted body. ``polytope`` over vec(Θ) ∈ R^{d²}: the half-spaces ``halfspaces`` = (A, b), the slabs
    |F θ − g| <= ``slab_widths`` (two rows each), then the box |Θ_pq| <= ``box`` as its last 2d² rows; it is
    assembled on first read (phases 4–6 read only the equality rows; building it took 4.4–5.0 ms at (16,4,2)).
    ``F θ ≈ g`` (weights ``weights``): equality-type constraints from agreeing rows (empty for a half-space-only
    body). ``rows_seen``/``rows_accepted``: output rows tested / accepted by the agreement test."""

    F: np.ndarray
    g: np.ndarray
    weights: np.ndarray
    rows_seen: int
    rows_accepted: int
    halfspaces: tuple[np.ndarray, np.ndarray]
    slab_widths: np.ndarray
    figures: dict = field(default_factory=dict)
    box: float = 4.0
    # phase 4's rows (slab mode): every equality of the agreeing rows up to ``span_tau``, not only the
    # min_equalities K* keeps as slabs, weighted by 1/(log-ratio error) ≈ (q̂_j⁻² + q̂_r⁻²)^(−1/2)/(rel + 0.01)
    span_F: np.ndarray | None = None
    span_g: np.ndarray | None = None
    span_weights: np.ndarray | None = None
    # the agreement test and weights those rows came from (``scan_span_rows``' keywords): phase 4 scans more
    # examples with exactly this rule
    span_rule: dict[str, float] | None = None

    _slab_rank: int | None = field(default=None, repr=False, compare=False)
    _polytope: Polytope | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def polytope(self) -> Polytope:
        """The body as an ``oracles.Polytope`` (built once, on first read)."""
        if self._polytope is None:
            p = self.F.shape[1]
            A, b = self.halfspaces
            poly = Polytope(np.empty((0, p)), np.empty(0), dim=p)
            if A.shape[0]:
                poly.add_halfspaces(A, b)
            if self.F.shape[0]:
                poly.add_slabs(self.F, self.g, self.slab_widths)
            poly.add_halfspaces(*_box_rows(p, self.box))
            self._polytope = poly
        return self._polytope

    @property
    def n_constraints(self) -> int:
        """Rows of ``polytope`` (half-spaces, two per slab, the 2d² box rows), without building it."""
        return int(self.halfspaces[0].shape[0] + 2 * self.F.shape[0] + 2 * self.F.shape[1])

    @property
    def dim(self) -> int:
        return int(self.F.shape[1])

    def slab_rank(self) -> int:
        """rank F of K*'s equality rows (computed once: phase 4 asks again after every scan)."""
        if self._slab_rank is None:
            self._slab_rank = row_rank(self.F, self.F.shape[1]) if self.F.shape[0] else 0
        return self._slab_rank

    def constraints(self) -> tuple[np.ndarray, np.ndarray]:
        """(A, b) of the polytope without the box rows (the box is ``box``)."""
        nb = 2 * self.dim
        return self.polytope.A[:-nb], self.polytope.b[:-nb]


def default_dist_min(d: int) -> float:
    """Token-pair distance filter: ±1 tokens differing in >= round(d/3) coordinates (8 → 3, 16 → 5),
    written as the Euclidean ‖x_r − x_j‖ >= 2·sqrt(h_min) so it applies to Gaussian tokens too."""
    return 2.0 * np.sqrt(max(1, round(d / 3)))


def default_rows(d: int, mode: str) -> int:
    """Agreeing rows kept by default: 2000 for slabs (phase 4 needs > d² equalities); for half-spaces 1000 up
    to d = 8 and 600 above,
    because every LP over the body costs about (rows · d²) and 1000 rows gave no better ΣW than 600 at
    d = 16 (measured, docs/method.md)."""
    if mode == "slabs":
        return 2000
    return 1000 if d <= 8 else 600


def _box_rows(p: int, R: float) -> tuple[np.ndarray, np.ndarray]:
    I = np.eye(p)
    return np.vstack([I, -I]), np.full(2 * p, R)


def _pair_rows(xa: np.ndarray, xr: np.ndarray, xj: np.ndarray) -> np.ndarray:
    """Rows kron(x_a, x_r − x_j): the logit difference x_aᵀΘ(x_r − x_j) = row @ vec(Θ)."""
    return np.einsum("np,nq->npq", xa, xr - xj).reshape(xa.shape[0], -1)


def sculpt(
    X: Any,
    Y: Any,
    W_sum: Any,
    *,
    mode: str = "halfspaces",
    rng: Any = None,
    solver: str | None = None,
    truth: Any = None,
    n_rows: int | None = None,
    q_tol: float | None = None,
    tau: float = 0.01,
    tau_max: float = 0.05,
    min_equalities: int | None = None,
    q_min: float = 0.02,
    c_floor: float = 6.0,
    floor_clip: tuple[float, float] = (1e-3, 0.2),
    dist_min: float | None = None,
    eta0: float = 0.1,
    box: float = 4.0,
    trim: bool = True,
    need_equalities: int | None = None,
    span_tau: float = 0.1,
    span_rel_floor: float = 0.01,
) -> tuple[SculptedBody, PhaseRecord]:
    """Phase 2 (see the module docstring). Returns (SculptedBody, PhaseRecord "2-sculpt").

    ``n_rows``: agreeing rows kept (the smallest residuals; default ``default_rows(d, mode)``);
    ``q_tol``: rows need q̂ >= −q_tol (0.02 / 0.001); ``tau``: residual bound of the slab mode, widened up
    to ``tau_max`` until ``min_equalities`` (default 3d²) equalities are available; in slab mode ``n_rows``
    counts rows that give equalities (plus the best half-space-budget rows for the half-spaces); ``q_min``:
    q̂_j needed for an equality; ``c_floor``: q_f = c_floor · q90(|negative q̂|) clipped to ``floor_clip``;
    ``dist_min``: token-pair distance filter (default ``default_dist_min(d)``); ``eta0``: slack added to
    2η*; ``box``: |Θ_pq| <= box; ``trim``: L1 outlier trim; ``need_equalities``: slab mode stops with
    ``PhaseFailed("3-refine", …)`` before its LPs when fewer equality rows survive (phase 4 would refuse the body:
    at d = 32 the LPs over such a body took 200 s for nothing); ``span_tau``, ``span_rel_floor``: slab mode also
    keeps, for phase 4, every equality of the rows with residual <= max(span_tau, tau_max) (``SculptedBody.span_F``,
    so K*'s own equality rows are among them), weighted
    by (q̂_j⁻² + q̂_r⁻²)^(−1/2)/(residual + span_rel_floor).
    """
    t0 = time.perf_counter()
    X, Y = check_data(X, Y)
    N, k, d = X.shape
    W = check_sum_w(W_sum, d)
    if mode not in ("halfspaces", "slabs"):
        raise ValueError(f"mode must be 'halfspaces' or 'slabs', got {mode!r}")
    if k < 2:
        raise ValueError("sculpting needs k >= 2 tokens per sequence")
    slabs = mode == "slabs"
    n_rows = default_rows(d, mode) if n_rows is None else int(n_rows)
    q_tol = (1e-3 if slabs else 0.02) if q_tol is None else float(q_tol)
    dist_min = default_dist_min(d) if dist_min is None else float(dist_min)
    if n_rows < 1 or box <= 0 or eta0 < 0 or c_floor <= 0:
        raise ValueError("n_rows, box and c_floor must be positive and eta0 non-negative")
    rec = PhaseRecord("2-sculpt")
    p = d * d

    fit = simplex_lstsq(X, Y, W)
    good_ex = token_gram_ok(X)
    qf_all = fit.q.reshape(-1, k)
    rel = fit.rel.reshape(-1)
    ok = (qf_all.min(1) >= -q_tol) & np.repeat(good_ex, k)
    span_rows, span_rule = None, None
    if slabs:
        # at least every row K* may use (rel <= tau_max), so K*'s equality rows are among phase 4's
        span_rule = {"q_tol": q_tol, "rel_max": max(span_tau, tau_max), "q_min": q_min, "rel_floor": span_rel_floor}
        span_rows = _span_rows(X, qf_all, rel, ok & (rel <= span_rule["rel_max"]), q_min, span_rel_floor)
        ok &= rel <= tau_max
    cand = np.flatnonzero(ok)
    cand = cand[np.argsort(rel[cand], kind="stable")]
    if slabs:
        # τ: the rows with residual <= tau, widened (up to tau_max) until they give min_equalities usable
        # equalities (with m = 3 heads agreement is rarer and τ = 0.01 leaves too few, docs/method.md#recon-prototype)
        Qc = qf_all[cand]
        Dc = token_distances(X[cand // k])[np.arange(cand.size), Qc.argmax(1)]
        n_eq_row = ((Qc >= q_min) & (Dc >= dist_min) & (Qc < Qc.max(1, keepdims=True))).sum(1)
        n_tau = int(np.sum(rel[cand] <= tau))
        need_eq = min_equalities if min_equalities is not None else 3 * d * d
        n_fill = int(np.searchsorted(np.cumsum(n_eq_row), need_eq) + 1)
        limit = max(n_tau, min(n_fill, cand.size))
        # the row budget goes to rows that give equalities (nearly 1-sparse rows give none); the best
        # default_rows(d, "halfspaces") rows still give the half-spaces of K*
        n_half = default_rows(d, "halfspaces")
        pos = np.arange(limit)
        eq_rank = np.cumsum(n_eq_row[:limit] > 0)
        take = ((n_eq_row[:limit] > 0) & (eq_rank <= n_rows)) | (pos < n_half)
        rows = cand[:limit][take]
        half_row = (pos < n_half)[take]
    else:
        rows = cand[:n_rows]
        half_row = np.ones(rows.size, bool)
    n_idx, a_idx = np.divmod(rows, k)
    Q = qf_all[rows]
    neg = -Q[Q < 0]
    floor = float(np.clip(c_floor * (np.quantile(neg, 0.9) if neg.size else 0.0), *floor_clip))
    if slabs:  # rows are selected with q̂ >= −0.001, so negative entries understate the noise there
        floor = max(floor, q_min)
    Xs, xa, xr, r_idx, qr, D = _row_frame(X, Q, n_idx, a_idx)

    # slab mode: half-spaces only from the best default_rows(d, "halfspaces") rows (the LPs over K* scale
    # with its row count; phase 4 reads F/g/w), measured 2-4 s of LP time saved at d = 16
    half_A, half_b, F, g, wts = [], [], [], [], []
    for j in range(k):
        xj = Xs[:, j]
        usable = (j != r_idx) & (D[:, j] >= dist_min)
        qj = Q[:, j]
        eq = usable & (qj >= q_min) if slabs else np.zeros(rows.size, bool)
        hs = usable & ~eq & half_row
        if hs.any():  # x_aᵀΘ(x_r − x_j) >= log(q_r/(q_j⁺ + q_f))  <=>  −row θ <= −bound
            half_A.append(-_pair_rows(xa[hs], xr[hs], xj[hs]))
            half_b.append(-np.log(qr[hs] / (np.maximum(qj[hs], 0.0) + floor)))
        if eq.any():  # x_aᵀΘ(x_j − x_r) ≈ log(q_j/q_r)
            F.append(_pair_rows(xa[eq], xj[eq], xr[eq]))
            g.append(np.log(qj[eq] / qr[eq]))
            wts.append(qj[eq])
    A = np.vstack(half_A) if half_A else np.empty((0, p))
    b = np.concatenate(half_b) if half_b else np.empty(0)
    F_ = np.vstack(F) if F else np.empty((0, p))
    g_ = np.concatenate(g) if g else np.empty(0)
    w_ = np.concatenate(wts) if wts else np.empty(0)
    n_half_raw, n_eq_raw = A.shape[0], F_.shape[0]

    # Slabs: a weighted least-squares fit of F θ ≈ g, robust trim of outlying equations, then η_s.
    # A log-ratio with q̂_j small is uncertain by about σ_q/q̂_j nats, so slab i gets the half-width
    # η_i = 2·q99(|r|·q̂)/q̂_j + η₀/2, with r the residuals of the weighted least-squares fit.
    eta_s = np.zeros(0)
    eq_keep = np.ones(n_eq_raw, bool)
    th = None
    if n_eq_raw:
        sw = np.sqrt(w_)
        for _ in range(3):
            # QR with column pivoting (gelsy): 3-5x faster than numpy's SVD lstsq on these tall systems
            # (0.23 s of a 0.63 s (16,4,1) run), the same minimiser on full-rank ones
            th = scipy.linalg.lstsq(
                F_[eq_keep] * sw[eq_keep, None], g_[eq_keep] * sw[eq_keep], lapack_driver="gelsy", check_finite=False
            )[0]
            res = np.abs(F_ @ th - g_) * w_
            mad = 1.4826 * np.median(res[eq_keep]) + 1e-12
            keep_next = res <= 5.0 * mad
            if np.array_equal(keep_next, eq_keep):  # the same rows give the same fit
                break
            eq_keep = keep_next
        sigma = float(np.quantile(res[eq_keep], 0.99)) if eq_keep.any() else 0.0
        F_, g_, w_ = F_[eq_keep], g_[eq_keep], w_[eq_keep]
        eta_s = 2.0 * sigma / w_ + 0.5 * eta0

    # phase 4 fits the flat to the span rows (a superset of K*'s slab rows) when there are any
    n_for_span = span_rows[0].shape[0] if span_rows is not None and span_rows[0].shape[0] else F_.shape[0]
    if slabs and need_equalities is not None and n_for_span < int(need_equalities):
        raise PhaseFailed(
            "3-refine",
            f"the re-sculpted body K* has {n_for_span} equality rows, fewer than the {int(need_equalities)} "
            "phase 4 needs to pin the heads' flat: sculpt more examples (stopped before K*'s LPs)",
        )

    # Half-spaces: the smallest uniform slack η* (with the slabs as they are), the L1 outlier trim when
    # the system is infeasible (a feasible system has an L1 optimum of 0 and nothing to trim), then η = 2η* + η₀.
    n_trimmed = 0
    lp_time = time.perf_counter()

    def with_slabs(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The half-spaces A θ <= b stacked with both sides of the slabs |F θ − g| <= η_s."""
        if not F_.shape[0]:
            return A, b
        return np.vstack([A, F_, -F_]), np.concatenate([b, g_ + eta_s, eta_s - g_])

    AA, bb = with_slabs(A, b)
    eta_star = 0.0
    eta_by = "none (no constraints)"
    if AA.shape[0]:
        # η* = min{t >= 0 : AA θ <= bb + t, |θ| <= box} is 0 exactly when some θ in the box meets every row;
        # the slabs' weighted least-squares fit is such a point whenever ΣŴ is exact (m = 1), and then the
        # LP (0.2-1 s over the 4,000-9,000 rows of a single-head K*) is not needed
        # η* = min{t >= 0 : AA θ <= bb + t, |θ| <= box} is 0 exactly when some θ in the box meets every row.
        # Candidates, each checked against every row: (a) the log-ratio weighted least-squares fit (a point of
        # the body whenever ΣŴ is exact, m = 1); (b) slab mode: a point on that fit + the 8 weakest
        # directions of the equality rows (along the heads' affine hull), one LP in 9 variables; (c) HiGHS's
        # first-order PDLP on the rows tightened by 1e-3. Otherwise the exact LP (at d = 16 it took 1-2 s over
        # 1,700-3,500 rows; (b) 0.07 s, (c) 0.2-0.3 s). Before (b): L-BFGS-B on the squared violations
        # (``hinge_feasible_point``, 6-27 ms where it succeeds, 45 ms to give up on an infeasible system).
        fit_ls: np.ndarray | None
        Fw: np.ndarray | None
        if th is not None:
            fit_ls, Fw = th, F_ * np.sqrt(w_)[:, None]
        elif Q.shape[0]:
            fit_ls, Fw = _loglinear_fit(xa, xr, Xs, Q, r_idx, D, dist_min, q_min)
        else:
            fit_ls, Fw = None, None
        x0 = np.clip(fit_ls, -box, box) if fit_ls is not None else None
        if x0 is not None and float(np.max(AA @ x0 - bb)) <= 0.0:
            eta_by = "feasible point (the log-ratio weighted least-squares fit): 0, no LP"
        elif (hinge := hinge_feasible_point(AA, bb, box, x0))[0] is not None:
            eta_by = "feasible point (L-BFGS-B on the squared violations of the rows tightened by 1e-3, checked): 0"
        elif (hinge_worst := hinge[1]) <= HINGE_INFEASIBLE and (
            th is not None and Fw is not None and (r_ok := _first_feasible_r(AA, bb, th, Fw, box, solver))
        ):
            eta_by = (
                f"feasible point (least-squares fit + {r_ok} weakest equality directions, {r_ok + 1}-variable LP): 0"
            )
        elif hinge_worst <= HINGE_INFEASIBLE and _pdlp_feasible_point(AA, bb, box, solver) is not None:
            eta_by = "feasible point (HiGHS PDLP on the rows tightened by 1e-3, checked): 0"
        elif AA.size > LP_MAX_ENTRIES or p > LP_MAX_VARIABLES:
            # LPs over this system take minutes (d = 32, 5,596 × 1,024: L1 trim 105 s + η* 88 s): trim and bound
            # at the hinge point instead. Half-spaces it violates by more than HINGE_INFEASIBLE are dropped (the
            # rows an L1 fit would give up), and η* is at most the kept rows' worst violation there, so the body
            # keeps that point (η* is an upper bound here, not the least slack)
            x_h = hinge.last
            keep_h = (A @ x_h - b) <= HINGE_INFEASIBLE if (trim and A.shape[0]) else np.ones(A.shape[0], bool)
            n_trimmed = int((~keep_h).sum())
            A, b = A[keep_h], b[keep_h]
            AA, bb = with_slabs(A, b)
            eta_star = max(0.0, float(np.max(AA @ x_h - bb))) if AA.shape[0] else 0.0
            eta_by = (
                f"hinge point ({AA.shape[0]} × {p} rows: LPs skipped above {LP_MAX_ENTRIES:.0e} entries or "
                f"{LP_MAX_VARIABLES} variables; "
                f"{n_trimmed} half-spaces violated by > {HINGE_INFEASIBLE:g} there trimmed): an upper bound"
            )
        elif trim and A.shape[0]:
            # the L1 fit decides both at once: total violation 0 <=> η* = 0 (nothing to trim); otherwise its
            # point meets every kept half-space, so η* over the kept rows is at most the kept rows' violation
            # there (the exact η* LP runs only when a slab row is still violated at that point). Measured at
            # (8,4,3): one LP of 0.17 s where η* LP + L1 LP + η* LP took 1.7 s
            tr = l1_trim(AA, bb, -box, box, solver=solver)
            keep_h = tr.keep[: A.shape[0]]
            n_trimmed = int((~keep_h).sum())
            A, b = A[keep_h], b[keep_h]
            AA, bb = with_slabs(A, b)
            left = float(np.max(AA @ tr.x - bb)) if AA.shape[0] else 0.0
            if left <= 1e-7:
                eta_star = max(0.0, left)
                eta_by = "L1 trim LP (its point meets every kept row)" if n_trimmed else "L1 LP: total violation 0"
            else:
                eta_star, _ = min_uniform_slack(AA, bb, -box, box, solver=solver)
                eta_by = "LP (after the L1 trim)"
        else:
            eta_star, _ = min_uniform_slack(AA, bb, -box, box, solver=solver)
            eta_by = "LP"
    lp_time = time.perf_counter() - lp_time
    eta = 2.0 * eta_star + eta0
    # the polytope is assembled on first read (SculptedBody.polytope): its rows are checked here instead
    for name, v in (("half-space offsets", b), ("log-ratios", g_), ("slab widths", eta_s)):
        if not np.all(np.isfinite(v)):
            raise FloatingPointError(f"K*'s {name} are not all finite (eta* = {eta_star!r})")
    if not np.isfinite(eta) or (eta_s.size and float(np.min(eta_s)) + eta < 0.0):
        raise FloatingPointError(f"K*'s slack eta = {eta!r} (slab widths from {float(np.min(eta_s, initial=0.0))!r})")
    body = SculptedBody(
        F_,
        g_,
        w_,
        rows_seen=int(N * k),
        rows_accepted=int(rows.size),
        halfspaces=(A, b + eta),
        slab_widths=eta_s + eta,
        box=float(box),
    )
    if span_rows is not None:
        body.span_F, body.span_g, body.span_weights = span_rows
        body.span_rule = span_rule
    rec.figures.update(
        mode=mode,
        rows_seen=int(N * k),
        rows_passing=int(ok.sum()),
        rows_accepted=int(rows.size),
        acceptance=float(rows.size / max(1, N * k)),
        tau_effective=float(rel[rows].max()) if rows.size else None,
        examples_dropped_rank=int((~good_ex).sum()),
        q_floor=floor,
        dist_min=dist_min,
        halfspaces_built=int(n_half_raw),
        halfspaces_trimmed=n_trimmed,
        halfspaces_kept=int(A.shape[0]),
        equalities_built=int(n_eq_raw),
        equalities_kept=int(F_.shape[0]),
        eta_star=float(eta_star),
        eta=float(eta),
        eta_slab_q50=float(np.median(eta_s) + eta) if F_.shape[0] else None,
        box=float(box),
        n_constraints=body.n_constraints,
        lp_time=lp_time,
        eta_star_by=eta_by,
        span_equalities=int(span_rows[0].shape[0]) if span_rows is not None else None,
    )
    body.figures = dict(rec.figures)
    if truth is not None:
        rec.truth.update(_truth_figures(truth, A, b, eta, F_, g_, w_, eta_s + eta, box, Xs, a_idx, Q))
    rec.time = time.perf_counter() - t0
    return body, rec


# a squared-violation descent that ends with some row violated by more than this many nats is taken as
# proof enough of infeasibility to skip the two feasibility searches after it (the near-flat LP and PDLP,
# 0.3-0.5 s spent for nothing at (8,4,3), where η* = 0.54) and go to the exact LP
HINGE_INFEASIBLE = 0.1

#: rows × variables above which phase 2/3 bound η* at the hinge point instead of by LPs: at d = 16 (up to
#: 3,500 × 256 = 9e5) the LPs take 1–2 s; at d = 32 (5,596 × 1,024 = 5.7e6) 193 s
LP_MAX_ENTRIES = 3_000_000

#: variables (d²) above which η* is bounded at the hinge point as well: at d = 16, m = 3 the L1 trim and η* LPs
#: over 1,256 × 256 rows took 1.2–2.4 s (dual simplex), 60–70 % of a run, for a slack no later phase reads; at
#: d = 8 they take 0.01–0.2 s and stay
LP_MAX_VARIABLES = 100


def _feasible_near_flat(
    A: np.ndarray, b: np.ndarray, th: np.ndarray, Fw: np.ndarray, box: float, r: int, solver: str | None
) -> np.ndarray | None:
    """A point of {A θ <= b, |θ| <= box} searched on θ_ls + span(U_r), U_r the r weakest right singular
    vectors of the weighted equality rows Fw (the directions along the heads' affine hull, which F θ ≈ g
    leaves free): one LP in r + 1 variables, min t s.t. A(θ_ls + U c) <= b + t. Returns the point when it
    meets every row (checked here, not taken from the LP), else None."""
    p = A.shape[1]
    r = min(r, p)
    U = np.linalg.svd(Fw, full_matrices=False)[2][-r:].T if Fw.shape[0] >= p else None
    if U is None:
        return None
    G = np.vstack(
        [
            np.hstack([A @ U, -np.ones((A.shape[0], 1))]),
            np.hstack([U, np.zeros((p, 1))]),
            np.hstack([-U, np.zeros((p, 1))]),
        ]
    )
    h = np.concatenate([b - A @ th, box - th, box + th])
    c = np.zeros(r + 1)
    c[-1] = 1.0
    try:
        sol = solvers.solve_lp(c, G, h, bounds=[(None, None)] * r + [(-1.0, None)], solver=solver)
    except OracleError:
        return None
    x = th + U @ np.asarray(sol.x[:r])
    if float(np.max(A @ x - b)) <= 0.0 and float(np.abs(x).max()) <= box:
        return x
    return None


def _pdlp_feasible_point(
    A: np.ndarray, b: np.ndarray, box: float, solver: str | None, delta: float = 1e-3
) -> np.ndarray | None:
    """A point of {A θ <= b, |θ| <= box} proposed by HiGHS's first-order PDLP on min{t : A θ <= b − δ + t}
    (the tightening δ absorbs PDLP's ~1e-4 feasibility tolerance) and accepted only if it meets every
    row exactly (checked here). Only with a backend that declares ``FIRST_ORDER_LP`` (HiGHS); None otherwise,
    when the check fails or after 1,000 PDLP iterations (the successes measured took < 500; on an infeasible K* at (8,4,3), η* > 0, the
    uncapped PDLP spent 1.2 s for nothing, capped 0.46 s). Measured at d = 16 (1,700-2,300 rows): 0.3 s
    against 1.2-1.3 s for the exact η* LP."""
    try:
        backend = solvers.get(solver, "lp")
        if not backend.FIRST_ORDER_LP:
            return None
        n, p = A.shape
        c = np.zeros(p + 1)
        c[-1] = 1.0
        sol = solvers.solve_lp(
            c,
            np.hstack([A, -np.ones((n, 1))]),
            b - delta,
            bounds=[(-box, box)] * p + [(0.0, None)],
            solver=backend.name,
            options=backend.first_order_options(max_iter=1000),
        )
    except OracleError:
        return None
    x = np.clip(np.asarray(sol.x[:p]), -box, box)
    return x if float(np.max(A @ x - b)) <= 0.0 else None


def _first_feasible_r(
    A: np.ndarray,
    b: np.ndarray,
    th: np.ndarray,
    Fw: np.ndarray,
    box: float,
    solver: str | None,
    rs: tuple[int, ...] = (8,),
) -> int:
    """The first r in ``rs`` for which ``_feasible_near_flat`` finds a point of the body; 0 if none does."""
    for r in rs:
        if _feasible_near_flat(A, b, th, Fw, box, r, solver) is not None:
            return r
    return 0


def _row_frame(
    X: np.ndarray, Q: np.ndarray, n_idx: np.ndarray, a_idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For output rows (example n, row a) with fitted patterns Q (R, k): the examples' tokens Xs (R, k, d),
    x_a, the reference token x_r (r = argmax q̂), r, q̂_r and the token distances ‖x_r − x_j‖ (R, k)."""
    I = np.arange(Q.shape[0])
    r_idx = Q.argmax(1)
    Xs = X[n_idx]
    return Xs, Xs[I, a_idx], Xs[I, r_idx], r_idx, Q[I, r_idx], token_distances(Xs)[I, r_idx]


def _span_rows(
    X: np.ndarray, Q_all: np.ndarray, rel: np.ndarray, ok: np.ndarray, q_min: float, rel_floor: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Phase 4's equality rows: for every row in ``ok`` (flat ids n·k + a) and every token j ≠ r = argmax q̂ with
    q̂_j >= q_min, ⟨Θ, x_a(x_j − x_r)ᵀ⟩ ≈ log(q̂_j/q̂_r), weighted by (q̂_j⁻² + q̂_r⁻²)^(−1/2)/(rel + rel_floor), the
    inverse of the log-ratio's error when q̂ errs by about the row's relative residual. No token-distance filter
    (distinct tokens only; dependent examples are already out of ``ok``) and no τ budget: measured at (8,4,2) and
    (16,4,2) on 1,500 / 2,560 examples, the 192 / 768 slab rows of K* gave a span 18–32° off, these 1,300–2,500
    rows 7–11°."""
    rows = np.flatnonzero(ok)
    Q = Q_all[rows]
    Xs, xa, xr, r_idx, qr, D = _row_frame(X, Q, *np.divmod(rows, X.shape[1]))
    F, g, w = [], [], []
    for j in range(X.shape[1]):
        e = (j != r_idx) & (Q[:, j] >= q_min) & (D[:, j] > 1e-9)
        if e.any():
            F.append(_pair_rows(xa[e], Xs[e, j], xr[e]))
            g.append(np.log(Q[e, j] / qr[e]))
            w.append((Q[e, j] ** -2 + qr[e] ** -2) ** -0.5 / (rel[rows[e]] + rel_floor))
    p = X.shape[2] ** 2
    if not F:
        return np.empty((0, p)), np.empty(0), np.empty(0)
    return np.vstack(F), np.concatenate(g), np.concatenate(w)


def scan_span_rows(
    X: np.ndarray,
    Y: np.ndarray,
    W_sum: np.ndarray,
    *,
    q_tol: float = 1e-3,
    rel_max: float = 0.1,
    q_min: float = 0.02,
    rel_floor: float = 0.01,
    block: int = 4096,
    max_entries: float = 4e7,
    initial: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Phase 4's equality rows (``_span_rows``) from examples read ``block`` at a time: the agreement test
    (q̂ >= −``q_tol``, independent tokens, residual <= ``rel_max``) under ``W_sum``, then every equality of the
    rows that pass. Past ``max_entries`` (rows × d²) only the highest-weight rows are kept, so memory does not
    grow with N: one block, up to twice the kept rows between poolings, and the pooled copy (about three times
    ``max_entries`` floats at the peak). ``initial`` = (F, g, w) from an earlier scan joins the reservoir, so a
    growing scan reads each example once. Returns (F, g, w)."""
    X, Y = check_data(X, Y)
    N, k, d = X.shape
    W_sum = check_sum_w(W_sum, d)
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"block must be an integer >= 1, got {block!r}")
    if not (np.isfinite(max_entries) and max_entries >= d * d):
        raise ValueError(f"max_entries must be finite and at least d² = {d * d} (one row), got {max_entries!r}")
    cap = max(1, int(max_entries // (d * d)))
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    if initial is not None and np.shape(initial[0])[0]:
        parts.append((np.asarray(initial[0], float), np.asarray(initial[1], float), np.asarray(initial[2], float)))
    held = sum(p[2].size for p in parts)

    def pooled(limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        F = np.vstack([p[0] for p in parts]) if parts else np.empty((0, d * d))
        g = np.concatenate([p[1] for p in parts]) if parts else np.empty(0)
        w = np.concatenate([p[2] for p in parts]) if parts else np.empty(0)
        if w.size > limit:  # a reservoir of the best rows: memory does not grow with N
            keep = np.sort(np.argpartition(-w, limit - 1)[:limit])
            F, g, w = F[keep], g[keep], w[keep]
        return F, g, w

    for s in range(0, N, int(block)):
        Xb, Yb = X[s : s + int(block)], Y[s : s + int(block)]
        fit = simplex_lstsq(Xb, Yb, W_sum)
        q, rel = fit.q.reshape(-1, k), fit.rel.reshape(-1)
        ok = ((rel <= rel_max) & (q.min(1) >= -q_tol)).reshape(-1, k)
        ex = np.flatnonzero(ok.any(1))  # the token-independence test only where some row passed
        ok[ex] &= token_gram_ok(Xb[ex])[:, None]
        parts.append(_span_rows(Xb, q, rel, ok.reshape(-1), q_min, rel_floor))
        held += parts[-1][2].size
        if held > 2 * cap:
            parts = [pooled(cap)]
            held = parts[0][2].size
    return pooled(cap)


def _loglinear_fit(
    xa: np.ndarray,
    xr: np.ndarray,
    Xs: np.ndarray,
    Q: np.ndarray,
    r_idx: np.ndarray,
    D: np.ndarray,
    dist_min: float,
    q_min: float,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """A candidate point of K: the q̂_j-weighted least-squares fit of x_aᵀΘ(x_j − x_r) ≈ log(q̂_j/q̂_r) over the
    tokens with q̂_j >= q_min (what slab mode fits), and its weighted rows; (None, None) when these rows are
    too few to determine Θ."""
    rows_, cols_ = np.nonzero((Q >= q_min) & (D >= dist_min) & (np.arange(Q.shape[1])[None] != r_idx[:, None]))
    if rows_.size <= xa.shape[1] ** 2:
        return None, None
    Fm = _pair_rows(xa[rows_], Xs[rows_, cols_], xr[rows_]) * np.sqrt(Q[rows_, cols_])[:, None]
    gm = np.log(Q[rows_, cols_] / Q[rows_, r_idx[rows_]]) * np.sqrt(Q[rows_, cols_])
    return np.linalg.lstsq(Fm, gm, rcond=None)[0], Fm


def _span_angle(F: np.ndarray, g: np.ndarray, w: np.ndarray, th: np.ndarray) -> float | None:
    """Largest principal angle (degrees) between span{Θ_i} and the span read off the m smallest right
    singular vectors of diag(√w)[F, −g] (the homogeneous fit phase 4 uses)."""
    m = th.shape[0]
    if F.shape[0] < F.shape[1] + 1:
        return None
    M = np.sqrt(w)[:, None] * np.hstack([F, -g[:, None]])
    V = np.linalg.svd(M, full_matrices=False)[2][-m:].T[:-1]
    Qa, Qb = np.linalg.qr(V)[0], np.linalg.qr(th.T)[0]
    s = np.linalg.svd(Qa.T @ Qb, compute_uv=False)
    return float(np.degrees(np.arccos(np.clip(s.min(), 0.0, 1.0))))


def _truth_figures(
    truth: Any,
    A: np.ndarray,
    b: np.ndarray,
    eta: float,
    F: np.ndarray,
    g: np.ndarray,
    w: np.ndarray,
    eta_slab: np.ndarray,
    box: float,
    Xs: np.ndarray,
    a_idx: np.ndarray,
    Q: np.ndarray,
) -> dict:
    """Whether every true Θ_i lies in K, and by how much (nats) the constraints are violated."""
    th = truth.thetas.reshape(truth.m, -1)
    out: dict = {}
    viol_raw = th @ A.T - b[None] if A.shape[0] else np.zeros((truth.m, 0))
    out["halfspace_max_violation_raw"] = float(viol_raw.max()) if viol_raw.size else None
    out["halfspace_violated_frac_raw"] = float((viol_raw > 0).mean()) if viol_raw.size else None
    worst = viol_raw.max(1) - eta if viol_raw.size else np.full(truth.m, -np.inf)
    if F.shape[0]:
        r = np.abs(th @ F.T - g[None])
        out["slab_max_residual"] = float(r.max())
        out["slab_rms_residual"] = float(np.sqrt(np.mean(r**2)))
        worst = np.maximum(worst, (r - eta_slab[None]).max(1))
        out["span_angle_deg"] = _span_angle(F, g, w, th)
    worst = np.maximum(worst, np.abs(th).max(1) - box)
    out["max_violation"] = float(worst.max())  # <= 0: every head inside K
    out["heads_inside"] = bool(np.all(worst <= 1e-9))
    out["heads_in_box"] = bool(np.abs(th).max() <= box)
    if Q.shape[0]:
        P = truth.attention(Xs)[np.arange(Q.shape[0]), :, a_idx]  # (R, m, k)
        out["accepted_tv_to_heads_q90"] = float(np.quantile(0.5 * np.abs(P - Q[:, None]).sum(-1).max(1), 0.9))
    return out
