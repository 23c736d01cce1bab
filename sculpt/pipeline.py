"""The sculpting route as a pipeline: a list of phases over one state object.

Each phase is ``Phase(name, run)`` where ``run(state) -> PhaseRecord`` reads what earlier phases left in the
``LearnState``, stores its own output there and returns its record. ``run_pipeline`` runs them in order,
records each, and stops at the first phase that cannot go on: ``sculpt.errors.PhaseFailed`` (raised by the
phase, or a record whose status is "failed"), an engine failure (``oracles.OracleError``) or a numerical
failure (``numpy.linalg.LinAlgError``, ``FloatingPointError``). Any other exception is a bug and propagates.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oracles.errors import OracleError

from .errors import PhaseFailed
from .model import MultiHeadAttention
from .result import PhaseRecord
from .settings import Settings

__all__ = ["LearnState", "Phase", "SCULPT_PHASES", "run_pipeline", "PHASE_FAILURES"]

#: what a phase may raise to say it cannot go on (anything else propagates)
PHASE_FAILURES: tuple[type[BaseException], ...] = (PhaseFailed, OracleError, np.linalg.LinAlgError, FloatingPointError)


@dataclass
class LearnState:
    """What the phases share: the data splits, the resolved settings, and each phase's output."""

    X_train: np.ndarray
    Y_train: np.ndarray
    X_val: np.ndarray
    Y_val: np.ndarray
    m: int
    settings: Settings
    rng: np.random.Generator
    solver: str | None = None
    truth: Any = None
    note: Callable[[str], None] | None = None
    # phases 1–3 use a subset of the training split
    X_body: np.ndarray | None = None
    Y_body: np.ndarray | None = None
    scan_order: np.ndarray | None = None  # training examples outside X_body, in a random order: phase 4 reads these
    # outputs, filled in phase order
    sum_w: np.ndarray | None = None
    body: Any = None
    span: Any = None
    candidates: Any = None
    model: MultiHeadAttention | None = None
    model_from: str = ""
    converged: bool = False
    validation_error: float | None = None
    iterations: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    # "body" (phases 2–5 on the sculpted body) or "argmax" (peaked heads, sculpt.phases.argmax); the argmax
    # route computes phases 3 and 5 with phase 2 and leaves their records here
    # phase 1 found every agreeing row fitted exactly by one pattern (one head): phase 2 builds K* directly
    exact_agreement: bool = False
    route: str = "body"
    pending: dict[str, PhaseRecord] = field(default_factory=dict)

    @property
    def d(self) -> int:
        return int(self.X_train.shape[2])


@dataclass(frozen=True)
class Phase:
    """One step of a route: ``name`` (as in its PhaseRecord) and ``run(state) -> PhaseRecord``."""

    name: str
    run: Callable[[LearnState], PhaseRecord]


def _body_subset(state: LearnState) -> tuple[np.ndarray, np.ndarray]:
    if state.X_body is None or state.Y_body is None:
        n = min(int(state.settings.sculpt_examples or state.X_train.shape[0]), state.X_train.shape[0])
        perm = state.rng.permutation(state.X_train.shape[0])
        sub = np.sort(perm[:n])
        state.X_body, state.Y_body, state.scan_order = state.X_train[sub], state.Y_train[sub], perm[n:]
        state.info["sculpt_examples"] = int(n)
    return state.X_body, state.Y_body


def _sum_w(state: LearnState) -> PhaseRecord:
    from .phases.sum_w import estimate_sum_w

    X, Y = _body_subset(state)
    state.sum_w, rec = estimate_sum_w(X, Y, truth=state.truth, **state.settings.sum_w.kwargs())
    state.exact_agreement = bool(rec.figures.get("exact_agreement", False))
    return rec


def _slab_opts(state: LearnState, d: int) -> dict[str, Any]:
    """K*'s options: ``refine.slabs``, and phase 4's need of d² − (m − 1) equality rows (K* stops before its
    LPs when it has fewer)."""
    return {**state.settings.refine.slabs.kwargs(), "need_equalities": d**2 - (state.m - 1)}


