"""``method="auto"``: routes and peers tried in turn until one validates, composed by name.

The order (docs/method.md): the exact route when m = 1, 2 <= k < d and N allows it; else, when
``auto.peer_first`` (auto: m·d² > 256, > 1,024 when m >= 3, where VP-LM's normal equations and its spurious fits
of a first small subset cost more than L-BFGS's try; at d = 8 VP-LM first is 2–3× faster), L-BFGS on
``auto.peer_examples`` examples capped at ``auto.peer_iterations`` iterations; else (or then) VP-LM from
``auto.vp_lm_starts`` random starts; else the sculpting route when N allows it (it recovers the layers gradient
descent fails on); else, or if that did not validate, L-BFGS on growing subsets with ``auto.restarts`` starts
per size, the first from the best model so far, within ``auto.fallback_work`` (a work budget, not seconds).
Every step is deterministic given the seed (iteration caps and work budgets; no time budget unless
``gradient.time_limit`` is set). ``reason`` lists what was tried, in order, with times.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..baselines import GrowingFit, gradient_descent, lbfgs_growing
from ..pipeline import SCULPT_PHASES
from ..result import LearnResult, PhaseRecord
from ..settings import ProblemSize
from . import exact
from .base import Holdout, Route, RouteContext, get_route, parameter_count_examples, run_route, truth_summary
from .vp_lm import fit_starts

__all__ = ["ROUTE", "min_examples"]


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
    """What auto has tried so far: the step lines, every record, the best result on validation."""

    ctx: RouteContext
    tried: list[str] = field(default_factory=list)
    records: list[PhaseRecord] = field(default_factory=list)
    best: LearnResult | None = None

    def keep(self, res: LearnResult, label: str, t0: float) -> bool:
        """Record step ``label`` (started at ``t0``) and its result; keep its model if it validates best.
        Returns whether it validated."""
        self.records.extend(res.phases)
        val = res.validation_error if res.validation_error is not None else math.inf
        outcome = (
            "validated" if res.converged else f"validation relative MSE {val:.2e}" if math.isfinite(val) else "no model"
        )
        self.tried.append(f"{label} ({time.perf_counter() - t0:.2f} s: {outcome})")
        best_val = math.inf if self.best is None or self.best.validation_error is None else self.best.validation_error
        if res.model is not None and (self.best is None or val < best_val):
            self.best = res
            res.info.model_from = label.split(":")[0].split(" ")[0]
        return bool(res.converged)


def _exact_step(t: _Tries) -> bool:
    t0 = time.perf_counter()
    return t.keep(run_route(get_route("exact"), t.ctx), "exact", t0)


def _peer_step(t: _Tries) -> bool:
    """L-BFGS on ``auto.peer_examples`` examples, capped at ``auto.peer_iterations`` iterations and given up
    after ``auto.peer_give_up`` iterations above ``auto.peer_give_up_loss``."""
    ctx = t.ctx
    cfg, a = ctx.settings, ctx.settings.auto
    assert a.peer_give_up is not None  # Settings.resolve sets it (30·m when unset)
    t0 = ctx.progress.start("auto-peer")
    fit = GrowingFit.of(
        lbfgs_growing(
            ctx.Xtr,
            ctx.Ytr,
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
    """The sculpting route when N reaches its minimum."""
    ctx = t.ctx
    route = get_route("sculpt")
    need = route.min_examples(ctx.d, ctx.k, ctx.m)
    if ctx.N < need:
        t.tried.append(f"sculpt skipped (N = {ctx.N} < {need} examples it needs)")
        return False
    t0 = time.perf_counter()
    return t.keep(run_route(route, ctx), "sculpt", t0)


def _fallback_step(t: _Tries) -> bool:
    """L-BFGS on growing subsets, ``auto.restarts`` starts per size (the first warm from the best model so far
    when ``auto.warm_start``), within ``auto.fallback_work``."""
    ctx = t.ctx
    a = ctx.settings.auto
    t0 = ctx.progress.start("fallback-gradient")
    init = t.best.model if a.warm_start and t.best is not None and t.best.model is not None else None
    fit = GrowingFit.of(
        lbfgs_growing(
            ctx.Xtr,
            ctx.Ytr,
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
    label = f"fallback-gradient: L-BFGS on growing subsets, {a.restarts} starts per size, ended by {fit.stop}"
    return t.keep(res, label, t0)


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
        train_error=ctx.train_error(model),
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
        ctx.Xtr[:n],
        ctx.Ytr[:n],
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


def _plan(ctx: RouteContext) -> list[Callable[[_Tries], bool]]:
    """The steps auto tries, in order: exact alone when it applies, else the capped L-BFGS try (when
    ``auto.peer_first``), VP-LM and sculpt; then the fallback (when ``auto.fallback``)."""
    a = ctx.settings.auto
    steps: list[Callable[[_Tries], bool]]
    if exact.applies(ctx.size):
        steps = [_exact_step]
    else:
        steps = [*([_peer_step] if a.peer_first else []), _vp_lm_step, _sculpt_step]
    if a.fallback:
        steps.append(_fallback_step)
    return steps


def _result(t: _Tries) -> LearnResult:
    """The best step's result (or an empty one) with every step's records, what was tried and the verdict."""
    ctx, tol = t.ctx, t.ctx.tol
    out = t.best if t.best is not None else LearnResult(None, "auto", math.inf, info=ctx.base_info())
    out.phases = t.records
    val = out.validation_error
    out.converged = bool(val is not None and val <= tol)
    out.info.tried = t.tried
    out.info.route = out.method
    out.info.truth = truth_summary(out.model, ctx.truth)
    tail = (
        f"validation relative MSE {val:.2e} {'<=' if out.converged else '>'} tol {tol:.0e}"
        if val is not None and math.isfinite(val)
        else "no step produced a usable model"
    )
    kept = out.info.model_from or "none"
    out.reason = f"auto tried {'; then '.join(t.tried)}. Kept the model of {kept}: {tail}"
    out.samples_used = max([int(r.figures.get("examples", 0)) for r in t.records] + [out.samples_used or 0])
    return out


def _run(ctx: RouteContext) -> LearnResult:
    """``Route.run`` of auto: each step of ``_plan`` in turn until one validates, keeping the best model on
    validation; ``info.tried`` lists each step with its time and outcome, ``info.model_from`` the step whose
    model is kept."""
    tries = _Tries(ctx)
    for step in _plan(ctx):
        if step(tries):
            break
    return _result(tries)


ROUTE = Route(
    name="auto",
    run=_run,
    min_examples=min_examples,
    settings=("auto", "gradient", "vp_lm", "exact", "polish"),
    summary="exact when it applies; else VP-LM (after a capped L-BFGS try for large m·d²), sculpt, then "
    "L-BFGS on growing subsets, until one validates",
    validated=False,
    holdout=_holdout,
    steps=len(SCULPT_PHASES) + 3,
)
