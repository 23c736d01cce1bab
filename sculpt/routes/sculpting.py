"""The sculpting route, ``method="sculpt"``: Chen & Li's phases 1–6 and the polish (``SCULPT_PHASES``, run by
``sculpt.pipeline``) on the training split, with adaptive samples; validation only selects and checks. Shapes
whose agreement test cannot give phase 4 its equality rows are refused at once (``refusal``)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..costs import predicted_span_rows
from ..errors import PhaseFailed
from ..noise import NoiseVerdict
from ..phases.linear_start import linear_route_applies
from ..pipeline import SCULPT_PHASES, LearnState, run_pipeline
from ..result import ExamplesUsed, LearnResult, PhaseRecord, RouteInfo, SculptAttempt
from ..settings import SCULPT_NEED_PER_D2, ProblemSize, Settings, one_head_examples
from .base import Holdout, Route, RouteContext, assess, settle, truth_summary, verdict_text
from .vp_lm import fallback

__all__ = ["ROUTE", "min_examples", "refusal"]


def min_examples(d: int, k: int, m: int) -> int:
    """What phases 1–4 need to pin the span, plus a ninth for the validation split.

    For one head phases 1–3's first subset max(64, ⌈2d²/(k(k−1))⌉) (K*'s d² equality rows; 4/4 seeds at that
    size plus a ninth at (8,4), (8,2), (16,4), (16,8), (24,4), (32,8), (4,2), (6,3), 3/4 at (8,6)); for m >= 2
    c(m)·d² (``SCULPT_NEED_PER_D2``: 13 for m = 2, 24 for m >= 3; conservative at d = 16, where m = 2 recovers
    4/4 from 7.8d²).

    Parameters
    ----------
    d, k, m : int
        Token dimension, tokens per example, heads.

    Returns
    -------
    int
        need + min(2000, max(1, need // 9)) examples, training and validation together.
    """
    need = one_head_examples(d, k) if m == 1 else SCULPT_NEED_PER_D2[min(m, 3)] * d * d
    return need + min(2000, max(1, need // 9))


def _holdout(size: ProblemSize) -> Holdout:
    """The validation split takes min(2000, N/10) whatever it leaves: the phases read a subset anyway."""
    return Holdout(0)


#: what the refusal quotes: phase 2 stopping short of phase 4's d² − (m − 1) equality rows (docs/method.md#limits)
_REFUSED_EVIDENCE = (
    "measured: phase 2 stops short at (32,8,4) with 407 of 1,021 rows, (16,8,8) 93 of 249, (16,8,4) 244 of 253 and "
    "(8,16,2), (8,32,2), (16,32,2) with none, after 1–110 s of phases"
)


def refusal(d: int, k: int, m: int, settings: Settings | None = None) -> str | None:
    """Why the sculpting route cannot learn layers of these sizes, from (d, k, m) alone: with k − 1 > d an
    output row's pattern has more free weights than the row has coordinates (the agreement test sees no
    disagreement and fixes no pattern), and elsewhere phases 1–3's largest subset (``max_sculpt_examples``) is
    predicted (``sculpt.costs.predicted_span_rows``) to give fewer than ``sculpt_row_budget`` × (d² − (m − 1))
    of the equality rows phase 4 needs: the heads agree on too few rows when they must match in many
    directions, and none of the disagreements the test is blind to can be told from agreement.

    Parameters
    ----------
    d, k, m : int
        Token dimension, tokens per example, heads.
    settings : Settings, optional
        The call's settings (defaults when None), resolved here for (d, k, m): ``sculpt_row_budget`` (0: never
        refuse), ``max_sculpt_examples``, ``cost.span_row_fit``.

    Returns
    -------
    str or None
        Why (with the rule, its evidence and what to do instead), or None when the route may run.
    """
    s = (settings or Settings()).resolve(d, k, m, 0)
    if s.sculpt_row_budget <= 0:
        return None
    size = ProblemSize(d, k, m)
    hint = (
        "use method='auto' (VP-LM or L-BFGS learn such layers), or set sculpt_row_budget=0 to try anyway "
        "(refused where the rule predicts fewer rows than sculpt_row_budget × (d² − (m − 1)), or k − 1 > d)"
    )
    if k - 1 > d:
        return (
            f"method='sculpt' cannot learn (d, k, m) = ({d}, {k}, {m}): with k − 1 = {k - 1} > d = {d} an output "
            f"row's attention pattern has more free weights than the row has coordinates, so the agreement test of "
            f"phases 2–4 fixes no pattern and sees no disagreement (blind in all {size.blind} directions) and phase "
            f"4 gets no equality rows ({_REFUSED_EVIDENCE}); {hint}"
        )
    rows, need = predicted_span_rows(size, s), d * d - (m - 1)
    if rows >= s.sculpt_row_budget * need:
        return None
    seen = (m - 1) * (k - 1) - size.blind
    blind = f", and the test is blind in {size.blind} more" if size.blind else ""
    return (
        f"method='sculpt' cannot learn (d, k, m) = ({d}, {k}, {m}): phases 1–3's largest subset "
        f"(max_sculpt_examples = {s.max_sculpt_examples:,}) is predicted to give about {rows:,.0f} of the {need:,} "
        f"equality rows phase 4 needs (d² − (m − 1)): rows where the {m} heads agree are rare when they must match "
        f"in the {seen} directions the agreement test sees{blind} ({_REFUSED_EVIDENCE}); {hint}; more "
        "max_sculpt_examples raise the prediction"
    )


@dataclass
class _Attempt:
    """One run of the phases with phases 1–3 on the training rows ``sub``."""

    state: LearnState
    failure: PhaseFailed | None
    sub: np.ndarray
    #: the polish's noise-floor test (None: the polish did not run)
    noise: NoiseVerdict | None = None
    #: its place in the attempt log (0: the first)
    number: int = 0

    @property
    def validated(self) -> bool:
        return self.failure is None and self.state.converged

    @property
    def at_floor(self) -> bool:
        """The polish ended at the noise floor: more examples for phases 1–3 end at the same floor."""
        return self.failure is None and self.noise is not None and self.noise.status == "noise"

    def validation(self, ctx: RouteContext) -> float:
        """Validation relative MSE of the attempt's model (inf without one)."""
        if self.state.model is None:
            return float("inf")
        if self.failure is None and self.state.validation_error is not None:
            return float(self.state.validation_error)
        return ctx.validation_error(self.state.model)

    def outcome(self, tol: float) -> str:
        if self.failure is not None:
            return f"phase {self.failure.phase} failed: {self.failure.reason}"
        if self.state.converged:
            return "validated"
        if self.at_floor:
            return f"the polish reached the noise floor at validation relative MSE {self.state.validation_error:.2e}"
        return f"the polish stopped at validation relative MSE {self.state.validation_error:.2e} > tol {tol:.0e}"


