"""``method="auto"``: routes and peers tried in turn until one validates or reaches the noise floor of the
labels (``sculpt.noise``: status "noise", when ``polish.accept_noise``), ordered by the cost model. An L-BFGS
step whose model the noise-floor test places at the floor is polished (a least-squares refit on up to
``polish.noise_max_examples`` examples) before it is kept; when no step produced a model the result is a
fallback VP-LM fit, not converged.

The exact route and VP-LM, cheapest first, when the exact route applies (m = 1, 2 <= k < d and N allows it).
Otherwise the steps are a capped L-BFGS try (``auto.peer_examples`` examples, ``auto.peer_iterations`` iterations), VP-LM from
``auto.vp_lm_starts`` random starts, the sculpting route (unless it refuses the shape or N is below its
minimum) and L-BFGS on growing subsets within ``auto.fallback_work``; ``plan`` orders them by the seconds
``sculpt.costs`` predicts from (d, k, m, N) and the settings, cheapest first, with the capped try first when
``auto.peer_first`` (by default when it is predicted to cost less than ``cost.peer_odds(m)`` × VP-LM: the order
that minimises the expected cost) and never after VP-LM (the fallback starts with the same run). A step whose
predicted peak memory exceeds ``cost.max_bytes`` is skipped. Every step is bounded by work (examples × iterations
caps, the fallback's work budget), never by time unless ``gradient.time_limit`` is set, so a run depends only on
the data, the seed and the settings. ``reason`` and ``info.tried`` list each step with its time, its predicted
cost and its outcome, and each skipped step with why.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..baselines import GrowingFit, gradient_descent, lbfgs_growing
from ..costs import StepCost, auto_step_costs
from ..diagnose import PROXY_EXAMPLES, looks_transposed
from ..pipeline import SCULPT_PHASES
from ..result import LearnResult, PhaseRecord
from ..settings import ProblemSize, Settings
from . import exact, sculpting
from .base import (
    Holdout,
    Route,
    RouteContext,
    assess,
    get_route,
    parameter_count_examples,
    run_route,
    settle,
    truth_summary,
    validate,
)
from .vp_lm import fallback, fit_starts

__all__ = ["ROUTE", "Plan", "min_examples", "plan"]


def min_examples(d: int, k: int, m: int) -> int:
    """The fewest examples of any step: the gradient peers' parameter count plus one, or the exact route's
    budget when it applies and is smaller.

    Parameters
    ----------
    d, k, m : int
        Token dimension, tokens per example, heads.

    Returns
    -------
    int
        The fewest examples, training and validation together.
    """
    exact_need = exact.min_examples(d, k, m) if exact.refusal(d, k, m) is None else math.inf
    return int(min(parameter_count_examples(d, k, m), exact_need))


def _holdout(size: ProblemSize) -> Holdout:
    """The exact route's split when it runs; else all but one example may train."""
    if exact.applies(size):
        return exact.ROUTE.split(size)
    return Holdout(min_examples(size.d, size.k, size.m) - 1)


@dataclass
class _Tries:
    """What auto has tried so far: the step lines, every record, the best result on validation; ``costs`` the
    plan's predictions, quoted in each step's line."""

    ctx: RouteContext
    costs: dict[str, StepCost] = field(default_factory=dict)
    tried: list[str] = field(default_factory=list)
    records: list[PhaseRecord] = field(default_factory=list)
    best: LearnResult | None = None

    def keep(self, res: LearnResult, label: str, t0: float) -> bool:
        """Record step ``label`` (started at ``t0``) and its result; keep its model if it validates best.
        Returns whether it validated."""
        self.records.extend(res.phases)
        val = res.validation_error if res.validation_error is not None else math.inf
        outcome = (
            f"at the noise floor, validation relative MSE {val:.2e}"
            if res.converged and res.status == "noise"
            else "validated"
            if res.converged
            else f"validation relative MSE {val:.2e}"
            if math.isfinite(val)
            else "no model"
        )
        step = label.split(":")[0].split(" ")[0]
        predicted = f"{self.costs[step].short()}; " if step in self.costs else ""
        self.tried.append(f"{label} ({predicted}{time.perf_counter() - t0:.2f} s: {outcome})")
        best_val = math.inf if self.best is None or self.best.validation_error is None else self.best.validation_error
        # a converged step (exact, or at the noise floor) beats one that is not, then the lower validation error
        better = self.best is None or (res.converged, -val) > (self.best.converged, -best_val)
        if res.model is not None and better:
            self.best = res
            res.info.model_from = label.split(":")[0].split(" ")[0]
        return bool(res.converged)


