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
by q̂_j (SculptedBody.F/g/weights) and entered as slabs |F θ − g| <= η_s; the small-q̂ tokens of those rows
still give half-spaces. A slab body also keeps phase 4's equality rows (``span_equality_rows``: every
equality of its agreeing rows up to ``span_tau``) and the agreement rule they came from (``SpanRule``).

The body is an ``oracles.Polytope`` (``SculptedBody.polytope``); its LPs go through the engine: the least
uniform and total violations (``oracles.min_max_violation``, ``min_total_violation``) and the cheap
feasible points tried first (``hinge_feasible_point``, ``feasible_point_on_flat``,
``first_order_feasible_point``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NamedTuple

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike

from oracles import (
    OracleError,
    Polytope,
    RankOneRows,
    feasible_point_on_flat,
    first_order_feasible_point,
    hinge_feasible_point,
    min_max_violation,
    min_total_violation,
)

from .._checks import check_data, check_sum_w
from ..errors import PhaseFailed
from ..result import PhaseRecord
from ..settings import BodySettings, ProblemSize
from ._rank import row_rank
from ._simplex import simplex_lstsq, token_distances, token_gram_ok

if TYPE_CHECKING:
    from ..model import MultiHeadAttention

__all__ = ["SculptedBody", "sculpt", "BodyMode", "SpanRule", "EqualityRows", "span_equality_rows"]

#: the two kinds of body: one-sided constraints only, or equality-type slabs from accurate agreeing rows
BodyMode = Literal["halfspaces", "slabs"]

#: the slab fit's robust trim: a log-ratio more than this many MADs (× 1.4826, the normal σ) off the weighted
#: least-squares fit is dropped, refitting up to SLAB_TRIM_ROUNDS times until the kept set repeats
SLAB_TRIM_MADS = 5.0
SLAB_TRIM_ROUNDS = 3
#: the slab fit solves the normal equations of the smaller side (rows·rows or d²·d², Cholesky) from this many
#: flops of gelsy's pivoted QR (rows · d² · min(rows, d²)) on: gelsy is bound by its pivoting's matrix-vector
#: work (25 s against 2 s for the Cholesky on 1,695 × 4,096 at d = 64); below it, the rank-revealing gelsy
SLAB_GRAM_FROM = 1e9
#: the normal equations are kept only when LAPACK's reciprocal condition estimate of their matrix is above
#: this (cond(F) below ~1e4, so squaring it costs at most ~1e-8 of the solution); else gelsy
SLAB_GRAM_RCOND = 1e-8
#: variables (d²) from which the slab fit and the hinge start work on the rows' rank-one factors x_a ⊗ v
#: (``oracles.RankOneRows``): at d = 64 a hinge evaluation over 10,771 rows takes 4–5 ms against 52 ms dense
FACTORED_FROM = 1024
#: entries of the dense rows one chunk of ``_factored`` reads (8 MB)
FACTOR_CHUNK = 1 << 20
#: a dense row is taken as rank one when its factors rebuild it to this many ulps of its largest entry
FACTOR_ULPS = 16.0


class EqualityRows(NamedTuple):
    """Equality-type rows F vec(Θ) ≈ g with row weights w (phase 4 fits the heads' flat to them); F is kept as the
    factors of its rows kron(x_a, x_j − x_r) (``oracles.RankOneRows``) where phase 4 reads it."""

    F: np.ndarray | RankOneRows
    g: np.ndarray
    w: np.ndarray


@dataclass(frozen=True)
class SpanRule:
    """The agreement test and weights of phase 4's equality rows, so that rows read later from more examples
    (``sculpt.phases.span.scan_span_rows``) follow the same rule: an output row agrees when q̂ >= −``q_tol`` and
    its relative residual is <= ``rel_max``; each token j ≠ r = argmax q̂ with q̂_j >= ``q_min`` gives an
    equality weighted (q̂_j⁻² + q̂_r⁻²)^(−1/2)/(residual + ``rel_floor``)."""

    q_tol: float
    rel_max: float
    q_min: float
    rel_floor: float


@dataclass
class SculptedBody:
    """The sculpted body. ``polytope`` over vec(Θ) ∈ R^{d²}: the half-spaces ``halfspaces`` = (A, b), the slabs
    |F θ − g| <= ``slab_widths`` (two rows each), then the box |Θ_pq| <= ``box`` as its last 2d² rows; it is
    assembled on first read (phases 4–6 read only the equality rows; building it takes about 5 ms at
    (16,4,2)). ``F θ ≈ g`` (weights ``weights``): equality-type constraints from agreeing rows (empty for a
    half-space-only body). ``rows_seen``/``rows_accepted``: output rows tested / accepted by the agreement test.
    A slab body also has phase 4's rows ``span_F``/``span_g``/``span_weights`` (every equality of its agreeing
    rows up to ``span_tau``, K*'s own slab rows among them) and ``span_rule``, the rule they came from. From
    d² >= ``FACTORED_FROM`` the rows of ``F`` and of the half-spaces are kept as ``oracles.RankOneRows`` factors
    (``.dense()`` gives them whole; the polytope is built from them whole)."""

    F: np.ndarray | RankOneRows
    g: np.ndarray
    weights: np.ndarray
    rows_seen: int
    rows_accepted: int
    halfspaces: tuple[np.ndarray | RankOneRows, np.ndarray]
    slab_widths: np.ndarray
    figures: dict[str, object] = field(default_factory=dict)
    box: float = 4.0
    span_F: np.ndarray | RankOneRows | None = None
    span_g: np.ndarray | None = None
    span_weights: np.ndarray | None = None
    span_rule: SpanRule | None = None

    _slab_rank: int | None = field(default=None, repr=False, compare=False)
    #: rank of the weighted span rows alone, set by phase 4's first fit (a later fit adds rows to them: when
    #: these already have full column rank, so has the union, and its rank check is skipped)
    span_rank: int | None = field(default=None, init=False, repr=False, compare=False)
    _polytope: Polytope | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def polytope(self) -> Polytope:
        """The body as an ``oracles.Polytope`` (built once, on first read)."""
        if self._polytope is None:
            p = self.F.shape[1]
            A, b = self.halfspaces
            poly = Polytope(np.empty((0, p)), np.empty(0), dim=p)
            if A.shape[0]:
                poly.add_halfspaces(_dense(A), b)
            if self.F.shape[0]:
                poly.add_slabs(_dense(self.F), self.g, self.slab_widths)
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
            self._slab_rank = row_rank(_dense(self.F), self.F.shape[1]) if self.F.shape[0] else 0
        return self._slab_rank

    def constraints(self) -> tuple[np.ndarray, np.ndarray]:
        """(A, b) of the polytope without the box rows (the box is ``box``)."""
        nb = 2 * self.dim
        return self.polytope.A[:-nb], self.polytope.b[:-nb]


def _box_rows(p: int, R: float) -> tuple[np.ndarray, np.ndarray]:
    I = np.eye(p)
    return np.vstack([I, -I]), np.full(2 * p, R)


def _pair_rows(xa: np.ndarray, xr: np.ndarray, xj: np.ndarray) -> np.ndarray:
    """Rows kron(x_a, x_r − x_j): the logit difference x_aᵀΘ(x_r − x_j) = row @ vec(Θ)."""
    return np.einsum("np,nq->npq", xa, xr - xj).reshape(xa.shape[0], -1)


#: constraint rows, whole or (from ``FACTORED_FROM`` variables on) as their factors x_a ⊗ (x_r − x_j)
Rows = np.ndarray | RankOneRows


def _stack_rows(parts: list[Rows], d: int, factored: bool) -> Rows:
    """The rows of ``parts`` (all factored or all whole) one after the other (an empty (0, d²) block when there
    are none)."""
    if factored:
        blocks = [p for p in parts if isinstance(p, RankOneRows)]
        return RankOneRows.concatenate(blocks) if blocks else RankOneRows(np.empty((0, d)), np.empty((0, d)))
    return np.vstack([_dense(p) for p in parts]) if parts else np.empty((0, d * d))


def _take_rows(M: Rows, idx: np.ndarray) -> Rows:
    """Rows ``idx`` (indices or a mask) of M."""
    return M.take(idx) if isinstance(M, RankOneRows) else M[idx]


def _dense(M: Rows) -> np.ndarray:
    """M's rows whole (for the LPs and the polytope)."""
    return M.dense() if isinstance(M, RankOneRows) else M


def sculpt(
    X: ArrayLike,
    Y: ArrayLike,
    W_sum: ArrayLike,
    settings: BodySettings | None = None,
    *,
    mode: BodyMode = "halfspaces",
    solver: str | None = None,
    truth: MultiHeadAttention | None = None,
    need_equalities: int | None = None,
) -> tuple[SculptedBody, PhaseRecord]:
    """Phase 2: the body of agreeing-row constraints under ΣŴ = ``W_sum`` (see the module docstring).

    Parameters
    ----------
    X, Y : array_like, shape (N, k, d)
        Inputs and outputs of the layer (k >= 2).
    W_sum : array_like, shape (d, d)
        The estimate ΣŴ of Σ_i W_i (phase 1's, or phase 3's refined one).
    settings : BodySettings, optional
        The body's settings (``learn`` passes ``sculpt`` for phase 2's half-space body, ``refine.slabs`` for
        K*); fields still "auto" resolve for ``mode`` as for one head (slabs: min_equalities 3d²).
    mode : {"halfspaces", "slabs"}
        One-sided constraints only, or equality-type slabs from accurate agreeing rows (K*).
    solver : str, optional
        LP backend of the slack LPs (None: the engine's default).
    truth : MultiHeadAttention, optional
        The true layer: the record's ``truth`` says whether every head lies in K and by how much not.
    need_equalities : int, optional
        Slab mode: equality rows phase 4 needs to pin the heads' flat (d² − (m − 1)); with fewer the body is
        refused before its LPs (``PhaseFailed``), which over such a body cost minutes at d = 32 for nothing.

    Returns
    -------
    SculptedBody
        The body K (an ``oracles.Polytope`` on ``.polytope``).
    PhaseRecord
        "2-sculpt", with the rows built, trimmed and kept, η* and how it was bounded (``eta_star_by``).

    Raises
    ------
    PhaseFailed
        Slab mode with fewer than ``need_equalities`` equality rows.
    FloatingPointError
        The body's offsets or slack are not finite.
    ValueError
        Malformed data or ``mode``, or k < 2.
    """
    t0 = time.perf_counter()
    X_, Y_ = check_data(X, Y)
    N, k, d = X_.shape
    W = check_sum_w(W_sum, d)
    if mode not in ("halfspaces", "slabs"):
        raise ValueError(f"mode must be 'halfspaces' or 'slabs', got {mode!r}")
    if k < 2:
        raise ValueError("sculpting needs k >= 2 tokens per sequence")
    s = (settings or BodySettings()).resolve(ProblemSize(d, k, 1, N), mode)
    sel = _select_rows(X_, Y_, W, s, mode == "slabs")
    rows = _row_constraints(X_, sel, s, mode == "slabs")
    slabs = _fit_slabs(rows.F, rows.g, rows.w, s.eta0)
    n_for_span = (
        sel.span_rows.F.shape[0] if sel.span_rows is not None and sel.span_rows.F.shape[0] else slabs.F.shape[0]
    )
    if mode == "slabs" and need_equalities is not None and n_for_span < int(need_equalities):
        raise PhaseFailed(
            "2-sculpt",
            f"the re-sculpted body K* has {n_for_span} equality rows, fewer than the {int(need_equalities)} "
            "phase 4 needs to pin the heads' flat: sculpt more examples (stopped before K*'s LPs)",
        )
    lp_t0 = time.perf_counter()
    slack = _least_slack(rows.A, rows.b, slabs, _start_point(rows, slabs, s), s, solver)
    lp_time = time.perf_counter() - lp_t0
    A, b = (_take_rows(rows.A, slack.keep), rows.b[slack.keep]) if slack.keep is not None else (rows.A, rows.b)
    eta = 2.0 * slack.eta_star + s.eta0
    body = _assemble(A, b, slabs, slack.eta_star, eta, _box(s), rows_seen=N * k, rows_accepted=int(sel.rows.size))
    if sel.span_rows is not None:
        body.span_F, body.span_g, body.span_weights = sel.span_rows
        body.span_rule = sel.span_rule
    rec = PhaseRecord("2-sculpt", figures=_figures(mode, sel, rows, slabs, slack, A, eta, s))
    rec.figures.update(n_constraints=body.n_constraints, lp_time=lp_time, eta_star_by=slack.how)
    rec.figures["span_equalities"] = int(sel.span_rows.F.shape[0]) if sel.span_rows is not None else None
    body.figures = dict(rec.figures)
    if truth is not None:
        rec.truth.update(_truth_figures(truth, A, b, eta, slabs, _box(s), rows))
    rec.time = time.perf_counter() - t0
    return body, rec


def _box(s: BodySettings) -> float:
    """The resolved box |Θ_pq| <= box."""
    assert s.box is not None  # BodySettings.resolve fills it
    return float(s.box)


def _figures(
    mode: BodyMode,
    sel: _Selection,
    rows: _Rows,
    slabs: _Slabs,
    slack: _Slack,
    A: Rows,
    eta: float,
    s: BodySettings,
) -> dict[str, object]:
    """The record's figures on the rows (tested, passing, kept), the constraints built and kept, and the slack."""
    seen = int(sel.q.shape[0])
    return dict(
        mode=mode,
        rows_seen=seen,
        rows_passing=int(sel.ok.sum()),
        rows_accepted=int(sel.rows.size),
        acceptance=float(sel.rows.size / max(1, seen)),
        tau_effective=float(sel.rel[sel.rows].max()) if sel.rows.size else None,
        examples_dropped_rank=int((~sel.good_ex).sum()),
        q_floor=rows.floor,
        dist_min=s.dist_min,
        halfspaces_built=int(rows.A.shape[0]),
        halfspaces_trimmed=slack.trimmed,
        halfspaces_kept=int(A.shape[0]),
        equalities_built=int(rows.F.shape[0]),
        equalities_kept=int(slabs.F.shape[0]),
        eta_star=float(slack.eta_star),
        eta=float(eta),
        eta_slab_q50=float(np.median(slabs.widths) + eta) if slabs.F.shape[0] else None,
        box=float(_box(s)),
    )


# --- the agreeing rows ---------------------------------------------------------------------------------------


@dataclass
class _Selection:
    """The agreeing rows a body is built from: the simplex fit of every output row (flat ids n·k + a), the
    agreement test, the rows kept (and which of them give half-spaces), and phase 4's rows in slab mode."""

    q: np.ndarray  # (N·k, k) fitted patterns q̂
    rel: np.ndarray  # (N·k,) relative residuals
    good_ex: np.ndarray  # (N,) examples with independent tokens
    ok: np.ndarray  # (N·k,) rows passing the agreement test
    rows: np.ndarray  # flat ids of the rows kept, best first
    half_row: np.ndarray  # (rows.size,) which kept rows give half-spaces
    span_rows: EqualityRows | None
    span_rule: SpanRule | None


def _select_rows(X: np.ndarray, Y: np.ndarray, W: np.ndarray, s: BodySettings, slabs: bool) -> _Selection:
    """The agreement test (q̂ >= −q_tol, independent tokens; slab mode: residual <= tau_max) and the rows kept:
    the n_rows with the smallest residuals, or in slab mode ``_slab_budget``'s."""
    k = X.shape[1]
    assert s.q_tol is not None and s.n_rows is not None  # resolved
    fit = simplex_lstsq(X, Y, W)
    good_ex = token_gram_ok(X)
    q = fit.q.reshape(-1, k)
    rel = fit.rel.reshape(-1)
    ok = (q.min(1) >= -s.q_tol) & np.repeat(good_ex, k)
    span_rows, span_rule = None, None
    if slabs:
        # at least every row K* may use (rel <= tau_max), so K*'s equality rows are among phase 4's
        span_rule = SpanRule(s.q_tol, max(s.span_tau, s.tau_max), s.q_min, s.span_rel_floor)
        span_rows = span_equality_rows(X, q, rel, ok & (rel <= span_rule.rel_max), s.q_min, s.span_rel_floor)
        ok &= rel <= s.tau_max
    cand = np.flatnonzero(ok)
    cand = cand[np.argsort(rel[cand], kind="stable")]
    if slabs:
        rows, half_row = _slab_budget(X, q, rel, cand, s)
    else:
        rows = cand[: s.n_rows]
        half_row = np.ones(rows.size, bool)
    return _Selection(q, rel, good_ex, ok, rows, half_row, span_rows, span_rule)


def _slab_budget(
    X: np.ndarray, q: np.ndarray, rel: np.ndarray, cand: np.ndarray, s: BodySettings
) -> tuple[np.ndarray, np.ndarray]:
    """Slab mode's rows among the candidates ``cand`` (best first): those with residual <= tau, widened (up to
    tau_max, already applied to ``cand``) until they give min_equalities usable equalities (with m = 3 heads
    agreement is rarer and τ = 0.01 leaves too few, docs/method.md#recon-prototype). The n_rows budget goes to
    rows that give equalities (nearly 1-sparse rows give none); the best ``half_rows`` rows still give K*'s
    half-spaces (the LPs over K* scale with its row count). Returns (rows, half_row)."""
    k = X.shape[1]
    assert s.dist_min is not None and s.min_equalities is not None and s.n_rows is not None  # resolved
    assert s.half_rows is not None  # resolved
    Qc = q[cand]
    Dc = token_distances(X[cand // k])[np.arange(cand.size), Qc.argmax(1)]
    n_eq_row = ((Qc >= s.q_min) & (Dc >= s.dist_min) & (Qc < Qc.max(1, keepdims=True))).sum(1)
    n_tau = int(np.sum(rel[cand] <= s.tau))
    n_fill = int(np.searchsorted(np.cumsum(n_eq_row), s.min_equalities) + 1)
    limit = max(n_tau, min(n_fill, cand.size))
    n_half = s.half_rows
    pos = np.arange(limit)
    eq_rank = np.cumsum(n_eq_row[:limit] > 0)
    take = ((n_eq_row[:limit] > 0) & (eq_rank <= s.n_rows)) | (pos < n_half)
    return cand[:limit][take], (pos < n_half)[take]


def _row_frame(
    X: np.ndarray, Q: np.ndarray, n_idx: np.ndarray, a_idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For output rows (example n, row a) with fitted patterns Q (R, k): the examples' tokens Xs (R, k, d),
    x_a, the reference token x_r (r = argmax q̂), r, q̂_r and the token distances ‖x_r − x_j‖ (R, k)."""
    I = np.arange(Q.shape[0])
    r_idx = Q.argmax(1)
    Xs = X[n_idx]
    return Xs, Xs[I, a_idx], Xs[I, r_idx], r_idx, Q[I, r_idx], token_distances(Xs)[I, r_idx]


def span_equality_rows(
    X: np.ndarray, Q_all: np.ndarray, rel: np.ndarray, ok: np.ndarray, q_min: float, rel_floor: float
) -> EqualityRows:
    """Phase 4's equality rows from the output rows in ``ok``.

    For every row in ``ok`` (flat ids n·k + a) and every token j ≠ r = argmax q̂ with q̂_j >= q_min:
    ⟨Θ, x_a(x_j − x_r)ᵀ⟩ ≈ log(q̂_j/q̂_r), weighted by (q̂_j⁻² + q̂_r⁻²)^(−1/2)/(rel + rel_floor), the inverse of
    the log-ratio's error when q̂ errs by about the row's relative residual. No token-distance filter (distinct
    tokens only; dependent examples are already out of ``ok``) and no τ budget: at (8,4,2) and (16,4,2) on
    1,500 / 2,560 examples these 1,300–2,500 rows give a span 7–11° off, K*'s 192 / 768 slab rows 18–32°.

    Parameters
    ----------
    X : numpy.ndarray, shape (N, k, d)
        The examples' tokens.
    Q_all : numpy.ndarray, shape (N·k, k)
        Every output row's fitted pattern q̂.
    rel : numpy.ndarray, shape (N·k,)
        Every output row's relative residual.
    ok : numpy.ndarray of bool, shape (N·k,)
        The rows to use.
    q_min, rel_floor : float
        As in ``SpanRule``.

    Returns
    -------
    EqualityRows
        F (R, d²) as ``oracles.RankOneRows`` (left factors x_a, right x_j − x_r), g (R,), w (R,).
    """
    rows = np.flatnonzero(ok)
    Q = Q_all[rows]
    Xs, xa, xr, r_idx, qr, D = _row_frame(X, Q, *np.divmod(rows, X.shape[1]))
    left, right, g, w = [], [], [], []
    for j in range(X.shape[1]):
        e = (j != r_idx) & (Q[:, j] >= q_min) & (D[:, j] > 1e-9)
        if e.any():
            left.append(xa[e])
            right.append(Xs[e, j] - xr[e])
            g.append(np.log(Q[e, j] / qr[e]))
            w.append((Q[e, j] ** -2 + qr[e] ** -2) ** -0.5 / (rel[rows[e]] + rel_floor))
    d = X.shape[2]
    if not left:
        return EqualityRows(RankOneRows(np.empty((0, d)), np.empty((0, d))), np.empty(0), np.empty(0))
    return EqualityRows(RankOneRows(np.vstack(left), np.vstack(right)), np.concatenate(g), np.concatenate(w))


# --- the constraint rows -------------------------------------------------------------------------------------


@dataclass
class _Rows:
    """The constraints of the kept rows: half-spaces A θ <= b, equality rows F θ ≈ g (weights w), the additive
    floor q_f, and the rows' frame (``_row_frame``) for the start point and the truth figures."""

    A: Rows
    b: np.ndarray
    F: Rows
    g: np.ndarray
    w: np.ndarray
    floor: float
    Q: np.ndarray
    a_idx: np.ndarray
    Xs: np.ndarray
    xa: np.ndarray
    xr: np.ndarray
    r_idx: np.ndarray
    D: np.ndarray


def _row_constraints(X: np.ndarray, sel: _Selection, s: BodySettings, slabs: bool) -> _Rows:
    """Every token j ≠ r at distance >= dist_min of a kept row gives a half-space x_aᵀΘ(x_r − x_j) >=
    log(q̂_r/(q̂_j⁺ + q_f)) (only rows ``half_row``), or in slab mode when q̂_j >= q_min an equality
    x_aᵀΘ(x_j − x_r) ≈ log(q̂_j/q̂_r) weighted q̂_j. The floor q_f = c_floor · q90(|negative q̂|), clipped to
    floor_clip (slab mode: at least q_min, since its rows have q̂ >= −q_tol and negative entries understate the
    noise there). From ``FACTORED_FROM`` variables on the rows are kept as factors (x_a, x_r − x_j)."""
    k, d = X.shape[1], X.shape[2]
    factored = d * d >= FACTORED_FROM

    def pair(xa_: np.ndarray, u: np.ndarray, v: np.ndarray) -> Rows:  # kron(x_a, u − v)
        return RankOneRows(xa_, u - v) if factored else _pair_rows(xa_, u, v)

    assert s.dist_min is not None  # resolved
    n_idx, a_idx = np.divmod(sel.rows, k)
    Q = sel.q[sel.rows]
    neg = -Q[Q < 0]
    floor = float(np.clip(s.c_floor * (np.quantile(neg, 0.9) if neg.size else 0.0), *s.floor_clip))
    if slabs:
        floor = max(floor, s.q_min)
    Xs, xa, xr, r_idx, qr, D = _row_frame(X, Q, n_idx, a_idx)
    half_A, half_b, F, g, wts = [], [], [], [], []
    for j in range(k):
        xj = Xs[:, j]
        usable = (j != r_idx) & (D[:, j] >= s.dist_min)
        qj = Q[:, j]
        eq = usable & (qj >= s.q_min) if slabs else np.zeros(sel.rows.size, bool)
        hs = usable & ~eq & sel.half_row
        if hs.any():  # x_aᵀΘ(x_r − x_j) >= log(q_r/(q_j⁺ + q_f))  <=>  −row θ <= −bound
            half_A.append(pair(xa[hs], xj[hs], xr[hs]))
            half_b.append(-np.log(qr[hs] / (np.maximum(qj[hs], 0.0) + floor)))
        if eq.any():  # x_aᵀΘ(x_j − x_r) ≈ log(q_j/q_r)
            F.append(pair(xa[eq], xj[eq], xr[eq]))
            g.append(np.log(qj[eq] / qr[eq]))
            wts.append(qj[eq])
    return _Rows(
        A=_stack_rows(half_A, d, factored),
        b=np.concatenate(half_b) if half_b else np.empty(0),
        F=_stack_rows(F, d, factored),
        g=np.concatenate(g) if g else np.empty(0),
        w=np.concatenate(wts) if wts else np.empty(0),
        floor=floor,
        Q=Q,
        a_idx=a_idx,
        Xs=Xs,
        xa=xa,
        xr=xr,
        r_idx=r_idx,
        D=D,
    )


@dataclass
class _Slabs:
    """The slabs |F θ − g| <= widths (+ η, added when the body is assembled) kept after the robust fit, and
    that fit's point ``fit`` (None without equality rows)."""

    F: Rows
    g: np.ndarray
    w: np.ndarray
    widths: np.ndarray
    fit: np.ndarray | None

    def stack(self, A: Rows, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The half-spaces A θ <= b stacked with both sides of the slabs, whole (for the LPs)."""
        if not self.F.shape[0]:
            return _dense(A), b
        F = _dense(self.F)
        return np.vstack([_dense(A), F, -F]), np.concatenate([b, self.g + self.widths, self.widths - self.g])


def _fit_slabs(F: Rows, g: np.ndarray, w: np.ndarray, eta0: float) -> _Slabs:
    """A weighted least-squares fit of F θ ≈ g with a robust trim of outlying equations, then the half-widths.

    A log-ratio with q̂_j small is uncertain by about σ_q/q̂_j nats, so slab i gets the half-width
    η_i = 2·q99(|r|·q̂)/q̂_j + η₀/2, with r the residuals of the weighted fit on the kept rows. From
    ``FACTORED_FROM`` variables on the fit works on the rows' rank-one factors (``_factored``)."""
    if not F.shape[0]:
        return _Slabs(F, g, w, np.zeros(0), None)
    eq_keep = np.ones(F.shape[0], bool)
    sw = np.sqrt(w)
    th = np.zeros(F.shape[1])
    res = np.zeros(F.shape[0])
    Ff = _factored(F)
    rows = F if Ff is None else Ff
    # the weights scale the right factors: rows of one output row keep their shared left factor (one group)
    solver = _SlabSolver(F * sw[:, None] if Ff is None else RankOneRows(Ff.left, Ff.right * sw[:, None]), g * sw)
    for _ in range(SLAB_TRIM_ROUNDS):
        th = solver.solve(eq_keep)
        res = np.abs(rows @ th - g) * w
        mad = 1.4826 * np.median(res[eq_keep]) + 1e-12
        keep_next = res <= SLAB_TRIM_MADS * mad
        if np.array_equal(keep_next, eq_keep):  # the same rows give the same fit
            break
        eq_keep = keep_next
    sigma = float(np.quantile(res[eq_keep], 0.99)) if eq_keep.any() else 0.0
    return _Slabs(_take_rows(rows, eq_keep), g[eq_keep], w[eq_keep], 2.0 * sigma / w[eq_keep] + 0.5 * eta0, th)


class _SlabSolver:
    """The minimum-norm least-squares solution of the weighted rows A θ ≈ c kept by a mask. Small systems: QR
    with column pivoting (gelsy; 3–5× faster than numpy's SVD least squares, the same minimiser on full-rank
    systems). From ``SLAB_GRAM_FROM`` flops: the normal equations of the smaller side by Cholesky, A Aᵀ z = c,
    θ = Aᵀ z when there are fewer rows than unknowns (the row Gram matrix is formed once: a trim takes its
    sub-matrix), else AᵀA θ = Aᵀc; gelsy whenever that matrix is not well conditioned. Rows given as rank-one
    factors (``RankOneRows``) are formed whole only for gelsy: their Gram matrices come from the factors."""

    def __init__(self, A: np.ndarray | RankOneRows, c: np.ndarray) -> None:
        self.A, self.c = A, c
        rows, p = A.shape
        self.gram = rows * p * min(rows, p) >= SLAB_GRAM_FROM
        self.K = _row_gram(A) if self.gram and rows <= p else None

    def solve(self, keep: np.ndarray) -> np.ndarray:
        """θ for the rows in ``keep``."""
        A = self.A.take(keep) if isinstance(self.A, RankOneRows) else self.A[keep]
        c = self.c[keep]
        th = self._normal(A, c, keep) if self.gram else None
        if th is None:
            dense = A.dense() if isinstance(A, RankOneRows) else A
            th = scipy.linalg.lstsq(dense, c, lapack_driver="gelsy", check_finite=False)[0]
        return np.asarray(th)

    def _normal(self, A: np.ndarray | RankOneRows, c: np.ndarray, keep: np.ndarray) -> np.ndarray | None:
        """The normal-equations solution, None when their matrix is not numerically well conditioned."""
        if self.K is not None:
            K = self.K if keep.all() else self.K[np.ix_(keep, keep)]
            z = _spd_solve(K, c)
            if z is None:
                return None
            return A.rmatvec(z) if isinstance(A, RankOneRows) else A.T @ z
        if isinstance(A, RankOneRows):
            return _spd_solve(A.gram(), A.rmatvec(c))
        return _spd_solve(A.T @ A, A.T @ c)


def _row_gram(A: np.ndarray | RankOneRows) -> np.ndarray:
    """A Aᵀ; for rank-one rows u_r ⊗ v_r the Hadamard product (U Uᵀ) ∘ (V Vᵀ) (R²·(p + q) flops, not R²·p·q)."""
    if isinstance(A, RankOneRows):  # both factors' Gram matrices by syrk (upper triangles), then mirrored
        K = scipy.linalg.blas.dsyrk(1.0, A.left) * scipy.linalg.blas.dsyrk(1.0, A.right)
        K += np.triu(K, 1).T
        return np.asarray(K)
    return A @ A.T


def _spd_solve(K: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """K⁻¹ rhs by Cholesky, None when K is not positive definite or its reciprocal condition estimate (dpocon)
    is below ``SLAB_GRAM_RCOND``."""
    factor, info = scipy.linalg.lapack.dpotrf(K, lower=1, clean=1)
    if info != 0:
        return None
    rcond, info = scipy.linalg.lapack.dpocon(factor, float(np.linalg.norm(K, 1)), uplo="L")
    if info != 0 or not rcond >= SLAB_GRAM_RCOND:
        return None
    return np.asarray(scipy.linalg.cho_solve((factor, True), rhs, check_finite=False))


def _start_point(rows: _Rows, slabs: _Slabs, s: BodySettings) -> np.ndarray | None:
    """The first candidate point of K: the slabs' weighted fit, else (no slab rows) the q̂_j-weighted
    least-squares fit of x_aᵀΘ(x_j − x_r) ≈ log(q̂_j/q̂_r) over the tokens with q̂_j >= q_min (what slab mode
    fits); None when those rows are too few to determine Θ."""
    if slabs.fit is not None:
        return slabs.fit
    if not rows.Q.shape[0]:
        return None
    assert s.dist_min is not None  # resolved
    Q, r_idx = rows.Q, rows.r_idx
    sel = (Q >= s.q_min) & (rows.D >= s.dist_min) & (np.arange(Q.shape[1])[None] != r_idx[:, None])
    rows_, cols_ = np.nonzero(sel)
    if rows_.size <= rows.xa.shape[1] ** 2:
        return None
    Fm = _pair_rows(rows.xa[rows_], rows.Xs[rows_, cols_], rows.xr[rows_]) * np.sqrt(Q[rows_, cols_])[:, None]
    gm = np.log(Q[rows_, cols_] / Q[rows_, r_idx[rows_]]) * np.sqrt(Q[rows_, cols_])
    return np.asarray(np.linalg.lstsq(Fm, gm, rcond=None)[0])


# --- the slack η* --------------------------------------------------------------------------------------------


@dataclass
class _Slack:
    """η* (or an upper bound), how it was found, and the half-space rows kept (None: all)."""

    eta_star: float
    how: str
    keep: np.ndarray | None = None
    trimmed: int = 0


def _least_slack(
    A: Rows, b: np.ndarray, slabs: _Slabs, start: np.ndarray | None, s: BodySettings, solver: str | None
) -> _Slack:
    """η* = min{t >= 0 : AA θ <= bb + t, |θ| <= box} over the half-spaces and slabs, with the L1 outlier trim of
    the half-spaces when the system is infeasible (a feasible system has an L1 optimum of 0 and nothing to trim).

    η* is 0 exactly when some θ in the box meets every row, so cheap candidates come first, each checked against
    every row: (a) ``start`` (a point of the body whenever ΣŴ is exact, m = 1); (b) L-BFGS-B on the squared
    violations (``hinge_feasible_point``, 6–27 ms where it succeeds, 45 ms to give up); when its last iterate
    leaves every row within hinge_infeasible, (c) a point on the slab fit + the weakest equality directions (one
    LP in near_flat_directions + 1 variables) and (d) HiGHS's first-order PDLP. Otherwise the exact LPs (1–2 s
    over 1,700–3,500 rows at d = 16, where (c) takes 0.07 s and (d) 0.2–0.3 s), or above lp_max_entries /
    lp_max_variables a bound at the hinge point."""
    box = _box(s)
    rows, bb = _hinge_rows(A, b, slabs)
    if not rows.shape[0]:
        return _Slack(0.0, "none (no constraints)")
    x0 = np.clip(start, -box, box) if start is not None else None
    if x0 is not None and float(np.max(rows @ x0 - bb)) <= 0.0:
        return _Slack(0.0, "feasible point (the log-ratio weighted least-squares fit): 0, no LP")
    hinge = hinge_feasible_point(rows, bb, -box, box, x0)
    if hinge.x is not None:
        return _Slack(
            0.0, "feasible point (L-BFGS-B on the squared violations of the rows tightened by 1e-3, checked): 0"
        )
    AA = rows if isinstance(rows, np.ndarray) else slabs.stack(A, b)[0]  # the LPs below need the rows whole
    if hinge.worst <= s.hinge_infeasible:
        how = _cheap_feasible_point(AA, bb, slabs, s, solver)
        if how:
            return _Slack(0.0, how)
    if AA.size > s.lp_max_entries or A.shape[1] > s.lp_max_variables:
        return _slack_at_hinge(A, b, slabs, hinge.last, s)
    if s.trim and A.shape[0]:
        return _slack_after_trim(_dense(A), b, slabs, box, solver)
    return _Slack(min_max_violation(AA, bb, -box, box, solver=solver).value, "LP")


def _hinge_rows(A: Rows, b: np.ndarray, slabs: _Slabs) -> tuple[np.ndarray | RankOneRows, np.ndarray]:
    """``slabs.stack(A, b)``: the half-spaces and both sides of the slabs, as rank-one factors when both A and the
    slab rows have them (``_factored``: from ``FACTORED_FROM`` variables on), else whole."""
    fa, ff = _factored(A), _factored(slabs.F)
    if fa is None or ff is None:
        return slabs.stack(A, b)
    if not ff.shape[0]:
        return fa, b
    rows = RankOneRows.concatenate([fa, ff, RankOneRows(-ff.left, ff.right)])
    return rows, np.concatenate([b, slabs.g + slabs.widths, slabs.widths - slabs.g])


def _factored(M: np.ndarray | RankOneRows) -> RankOneRows | None:
    """The rows of M (R, d²) as rank-one factors u_r ⊗ v_r (vec(u vᵀ), row-major) from ``FACTORED_FROM`` columns
    on; None below, or when some row is not rank one to ``FACTOR_ULPS`` ulps of its largest entry. Each row's
    factors are read off its largest entry M[i, j]: v = M[i, :], u = M[:, j] / M[i, j] (exact for ±1 tokens)."""
    if isinstance(M, RankOneRows):
        return M
    R, p = M.shape
    d = int(round(np.sqrt(p)))
    if p < FACTORED_FROM or d * d != p:
        return None
    left, right = np.zeros((R, d)), np.zeros((R, d))
    step = max(1, FACTOR_CHUNK // p)
    for lo in range(0, R, step):
        T = M[lo : lo + step].reshape(-1, d, d)
        I = np.arange(T.shape[0])
        E = np.abs(T)
        i, j = np.divmod(E.reshape(T.shape[0], p).argmax(1), d)
        piv = T[I, i, j]
        u = T[I, :, j] / np.where(piv != 0.0, piv, 1.0)[:, None]
        v = T[I, i, :]
        np.multiply(u[:, :, None], v[:, None, :], out=E)  # the rows rebuilt, in place
        E -= T
        np.abs(E, out=E)
        if np.any(E.reshape(T.shape[0], p).max(1) > FACTOR_ULPS * np.finfo(float).eps * np.abs(piv)):
            return None
        left[lo : lo + step], right[lo : lo + step] = u, v
    return RankOneRows(left, right)


def _cheap_feasible_point(AA: np.ndarray, bb: np.ndarray, slabs: _Slabs, s: BodySettings, solver: str | None) -> str:
    """How a point of {AA θ <= bb, |θ| <= box} was found by (c) or (d) of ``_least_slack`` ("" when neither
    found one). (c) searches the slab fit θ_ls + span(U), U the near_flat_directions weakest right singular
    vectors of the weighted equality rows (the directions along the heads' affine hull, which F θ ≈ g leaves
    free); it needs at least d² equality rows."""
    box = _box(s)
    if slabs.fit is not None:
        Fw = _dense(slabs.F) * np.sqrt(slabs.w)[:, None]
        p = AA.shape[1]
        r = min(s.near_flat_directions, p)
        if Fw.shape[0] >= p:
            U = np.linalg.svd(Fw, full_matrices=False)[2][-r:].T
            if feasible_point_on_flat(AA, bb, slabs.fit, U, -box, box, solver=solver) is not None:
                n = s.near_flat_directions
                return f"feasible point (least-squares fit + {n} weakest equality directions, {n + 1}-variable LP): 0"
    try:
        x = first_order_feasible_point(AA, bb, -box, box, max_iter=s.first_order_max_iter, solver=solver)
    except OracleError:  # no first-order backend, or the run failed: the exact LPs decide
        x = None
    return "feasible point (HiGHS PDLP on the rows tightened by 1e-3, checked): 0" if x is not None else ""


def _slack_at_hinge(A: Rows, b: np.ndarray, slabs: _Slabs, x_h: np.ndarray, s: BodySettings) -> _Slack:
    """Above lp_max_entries / lp_max_variables, LPs over the system take minutes (d = 32, 5,596 × 1,024: L1 trim
    105 s + η* 88 s): trim and bound at the hinge point x_h instead. Half-spaces it violates by more than
    hinge_infeasible are dropped (the rows an L1 fit would give up), and η* is at most the kept rows' worst
    violation there, so the body keeps that point (η* is an upper bound here, not the least slack)."""
    keep = (A @ x_h - b) <= s.hinge_infeasible if (s.trim and A.shape[0]) else np.ones(A.shape[0], bool)
    n_trimmed = int((~keep).sum())
    AA, bb = slabs.stack(_take_rows(A, keep), b[keep])
    eta_star = max(0.0, float(np.max(AA @ x_h - bb))) if AA.shape[0] else 0.0
    how = (
        f"hinge point ({AA.shape[0]} × {A.shape[1]} rows: LPs skipped above {s.lp_max_entries:.0e} entries or "
        f"{s.lp_max_variables} variables; "
        f"{n_trimmed} half-spaces violated by > {s.hinge_infeasible:g} there trimmed): an upper bound"
    )
    return _Slack(eta_star, how, keep, n_trimmed)


def _slack_after_trim(A: np.ndarray, b: np.ndarray, slabs: _Slabs, box: float, solver: str | None) -> _Slack:
    """The L1 fit decides both at once: total violation 0 <=> η* = 0 (nothing to trim); otherwise its point meets
    every kept half-space, so η* over the kept rows is at most the kept rows' violation there (the exact η* LP
    runs only when a slab row is still violated at that point): at (8,4,3) one LP of 0.17 s instead of three
    (η*, L1, η*) of 1.7 s."""
    AA, bb = slabs.stack(A, b)
    tr = min_total_violation(AA, bb, -box, box, solver=solver)
    keep = tr.keep[: A.shape[0]]
    n_trimmed = int((~keep).sum())
    AA, bb = slabs.stack(A[keep], b[keep])
    left = float(np.max(AA @ tr.x - bb)) if AA.shape[0] else 0.0
    if left <= 1e-7:
        how = "L1 trim LP (its point meets every kept row)" if n_trimmed else "L1 LP: total violation 0"
        return _Slack(max(0.0, left), how, keep, n_trimmed)
    return _Slack(min_max_violation(AA, bb, -box, box, solver=solver).value, "LP (after the L1 trim)", keep, n_trimmed)


def _assemble(
    A: Rows,
    b: np.ndarray,
    slabs: _Slabs,
    eta_star: float,
    eta: float,
    box: float,
    *,
    rows_seen: int,
    rows_accepted: int,
) -> SculptedBody:
    """The body with every row widened by η = 2η* + η₀ (its rows checked finite here: the polytope is assembled
    on first read)."""
    for name, v in (("half-space offsets", b), ("log-ratios", slabs.g), ("slab widths", slabs.widths)):
        if not np.all(np.isfinite(v)):
            raise FloatingPointError(f"K*'s {name} are not all finite (eta* = {eta_star!r})")
    if not np.isfinite(eta) or (slabs.widths.size and float(np.min(slabs.widths)) + eta < 0.0):
        raise FloatingPointError(
            f"K*'s slack eta = {eta!r} (slab widths from {float(np.min(slabs.widths, initial=0.0))!r})"
        )
    return SculptedBody(
        slabs.F,
        slabs.g,
        slabs.w,
        rows_seen=int(rows_seen),
        rows_accepted=int(rows_accepted),
        halfspaces=(A, b + eta),
        slab_widths=slabs.widths + eta,
        box=box,
    )


# --- ground truth --------------------------------------------------------------------------------------------


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
    truth: MultiHeadAttention, A: Rows, b: np.ndarray, eta: float, slabs: _Slabs, box: float, rows: _Rows
) -> dict[str, object]:
    """Whether every true Θ_i lies in K, and by how much (nats) the constraints are violated."""
    th = truth.thetas.reshape(truth.m, -1)
    out: dict[str, object] = {}
    viol_raw = (A @ th.T).T - b[None] if A.shape[0] else np.zeros((truth.m, 0))
    out["halfspace_max_violation_raw"] = float(viol_raw.max()) if viol_raw.size else None
    out["halfspace_violated_frac_raw"] = float((viol_raw > 0).mean()) if viol_raw.size else None
    worst = viol_raw.max(1) - eta if viol_raw.size else np.full(truth.m, -np.inf)
    if slabs.F.shape[0]:
        r = np.abs((slabs.F @ th.T).T - slabs.g[None])
        out["slab_max_residual"] = float(r.max())
        out["slab_rms_residual"] = float(np.sqrt(np.mean(r**2)))
        worst = np.maximum(worst, (r - (slabs.widths + eta)[None]).max(1))
        out["span_angle_deg"] = _span_angle(_dense(slabs.F), slabs.g, slabs.w, th)
    worst = np.maximum(worst, np.abs(th).max(1) - box)
    out["max_violation"] = float(worst.max())  # <= 0: every head inside K
    out["heads_inside"] = bool(np.all(worst <= 1e-9))
    out["heads_in_box"] = bool(np.abs(th).max() <= box)
    if rows.Q.shape[0]:
        P = truth.attention(rows.Xs)[np.arange(rows.Q.shape[0]), :, rows.a_idx]  # (R, m, k)
        out["accepted_tv_to_heads_q90"] = float(np.quantile(0.5 * np.abs(P - rows.Q[:, None]).sum(-1).max(1), 0.9))
    return out