def _attempt(ctx: RouteContext, sub: np.ndarray, rest: np.ndarray, records: list[PhaseRecord]) -> _Attempt:
    """Phases 1–6 and the polish with phases 1–3 on the training examples ``sub``; ``rest`` (the others, in a
    random order) is what phase 4 may read."""
    Xtr, Ytr = ctx.train_views()  # read by rows (subsets, phase 4's scan blocks): the split is not copied whole
    X_body, Y_body = ctx.train_rows(sub)
    state = LearnState(
        Xtr,
        Ytr,
        ctx.Xva,
        ctx.Yva,
        ctx.m,
        ctx.settings,
        ctx.gen,
        solver=ctx.solver,
        truth=ctx.truth,
        note=ctx.progress.note,
        X_body=X_body,
        Y_body=Y_body,
        scan_order=rest,
    )
    state.info.sculpt_examples = int(sub.size)
    first = len(records)
    failure = run_pipeline(SCULPT_PHASES, state, records, ctx.progress)
    polished = [r for r in records[first:] if r.name == "polish" and isinstance(r.figures.get("noise"), dict)]
    noise = NoiseVerdict.of(polished[-1].figures["noise"]) if polished and failure is None else None
    return _Attempt(state, failure, sub, noise)


def _attempts(ctx: RouteContext, records: list[PhaseRecord]) -> tuple[_Attempt, list[SculptAttempt]]:
    """Adaptive samples: phases 1–3 start on the first ``sculpt_examples`` of a random order of the training
    split; an attempt that does not validate (a phase cannot go on, or the polish stays above ``tol``) is rerun
    on ``sculpt_growth`` times more, up to ``max_sculpt_examples``, except when its polish reached the noise floor
    and ``polish.accept_noise`` (every further attempt ends at the same floor). Returns the attempt with
    the best model on validation (the last one when none has a model) and the log of every attempt."""
    cfg = ctx.settings
    n_tr = ctx.n_train
    order = ctx.gen.permutation(n_tr)
    cap = min(n_tr, int(cfg.max_sculpt_examples or n_tr))
    n = min(int(cfg.sculpt_examples or n_tr), cap)
    log: list[SculptAttempt] = []
    accept = cfg.polish.accept_noise
    best: _Attempt | None = None
    while True:
        ta = time.perf_counter()
        att = _attempt(ctx, np.sort(order[:n]), order[n:], records)
        outcome = att.outcome(ctx.tol)
        log.append({"examples": int(n), "outcome": outcome, "time": time.perf_counter() - ta})
        att.number = len(log) - 1
        has_model = att.state.model is not None
        if best is None or (has_model and (best.state.model is None or att.validation(ctx) < best.validation(ctx))):
            best = att
        if att.validated or (accept and att.at_floor) or n >= cap or cfg.sculpt_growth < 2:
            return (att if att.validated or att.at_floor else best), log
        n = min(cap, n * int(cfg.sculpt_growth))
        ctx.progress.note(f"{outcome}: phases 1–3 again on {n} examples")