def _exact_step(t: _Tries) -> bool:
    t0 = time.perf_counter()
    return t.keep(run_route(get_route("exact"), replace(t.ctx, fallback=False)), "exact", t0)


def _peer_step(t: _Tries) -> bool:
    """L-BFGS on ``auto.peer_examples`` examples, capped at ``auto.peer_iterations`` iterations and given up
    after ``auto.peer_give_up`` iterations above ``auto.peer_give_up_loss``."""
    ctx = t.ctx
    cfg, a = ctx.settings, ctx.settings.auto
    assert a.peer_give_up is not None  # Settings.resolve sets it (30·m when unset)
    t0 = ctx.progress.start("auto-peer")
    Xtr, Ytr = ctx.train_views()  # sliced by rows only: the split is not gathered whole
    fit = GrowingFit.of(
        lbfgs_growing(
            Xtr,
            Ytr,
            ctx.m,
            cfg.gradient.merged(time_limit=None),
            seed=ctx.gen,
            validation=(ctx.Xva, ctx.Yva),
            first=a.peer_examples,
            restarts=1,
            tol=ctx.tol,
            max_iter=a.peer_iterations,
            max_examples=a.peer_examples,
            give_up=(int(a.peer_give_up), float(a.peer_give_up_loss)),
        )
    )
    _finish(fit, ctx)
    res = _fit_result(fit, ctx, "auto-peer", t0)
    ctx.progress.end(res.phases[-1])
    res = _noise_floor(res, ctx, int(fit.examples))
    label = (
        f"auto-peer: L-BFGS on {fit.examples} examples, <= {a.peer_iterations} iterations "
        f"(given up after {a.peer_give_up} above {a.peer_give_up_loss:.0e})"
    )
    return t.keep(res, label, t0)


def _vp_lm_step(t: _Tries) -> bool:
    """VP-LM from ``auto.vp_lm_starts`` random starts (Θ entries N(0, 1/d²)); none when that is 0."""
    ctx = t.ctx
    starts = ctx.settings.auto.vp_lm_starts
    if starts <= 0:
        return False
    res, t0 = fit_starts(ctx, "auto-vp-lm", ctx.settings.vp_lm.merged(restarts=starts, init_scale=1.0 / ctx.d))
    ctx.progress.end(res.phases[-1])
    res.samples_used = ctx.with_validation(res.samples_used)
    rec = res.phases[-1]
    label = f"auto-vp-lm: VP-LM from {len(rec.figures['starts'])} random start(s), {res.iterations} LM iterations"
    return t.keep(res, label, t0)


def _sculpt_step(t: _Tries) -> bool:
    """The sculpting route (``plan`` has checked its refusal and its minimum N)."""
    t0 = time.perf_counter()
    return t.keep(run_route(get_route("sculpt"), replace(t.ctx, fallback=False)), "sculpt", t0)