def _argmax_route(state: LearnState) -> PhaseRecord | None:
    """Peaked heads: when phase 1's Σ̂W fits many rows by one token, phases 2–5 are the argmax route
    (``sculpt.phases.argmax``); returns its phase-2 record, or None when the route does not apply."""
    from .phases.argmax import argmax_heads, argmax_route_applies, onehot_fraction, robust_sum_w
    from .phases.heads import HeadCandidates
    from .phases.sum_w import crude_sum_w

    a = state.settings.argmax
    X, Y = _body_subset(state)
    if not a.enabled or state.sum_w is None:
        return None
    frac = onehot_fraction(X, Y, state.sum_w, a.onehot_tol)
    state.info["onehot_fraction"] = frac
    if not argmax_route_applies(frac, state.m, X.shape[1], X.shape[2], a.detect_fraction):
        return None
    # phase 1's trimmed rounds can stall (1e-4–0.4 off on peaked data): the exact one-hot rows decide
    t0 = time.perf_counter()
    w_sum, rfig = robust_sum_w(X, Y, [state.sum_w, crude_sum_w(X, Y)], rng=state.rng)
    frac = onehot_fraction(X, Y, w_sum, a.onehot_tol)
    state.info["onehot_fraction"] = frac
    if not argmax_route_applies(frac, state.m, X.shape[1], X.shape[2], a.min_fraction):
        return None
    kw = a.kwargs()
    for name in ("enabled", "min_fraction", "detect_fraction"):
        kw.pop(name)
    try:
        thetas, ws, recs = argmax_heads(X, Y, w_sum, state.m, rng=state.rng, truth=state.truth, **kw)
    except PhaseFailed as exc:
        # moderately peaked heads (‖Θ_i‖_F = 12–20 at (8,4,2)) have one-hot rows but few rows one-hot in every
        # head: the split finds no start, while the body route recovered them (2/2): fall back to it
        state.info["argmax_route"] = f"tried, fell back to the body route: {exc.reason}"
        return None
    state.sum_w = w_sum
    recs[0].figures.update(rfig, robust_sum_w_time=time.perf_counter() - t0)
    if state.truth is not None:
        S = state.truth.ws.sum(0)
        recs[0].truth["sum_w_error_robust"] = float(np.linalg.norm(w_sum - S) / np.linalg.norm(S))
    state.route = "argmax"
    state.candidates = HeadCandidates(thetas[None], np.zeros(1), np.zeros((1, state.m, 0)), 0, 1, 1)
    recs[0].figures["onehot_fraction"] = frac
    state.pending = {r.name: r for r in recs[1:]}
    return recs[0]


def _sculpt(state: LearnState) -> PhaseRecord:
    from .phases.sculpting import sculpt

    rec_argmax = _argmax_route(state)
    if rec_argmax is not None:
        return rec_argmax
    X, Y = _body_subset(state)
    why = _nothing_to_refine(state, X.shape[0])
    if why:
        # phase 3 would only re-sculpt with the same Σ̂W: the slab body K* is sculpted at once (the half-space
        # body would be discarded unread; 0.02–0.04 s of a 0.17–0.5 s run at (8,4,2) and (16,4,2))
        try:
            state.body, rec = sculpt(
                X,
                Y,
                state.sum_w,
                mode="slabs",
                rng=state.rng,
                solver=state.solver,
                truth=state.truth,
                **_slab_opts(state, X.shape[2]),
            )
        except PhaseFailed as exc:  # K*'s own checks name phase 3, which builds it on the full route
            raise PhaseFailed("2-sculpt", f"{exc.reason} (K* is sculpted in phase 2 here: {why})") from exc
        rec.message = f"{why}: the slab body K* at once"
        return rec
    state.body, rec = sculpt(
        X, Y, state.sum_w, rng=state.rng, solver=state.solver, truth=state.truth, **state.settings.sculpt.kwargs()
    )
    return rec


def _certifies(state: LearnState, n_examples: int) -> bool:
    """Whether phase 3 runs certification rounds: ``refine.certify``, or when unset (d² <= 100) on subsets of
    at least CERTIFY_MIN_EXAMPLES examples."""
    return state.settings.refine.certifies(n_examples)


def _nothing_to_refine(state: LearnState, n_examples: int) -> str:
    """Why phase 3 has nothing to do beyond re-sculpting with the same Σ̂W ("" when it has): then phase 2
    sculpts K* itself and phase 3 is skipped."""
    if state.exact_agreement:
        return "phase 1's Σ̂W fits every agreeing row exactly by one pattern (one head): nothing to refine"
    if not _certifies(state, n_examples):
        return (
            "no certification rounds (refine.certify off, or unset with d² > 100 or fewer than "
            f"{state.settings.refine.certify_min_examples} examples): Σ̂W stays phase 1's"
        )
    return ""


