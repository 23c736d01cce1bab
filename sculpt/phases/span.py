"""Phase 4: the span and affine hull of the Θ_i from the sculpted body K*.

The equality-type rows F vec(Θ) ≈ g of the agreeing rows hold (nearly) for every head, so the lifted heads
(vec Θ_i, 1) lie in the near-null space of diag(w)·[F, −g]: its m smallest right singular vectors give
span{Θ_i} and the (m−1)-dimensional flat aff{Θ_i} in one SVD (engine: ``oracles.fit_flat``); the
singular-value gap estimates m. The rows are every equality of K*'s agreeing rows up to a residual of
``span_tau`` (not only the slabs K* keeps), weighted by the inverse of their log-ratio's error; a row that
holds only at some point between the heads errs by about |⟨Θ_1 − Θ_2, row⟩|, so refits down-weight the rows
along the flat's own directions (docs/method.md, "The span from every agreeing row").

``adaptive_span`` is the phase: ``extract_span`` on K*'s rows, then, while the flat is not pinned, on the rows
of more training examples read block by block under the final Σ̂W with K*'s own agreement rule
(``scan_span_rows``; docs/method.md, "Phase 4 reads more examples"). LP extents of K* along the flat's
directions versus directions normal to it (``oracles.extents``) cross-check the fit when asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from oracles import AffineSubspace, FlatFit, OracleError, RankOneRows, extents, fit_flat, flat_slice

from .._checks import check_data, check_sum_w
from ..errors import PhaseFailed
from ..result import PhaseRecord
from ..settings import ProblemSize, SpanSettings
from ._rank import row_rank
from ._simplex import agreement_blind_dims, simplex_lstsq, token_gram_ok
from .sculpting import EqualityRows, SculptedBody, SpanRule, span_equality_rows

if TYPE_CHECKING:
    from ..model import MultiHeadAttention

__all__ = [
    "SpanEstimate",
    "ScanPool",
    "adaptive_span",
    "extract_span",
    "scan_span_rows",
    "principal_angle_deg",
]

#: the LP extents a fit measured, as (low, high) pairs: ``in_flat`` in the flat's coordinates, ``along`` the
#: flat's directions and ``normal`` random directions normal to the span (both relative to the flat's point)
Widths = dict[str, list[tuple[float, float]]]

#: equality rows F, whole or as the factors of their rows kron(x_a, x_j − x_r)
Rows = np.ndarray | RankOneRows


@dataclass
class SpanEstimate:
    """Estimated geometry of the heads: ``flat`` ≈ aff{Θ_i} (dim m−1, in vec(Θ) coordinates), ``span``
    (d², m) orthonormal basis ≈ span{Θ_i}, ``m_estimate`` from the singular-value gap, the smallest
    ``singular_values`` (ascending), ``gap`` = σ_m/σ_{m+1}, ``radius``: suggested search radius along the
    flat (flat coordinates), ``widths``: LP extents of the body (``Widths``), ``vectors``: the fit's smallest
    right singular vectors of the lifted rows (a refit's ``start``)."""

    flat: AffineSubspace
    span: np.ndarray
    m_estimate: int
    singular_values: np.ndarray
    gap: float
    radius: float
    widths: Widths = field(default_factory=dict)
    vectors: np.ndarray | None = field(default=None, repr=False)


def principal_angle_deg(A: np.ndarray, B: np.ndarray) -> float:
    """Largest principal angle between two subspaces.

    Parameters
    ----------
    A, B : numpy.ndarray, shape (n, r)
        Bases of the subspaces, as columns (orthonormalised here).

    Returns
    -------
    float
        The angle in degrees; 90 when the dimensions differ.
    """
    Qa = np.linalg.qr(A)[0]
    Qb = np.linalg.qr(B)[0]
    s = np.linalg.svd(Qa.T @ Qb, compute_uv=False)
    if Qa.shape[1] != Qb.shape[1]:
        return 90.0
    return float(np.degrees(np.arccos(np.clip(s.min(), 0.0, 1.0))))


# --- one fit -------------------------------------------------------------------------------------------------


def extract_span(
    body: SculptedBody,
    m: int,
    settings: SpanSettings | None = None,
    *,
    extra_rows: EqualityRows | None = None,
    solver: str | None = None,
    rng: np.random.Generator | int | None = None,
    truth: MultiHeadAttention | None = None,
    start: np.ndarray | None = None,
) -> tuple[SpanEstimate, PhaseRecord]:
    """Fit aff{Θ_i} (dim m−1) and span{Θ_i} (dim m) to the body's equality rows.

    The rows are ``body.span_F/span_g/span_weights`` when the body has them (every agreeing row up to
    ``span_tau``, slab mode), else its slabs (F, g, weights), plus ``extra_rows`` when given. ``hull_reweight``
    refits weight row i by w_i/(‖F_i U‖ + ``hull_c``·median), U the flat's directions.

    Parameters
    ----------
    body : SculptedBody
        K* (phase 3's, or phase 2's when it sculpts K* at once).
    m : int
        Number of heads.
    settings : SpanSettings, optional
        ``width_probes`` random directions normal to the span are LP-probed over the whole body next to the
        flat's own directions (LPs over K* cost seconds: off by default); ``in_flat_extent`` measures the
        body's extent inside the flat (a diagnostic no later phase reads); ``radius`` overrides phase 5's
        search radius; ``max_m``, ``hull_reweight``, ``hull_c`` as described there.
    extra_rows : EqualityRows, optional
        Rows from more examples (``scan_span_rows``), fitted with the body's.
    solver : str, optional
        LP backend of the extents (None: the engine's default).
    rng : numpy.random.Generator or int, optional
        Draws the ``width_probes`` directions.
    truth : MultiHeadAttention, optional
        The true layer: the record's ``truth`` gets the span angle and the heads' distance to the flat.
    start : numpy.ndarray, optional
        ``vectors`` of an earlier fit of nearly the same rows (``oracles.fit_flat``'s ``start``).

    Returns
    -------
    SpanEstimate
        The flat, the span, the m estimate and phase 5's search radius.
    PhaseRecord
        "4-span".

    Raises
    ------
    PhaseFailed
        The rows are missing, too few or of too low a rank to pin an (m−1)-dimensional flat.
    ValueError
        m is not a positive integer, or ``extra_rows`` are malformed.
    """
    t0 = time.perf_counter()
    rec = PhaseRecord("4-span")
    if int(m) != m or m < 1:
        raise ValueError(f"m must be a positive integer, got {m}")
    s = settings or SpanSettings()
    gen = np.random.default_rng(rng)
    rows, from_span = _body_rows(body)
    F, g, w, n_extra = _with_extra(rows, extra_rows)
    _check_row_count(F, m)
    try:  # the fit first: its singular values certify full column rank where they can (no rank check then)
        fit: FlatFit | None = _fit(F, g, w, m, s, start)
    except ValueError:  # rows of too low a rank leave no flat: the rank check below says so
        fit = None
    if fit is not None and _full_rank(fit):
        rank = F.shape[1]
        if from_span and not n_extra:
            body.span_rank = rank
    else:
        rank = _checked_rank(body, F, w, m, from_span, n_extra)
    if fit is None:
        fit = _fit(F, g, w, m, s, start)  # full rank, yet no flat: the engine's error stands
    flat = fit.flat
    m_est = fit.dim_estimate + 1
    rec.figures.update(_fit_figures(F, n_extra, from_span, rank, m, fit))
    if m_est != m:
        rec.message = f"the singular-value gap suggests m = {m_est}, not the given m = {m}; using m = {m}"
    widths: Widths = {"in_flat": [], "along": [], "normal": []}
    if s.in_flat_extent and flat.dim > 0:
        _extent_in_flat(body, flat, widths, rec, solver)
    if s.width_probes > 0:
        _probe_widths(body, fit, s.width_probes, widths, rec, gen, solver)
    radius = s.radius if s.radius is not None else _search_radius(flat, widths["along"])
    rec.figures["radius"] = float(radius)
    est = SpanEstimate(
        flat=flat,
        span=fit.span,
        m_estimate=m_est,
        singular_values=fit.singular_values[: min(fit.singular_values.size, m + 3)],
        gap=float(fit.gap),
        radius=float(radius),
        widths=widths,
        vectors=fit.vectors,
    )
    if truth is not None:
        rec.truth.update(_truth_figures(est, body, truth))
    rec.time = time.perf_counter() - t0
    return est, rec


def _body_rows(body: SculptedBody) -> tuple[EqualityRows, bool]:
    """The body's rows for the fit, and whether they are its span rows (else its slab rows)."""
    if body.span_F is not None and body.span_g is not None and body.span_weights is not None and body.span_F.shape[0]:
        F, g, w = body.span_F, body.span_g, body.span_weights
        from_span = True
    else:
        F, g, w = body.F, body.g, body.weights
        from_span = False
    F_ = F if isinstance(F, RankOneRows) else np.asarray(F, dtype=float)
    g_ = np.asarray(g, dtype=float).reshape(-1)
    w_ = np.asarray(w, dtype=float).reshape(-1) if np.size(w) else np.ones(g_.shape[0])
    return EqualityRows(F_, g_, w_), from_span


def _with_extra(rows: EqualityRows, extra: EqualityRows | None) -> tuple[Rows, np.ndarray, np.ndarray, int]:
    """(F, g, w) with the extra rows appended, and how many were appended."""
    F, g, w = rows
    if extra is None or not np.shape(extra[0])[0]:
        return F, g, w, 0
    Fx = extra[0] if isinstance(extra[0], RankOneRows) else np.asarray(extra[0], dtype=float)
    gx, wx = (np.asarray(a, dtype=float) for a in extra[1:])
    if Fx.ndim != 2 or Fx.shape[1] != F.shape[1] or gx.shape != wx.shape or gx.shape[0] != Fx.shape[0]:
        raise ValueError(
            f"extra_rows must be (F (R, {F.shape[1]}), g (R,), w (R,)), got shapes {Fx.shape}, {gx.shape}, {wx.shape}"
        )
    return _stack([F, Fx]), np.concatenate([g, gx]), np.concatenate([w, wx]), int(Fx.shape[0])


def _stack(parts: list[Rows]) -> Rows:
    """The parts' rows one after the other: factored when every part is, else dense."""
    if all(isinstance(p, RankOneRows) for p in parts):
        return RankOneRows.concatenate([p for p in parts if isinstance(p, RankOneRows)])
    return np.vstack([_dense(p) for p in parts])


def _dense(F: Rows) -> np.ndarray:
    """The rows whole."""
    return F.dense() if isinstance(F, RankOneRows) else F


#: a fit certifies that its weighted rows have full column rank when σ_min/σ_max of the lifted rows [F, −g]·w is at
#: least this (σ_min of a column subset is no smaller; the threshold of ``row_rank``'s certificate)
FULL_RANK_RATIO = 1e-5


def _full_rank(fit: FlatFit) -> bool:
    """Whether the fit's singular values certify full column rank of the weighted rows F·w."""
    sv = fit.singular_values
    return bool(sv.size and sv[-1] > 0 and sv[0] >= FULL_RANK_RATIO * sv[-1])


def _check_row_count(F: Rows, m: int) -> None:
    """PhaseFailed when F is empty or has fewer rows than the d² − (m − 1) needed to pin an (m−1)-dimensional flat."""
    n = F.shape[1]
    need = n - (m - 1)
    if F.ndim != 2 or F.shape[0] == 0:
        raise PhaseFailed(
            "4-span", "the sculpted body has no equality-type rows (F is empty): phase 4 needs them to fit the flat"
        )
    if F.shape[0] < need:
        raise PhaseFailed(
            "4-span",
            f"the sculpted body has {F.shape[0]} equality rows, fewer than the {need} "
            f"needed to pin an {m - 1}-dimensional flat in R^{n}: sculpt more examples",
        )


def _checked_rank(body: SculptedBody, F: Rows, w: np.ndarray, m: int, from_span: bool, n_extra: int = 0) -> int:
    """rank of the rows, at least the d² − (m − 1) needed to pin an (m−1)-dimensional flat, else PhaseFailed.

    K*'s slab rows are among the span rows (the same agreeing rows, stricter filters), and row weights do not
    change a rank: when the slab rows have the rank needed, so do the span rows (their rank is computed once per
    body, 0.05 s saved per fit at d = 16). The span rows are among the rows of every later fit (the scanned rows
    are appended to them, ``n_extra``): when they alone have full column rank, so have the union (4 s saved per
    refit at d = 64, where the check costs a d²-column Gram matrix)."""
    n = F.shape[1]
    need = n - (m - 1)
    _check_row_count(F, m)
    rank = -1
    if from_span and body.F.ndim == 2 and body.F.shape[0] >= need:
        rank = int(body.slab_rank())
    if rank < need and from_span and n_extra and body.span_rank == n:
        rank = n
    if rank < need:
        rank = row_rank(_dense(F) * w[:, None], need)
        if from_span and not n_extra:
            body.span_rank = rank
    if rank < need:
        raise PhaseFailed(
            "4-span",
            f"the sculpted body's {F.shape[0]} equality rows have rank {rank}, below the "
            f"{need} needed to pin an {m - 1}-dimensional flat in R^{n}: the agreeing rows "
            "are too few or too alike (sculpt more examples or loosen the agreement test)",
        )
    return rank


def _fit(F: Rows, g: np.ndarray, w: np.ndarray, m: int, s: SpanSettings, start: np.ndarray | None) -> FlatFit:
    """The weighted homogeneous fit, then ``hull_reweight`` refits. A row's log-ratio comes from rows where the
    heads only nearly agree, so its error is about |⟨Θ_1 − Θ_2, row⟩| (it holds at some point between the heads,
    not at all of them); rows nearly normal to the flat's directions U are the trustworthy ones: weight
    w/(‖F_i U‖ + c·median). At (8,4,2)/(16,4,2) the heads' relative distance to the flat is 0.09/0.07 after the
    refits, 0.16/0.11 without (0.06/0.05 from the true directions). Only the few smallest eigenpairs of the
    Gram matrix are computed (0.15 s per fit at d = 32, 0.26 s for all); each refit's eigensolver starts from the
    previous fit's vectors (at d = 64 a third of a cold start's solves)."""
    max_dim = max(m - 1, (s.max_m or m + 3) - 1)
    few = max_dim + 3
    eig_from = int(s.iterative_eigen_from)

    def one(weights: np.ndarray, guess: np.ndarray | None) -> FlatFit:
        return fit_flat(
            F, g, dim=m - 1, weights=weights, max_dim=max_dim, smallest=few, iterative_from=eig_from, start=guess
        )

    fit = one(w, start)
    for _ in range(s.reweights(int(np.sqrt(F.shape[1]))) if m > 1 else 0):
        a = np.linalg.norm(F @ fit.flat.basis, axis=1)
        fit = one(w / (a + s.hull_c * float(np.median(a)) + 1e-300), fit.vectors)
    return fit


def _fit_figures(F: Rows, n_extra: int, from_span: bool, rank: int, m: int, fit: FlatFit) -> dict[str, object]:
    """The record's figures on the rows fitted and the fit (the m + 3 smallest singular values)."""
    return {
        "equality_rows": int(F.shape[0]),
        "equality_rows_scanned": int(n_extra),
        "equality_rows_from": "span rows (every agreeing row up to span_tau)" if from_span else "K*'s slabs",
        "equality_rank": rank,
        "m_given": int(m),
        "m_estimate": int(fit.dim_estimate + 1),
        "singular_values": [float(v) for v in fit.singular_values[: min(fit.singular_values.size, m + 3)]],
        "sv_gap": float(fit.gap),
        "flat_residual": float(fit.residual),
        "flat_point_norm": float(np.linalg.norm(fit.flat.point)),
    }


def _extent_in_flat(
    body: SculptedBody, flat: AffineSubspace, widths: Widths, rec: PhaseRecord, solver: str | None
) -> None:
    """The body's extent inside the estimated flat: LPs over K* ∩ flat in the m−1 flat coordinates
    (``oracles.flat_slice``; the dual simplex: a few ms per LP with m − 1 variables over thousands of rows,
    where the interior point takes 0.13 s per LP at (8,4,4)). Empty when the flat misses K*."""
    local = flat_slice(body.polytope, flat)
    if local is None:
        rec.figures["flat_misses_body"] = True
    else:
        try:
            lo, hi = extents(local, np.eye(flat.dim), solver=solver, algorithm="simplex")
            widths["in_flat"].extend((float(a), float(b)) for a, b in zip(lo, hi))
        except (OracleError, ValueError) as exc:
            rec.figures["in_flat_error"] = f"{type(exc).__name__}: {exc}"
    rec.figures["extent_in_flat"] = [list(e) for e in widths["in_flat"]]
    if widths["in_flat"] and not all(np.isfinite(e).all() for e in widths["in_flat"]):
        rec.figures["flat_misses_body"] = True


def _probe_widths(
    body: SculptedBody,
    fit: FlatFit,
    probes: int,
    widths: Widths,
    rec: PhaseRecord,
    rng: np.random.Generator,
    solver: str | None,
) -> None:
    """Full-body LP extents along the flat's directions and along ``probes`` random unit directions normal to
    the span (the thin-body check; 2 LPs per direction over all of K*: 3.5–5.8 s for 4 LPs at 5.6k rows,
    d = 8), relative to the flat's point."""
    flat = fit.flat
    n = flat.ambient_dim
    P = np.eye(n) - fit.span @ fit.span.T
    dirs = [flat.basis[:, j] for j in range(flat.dim)]
    for _ in range(int(probes)):
        u = P @ rng.standard_normal(n)
        dirs.append(u / np.linalg.norm(u))
    lo, hi = extents(body.polytope, np.vstack(dirs), solver=solver)
    for j, u in enumerate(dirs):
        c = float(u @ flat.point)
        widths["along" if j < flat.dim else "normal"].append((float(lo[j]) - c, float(hi[j]) - c))
    rec.figures["width_along"] = [h - lo_ for lo_, h in widths["along"]]
    rec.figures["width_normal"] = [h - lo_ for lo_, h in widths["normal"]]


def _search_radius(flat: AffineSubspace, along: list[tuple[float, float]]) -> float:
    """Phase 5's search radius: the heads' offsets from the flat's min-norm point are at most their norms, so
    2·max(‖p‖, 1); capped at 1.25 × the full-body extent along the flat when ``width_probes`` measure it. The
    in-flat extent is not used: the true heads lie slightly outside K* and the flat is slightly off, so the
    slice K* ∩ flat is empty in 3 of 7 runs measured and narrower than the heads' spread in the rest."""
    radius = 2.0 * max(float(np.linalg.norm(flat.point)), 1.0)
    ext = [max(abs(lo), abs(hi)) for lo, hi in along if np.isfinite(lo) and np.isfinite(hi)]
    if ext and len(ext) == flat.dim:
        radius = float(min(radius, max(1.25 * max(ext), 0.5)))
    return radius


def _truth_figures(est: SpanEstimate, body: SculptedBody, truth: MultiHeadAttention) -> dict[str, object]:
    """The span's angle to span{Θ_i}, the heads' distance to the flat, and whether they lie in the body."""
    T = np.asarray(truth.thetas, dtype=float).reshape(len(truth.thetas), -1)
    dist = np.atleast_1d(est.flat.distance(T))
    out: dict[str, object] = {
        "span_angle_deg": principal_angle_deg(est.span, T.T),
        "hull_distance": [float(x) for x in dist],
        "hull_distance_rel": [float(x) for x in dist / np.linalg.norm(T, axis=1)],
    }
    poly = body.polytope
    viol = []
    for t in T:
        a, e = poly.violations(t)
        viol.append(float(max(a.max(initial=-np.inf), e.max(initial=-np.inf))))
    out["body_max_violation"] = max(viol)
    out["heads_in_body"] = bool(max(viol) <= 1e-9)
    return out


# --- more rows from more examples ----------------------------------------------------------------------------


def scan_span_rows(
    X: np.ndarray,
    Y: np.ndarray,
    W_sum: np.ndarray,
    rule: SpanRule,
    settings: SpanSettings | None = None,
    *,
    initial: EqualityRows | None = None,
) -> EqualityRows:
    """Phase 4's equality rows from examples read ``settings.scan_block`` at a time.

    The agreement test of ``rule`` (q̂ >= −q_tol, independent tokens, residual <= rel_max) under ``W_sum``, then
    every equality of the rows that pass (``span_equality_rows``). Past ``settings.scan_max_entries`` (rows × d²)
    only the highest-weight rows are kept, so memory does not grow with N: one block, up to twice the kept rows
    between poolings, and the pooled copy (rows as factors, 2d floats each).

    Parameters
    ----------
    X, Y : numpy.ndarray, shape (N, k, d)
        The examples to read.
    W_sum : numpy.ndarray, shape (d, d)
        The final ΣŴ.
    rule : SpanRule
        K*'s own agreement rule (``SculptedBody.span_rule``).
    settings : SpanSettings, optional
        ``scan_block`` and ``scan_max_entries``.
    initial : EqualityRows, optional
        Rows from an earlier scan: they join the reservoir, so a growing scan reads each example once.

    Returns
    -------
    EqualityRows
        The kept rows (F, g, w).

    Raises
    ------
    ValueError
        Malformed data, or ``scan_max_entries`` below one row (d²).
    """
    s = settings or SpanSettings()
    X, Y = check_data(X, Y)
    N, k, d = X.shape
    W_sum = check_sum_w(W_sum, d)
    if not (np.isfinite(s.scan_max_entries) and s.scan_max_entries >= d * d):
        raise ValueError(
            f"scan_max_entries must be finite and at least d² = {d * d} (one row), got {s.scan_max_entries!r}"
        )
    cap = max(1, int(s.scan_max_entries // (d * d)))
    parts: list[EqualityRows] = []
    if initial is not None and np.shape(initial[0])[0]:
        F0 = initial[0] if isinstance(initial[0], RankOneRows) else np.asarray(initial[0], float)
        parts.append(EqualityRows(F0, np.asarray(initial[1], float), np.asarray(initial[2], float)))
    held = sum(p.w.size for p in parts)
    block = int(s.scan_block)
    for start in range(0, N, block):
        Xb, Yb = X[start : start + block], Y[start : start + block]
        fit = simplex_lstsq(Xb, Yb, W_sum)
        q, rel = fit.q.reshape(-1, k), fit.rel.reshape(-1)
        ok = ((rel <= rule.rel_max) & (q.min(1) >= -rule.q_tol)).reshape(-1, k)
        ex = np.flatnonzero(ok.any(1))  # the token-independence test only where some row passed
        ok[ex] &= token_gram_ok(Xb[ex])[:, None]
        parts.append(span_equality_rows(Xb, q, rel, ok.reshape(-1), rule.q_min, rule.rel_floor))
        held += parts[-1].w.size
        if held > 2 * cap:
            parts = [_pooled(parts, cap, d * d)]
            held = parts[0].w.size
    return _pooled(parts, cap, d * d)


def _pooled(parts: list[EqualityRows], limit: int, p: int) -> EqualityRows:
    """The parts stacked, keeping only the ``limit`` highest-weight rows (in their order) beyond that many (a
    single part within the limit is returned as it is)."""
    if len(parts) == 1 and parts[0].w.size <= limit:
        return parts[0]
    if not parts:
        d = int(round(np.sqrt(p)))
        return EqualityRows(RankOneRows(np.empty((0, d)), np.empty((0, d))), np.empty(0), np.empty(0))
    w = np.concatenate([part.w for part in parts])
    keep = np.arange(w.size) if w.size <= limit else np.sort(np.argpartition(-w, limit - 1)[:limit])
    bounds = np.cumsum([0] + [part.w.size for part in parts])
    cut = np.searchsorted(keep, bounds)
    F = _stack(
        [
            part.F[keep[a:b] - lo] if isinstance(part.F, np.ndarray) else part.F.take(keep[a:b] - lo)
            for part, lo, a, b in zip(parts, bounds[:-1], cut[:-1], cut[1:])
        ]
    )
    return EqualityRows(F, np.concatenate([part.g for part in parts])[keep], w[keep])


# --- the phase: fit, then read more examples while the flat is not pinned ------------------------------------


@dataclass(frozen=True)
class ScanPool:
    """The training examples phase 4 may read beyond phases 1–3's subset: ``X[order]``, ``Y[order]`` in that
    order (``order``: the examples outside the subset, shuffled); ``n_read`` examples (the subset) are read
    already."""

    X: np.ndarray
    Y: np.ndarray
    order: np.ndarray
    n_read: int


@dataclass
class _Growth:
    """One growth of the scan (a figure of the record's ``scan`` list)."""

    examples: int
    rows_scanned: int
    why: str
    sv_gap: float
    m_estimate: int
    span_moved_deg: float


Fit = Callable[[EqualityRows | None, np.ndarray | None], tuple[SpanEstimate, PhaseRecord]]


def adaptive_span(
    body: SculptedBody,
    m: int,
    settings: SpanSettings | None = None,
    *,
    pool: ScanPool,
    sum_w: np.ndarray | None,
    solver: str | None = None,
    rng: np.random.Generator | int | None = None,
    truth: MultiHeadAttention | None = None,
) -> tuple[SpanEstimate, PhaseRecord]:
    """Phase 4: ``extract_span`` on K*'s rows, then on rows from more examples while the flat is not pinned.

    While σ_m/σ_{m+1} is above ``scan_gap``, the scan reads ``scan_growth`` times the examples read so far (up
    to ``scan_examples`` in all) from ``pool`` with K*'s agreement rule under ``sum_w`` and refits, until the
    span settles (it moved less than ``scan_settle_deg`` in the last growth: with ×4 growth the error is then
    about half that) or, from the second growth on, the gap stops falling (less than ``scan_min_gain`` per
    doubling of the examples: a bias more examples do not remove). The record says why the scan stopped and
    whether the agreement test is blind to part of the heads' disagreements (m(k−1) > d). With ``scan_first``
    (auto from d² >= ``iterative_eigen_from``) the first growth is read before the first fit.

    Parameters
    ----------
    body : SculptedBody
        K*.
    m : int
        Number of heads.
    settings : SpanSettings, optional
        Phase 4's settings (``learn`` passes ``span``, resolved).
    pool : ScanPool
        The examples the scan may read.
    sum_w : numpy.ndarray or None
        The final ΣŴ (None: no scan).
    solver, rng, truth
        As in ``extract_span``.

    Returns
    -------
    SpanEstimate
        The last fit.
    PhaseRecord
        "4-span": the last fit's record with ``examples`` read, ``scan`` (one entry per growth) and
        ``scan_stopped``.

    Raises
    ------
    PhaseFailed
        From ``extract_span``.
    """
    t0 = time.perf_counter()
    N, k, d = pool.X.shape
    s = (settings or SpanSettings()).resolve(ProblemSize(d, k, m, N))

    def fit(extra: EqualityRows | None, start: np.ndarray | None) -> tuple[SpanEstimate, PhaseRecord]:
        return extract_span(body, m, s, extra_rows=extra, solver=solver, rng=rng, truth=truth, start=start)

    est, rec, growth, read, stop = _scan(fit, body.span_rule, pool, sum_w, m, s)
    rec.figures["examples"] = int(pool.n_read + read)
    if growth:
        rec.figures["scan_stopped"] = stop or (
            "read every training example" if read >= pool.order.size else f"read scan_examples = {s.scan_examples}"
        )
    blind = agreement_blind_dims(m, k, d)
    rec.figures["agreement_blind_dims"] = blind
    if blind:
        note = (
            f"m(k−1) = {m * (k - 1)} > d = {d}: a {blind}-dimensional family of disagreements among the heads "
            "leaves an output row fitted exactly by one shared pattern, so the agreement test cannot certify "
            "agreement and the span is loose; the polish does the rest (docs/method.md#agreement-blind)"
        )
        rec.message = f"{rec.message}; {note}" if rec.message else note
    if growth:
        rec.figures["scan"] = [asdict(g) for g in growth]
        rec.time = time.perf_counter() - t0
    return est, rec


def _scan(
    fit: Fit, rule: SpanRule | None, pool: ScanPool, sum_w: np.ndarray | None, m: int, s: SpanSettings
) -> tuple[SpanEstimate, PhaseRecord, list[_Growth], int, str]:
    """The fit, refitted after each growth of the examples read (with ``scan_first``, the first growth is read
    before the first fit). Returns the last fit and record, the growths, the examples read beyond the subset,
    and why the scan stopped ("" when the budget or the pool ended it)."""
    budget = min(pool.order.size, max(0, int(s.scan_examples or 0) - pool.n_read))
    can_scan = m > 1 and rule is not None and sum_w is not None
    growth: list[_Growth] = []
    read = 0
    extra: EqualityRows | None = None
    stop = ""
    if can_scan and s.scan_first and budget > 0:
        read, extra = _grow(pool, read, budget, rule, sum_w, s, extra)
    est, rec = fit(extra, None)
    if read:
        why = "scan_first: read before the first fit (K*'s own rows do not pin the flat at this d)"
        growth.append(
            _Growth(pool.n_read + read, int(len(extra[0]) if extra else 0), why, est.gap, est.m_estimate, float("nan"))
        )
    while can_scan and read < budget and not stop:
        stop = _pinned(est, s)
        if stop:
            break
        was = pool.n_read + read
        read, extra = _grow(pool, read, budget, rule, sum_w, s, extra)
        gap_was, span_was = float(est.gap), est.span
        est, rec = fit(extra, est.vectors)
        growth.append(
            _Growth(
                examples=int(pool.n_read + read),
                rows_scanned=int(len(extra[0])),
                why=f"σ_m/σ_(m+1) = {gap_was:.3g} > scan_gap {s.scan_gap:.3g}",
                sv_gap=float(est.gap),
                m_estimate=int(est.m_estimate),
                span_moved_deg=principal_angle_deg(span_was, est.span),
            )
        )
        if read >= budget:  # the budget ended the scan (the record says so), not a stop rule
            break
        stop = _settled(growth, gap_was, float(est.gap), (pool.n_read + read) / was, s)
    return est, rec, growth, read, stop


def _grow(
    pool: ScanPool,
    read: int,
    budget: int,
    rule: SpanRule | None,
    sum_w: np.ndarray | None,
    s: SpanSettings,
    extra: EqualityRows | None,
) -> tuple[int, EqualityRows]:
    """One growth: read ``scan_growth`` times the examples read so far (within the budget); the earlier rows
    join the reservoir. Returns the examples read beyond the subset and the rows."""
    assert rule is not None and sum_w is not None
    was = pool.n_read + read
    before, read = read, min(budget, max(was * int(s.scan_growth) - pool.n_read, read + 1))
    idx = pool.order[before:read]  # only the new examples: the earlier scans' rows join the reservoir
    # gathered one scan block at a time (the reservoir carries over, so the rows are those of one scan of them
    # all): the examples are never copied out whole
    step = int(s.scan_block)
    rows = extra
    for lo in range(0, max(idx.size, 1), step):
        rows = scan_span_rows(pool.X[idx[lo : lo + step]], pool.Y[idx[lo : lo + step]], sum_w, rule, s, initial=rows)
    assert rows is not None
    return read, rows


def _pinned(est: SpanEstimate, s: SpanSettings) -> str:
    """Why the flat needs no more examples ("" while σ_m/σ_{m+1} is above scan_gap)."""
    if not np.isfinite(est.gap):
        return "σ_m/σ_(m+1) is undefined (σ_(m+1) = 0): the fit has no scale to judge the flat by"
    if est.gap <= s.scan_gap:
        return f"σ_m/σ_(m+1) = {est.gap:.3g} <= scan_gap {s.scan_gap:.3g}: the flat is pinned"
    return ""


def _settled(growth: list[_Growth], gap_was: float, gap: float, ratio: float, s: SpanSettings) -> str:
    """Why more examples would not help ("" when they may): the span moved less than scan_settle_deg, or, from
    the second growth on (the gap of the phases' own subset is noisy), the gap fell by less than scan_min_gain
    per doubling of the examples read (``ratio``: examples read now / before the growth)."""
    moved = growth[-1].span_moved_deg
    if s.scan_settle_deg > 0 and moved < s.scan_settle_deg:
        return f"the span moved {moved:.2g}° < scan_settle_deg {s.scan_settle_deg:g}°"
    if s.scan_min_gain > 0 and len(growth) > 1 and (gap_was - gap) / gap_was < s.scan_min_gain * np.log2(ratio):
        return (
            f"σ_m/σ_(m+1) fell {gap_was:.3g} → {gap:.3g}, less than scan_min_gain "
            f"{s.scan_min_gain:g} of it per doubling of the examples: a bias more examples do not remove"
        )
    return ""