def _fallback_step(t: _Tries) -> bool:
    """L-BFGS on growing subsets, ``auto.restarts`` starts per size (the first warm from the best model so far
    when ``auto.warm_start``), within ``auto.fallback_work``."""
    ctx = t.ctx
    a = ctx.settings.auto
    t0 = ctx.progress.start("fallback-gradient")
    init = t.best.model if a.warm_start and t.best is not None and t.best.model is not None else None
    Xtr, Ytr = ctx.train_views()  # sliced by rows only: the split is not gathered whole
    fit = GrowingFit.of(
        lbfgs_growing(
            Xtr,
            Ytr,
            ctx.m,
            ctx.settings.gradient,
            seed=ctx.gen,
            validation=(ctx.Xva, ctx.Yva),
            first=a.peer_examples,
            restarts=a.restarts,
            tol=ctx.tol,
            init=init,
            max_work=None if a.fallback_work is None else float(a.fallback_work),
        )
    )
    res = _fit_result(fit, ctx, "fallback-gradient", t0)
    res.phases[-1].figures["init"] = "warm, then random" if init is not None else "random"
    ctx.progress.end(res.phases[-1])
    res = _noise_floor(res, ctx, int(fit.examples))
    label = f"fallback-gradient: L-BFGS on growing subsets, {a.restarts} starts per size, ended by {fit.stop}"
    return t.keep(res, label, t0)


def _noise_floor(res: LearnResult, ctx: RouteContext, fitted: int) -> LearnResult:
    """An L-BFGS step's result with its noise-floor test: a model above tol that the test puts at the noise
    floor (fitted on the first ``fitted`` training examples) is polished as the validated routes' models are,
    which refits it on up to ``polish.noise_max_examples`` examples (the least-squares fit); any other model
    keeps the step's own verdict."""
    if res.model is None:
        return res
    test = assess(res.model, ctx, fitted)
    if test.status != "noise":
        settle(res, ctx, test)
        return res
    read = res.samples_used
    res.samples_used = fitted  # validate_and_polish adds the validation split
    res = validate(res, ctx)
    res.samples_used = max(res.samples_used, read)
    return res


def _fit_result(fit: GrowingFit, ctx: RouteContext, name: str, t0: float) -> LearnResult:
    """A LearnResult from a growing L-BFGS fit on the learner's splits, with its run recorded as a phase."""
    model = fit.model
    rec = PhaseRecord(
        name,
        figures={
            "stages": fit.stages,
            "iterations": fit.iterations,
            "examples": fit.examples,
            "validation_error": fit.validation_error,
        },
        time=time.perf_counter() - t0,
        message=fit.reason,
    )
    if ctx.truth is not None and model is not None:
        rec.truth.update(truth_summary(model, ctx.truth))
    info = ctx.base_info()
    info.truth = truth_summary(model, ctx.truth)
    return LearnResult(
        model=model,
        method="gradient",
        # on the subset the fit read, as every route reports it (the whole training split cost 2.0 of the
        # try's 2.4 s at (32,8,2) with 80,000 examples)
        train_error=float(fit.train_error) if model is not None else math.inf,
        validation_error=fit.validation_error,
        converged=fit.converged,
        time=time.perf_counter() - t0,
        iterations=fit.iterations,
        samples_used=int(fit.examples) + int(ctx.n_val),
        phases=[rec],
        reason=fit.reason,
        info=info,
    )


def _finish(fit: GrowingFit, ctx: RouteContext) -> None:
    """A first try that validated only just (validation relative MSE above ``auto.finish_margin``·tol: it
    stopped at its iteration cap) is run on, on the same examples, to training relative MSE
    finish_margin·tol, in place; the finished model is kept if it validates at least as well."""
    margin = ctx.settings.auto.finish_margin
    if not fit.converged or fit.model is None or fit.validation_error <= margin * ctx.tol:
        return
    t0 = time.perf_counter()
    n = int(fit.examples)
    g = ctx.settings.gradient
    fin = gradient_descent(
        *ctx.train_rows(slice(0, n)),
        ctx.m,
        method="lbfgs",
        seed=ctx.gen,
        init=fit.model,
        tol=margin * ctx.tol,
        max_iter=g.max_iter,
        single_thread=g.single_thread,
    )
    assert fin.model is not None
    val = ctx.validation_error(fin.model)
    fit.stages.append(
        {
            "examples": n,
            "init": "finish (the validated model, run on to auto.finish_margin·tol)",
            "iterations": int(fin.iterations),
            "train_error": fin.train_error,
            "validation_error": val,
            "time": time.perf_counter() - t0,
        }
    )
    fit.iterations += int(fin.iterations)
    if val <= fit.validation_error:
        fit.model, fit.validation_error, fit.train_error = fin.model, float(val), float(fin.train_error)


