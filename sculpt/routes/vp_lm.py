"""The VP-LM route, ``method="vp-lm"``: the polish's variable-projection Levenberg–Marquardt from random starts
(``sculpt.vplm.vp_lm_starts``) on the learner's splits, then the learner's validation step. ``auto`` runs the
same fit as its step "auto-vp-lm" (``fit_starts``)."""

from __future__ import annotations

import time

import numpy as np

from ..noise import NoiseVerdict
from ..result import LearnResult, PhaseRecord
from ..settings import VpLmSettings
from ..toolkit import single_blas_thread
from ..vplm import StartsFit, vp_lm_starts
from .base import Route, RouteContext, assess, parameter_count_examples, settle, truth_summary

__all__ = ["ROUTE", "fit_starts", "fallback"]


def _at_floor(fit: StartsFit, ctx: RouteContext) -> bool:
    """The best start is at the noise floor and ``polish.accept_noise`` lets that end the starts."""
    best = fit.best
    return (
        ctx.settings.polish.accept_noise
        and best is not None
        and best.noise is not None
        and best.noise.status == "noise"
    )


def _starts(ctx: RouteContext, settings: VpLmSettings, deadline: float | None) -> StartsFit:
    """``vp_lm_starts`` one start at a time (the same random stream), stopping at the first start that validates
    or reaches the noise floor: under label noise every start ends above tol, and each further start would
    land on the same floor."""
    one = settings.merged(restarts=1)
    Xtr, Ytr = ctx.train_views()  # each start reads random subsets: the split is never copied whole
    fits: list[StartsFit] = []
    stop = f"{settings.restarts} start(s) without validating"
    for r in range(settings.restarts):
        fit = vp_lm_starts(
            Xtr,
            Ytr,
            ctx.Xva,
            ctx.Yva,
            ctx.m,
            ctx.gen,
            one,
            tol=ctx.tol,
            polish_settings=ctx.settings.polish,
            deadline=deadline,
        )
        for st in fit.starts:
            st["start"] = r
        fits.append(fit)
        if fit.stop == "time limit":
            stop = "time limit"
            break
        if fit.stop == "validated":
            stop = "validated"
            break
        if _at_floor(fit, ctx):
            stop = "at the noise floor"
            break
    best = min((f.best for f in fits if f.best is not None), key=lambda b: b.validation_error, default=None)
    starts = [st for f in fits for st in f.starts]
    return StartsFit(best, starts, sum(f.iterations for f in fits), stop)


def fit_starts(ctx: RouteContext, name: str, settings: VpLmSettings) -> tuple[LearnResult, float]:
    """VP-LM from ``settings.restarts`` random starts on the learner's splits, stopping at the first that
    validates, recorded as the phase ``name``.

    Parameters
    ----------
    ctx : RouteContext
        The call's splits and resolved settings (``gradient.single_thread`` and ``gradient.time_limit`` apply).
    name : str
        The phase record's name ("vp-lm", or auto's "auto-vp-lm").
    settings : VpLmSettings
        Starts, start scale and largest subset.

    Returns
    -------
    result : LearnResult
        The best start's model, validated on the split (``samples_used``: the largest training subset fitted).
    started : float
        ``time.perf_counter()`` when the fit began.
    """
    t0 = ctx.progress.start(name)
    g = ctx.settings.gradient
    with single_blas_thread(g.single_thread):
        fit = _starts(ctx, settings, None if g.time_limit is None else t0 + g.time_limit)
        if fit.best is None:  # the time limit ended every start before it began: one start regardless
            fit = _starts(ctx, settings.merged(restarts=1), None)
    val = fit.validation_error
    rec = PhaseRecord(
        name,
        figures={"starts": fit.starts, "iterations": fit.iterations, "examples": fit.examples, "validation_error": val},
        time=time.perf_counter() - t0,
        message=f"{fit.stop} after {len(fit.starts)} start(s)",
    )
    if ctx.truth is not None and fit.model is not None:
        rec.truth.update(truth_summary(fit.model, ctx.truth))
    res = LearnResult(
        model=fit.model,
        method="vp-lm",
        train_error=fit.train_error,
        validation_error=val,
        converged=bool(val <= ctx.tol),
        iterations=fit.iterations,
        samples_used=int(fit.examples),
        phases=[rec],
        reason=rec.message,
        info=ctx.base_info(),
    )
    if fit.best is not None and fit.best.noise is not None:
        settle(res, ctx, fit.best.noise)
        rec.figures["status"] = fit.best.noise.status
    return res, t0


def fallback(ctx: RouteContext, why: str, method: str, phases: list[PhaseRecord] | None = None) -> LearnResult:
    """A route that produced no model hands back a least-squares fit instead: VP-LM from random starts on the
    same splits (``vp_lm`` settings, bounded by their starts and subsets), with ``converged=False``, status
    "failed" and ``info.fallback = why``.

    Parameters
    ----------
    ctx : RouteContext
        The call's splits and settings.
    why : str
        Why the route's own method produced no model.
    method : str
        The route's name (the result's ``method``).
    phases : list of PhaseRecord, optional
        The route's own records, kept before the fallback's.

    Returns
    -------
    LearnResult
        The fallback fit, its validation error and noise-floor test, and a reason that starts with ``why``.

    Raises
    ------
    ValueError
        No training or validation example to fit (nothing a least-squares fit could use).
    """
    if ctx.n_train == 0 or ctx.Xva.shape[0] == 0:
        raise ValueError(f"{why}; and there is no example left for a fallback fit")
    ctx.progress.note(f"{why}: falling back to VP-LM")
    res, t0 = fit_starts(ctx, "fallback-vp-lm", ctx.settings.vp_lm)
    res.method = method
    res.phases = [*(phases or []), *res.phases]
    res.info.fallback = why
    res.info.model_from = "fallback-vp-lm"
    res.time = time.perf_counter() - t0
    val = res.validation_error if res.validation_error is not None else np.inf
    if res.model is not None:
        settle(res, ctx, NoiseVerdict.of(res.info.noise) if res.info.noise else assess(res.model, ctx))
    res.reason = f"{why}; the model is a fallback VP-LM fit (validation relative MSE {val:.2e}), not converged"
    return res


def _run(ctx: RouteContext) -> LearnResult:
    """``Route.run`` of the VP-LM route: VP-LM from ``vp_lm.restarts`` random starts (the ``vp_lm`` settings) on
    the learner's splits."""
    return fit_starts(ctx, "vp-lm", ctx.settings.vp_lm)[0]


ROUTE = Route(
    name="vp-lm",
    run=_run,
    min_examples=parameter_count_examples,
    settings=("vp_lm", "gradient", "polish"),
    summary="the polish's variable-projection LM from random starts",
)
