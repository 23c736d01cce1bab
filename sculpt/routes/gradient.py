"""The gradient route, ``method="gradient"``: full-batch L-BFGS from a random initialisation
(``sculpt.baselines.gradient_descent``), then the learner's validation step."""

from __future__ import annotations

import time

from ..baselines import gradient_descent
from ..result import LearnResult, PhaseRecord
from .base import Route, RouteContext, parameter_count_examples

__all__ = ["ROUTE"]


def _run(ctx: RouteContext) -> LearnResult:
    """``Route.run`` of the gradient route: L-BFGS on the training split with the ``gradient`` settings, its run
    recorded as the phase "gradient"."""
    t0 = ctx.progress.start("gradient")
    res = gradient_descent(ctx.Xtr, ctx.Ytr, ctx.m, ctx.settings.gradient, method="lbfgs", seed=ctx.gen, init=None)
    res.method = "gradient"
    res.phases.append(
        PhaseRecord(
            "gradient",
            figures={"train_error": res.train_error, "iterations": res.iterations, "init": "random"},
            time=time.perf_counter() - t0,
            message=res.reason,
        )
    )
    return res


ROUTE = Route(
    name="gradient",
    run=_run,
    min_examples=parameter_count_examples,
    settings=("gradient", "polish"),
    summary="full-batch L-BFGS from a random initialisation",
)