_STEPS: dict[str, Callable[[_Tries], bool]] = {
    "exact": _exact_step,
    "auto-peer": _peer_step,
    "auto-vp-lm": _vp_lm_step,
    "sculpt": _sculpt_step,
    "fallback-gradient": _fallback_step,
}


@dataclass(frozen=True)
class Plan:
    """auto's steps at one size, in order: ``order`` pairs each step's name with None (it runs) or why it is
    skipped; ``costs`` holds every step's prediction (``sculpt.costs.auto_step_costs``)."""

    order: tuple[tuple[str, str | None], ...]
    costs: dict[str, StepCost]

    @property
    def steps(self) -> list[str]:
        """The steps that run, in order."""
        return [name for name, why in self.order if why is None]

    @property
    def skipped(self) -> dict[str, str]:
        """The steps left out, with why."""
        return {name: why for name, why in self.order if why is not None}


def _sculpt_skip(settings: Settings, size: ProblemSize) -> str | None:
    """Why the sculpting step does not run at ``size``: the route refuses the shape, or N is below its minimum."""
    why = sculpting.refusal(size.d, size.k, size.m, settings)
    if why is not None:
        return why
    need = get_route("sculpt").min_examples(size.d, size.k, size.m)
    return f"N = {size.N} < {need} examples it needs" if size.N < need else None


def plan(settings: Settings, size: ProblemSize, *, check_sculpt: bool = True) -> Plan:
    """The steps auto takes at ``size``, in order: exact and VP-LM cheapest first (then the fallback) when the
    exact route applies (VP-LM is 3–25× faster than the exact route's QR from (16,4,1) up); else the
    capped L-BFGS try first when ``auto.peer_first``, then VP-LM (when ``auto.vp_lm_starts``), sculpt and the
    fallback (when ``auto.fallback``) by expected seconds (predicted seconds over the chance of success: ``cost.peer_odds`` for the L-BFGS fallback, 1 for the others), cheapest first. A step predicted to need more than
    ``cost.max_bytes`` is skipped, as is sculpt where it refuses the shape or N is below its minimum.

    Parameters
    ----------
    settings : Settings
        Resolved settings (``Settings.resolve``).
    size : ProblemSize
        (d, k, m, N).
    check_sculpt : bool
        Check sculpt's refusal and minimum N here; False leaves that to the caller when the step is reached
        (``auto`` does: a Settings.resolve, 1 ms, that an earlier step that validates makes moot).

    Returns
    -------
    Plan
        The order, the skipped steps with why, and every step's predicted cost.
    """
    a = settings.auto
    costs = auto_step_costs(settings, size)
    order: list[tuple[str, str | None]]
    if exact.applies(size):
        first: list[tuple[str, str | None]] = [("exact", None), *([("auto-vp-lm", None)] if a.vp_lm_starts > 0 else [])]
        first.sort(key=lambda step: costs[step[0]].seconds)  # stable: exact first on ties
        order = [*first, *([("fallback-gradient", None)] if a.fallback else [])]
    else:
        rest: list[tuple[str, str | None]] = [("auto-vp-lm", None)] if a.vp_lm_starts > 0 else []
        rest.append(("sculpt", _sculpt_skip(settings, size) if check_sculpt else None))
        rest += [("fallback-gradient", None)] if a.fallback else []
        # expected cost: L-BFGS on growing subsets succeeds with the capped try's odds (cost.peer_odds: with
        # m >= 3 heads it fails more often than not, after spending its whole work budget)
        odds = settings.cost.peer_odds(size.m)
        rest.sort(key=lambda step: costs[step[0]].seconds / (odds if step[0] == "fallback-gradient" else 1.0))
        order = [*([("auto-peer", None)] if a.peer_first else []), *rest]
    limit = math.inf if settings.cost.max_bytes is None else float(settings.cost.max_bytes)
    return Plan(tuple((name, why or _over_memory(costs[name], limit)) for name, why in order), costs)


