"""The exact route, ``method="exact"``: one head (m = 1, 2 <= k < d) from two linear systems
(``sculpt.exact.exact_single_head``), then the learner's validation step."""

from __future__ import annotations

from ..exact import exact_sample_size, exact_single_head
from ..result import LearnResult
from ..settings import ProblemSize
from .base import Holdout, Route, RouteContext
from .vp_lm import fallback

__all__ = ["ROUTE", "min_examples", "refusal"]


def refusal(d: int, k: int, m: int) -> str | None:
    """Why the exact route cannot learn layers of these sizes: it learns one head, from examples of 2 <= k < d
    tokens.

    Parameters
    ----------
    d, k, m : int
        Token dimension, tokens per example, heads.

    Returns
    -------
    str or None
        The reason, or None when the route applies.
    """
    if m != 1:
        return f"method='exact' learns one head (m = 1), got m = {m}"
    if not 2 <= k < d:
        return f"method='exact' needs 2 <= k < d, got k = {k}, d = {d}"
    return None


def min_examples(d: int, k: int, m: int) -> int:
    """The exact route's own recommendation ``exact_sample_size(d, k)``.

    max(⌈d²/(k(k−1))⌉, ⌈d²/(k(d−k+1))⌉) + 3, i.e. ⌈d²/(k(k−1))⌉ + 3 when k <= (d + 2)/2. Its systems are
    overdetermined, so with no example to spare the validation error is measured on the training examples and
    ``info.validation_on`` says so.

    Parameters
    ----------
    d, k, m : int
        Token dimension, tokens per example, heads (m does not change the count).

    Returns
    -------
    int
        The fewest examples, training and validation together.
    """
    return exact_sample_size(d, k)


def _holdout(size: ProblemSize) -> Holdout:
    """Every example the systems need stays in training; at the minimum N nothing is held out."""
    return Holdout(min_examples(size.d, size.k, size.m), may_be_empty=True)


def applies(size: ProblemSize) -> bool:
    """The exact route can run on ``size``: one head, 2 <= k < d and N at least its minimum."""
    return refusal(size.d, size.k, size.m) is None and size.N >= min_examples(size.d, size.k, size.m)


def _run(ctx: RouteContext) -> LearnResult:
    """``Route.run`` of the exact route: ``exact_single_head`` on the training split with the ``exact``
    settings (``samples_used``: the training examples read); when its systems give no model (rank deficient,
    no usable example) a fallback VP-LM fit on the same splits, not converged (``vp_lm.fallback``)."""
    ctx.progress.start("exact")
    res = exact_single_head(ctx.Xtr, ctx.Ytr, ctx.settings.exact, truth=ctx.truth)
    if res.model is not None or ctx.n_val == 0 or not ctx.fallback:
        return res
    if res.phases:
        ctx.progress.end(res.phases[-1])
    out = fallback(ctx, f"method='exact' found no model: {res.reason}", "exact", res.phases)
    out.samples_used = max(int(out.samples_used), int(res.samples_used))
    return out


ROUTE = Route(
    name="exact",
    run=_run,
    min_examples=min_examples,
    settings=("exact", "polish"),
    summary="one head (m = 1, 2 <= k < d) exactly from two linear systems",
    refusal=refusal,
    holdout=_holdout,
)