def _refine(state: LearnState) -> PhaseRecord:
    from .phases.refine import refine_sum_w

    if state.route == "argmax":
        return state.pending["3-refine"]
    X, Y = _body_subset(state)
    why = _nothing_to_refine(state, X.shape[0])
    if why:
        return PhaseRecord("3-refine", status="skipped", message=f"{why}: K* is phase 2's slab body")
    r = state.settings.refine
    kw = r.kwargs()
    kw["certify"] = True
    kw.pop("certify_min_examples")
    state.sum_w, state.body, rec = refine_sum_w(
        X,
        Y,
        state.sum_w,
        state.body,
        rng=state.rng,
        solver=state.solver,
        truth=state.truth,
        sculpt_opts=r.resculpt.kwargs(),
        slab_opts=_slab_opts(state, X.shape[2]),
        **kw,
    )
    return rec


def _span(state: LearnState) -> PhaseRecord:
    from .phases._simplex import agreement_blind_dims
    from .phases.sculpting import scan_span_rows
    from .phases.span import extract_span, principal_angle_deg

    if state.route == "argmax":
        return PhaseRecord(
            "4-span", status="skipped", message="argmax route: each head is solved on its own, no span is needed"
        )
    kw = state.settings.span.kwargs()
    scan = {key: kw.pop(key) for key in [key for key in kw if key.startswith("scan_")]}

    def fit(extra: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> PhaseRecord:
        state.span, rec = extract_span(
            state.body, state.m, solver=state.solver, rng=state.rng, truth=state.truth, extra_rows=extra, **kw
        )
        return rec

    t0 = time.perf_counter()
    rec = fit(None)
    # adaptive samples for the span: while the flat is not pinned (σ_m/σ_{m+1} above scan_gap), rows from more
    # training examples, read block by block under the final Σ̂W (docs/method.md, "Phase 4 reads more examples"),
    # until the span settles (it moved less than scan_settle_deg in the last growth: with ×4 growth the error
    # is then about half that) or, from the second growth on, the gap stops falling (less than scan_min_gain per doubling: a
    # bias more examples do not remove)
    rest = _examples_outside_body(state)
    budget = min(rest.size, max(0, int(scan["scan_examples"] or 0) - _n_body(state)))
    growth: list[dict[str, Any]] = []
    read = 0
    extra: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    rule = getattr(state.body, "span_rule", None)  # the agreement test K*'s own span rows passed
    stop = ""
    while state.m > 1 and read < budget and rule and state.sum_w is not None and not stop:
        if not np.isfinite(state.span.gap):
            stop = "σ_m/σ_(m+1) is undefined (σ_(m+1) = 0): the fit has no scale to judge the flat by"
            break
        if state.span.gap <= scan["scan_gap"]:
            stop = f"σ_m/σ_(m+1) = {state.span.gap:.3g} <= scan_gap {scan['scan_gap']:.3g}: the flat is pinned"
            break
        was = _n_body(state) + read
        before, read = read, min(budget, max(was * int(scan["scan_growth"]) - _n_body(state), read + 1))
        idx = rest[before:read]  # only the new examples: the earlier scans' rows join the reservoir
        extra = scan_span_rows(
            state.X_train[idx],
            state.Y_train[idx],
            state.sum_w,
            **rule,
            block=int(scan["scan_block"]),
            max_entries=float(scan["scan_max_entries"]),
            initial=extra,
        )
        gap_was, span_was = float(state.span.gap), state.span.span
        rec = fit(extra)
        growth.append(
            {
                "examples": int(_n_body(state) + read),
                "rows_scanned": int(extra[0].shape[0]),
                "why": f"σ_m/σ_(m+1) = {gap_was:.3g} > scan_gap {scan['scan_gap']:.3g}",
                "sv_gap": float(state.span.gap),
                "m_estimate": int(state.span.m_estimate),
                "span_moved_deg": principal_angle_deg(span_was, state.span.span),
            }
        )
        if read >= budget:  # the budget ended the scan (the message below says so), not a stop rule
            break
        if scan["scan_settle_deg"] > 0 and growth[-1]["span_moved_deg"] < scan["scan_settle_deg"]:
            stop = f"the span moved {growth[-1]['span_moved_deg']:.2g}° < scan_settle_deg {scan['scan_settle_deg']:g}°"
        elif (
            scan["scan_min_gain"] > 0
            and len(growth) > 1
            and (gap_was - state.span.gap) / gap_was < scan["scan_min_gain"] * np.log2((_n_body(state) + read) / was)
        ):  # (not after the first growth: the gap of the phases' own subset is noisy)
            stop = (
                f"σ_m/σ_(m+1) fell {gap_was:.3g} → {state.span.gap:.3g}, less than scan_min_gain "
                f"{scan['scan_min_gain']:g} of it per doubling of the examples: a bias more examples do not remove"
            )
    rec.figures["examples"] = int(_n_body(state) + read)
    if growth:
        rec.figures["scan_stopped"] = stop or (
            "read every training example" if read >= rest.size else f"read scan_examples = {scan['scan_examples']}"
        )
    k, d = state.X_train.shape[1], state.X_train.shape[2]
    blind = agreement_blind_dims(state.m, k, d)
    rec.figures["agreement_blind_dims"] = blind
    if blind:
        note = (
            f"m(k−1) = {state.m * (k - 1)} > d = {d}: a {blind}-dimensional family of disagreements among the heads "
            "leaves an output row fitted exactly by one shared pattern, so the agreement test cannot certify "
            "agreement and the span is loose; the polish does the rest (docs/method.md#agreement-blind)"
        )
        rec.message = f"{rec.message}; {note}" if rec.message else note
    if growth:
        rec.figures["scan"] = growth
        rec.time = time.perf_counter() - t0
    state.info["m_estimate"] = state.span.m_estimate
    return rec


def _n_body(state: LearnState) -> int:
    return int(state.X_body.shape[0]) if state.X_body is not None else 0


def _examples_outside_body(state: LearnState) -> np.ndarray:
    """The training examples phases 1–3 did not read, in a random order (``scan_order``, set with ``X_body``);
    none when a caller gave ``X_body`` without them."""
    return np.asarray(state.scan_order) if state.scan_order is not None else np.arange(0)


def _heads(state: LearnState) -> PhaseRecord:
    from .phases.heads import candidate_heads

    if state.route == "argmax":
        return state.pending["5-heads"]
    state.candidates, rec = candidate_heads(
        state.span,
        state.X_train,
        state.Y_train,
        state.m,
        rng=state.rng,
        truth=state.truth,
        **state.settings.heads.kwargs(),
    )
    return rec


def _projections(state: LearnState) -> PhaseRecord:
    from .phases.projections import fit_projections

    ns = min(state.settings.search_examples, state.X_train.shape[0])
    fit, rec = fit_projections(
        list(state.candidates.thetas),
        state.X_train[:ns],
        state.Y_train[:ns],
        state.X_val,
        state.Y_val,
        truth=state.truth,
    )
    if np.isfinite(fit.validation_error):
        state.model, state.model_from = MultiHeadAttention(fit.thetas, fit.ws), "6-projections"
        state.validation_error = float(fit.validation_error)
    return rec


def _polish(state: LearnState) -> PhaseRecord:
    from .phases.polish import polish

    if state.model is None:
        raise PhaseFailed("polish", "no model to polish")
    pol, rec = polish(
        state.model.thetas,
        state.X_train,
        state.Y_train,
        state.X_val,
        state.Y_val,
        rng=state.rng,
        truth=state.truth,
        callback=state.note,
        tol=state.settings.tol,
        **state.settings.polish.kwargs(),
    )
    state.model, state.model_from = MultiHeadAttention(pol.thetas, pol.ws), "polish"
    state.validation_error, state.converged, state.iterations = pol.validation_error, pol.converged, pol.iterations
    return rec


#: Chen & Li's six phases and the final polish, in order
SCULPT_PHASES: tuple[Phase, ...] = (
    Phase("1-sum-w", _sum_w),
    Phase("2-sculpt", _sculpt),
    Phase("3-refine", _refine),
    Phase("4-span", _span),
    Phase("5-heads", _heads),
    Phase("6-projections", _projections),
    Phase("polish", _polish),
)


def run_pipeline(
    phases: tuple[Phase, ...] | list[Phase], state: LearnState, records: list[PhaseRecord], progress: Any = None
) -> PhaseFailed | None:
    """Run ``phases`` in order on ``state``, appending each record to ``records``. Returns None when every
    phase ran, else the ``PhaseFailed`` that stopped the route (its record is appended with status
    "failed")."""
    for phase in phases:
        t0 = progress.start(phase.name) if progress is not None else time.perf_counter()
        try:
            rec = phase.run(state)
            if rec.status == "failed":
                raise PhaseFailed(phase.name, rec.message or "the phase reported a failure")
        except PHASE_FAILURES as exc:
            failure = exc if isinstance(exc, PhaseFailed) else PhaseFailed(phase.name, f"{type(exc).__name__}: {exc}")
            rec = PhaseRecord(phase.name, time=time.perf_counter() - t0, status="failed", message=failure.reason)
            records.append(rec)
            if progress is not None:
                progress.end(rec)
            return failure
        records.append(rec)
        if progress is not None:
            progress.end(rec)
    return None