def _over_memory(cost: StepCost, limit: float) -> str | None:
    """Why a step predicted to need ``cost.bytes`` may not start under the bound ``limit``, or None."""
    if cost.bytes <= limit:
        return None
    return f"predicted peak memory {cost.short_bytes()} > cost.max_bytes = {StepCost.format_bytes(limit)}"


def _result(t: _Tries) -> LearnResult:
    """The best step's result (or an empty one) with every step's records, what was tried and the verdict."""
    ctx, tol = t.ctx, t.ctx.tol
    if t.best is None:  # every step was skipped or produced nothing: a least-squares fit, not converged
        why = "auto: no step produced a model (" + "; ".join(t.tried) + ")"
        limit = math.inf if ctx.settings.cost.max_bytes is None else float(ctx.settings.cost.max_bytes)
        over = _over_memory(t.costs["auto-vp-lm"], limit) if "auto-vp-lm" in t.costs else None
        if over is not None:  # the fallback is VP-LM too: the memory bound holds for it as for every step
            raise ValueError(f"{why}; the fallback VP-LM fit is not started either: {over} (raise cost.max_bytes)")
        out = fallback(ctx, why, "vp-lm", t.records)
        out.samples_used = ctx.with_validation(out.samples_used)
        t.records = out.phases
    else:
        out = t.best
    out.phases = t.records
    val = out.validation_error
    out.info.tried = t.tried
    out.info.route = out.method
    out.info.truth = truth_summary(out.model, ctx.truth)
    said = "at the noise floor, " if out.status == "noise" else ""
    tail = (
        f"{said}validation relative MSE {val:.2e} {'<=' if val <= tol else '>'} tol {tol:.0e}"
        + ("" if out.converged else " (not converged)")
        if val is not None and math.isfinite(val)
        else "no step produced a usable model"
    )
    kept = out.info.model_from or "none"
    out.reason = f"auto tried {'; then '.join(t.tried)}. Kept the model of {kept}: {tail}"
    out.samples_used = max([int(r.figures.get("examples", 0)) for r in t.records] + [out.samples_used or 0])
    return out


def _run(ctx: RouteContext) -> LearnResult:
    """``Route.run`` of auto: each step of ``plan`` in turn until one validates, keeping the best model on
    validation; ``info.tried`` lists each step with its time, predicted cost and outcome (and each skipped step
    with why), ``info.model_from`` the step whose model is kept."""
    steps = plan(ctx.settings, ctx.size, check_sculpt=False)
    tries = _Tries(ctx, steps.costs)
    checked = False
    for name, why in steps.order:
        if name == "sculpt":  # (its refusal first, as ``plan`` words it)
            why = _sculpt_skip(ctx.settings, ctx.size) or why
        if why is not None:
            tries.tried.append(f"{name} skipped ({why})")
        elif _STEPS[name](tries):
            break
        elif not checked and _misfit(tries):
            checked = True  # one axis check per call: a least-squares solve on 2,000 examples, both layouts
            swapped, given, other = looks_transposed(*ctx.train_rows(slice(0, PROXY_EXAMPLES)))  # no whole copy
            if swapped:
                tries.tried.append(
                    "the remaining steps skipped: X and Y look saved as (N, d, k) (a linear check leaves "
                    f"{other:.2f} of the labels' energy transposed against {given:.2f} as given)"
                )
                break
    return _result(tries)


def _misfit(t: _Tries) -> bool:
    """Whether the best model so far explains less of the labels than ``Settings.misfit_residual`` asks: no
    later step is likely to fix data in the wrong layout, so auto checks the axis order before going on."""
    val = None if t.best is None else t.best.validation_error
    return val is not None and val > float(t.ctx.settings.misfit_residual)


ROUTE = Route(
    name="auto",
    run=_run,
    min_examples=min_examples,
    settings=("auto", "cost", "gradient", "vp_lm", "exact", "polish"),
    summary="exact when it applies; else a capped L-BFGS try, VP-LM, sculpt and L-BFGS on growing subsets, "
    "cheapest first by predicted cost, until one validates",
    validated=False,
    holdout=_holdout,
    steps=len(SCULPT_PHASES) + 3,
)
