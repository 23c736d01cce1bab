"""The sculpting route as a pipeline over one state object: phase 1, a route decision, the chosen route's
phases 2–5, then phase 6 and the polish.

A phase is ``Phase(name, run)``: ``run(state) -> PhaseRecord`` reads what earlier phases left in the
``LearnState``, stores its own output there and returns its record. After phase 1 the pipeline decides once
which route runs phases 2–5 (``decide_route``, kept typed in ``state.decision``):

- "body" (``BODY_ROUTE``): Chen & Li's phases on the sculpted body: 2-sculpt, 3-refine, 4-span, 5-heads. When
  phase 3 has nothing to refine (``RouteDecision.nothing_to_refine``), phase 2 sculpts the slab body K* at once
  and phase 3 is recorded as skipped.
- "argmax" (``ARGMAX_ROUTE``, peaked heads, ``sculpt.phases.argmax``): one joint step solves phases 2, 3 and 5
  together and records 4-span as skipped. It declines when its mixed regression finds no start (moderately
  peaked heads), and the body route runs instead.
- "linear" (``LINEAR_ROUTE``, ``sculpt.phases.linear_start``): where the body route is refused (the agreement
  test is blind, m(k − 1) > d, and too few rows agree) and the lifted regression is affordable, phase 1 fits the
  lifted linear-attention regression (its x̄ coefficient is Σ̂W) and one joint step splits it into the m heads
  (5-heads), recording 2-sculpt, 3-refine and 4-span as skipped.

``run_pipeline`` runs the phases, records each, and stops at the first that cannot go on: a
``sculpt.errors.PhaseFailed`` raised while it runs (by its own algorithm or one it calls, such as phase 3's
re-sculpt of K*; it is recorded under the running phase's name), a record whose status is "failed", an engine
failure (``oracles.OracleError``) or a numerical failure (``numpy.linalg.LinAlgError``, ``FloatingPointError``).
Any other exception is a bug and propagates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

import numpy as np

from oracles import OracleError

from .errors import PhaseFailed
from .model import MultiHeadAttention
from .result import PhaseRecord, RouteInfo
from .settings import Settings

if TYPE_CHECKING:
    from .phases.heads import HeadCandidates
    from .phases.linear_start import LiftedFit
    from .phases.sculpting import SculptedBody
    from .phases.span import SpanEstimate

__all__ = [
    "LearnState",
    "PhaseRoute",
    "RouteDecision",
    "ArgmaxStart",
    "Phase",
    "JointPhases",
    "Pipeline",
    "BODY_ROUTE",
    "ARGMAX_ROUTE",
    "LINEAR_ROUTE",
    "SCULPT_PHASES",
    "decide_route",
    "run_pipeline",
    "PHASE_FAILURES",
]

#: what a phase may raise to say it cannot go on (anything else propagates)
PHASE_FAILURES: tuple[type[BaseException], ...] = (PhaseFailed, OracleError, np.linalg.LinAlgError, FloatingPointError)

#: the two ways through phases 2–5: the sculpted body (Chen & Li), or the argmax route for peaked heads (not to
#: be confused with ``sculpt.routes.Route``, a way for ``learn`` to learn the layer)
PhaseRoute = Literal["body", "argmax", "linear"]


@dataclass(frozen=True)
class ArgmaxStart:
    """Why and from where the argmax route starts: phase 1's Σ̂W fits many rows by one token, and the robust
    Σ̂W ``sum_w`` (``figures``: ``robust_sum_w``'s) leaves ``onehot_fraction`` of the rows one-hot in every
    head. ``started``: ``time.perf_counter()`` when the robust Σ̂W began (the route's record reports the time
    from there)."""

    sum_w: np.ndarray
    figures: dict[str, object]
    onehot_fraction: float
    started: float


@dataclass(frozen=True)
class RouteDecision:
    """The pipeline's decision after phase 1, made once.

    ``nothing_to_refine``: why phase 3 has nothing to do beyond re-sculpting with phase 1's Σ̂W ("" when it
    has): then phase 2 sculpts the slab body K* at once and phase 3 is skipped. ``argmax``: the argmax route's
    start when that route applies (None: the body route only). ``linear``: the linear route runs phases 2–5
    (phase 1 fitted the lifted regression)."""

    nothing_to_refine: str
    argmax: ArgmaxStart | None = None
    linear: bool = False

    @property
    def routes(self) -> tuple[PhaseRoute, ...]:
        """The routes to try, in order (the argmax route may decline; the body and linear routes never do)."""
        if self.linear:
            return ("linear",)
        return ("argmax", "body") if self.argmax is not None else ("body",)


@dataclass
class LearnState:
    """What the phases share: the data splits, the resolved settings, the route decision and each phase's
    output."""

    X_train: np.ndarray
    Y_train: np.ndarray
    X_val: np.ndarray
    Y_val: np.ndarray
    m: int
    settings: Settings
    rng: np.random.Generator
    solver: str | None = None
    truth: MultiHeadAttention | None = None
    note: Callable[[str], None] | None = None
    # phases 1–3 use a subset of the training split
    X_body: np.ndarray | None = None
    Y_body: np.ndarray | None = None
    scan_order: np.ndarray | None = None  # training examples outside X_body, in a random order: phase 4 reads these
    # outputs, filled in phase order
    sum_w: np.ndarray | None = None
    lifted: LiftedFit | None = None  # phase 1's lifted regression when the linear route runs phases 2–5
    # phase 1 found every agreeing row fitted exactly by one pattern (one head): phase 3 has nothing to refine
    exact_agreement: bool = False
    decision: RouteDecision | None = None
    route: PhaseRoute = "body"  # the route that ran phases 2–5
    body: SculptedBody | None = None
    span: SpanEstimate | None = None
    candidates: HeadCandidates | None = None
    model: MultiHeadAttention | None = None
    model_from: str = ""
    converged: bool = False
    validation_error: float | None = None
    iterations: int = 0
    info: RouteInfo = field(default_factory=RouteInfo)  # what the route reports from the phases

    @property
    def d(self) -> int:
        return int(self.X_train.shape[2])


# --- steps and the pipeline ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    """One phase: ``name`` (as in its PhaseRecord) and ``run(state) -> PhaseRecord``."""

    name: str
    run: Callable[[LearnState], PhaseRecord]

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,)

    def records(self, state: LearnState) -> list[PhaseRecord] | None:
        return [self.run(state)]


@dataclass(frozen=True)
class JointPhases:
    """Phases one computation solves together: ``names`` (their records', in order) and ``run(state)``, which
    returns those records, or None to decline (the route does not apply after all: nothing is recorded and
    the decision's next route runs). A failure while it runs is recorded under its first name."""

    names: tuple[str, ...]
    run: Callable[[LearnState], list[PhaseRecord] | None]

    def records(self, state: LearnState) -> list[PhaseRecord] | None:
        recs = self.run(state)
        if recs is not None and tuple(r.name for r in recs) != self.names:
            raise RuntimeError(f"joint phases {self.names} returned the records {[r.name for r in recs]}")
        return recs


Step = Phase | JointPhases


@dataclass(frozen=True)
class Pipeline:
    """``first``, then (when ``decide`` is given) the decided route's steps among ``routes``, then ``last``.

    Every route records the same phase names; the decision is reported as part of the first of them (its
    progress line comes first, and a failure in it is that phase's)."""

    first: tuple[Step, ...]
    decide: Callable[[LearnState], RouteDecision] | None = None
    routes: Mapping[PhaseRoute, tuple[Step, ...]] = field(default_factory=dict)
    last: tuple[Step, ...] = ()

    def __len__(self) -> int:
        """Phases a run records when every phase runs."""
        route = max((sum(len(s.names) for s in steps) for steps in self.routes.values()), default=0)
        return sum(len(s.names) for s in self.first + self.last) + route

    @property
    def decision_phase(self) -> str:
        """The phase the route decision is reported with: the first phase of the routes."""
        return next(iter(self.routes.values()))[0].names[0]


class PhaseReporter(Protocol):
    """What ``run_pipeline`` tells about progress (``sculpt.toolkit.Progress``)."""

    def start(self, name: str) -> float: ...

    def end(self, rec: PhaseRecord) -> None: ...


class _Log:
    """Appends records and reports them. A phase is opened (``progress.start``) once: a step that declines
    leaves it open, and the step of the same name on the next route continues it (so does the decision for
    the phase it is reported with)."""

    def __init__(self, records: list[PhaseRecord], progress: PhaseReporter | None) -> None:
        self.records, self.progress = records, progress
        self.open_name: str | None = None
        self.t0 = 0.0

    def open(self, name: str) -> None:
        if name != self.open_name:
            self.t0 = self.progress.start(name) if self.progress is not None else time.perf_counter()
            self.open_name = name

    def record(self, rec: PhaseRecord) -> None:
        self.open(rec.name)
        self.records.append(rec)
        if self.progress is not None:
            self.progress.end(rec)
        self.open_name = None

    def fail(self, exc: BaseException) -> PhaseFailed:
        """Record the open phase as failed because of ``exc``; the PhaseFailed naming that phase."""
        name = self.open_name or "?"
        reason = exc.reason if isinstance(exc, PhaseFailed) else f"{type(exc).__name__}: {exc}"
        failure = exc if isinstance(exc, PhaseFailed) and exc.phase == name else PhaseFailed(name, reason)
        if failure is not exc:
            failure.__cause__ = exc
        self.record(PhaseRecord(name, time=time.perf_counter() - self.t0, status="failed", message=reason))
        return failure


_DECLINED: Literal["declined"] = "declined"


def _run(steps: tuple[Step, ...], state: LearnState, log: _Log) -> PhaseFailed | Literal["declined"] | None:
    """Run ``steps`` in order: None when every one ran, the failure that stopped them, or "declined"."""
    for step in steps:
        log.open(step.names[0])
        try:
            recs = step.records(state)
            if recs is None:
                return _DECLINED
            for rec in recs:
                if rec.status == "failed":
                    raise PhaseFailed(rec.name, rec.message or "the phase reported a failure")
        except PHASE_FAILURES as exc:
            return log.fail(exc)
        for rec in recs:
            log.record(rec)
    return None


def run_pipeline(
    pipeline: Pipeline, state: LearnState, records: list[PhaseRecord], progress: PhaseReporter | None = None
) -> PhaseFailed | None:
    """Run ``pipeline`` on ``state``, appending each phase's record to ``records``.

    Parameters
    ----------
    pipeline : Pipeline
        The phases (``SCULPT_PHASES``).
    state : LearnState
        The state the phases read and fill; ``state.decision`` and ``state.route`` say which route ran.
    records : list of PhaseRecord
        Appended to, one record per phase that ran (a failed phase's with status "failed").
    progress : PhaseReporter, optional
        Told when each phase starts and ends.

    Returns
    -------
    PhaseFailed or None
        None when every phase ran, else the failure that stopped the pipeline, naming the phase it stopped in.
    """
    log = _Log(records, progress)
    outcome = _run(pipeline.first, state, log)
    if outcome is None and pipeline.decide is not None:
        log.open(pipeline.decision_phase)
        try:
            state.decision = pipeline.decide(state)
        except PHASE_FAILURES as exc:
            return log.fail(exc)
        for route in state.decision.routes:
            state.route = route
            outcome = _run(pipeline.routes[route], state, log)
            if outcome != _DECLINED:
                break
    if outcome is None:
        outcome = _run(pipeline.last, state, log)
    if outcome == _DECLINED:
        raise RuntimeError("a step declined outside a route, or every route declined")
    return outcome if isinstance(outcome, PhaseFailed) else None


# --- the route decision --------------------------------------------------------------------------------------


def _body_subset(state: LearnState) -> tuple[np.ndarray, np.ndarray]:
    if state.X_body is None or state.Y_body is None:
        n = min(int(state.settings.sculpt_examples or state.X_train.shape[0]), state.X_train.shape[0])
        perm = state.rng.permutation(state.X_train.shape[0])
        sub = np.sort(perm[:n])
        state.X_body, state.Y_body, state.scan_order = state.X_train[sub], state.Y_train[sub], perm[n:]
        state.info.sculpt_examples = int(n)
    return state.X_body, state.Y_body


T = TypeVar("T")


def _required(value: T | None, phase: str, what: str) -> T:
    """``value``, which an earlier phase must have left; PhaseFailed naming ``phase`` when it did not."""
    if value is None:
        raise PhaseFailed(phase, f"no {what}: the phase that computes it did not run")
    return value


def _decision(state: LearnState) -> RouteDecision:
    if state.decision is None:
        raise RuntimeError("phases 2–5 run only after the route decision (run_pipeline makes it)")
    return state.decision


def decide_route(state: LearnState) -> RouteDecision:
    """The decision after phase 1: whether the argmax route applies and whether phase 3 has anything to refine.

    Parameters
    ----------
    state : LearnState
        After phase 1 (``sum_w``, ``exact_agreement``); the argmax test writes ``info.onehot_fraction`` and
        draws the robust Σ̂W's starts from ``state.rng`` when phase 1's Σ̂W leaves one-hot rows.

    Returns
    -------
    RouteDecision
        ``argmax``: the argmax route's start when peaked heads make it worth trying (``_argmax_start``);
        ``nothing_to_refine``: why phase 3 would only re-sculpt with phase 1's Σ̂W (one pattern fits every
        agreeing row, or no certification rounds on this subset), "" when it has work.
    """
    X, _ = _body_subset(state)
    if state.lifted is not None:
        return RouteDecision(nothing_to_refine="the linear route: no body to refine", linear=True)
    start = _argmax_start(state)
    return RouteDecision(nothing_to_refine=_nothing_to_refine(state, X.shape[0]), argmax=start)


def _nothing_to_refine(state: LearnState, n_examples: int) -> str:
    """Why phase 3 has nothing to do beyond re-sculpting with the same Σ̂W ("" when it has)."""
    if state.exact_agreement:
        return "phase 1's Σ̂W fits every agreeing row exactly by one pattern (one head): nothing to refine"
    if not state.settings.refine.certifies(n_examples):
        return (
            "no certification rounds (refine.certify off, or unset with d² > 100 or fewer than "
            f"{state.settings.refine.certify_min_examples} examples): Σ̂W stays phase 1's"
        )
    return ""


def _argmax_start(state: LearnState) -> ArgmaxStart | None:
    """Peaked heads: when phase 1's Σ̂W fits at least ``argmax.detect_fraction`` of the rows by one token, the
    robust Σ̂W (phase 1's trimmed rounds can stall 1e-4–0.4 off on peaked data: the exact one-hot rows decide)
    and, when it leaves ``argmax.min_fraction`` of the rows one-hot, the argmax route's start (else None)."""
    from .phases.argmax import argmax_route_applies, onehot_fraction, robust_sum_w
    from .phases.sum_w import crude_sum_w

    a = state.settings.argmax
    X, Y = _body_subset(state)
    if not a.enabled or state.sum_w is None:
        return None
    frac = onehot_fraction(X, Y, state.sum_w, a.onehot_tol)
    state.info.onehot_fraction = frac
    if not argmax_route_applies(frac, state.m, X.shape[1], X.shape[2], a.detect_fraction):
        return None
    t0 = time.perf_counter()
    w_sum, rfig = robust_sum_w(X, Y, [state.sum_w, crude_sum_w(X, Y)], a, rng=state.rng)
    frac = onehot_fraction(X, Y, w_sum, a.onehot_tol)
    state.info.onehot_fraction = frac
    if not argmax_route_applies(frac, state.m, X.shape[1], X.shape[2], a.min_fraction):
        return None
    return ArgmaxStart(w_sum, rfig, frac, t0)


# --- the phases ----------------------------------------------------------------------------------------------


def _sum_w(state: LearnState) -> PhaseRecord:
    """Phase 1: ``estimate_sum_w``, or, where the linear route runs phases 2–5, the lifted linear-attention
    regression (its x̄ coefficient is Σ̂W: 26 % off at (8,32,2) against the single-token estimate's 60–70 %)."""
    from .phases.linear_start import linear_route_applies
    from .phases.sum_w import estimate_sum_w

    X, Y = _body_subset(state)
    if linear_route_applies(state.d, X.shape[1], state.m, state.settings):
        return _lifted_sum_w(state, X, Y)
    state.sum_w, rec = estimate_sum_w(X, Y, state.settings.sum_w, truth=state.truth)
    state.exact_agreement = bool(rec.figures.get("exact_agreement", False))
    return rec


def _lifted_sum_w(state: LearnState, X: np.ndarray, Y: np.ndarray) -> PhaseRecord:
    """Phase 1 on the linear route: the lifted regression on the first ``linear_examples`` of phases 1–3's
    subset; Σ̂W is its x̄ coefficient."""
    from .phases.linear_start import fit_lifted, linear_examples

    t0 = time.perf_counter()
    n = min(X.shape[0], linear_examples(state.d, X.shape[1], state.settings.linear))
    state.lifted = fit = fit_lifted(X[:n], Y[:n])
    state.sum_w = fit.sum_w
    rec = PhaseRecord("1-sum-w", message="the linear route: Σ̂W from the lifted linear-attention regression")
    rec.figures.update(estimator="lifted linear-attention regression (x̄ coefficient)", examples=fit.examples)
    rec.figures["linear_rel_mse"] = fit.rel_residual
    if state.truth is not None:
        S = state.truth.ws.sum(0)
        rec.truth["err_sum_w"] = float(np.linalg.norm(fit.sum_w - S) / np.linalg.norm(S))
    rec.time = time.perf_counter() - t0
    return rec


def _sculpt(state: LearnState) -> PhaseRecord:
    """Phase 2 on the body route: the half-space body under phase 1's Σ̂W, or, when phase 3 has nothing to
    refine, the slab body K* at once (the half-space body would be discarded unread; 0.02–0.04 s of a
    0.17–0.5 s run at (8,4,2) and (16,4,2))."""
    from .phases.sculpting import sculpt

    X, Y = _body_subset(state)
    sum_w = _required(state.sum_w, "2-sculpt", "Σ̂W")
    why = _decision(state).nothing_to_refine
    if not why:
        state.body, rec = sculpt(X, Y, sum_w, state.settings.sculpt, solver=state.solver, truth=state.truth)
        return rec
    try:
        state.body, rec = sculpt(
            X,
            Y,
            sum_w,
            state.settings.refine.slabs,
            mode="slabs",
            solver=state.solver,
            truth=state.truth,
            need_equalities=X.shape[2] ** 2 - (state.m - 1),  # phase 4's need: K* stops before its LPs with fewer
        )
    except PhaseFailed as exc:  # K*'s own check says what is missing; the reason also says why phase 2 builds K*
        raise PhaseFailed("2-sculpt", f"{exc.reason} (K* is sculpted in phase 2 here: {why})") from exc
    rec.message = f"{why}: the slab body K* at once"
    return rec


def _refine(state: LearnState) -> PhaseRecord:
    from .phases.refine import refine_sum_w

    X, Y = _body_subset(state)
    why = _decision(state).nothing_to_refine
    if why:
        return PhaseRecord("3-refine", status="skipped", message=f"{why}: K* is phase 2's slab body")
    state.sum_w, state.body, rec = refine_sum_w(
        X,
        Y,
        _required(state.sum_w, "3-refine", "Σ̂W"),
        _required(state.body, "3-refine", "phase 2's body"),
        state.m,
        state.settings.refine,
        solver=state.solver,
        truth=state.truth,
    )
    return rec


def _span(state: LearnState) -> PhaseRecord:
    """Phase 4 (``sculpt.phases.span.adaptive_span``): the flat from K*'s rows, and from more training examples
    (those phases 1–3 did not read) while it is not pinned."""
    from .phases.span import ScanPool, adaptive_span

    pool = ScanPool(state.X_train, state.Y_train, _examples_outside_body(state), _n_body(state))
    state.span, rec = adaptive_span(
        _required(state.body, "4-span", "sculpted body K*"),
        state.m,
        state.settings.span,
        pool=pool,
        sum_w=state.sum_w,
        solver=state.solver,
        rng=state.rng,
        truth=state.truth,
    )
    state.info.m_estimate = state.span.m_estimate
    return rec


def _n_body(state: LearnState) -> int:
    return int(state.X_body.shape[0]) if state.X_body is not None else 0


def _examples_outside_body(state: LearnState) -> np.ndarray:
    """The training examples phases 1–3 did not read, in a random order (``scan_order``, set with ``X_body``);
    none when a caller gave ``X_body`` without them."""
    return np.asarray(state.scan_order) if state.scan_order is not None else np.arange(0)


def _heads(state: LearnState) -> PhaseRecord:
    from .phases.heads import candidate_heads

    state.candidates, rec = candidate_heads(
        _required(state.span, "5-heads", "span"),
        state.X_train,
        state.Y_train,
        state.m,
        state.settings.heads,
        rng=state.rng,
        truth=state.truth,
    )
    return rec


def _argmax_phases(state: LearnState) -> list[PhaseRecord] | None:
    """Phases 2–5 on the argmax route (``sculpt.phases.argmax.argmax_heads`` from the decision's robust Σ̂W):
    records 2-sculpt (the per-head W split), 3-refine (their joint refit), 4-span (skipped: each head is
    solved on its own) and 5-heads (each head's Θ); None when the split finds no start."""
    from .phases.argmax import argmax_heads
    from .phases.heads import HeadCandidates

    start = _decision(state).argmax
    if start is None:
        raise RuntimeError("the argmax route runs only when the decision found its start")
    X, Y = _body_subset(state)
    try:
        thetas, ws, recs = argmax_heads(
            X, Y, start.sum_w, state.m, state.settings.argmax, rng=state.rng, truth=state.truth
        )
    except PhaseFailed as exc:
        # moderately peaked heads (‖Θ_i‖_F = 12–20 at (8,4,2)) have one-hot rows but few rows one-hot in every
        # head: the split finds no start, while the body route recovers them: fall back to it
        state.info.argmax_route = f"tried, fell back to the body route: {exc.reason}"
        return None
    state.sum_w = start.sum_w
    by_name = {r.name: r for r in recs}
    split = by_name["2-sculpt"]
    split.figures.update(start.figures, robust_sum_w_time=time.perf_counter() - start.started)
    if state.truth is not None:
        S = state.truth.ws.sum(0)
        split.truth["sum_w_error_robust"] = float(np.linalg.norm(start.sum_w - S) / np.linalg.norm(S))
    state.candidates = HeadCandidates(thetas[None], np.zeros(1), np.zeros((1, state.m, 0)), 0, 1, 1)
    split.figures["onehot_fraction"] = start.onehot_fraction
    no_span = PhaseRecord(
        "4-span", status="skipped", message="argmax route: each head is solved on its own, no span is needed"
    )
    return [split, by_name["3-refine"], no_span, by_name["5-heads"]]


def _linear_phases(state: LearnState) -> list[PhaseRecord] | None:
    """Phases 2–5 on the linear route: 2-sculpt, 3-refine and 4-span skipped (no body: the agreement test is
    blind here), 5-heads the m heads split from phase 1's lifted regression (``linear_start``)."""
    from .phases.heads import HeadCandidates
    from .phases.linear_start import linear_start

    fit = _required(state.lifted, "5-heads", "lifted regression")
    thetas, heads = linear_start(fit, state.m, state.settings.linear, rng=state.rng)
    n = thetas.shape[0]
    state.candidates = HeadCandidates(thetas, np.zeros(n), np.zeros((n, state.m, 0)), 0, n, n)
    why = "the linear route: the agreement test is blind at this shape, the heads come from the lifted regression"
    skipped = [PhaseRecord(name, status="skipped", message=why) for name in ("2-sculpt", "3-refine", "4-span")]
    return [*skipped, heads]


def _projections(state: LearnState) -> PhaseRecord:
    from .phases.projections import fit_projections

    ns = min(state.settings.search_examples, state.X_train.shape[0])
    fit, rec = fit_projections(
        list(_required(state.candidates, "6-projections", "candidate heads").thetas),
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
        state.settings.polish,
        tol=state.settings.tol,
        rng=state.rng,
        truth=state.truth,
        callback=state.note,
    )
    state.model, state.model_from = MultiHeadAttention(pol.thetas, pol.ws), "polish"
    state.validation_error, state.converged, state.iterations = pol.validation_error, pol.converged, pol.iterations
    return rec


#: phases 2–5 on the sculpted body (Chen & Li)
BODY_ROUTE: tuple[Step, ...] = (
    Phase("2-sculpt", _sculpt),
    Phase("3-refine", _refine),
    Phase("4-span", _span),
    Phase("5-heads", _heads),
)

#: phases 2–5 for peaked heads: one joint step, which declines when its split finds no start
ARGMAX_ROUTE: tuple[Step, ...] = (JointPhases(("2-sculpt", "3-refine", "4-span", "5-heads"), _argmax_phases),)

#: phases 2–5 where the body route is refused: the split of phase 1's lifted regression (one joint step)
LINEAR_ROUTE: tuple[Step, ...] = (JointPhases(("2-sculpt", "3-refine", "4-span", "5-heads"), _linear_phases),)

#: Chen & Li's six phases and the final polish: phase 1, the route decision, the route's phases 2–5, phase 6
#: and the polish (seven records on either route)
SCULPT_PHASES = Pipeline(
    first=(Phase("1-sum-w", _sum_w),),
    decide=decide_route,
    routes={"argmax": ARGMAX_ROUTE, "body": BODY_ROUTE, "linear": LINEAR_ROUTE},
    last=(Phase("6-projections", _projections), Phase("polish", _polish)),
)