def _failure_reason(ctx: RouteContext, failure: PhaseFailed, records: list[PhaseRecord], examples: int) -> str:
    """Why the route stopped at ``failure``, with what may explain it: too few examples for phase 1, or a
    singular Σ W_i (phase 1's estimate above ``sum_w.warn_cond``)."""
    d, k, m = ctx.d, ctx.k, ctx.m
    why = f"phase {failure.phase} failed: {failure.reason}"
    if failure.phase == "1-sum-w" and examples * k < 3 * d:
        # the crude estimate (1/kN) Σ s tᵀ has rank <= N·k: with fewer rows than d it is singular whatever
        # the layer (one training example gives "degenerate instance, condition number 1.3e49")
        return (
            f"phase 1-sum-w failed: too few training examples: {examples} example(s) give {examples * k} "
            f"single-token rows for the {d}×{d} matrix Σ W_i (phase 1 needs at least 3d = {3 * d}), so its "
            f"estimate is singular; this says nothing about the layer (give more examples, or a smaller "
            f"validation_size) [{failure.reason}]"
        )
    need = min_examples(d, k, m)
    if failure.phase == "1-sum-w" and examples < need:
        why += (
            f" (on {examples} training examples, below the {need} method='sculpt' asks for: phase 1's "
            "estimate is mostly noise, which need not be a property of the layer)"
        )
    first = records[0] if records else None
    fig = first.figures if first is not None and first.name == "1-sum-w" else {}
    cond, low = fig.get("cond", 0.0), fig.get("cond_lower", fig.get("cond", 0.0))
    if failure.phase != "1-sum-w" and cond > ctx.settings.sum_w.warn_cond:
        # an exactly singular Σ W leaves only noise in phase 1's estimate, whose condition number ranged
        # 52–6e7 over planted W_2 = −W_1 layers (below max_cond = 1e3 in some), against <= 10 for plant();
        # the instance is blamed only when the estimate's uncertainty cannot explain the condition number
        single = fig.get("single_token_residual_q005", 0.0)
        if low > ctx.settings.sum_w.warn_cond:
            why += (
                f" (phase 1's Σ W estimate has condition number {cond:.3g}, above {low:.3g} within its "
                "uncertainty: Σ W_i may be singular, a degenerate instance for the sculpting route)"
            )
        elif single > (ctx.settings.sum_w.max_single_residual or float("inf")):
            why += (
                f" (phase 1's Σ W estimate has condition number {cond:.3g} and no output row is explained by a "
                "single token: Σ W_i may be singular, a degenerate instance for the sculpting route, or attention "
                "nearly uniform in every head)"
            )
        else:
            why += (
                f" (phase 1's Σ W estimate has condition number {cond:.3g} but is uncertain by about "
                f"{fig.get('rel_uncertainty', 0.0):.0%}, so Σ W_i's may be as low as {low:.3g}: too few examples "
                f"for phase 1 at k = {k} to tell, and no evidence of a degenerate instance)"
            )
    return why


def _verdict(
    ctx: RouteContext, att: _Attempt, records: list[PhaseRecord], attempts: list[SculptAttempt]
) -> tuple[float | None, NoiseVerdict | None, str]:
    """(validation relative MSE, noise-floor test, reason) of the returned attempt ``att``; the reason lists the
    other attempts."""
    model = att.state.model
    chosen = att.number
    test: NoiseVerdict | None = None
    val: float | None = None
    if model is not None:
        val = att.validation(ctx)
        test = att.noise if att.noise is not None else assess(model, ctx)
    if att.failure is not None:
        reason = _failure_reason(ctx, att.failure, records, attempts[chosen]["examples"])
        if model is not None:
            reason += f" (model: phase 6's, unpolished; {verdict_text(float(val or 0.0), ctx, test)})" if test else ""
    else:
        assert val is not None and test is not None
        reason = verdict_text(val, ctx, test)
    if len(attempts) > 1:
        others = [f"{a['examples']}: {a['outcome']}" for i, a in enumerate(attempts) if i != chosen]
        reason += (
            f" (phases 1–3 on {attempts[chosen]['examples']} examples, attempt {chosen + 1} of {len(attempts)}, "
            f"the best on validation; the others: " + "; ".join(others) + ")"
        )
    return val, test, reason


