"""The VP-LM route, ``method="vp-lm"``: the polish's variable-projection Levenberg–Marquardt from random starts
(``sculpt.vplm.vp_lm_starts``) on the learner's splits, then the learner's validation step. ``auto`` runs the
same fit as its step "auto-vp-lm" (``fit_starts``)."""

from __future__ import annotations

import time

from ..result import LearnResult, PhaseRecord
from ..settings import VpLmSettings
from ..toolkit import single_blas_thread
from ..vplm import vp_lm_starts
from .base import Route, RouteContext, parameter_count_examples, truth_summary

__all__ = ["ROUTE", "fit_starts"]


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
        fit = vp_lm_starts(
            ctx.Xtr,
            ctx.Ytr,
            ctx.Xva,
            ctx.Yva,
            ctx.m,
            ctx.gen,
            settings,
            tol=ctx.tol,
            polish_settings=ctx.settings.polish,
            deadline=None if g.time_limit is None else t0 + g.time_limit,
        )
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
    return res, t0


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
