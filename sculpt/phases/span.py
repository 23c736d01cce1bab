"""Phase 4: the span and affine hull of the Θ_i from the sculpted body K*.

The equality-type rows F vec(Θ) ≈ g of the agreeing rows hold (nearly) for every head, so the lifted heads
(vec Θ_i, 1) lie in the near-null space of diag(w)·[F, −g]: its m smallest right singular vectors give
span{Θ_i} and the (m−1)-dimensional flat aff{Θ_i} in one SVD (engine: ``oracles.flats.fit_flat``); the
singular-value gap estimates m. The rows are every equality of K*'s agreeing rows up to a residual of
``span_tau`` (not only the slabs K* keeps), weighted by the inverse of their log-ratio's error; a row that
holds only at some point between the heads errs by about |⟨Θ_1 − Θ_2, row⟩|, so refits down-weight the rows
along the flat's own directions (docs/method.md, "The span from every agreeing row"). LP widths of K* along
the flat's directions versus directions normal to it cross-check the fit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oracles.affine_subspace import AffineSubspace
from oracles.errors import OracleError
from oracles.flats import fit_flat
from oracles.solvers import LPModel

from ..errors import PhaseFailed
from ..result import PhaseRecord
from ._rank import row_rank


@dataclass
class SpanEstimate:
    """Estimated geometry of the heads: ``flat`` ≈ aff{Θ_i} (dim m−1, in vec(Θ) coordinates), ``span``
    (d², m) orthonormal basis ≈ span{Θ_i}, ``m_estimate`` from the singular-value gap, the smallest
    ``singular_values`` (ascending), ``gap`` = σ_m/σ_{m+1}, ``radius``: suggested search radius along the
    flat (flat coordinates), ``widths``: LP widths of the body along flat / normal directions."""

    flat: AffineSubspace
    span: np.ndarray
    m_estimate: int
    singular_values: np.ndarray
    gap: float
    radius: float
    widths: dict[str, Any] = field(default_factory=dict)


def principal_angle_deg(A: np.ndarray, B: np.ndarray) -> float:
    """Largest principal angle (degrees) between the column spans of A and B (orthonormalised here)."""
    Qa = np.linalg.qr(A)[0]
    Qb = np.linalg.qr(B)[0]
    s = np.linalg.svd(Qa.T @ Qb, compute_uv=False)
    if Qa.shape[1] != Qb.shape[1]:
        return 90.0
    return float(np.degrees(np.arccos(np.clip(s.min(), 0.0, 1.0))))


def _extent(model: Any, u: np.ndarray) -> tuple[float, float]:
    """(min, max) of ⟨u, x⟩ over the body from a kept engine LP model (±inf when unbounded or failed)."""
    try:
        hi = model.maximize(u)[0]
    except OracleError:
        hi = np.inf
    try:
        lo = -model.maximize(-u)[0]
    except OracleError:
        lo = -np.inf
    return float(lo), float(hi)


def extract_span(
    body: Any,
    m: int,
    *,
    solver: str | None = None,
    width_probes: int = 0,
    radius: float | None = None,
    max_m: int | None = None,
    rng: np.random.Generator | None = None,
    truth: Any = None,
    hull_reweight: int = 2,
    hull_c: float = 1.0,
    in_flat_extent: bool = False,
    extra_rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[SpanEstimate, PhaseRecord]:
    """Fit aff{Θ_i} (dim m−1) and span{Θ_i} (dim m) to the body's equality rows: ``body.span_F/span_g/
    span_weights`` when the body has them (every agreeing row up to ``span_tau``, slab mode), else (F, g,
    weights), plus ``extra_rows`` = (F, g, w) when given (rows from more examples, ``scan_span_rows``).
    ``hull_reweight`` refits weight row i by w_i/(‖F_i U‖ + ``hull_c``·median), U the flat's directions.

    ``in_flat_extent`` measures the body's extent inside the flat (LPs in flat coordinates; a diagnostic no
    later phase reads, 25 ms of a 0.5 s run at (16,4,2), so off by default); ``width_probes``
    random directions normal to the span are width-probed over the whole body next to the flat's own
    directions (default 0: those LPs cost seconds); ``radius`` overrides the search radius for phase 5.
    """
    t0 = time.perf_counter()
    rec = PhaseRecord("4-span")
    if int(m) != m or m < 1:
        raise ValueError(f"m must be a positive integer, got {m}")
    rng = np.random.default_rng(rng)
    use_span_rows = getattr(body, "span_F", None) is not None and np.shape(body.span_F)[0] > 0
    F = np.asarray(body.span_F if use_span_rows else body.F, dtype=float)
    g = np.asarray(body.span_g if use_span_rows else body.g, dtype=float).reshape(-1)
    n = F.shape[1]
    wsrc = body.span_weights if use_span_rows else getattr(body, "weights", None)
    w = np.asarray(wsrc, dtype=float).reshape(-1) if wsrc is not None and np.size(wsrc) else np.ones(g.shape[0])
    n_extra = 0
    if extra_rows is not None and np.shape(extra_rows[0])[0]:
        Fx, gx, wx = (np.asarray(a, dtype=float) for a in extra_rows)
        if Fx.ndim != 2 or Fx.shape[1] != F.shape[1] or gx.shape != wx.shape or gx.shape[0] != Fx.shape[0]:
            raise ValueError(
                f"extra_rows must be (F (R, {F.shape[1]}), g (R,), w (R,)), got shapes "
                f"{Fx.shape}, {gx.shape}, {wx.shape}"
            )
        F, g, w, n_extra = np.vstack([F, Fx]), np.concatenate([g, gx]), np.concatenate([w, wx]), Fx.shape[0]
    if F.ndim != 2 or F.shape[0] == 0:
        raise PhaseFailed(
            "4-span", "the sculpted body has no equality-type rows (F is empty): phase 4 needs them to fit the flat"
        )
    if F.shape[0] < n - (m - 1):
        raise PhaseFailed(
            "4-span",
            f"the sculpted body has {F.shape[0]} equality rows, fewer than the {n - (m - 1)} "
            f"needed to pin an {m - 1}-dimensional flat in R^{n}: sculpt more examples",
        )
    rank = -1
    F_k = np.asarray(getattr(body, "F", np.empty((0, n))), dtype=float)
    if use_span_rows and F_k.ndim == 2 and F_k.shape[0] >= n - (m - 1):
        # K*'s slab rows are among the span rows (the same agreeing rows, stricter filters), and row weights do
        # not change a rank: when they already have the rank needed, so do the span rows (0.05 s saved at d = 16)
        rank = int(body.slab_rank()) if hasattr(body, "slab_rank") else row_rank(F_k, n - (m - 1))
    if rank < n - (m - 1):
        rank = row_rank(F * w[:, None], n - (m - 1))
    if rank < n - (m - 1):
        raise PhaseFailed(
            "4-span",
            f"the sculpted body's {F.shape[0]} equality rows have rank {rank}, below the "
            f"{n - (m - 1)} needed to pin an {m - 1}-dimensional flat in R^{n}: the agreeing rows "
            "are too few or too alike (sculpt more examples or loosen the agreement test)",
        )
    max_dim = max(m - 1, (max_m or m + 3) - 1)
    # only the few smallest eigenpairs of the Gram matrix are needed (0.26 → 0.15 s per fit at d = 32)
    few = max_dim + 3
    fit = fit_flat(F, g, dim=m - 1, weights=w, max_dim=max_dim, smallest=few)
    # hull reweighting: a row's log-ratio comes from rows where the heads only nearly agree, so its error is
    # about |⟨Θ_1 − Θ_2, row⟩| (it holds at some point between the heads, not at all of them); rows nearly
    # normal to the flat's directions U are the trustworthy ones: weight w/(‖F_i U‖ + c·median). Measured at
    # (8,4,2)/(16,4,2): head distance to the flat 0.16/0.11 → 0.09/0.07 relative (true directions: 0.06/0.05)
    for _ in range(int(hull_reweight) if m > 1 else 0):
        a = np.linalg.norm(F @ fit.flat.basis, axis=1)
        fit = fit_flat(
            F, g, dim=m - 1, weights=w / (a + hull_c * float(np.median(a)) + 1e-300), max_dim=max_dim, smallest=few
        )
    flat = fit.flat
    m_est = fit.dim_estimate + 1
    nsv = min(fit.singular_values.size, m + 3)
    rec.figures.update(
        {
            "equality_rows": int(F.shape[0]),
            "equality_rows_scanned": int(n_extra),
            "equality_rows_from": "span rows (every agreeing row up to span_tau)" if use_span_rows else "K*'s slabs",
            "equality_rank": rank,
            "m_given": int(m),
            "m_estimate": int(m_est),
            "singular_values": [float(s) for s in fit.singular_values[:nsv]],
            "sv_gap": float(fit.gap),
            "flat_residual": float(fit.residual),
            "flat_point_norm": float(np.linalg.norm(flat.point)),
        }
    )
    if m_est != m:
        rec.message = f"the singular-value gap suggests m = {m_est}, not the given m = {m}; using m = {m}"

    # cross-checks through the engine. (i) ``in_flat_extent``: the body's extent inside the estimated flat, LPs
    # over K* ∩ flat in the m−1 flat coordinates (Polytope(A U, b − A p)); empty when the flat misses K*.
    # (ii) Optional full-body LP widths along the flat's directions versus random directions normal to the span (``width_probes`` > 0): the thin-body check;
    # 2 LPs per direction over all of K* (3.5–5.8 s for 4 LPs at 5.6k rows, d = 8), so off by default.
    widths: dict[str, Any] = {"in_flat": [], "along": [], "normal": []}
    # the polytope only for the LPs and the truth figures (a SculptedBody builds it on first read)
    poly = getattr(body, "polytope", None) if (in_flat_extent or width_probes > 0 or truth is not None) else None
    if in_flat_extent and poly is not None and flat.dim > 0:
        A_loc = poly.A @ flat.basis
        b_loc = poly.b - poly.A @ flat.point
        keep = np.linalg.norm(A_loc, axis=1) > 1e-12
        infeasible = bool(np.any(b_loc[~keep] < -1e-9))
        if infeasible:
            rec.figures["flat_misses_body"] = True
        else:
            try:
                # m − 1 variables over thousands of rows: the dual simplex (a few ms per LP) instead of the
                # interior-point default (0.13 s per LP at (8,4,4), 0.76 s of phase 4)
                local = LPModel(A_loc[keep], b_loc[keep], solver=solver, algorithm="simplex")
                for j in range(flat.dim):
                    widths["in_flat"].append(_extent(local, np.eye(flat.dim)[j]))
            except (OracleError, ValueError) as exc:
                rec.figures["in_flat_error"] = f"{type(exc).__name__}: {exc}"
        rec.figures["extent_in_flat"] = [list(e) for e in widths["in_flat"]]
        if widths["in_flat"] and not all(np.isfinite(e).all() for e in widths["in_flat"]):
            rec.figures["flat_misses_body"] = True
    if poly is not None and width_probes > 0:
        model = LPModel(poly, solver=solver)
        for j in range(flat.dim):
            u = flat.basis[:, j]
            lo, hi = _extent(model, u)
            c = float(u @ flat.point)
            widths["along"].append((lo - c, hi - c))
        P = np.eye(n) - fit.span @ fit.span.T
        for _ in range(int(width_probes)):
            u = P @ rng.standard_normal(n)
            u /= np.linalg.norm(u)
            lo, hi = _extent(model, u)
            widths["normal"].append((lo - float(u @ flat.point), hi - float(u @ flat.point)))
        rec.figures["width_along"] = [hi - lo for lo, hi in widths["along"]]
        rec.figures["width_normal"] = [hi - lo for lo, hi in widths["normal"]]
    # search radius for phase 5: the heads' offsets from the flat's min-norm point are at most their norms,
    # so 2·max(‖p‖, 1); capped at 1.25 × the full-body extent along the flat when that was measured. The
    # in-flat extent is NOT used: the true heads lie slightly outside K* and the flat is slightly off, so
    # the slice K* ∩ flat was empty in 3 of 7 measured runs and narrower than the heads' spread in the rest.
    if radius is None:
        radius = 2.0 * max(float(np.linalg.norm(flat.point)), 1.0)
        ext = [max(abs(lo), abs(hi)) for lo, hi in widths["along"] if np.isfinite(lo) and np.isfinite(hi)]
        if ext and len(ext) == flat.dim:
            radius = float(min(radius, max(1.25 * max(ext), 0.5)))
    rec.figures["radius"] = float(radius)

    est = SpanEstimate(
        flat=flat,
        span=fit.span,
        m_estimate=m_est,
        singular_values=fit.singular_values[:nsv],
        gap=float(fit.gap),
        radius=float(radius),
        widths=widths,
    )
    if truth is not None:
        T = np.asarray(truth.thetas, dtype=float).reshape(len(truth.thetas), -1)
        rec.truth["span_angle_deg"] = principal_angle_deg(est.span, T.T)
        dist = flat.distance(T)
        rec.truth["hull_distance"] = [float(x) for x in np.atleast_1d(dist)]
        rec.truth["hull_distance_rel"] = [float(x) for x in np.atleast_1d(dist) / np.linalg.norm(T, axis=1)]
        if poly is not None:
            viol = []
            for t in T:
                a, e = poly.violations(t)
                viol.append(float(max(a.max(initial=-np.inf), e.max(initial=-np.inf))))
            rec.truth["body_max_violation"] = max(viol)
            rec.truth["heads_in_body"] = bool(max(viol) <= 1e-9)
    rec.time = time.perf_counter() - t0
    return est, rec