def _examples_used(
    ctx: RouteContext, attempts: list[SculptAttempt], records: list[PhaseRecord], has_model: bool
) -> ExamplesUsed:
    """Examples read: phases 1–3's largest subset; with a model, phases 4–6 and the polish read the training
    split beyond it (phase 4's scan, the polish's subsets, phase 6's ``search_examples``)."""
    n_tr = ctx.n_train
    used = int(max(a["examples"] for a in attempts))
    runs = [int(r.figures.get("examples", 0)) for r in records if r.name == "4-span"]
    span_read = runs[-1] if runs else 0  # phase 4's last run: phases 1–3's subset plus what it scanned
    if has_model:
        polished = max([int(r.figures.get("examples", 0)) for r in records if r.name in ("polish", "5-heads")] or [0])
        used = max(used, span_read, polished, min(ctx.settings.search_examples, n_tr))
    return {
        "phases_1_3": int(attempts[-1]["examples"]),
        "phase_4": int(span_read),
        "training": used,
        "validation": int(ctx.n_val),
    }


def _run(ctx: RouteContext) -> LearnResult:
    """``Route.run`` of the sculpting route: phases 1–6 and the polish on the training split, growing phases
    1–3's subset while an attempt neither validates nor reaches the noise floor. ``info.attempts`` says how many
    examples each attempt used and why the next asked for more; the model is the best attempt's on validation;
    ``train_error`` is on that attempt's subset (as ``lbfgs_growing`` reports its fitted subset: the whole
    training split holds examples no phase read); K* and the span are attached for ``certify(widths=True)``.
    Where ``refusal`` refuses the shape under the call's settings, or no attempt produced a model, the result is
    a fallback VP-LM fit (``vp_lm.fallback``) with ``converged=False`` and the reason."""
    # where the body route is refused, the linear route (sculpt.phases.linear_start) may run phases 2–5 instead
    linear = linear_route_applies(ctx.d, ctx.k, ctx.m, ctx.settings)
    why = None if linear else refusal(ctx.d, ctx.k, ctx.m, ctx.settings)
    if why is not None:
        res = fallback(ctx, why, "sculpt")
        res.samples_used = ctx.with_validation(res.samples_used)
        return res
    t_start = time.perf_counter()
    records: list[PhaseRecord] = []
    att, attempts = _attempts(ctx, records)
    state, model = att.state, att.state.model
    val, test, reason = _verdict(ctx, att, records, attempts)
    info = ctx.base_info(RouteInfo.of(state.info))
    info.attempts = attempts
    info.examples_used = _examples_used(ctx, attempts, records, model is not None)
    if model is None and ctx.fallback:
        res = fallback(ctx, reason, "sculpt", records)
        res.info.attempts, res.info.examples_used = attempts, info.examples_used
        res.info.truth = truth_summary(res.model, ctx.truth)
        res.samples_used = ctx.with_validation(max(res.samples_used, info.examples_used["training"]))
        res.time = time.perf_counter() - t_start
        return res
    info.truth = truth_summary(model, ctx.truth)
    res = LearnResult(
        model=model,
        method="sculpt",
        train_error=ctx.train_error(model, att.sub),
        validation_error=val,
        time=time.perf_counter() - t_start,
        iterations=state.iterations,
        samples_used=info.examples_used["training"] + int(ctx.n_val),
        phases=records,
        reason=reason,
        info=info,
    )
    if test is not None:
        settle(res, ctx, test)
    if att.failure is not None:
        res.converged, res.status = False, "failed"  # phase 6's unpolished model: the route did not finish
    if state.body is not None and state.span is not None:
        res.attach_body(state.body, state.span.span)
    return res


ROUTE = Route(
    name="sculpt",
    run=_run,
    min_examples=min_examples,
    settings=("sum_w", "sculpt", "refine", "span", "heads", "argmax", "linear", "polish"),
    summary="Chen & Li's phases 1–6 on a sculpted convex body, then the polish",
    validated=False,
    holdout=_holdout,
    steps=len(SCULPT_PHASES),
    uses_lp=True,
)
