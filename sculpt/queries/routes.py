"""The query routes, in a small registry like ``sculpt.routes``: each has a name, a ``Plan`` maker (which may
refuse a size), and a predicted query count that ``method="auto"`` compares.

- ``rational`` (ours, the default): every output row. ΣW from d single tokens; 2d − 1 copy families (the first
  token and n = 1..L copies of a second), whose two distinct output rows are vector rational functions of n with
  the heads' logit differences as poles and δW_i as shared residues; heads matched across families through sum
  families; then Θ from every answer's attention rows (random queries of k = 1 + ⌊3d/4m⌋ tokens fill the
  d² equations), validation, and least-squares refinement if needed.
- ``kkg`` (a reconstruction of Kim, Kim & Guo's route from their abstract): the first output row only, families
  with n = 1..2m copies (queries of length <= 2m + 1) on a grid of first tokens × axes, Θ from the families alone.
- ``one-head`` (Bhattamishra et al.'s setting, m = 1): the first output row only; W = ΣW from d single tokens,
  then one two-token query per (first token, axis): d² + d queries.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .errors import QueryBudgetExceeded
from .pipeline import Plan, theta_tokens
from .settings import QuerySettings

__all__ = ["QueryRoute", "QUERY_ROUTES", "register_query_route", "kkg_bound", "choose_route", "OVERHEAD_REPEATS"]

#: queries asked twice (the determinism check): the first query and one validation query
OVERHEAD_REPEATS = 2
#: the predicted counts use the default probe and validation queries (a plan's budget check is an estimate;
#: the oracle enforces the budget itself)
_DEFAULTS = QuerySettings()


def kkg_bound(d: int, m: int) -> int:
    """Kim, Kim & Guo's query count 4md² − 2m + 1 (the default route's budget when ``max_queries`` is None)."""
    return 4 * m * d * d - 2 * m + 1


@dataclass(frozen=True)
class Planned:
    """A plan with its predicted query count and the spare families it may redraw."""

    plan: Plan
    predicted: int
    spare_families: int


@dataclass(frozen=True)
class QueryRoute:
    """A way to learn from queries: ``plan(d, m, budget)`` gives a ``Planned`` or raises ``QueryBudgetExceeded``
    (or ValueError when the route cannot learn layers of this size)."""

    name: str
    plan: Callable[[int, int, int], Planned]
    summary: str


QUERY_ROUTES: dict[str, QueryRoute] = {}


def register_query_route(route: QueryRoute) -> QueryRoute:
    """Make ``route`` runnable as ``learn_from_queries(method=route.name)``.

    Parameters
    ----------
    route : QueryRoute
        The route (a name registered again is replaced).

    Returns
    -------
    QueryRoute
        ``route``.
    """
    if not isinstance(route, QueryRoute):
        raise TypeError(f"route must be a QueryRoute, got {type(route).__name__}")
    QUERY_ROUTES[route.name] = route
    return route


def _overhead(d: int) -> int:
    return d + OVERHEAD_REPEATS + _DEFAULTS.validation_queries


def _probe(m: int) -> int:
    """The scale probe's queries (one round; more rounds come out of the spare families' queries)."""
    return 0 if m == 1 else _DEFAULTS.probe_queries


def _theta_count(d: int, m: int, family_equations: int) -> int:
    k = theta_tokens(d, m)
    need = d * d + d - family_equations
    return math.ceil(need / (k * (k - 1))) + 1 if need > 0 else 0


def _refuse_heads(d: int, m: int) -> None:
    if m > d:
        raise ValueError(
            f"the query routes need m <= d (the heads' residues δW_i must be independent), got m={m}, d={d}"
        )


def _check_budget(name: str, predicted: int, budget: int) -> None:
    if predicted > budget:
        raise QueryBudgetExceeded(
            f"method={name!r} needs about {predicted} queries at this size, above the budget of {budget}",
            needed=predicted,
            budget=budget,
        )


def plan_rational(d: int, m: int, budget: int) -> Planned:
    """The most copies per family (m + 1 .. 2m) whose plan, with redraws to spare, fits ``budget``."""
    _refuse_heads(d, m)
    if m == 1:
        predicted = _overhead(d) + _theta_count(d, 1, 0)
        _check_budget("rational", predicted, budget)
        return Planned(Plan("rational"), predicted, 0)
    families = 2 * d - 1
    spare = 2 * families
    for L in range(2 * m, m, -1):
        base = _overhead(d) + _probe(m) + L * families + _theta_count(d, m, 2 * families + 2 * _probe(m))
        if base <= budget:
            return Planned(Plan("rational", copies=L), base, min(spare, (budget - base) // (2 * L)))
    base = _overhead(d) + _probe(m) + (m + 1) * families + _theta_count(d, m, 2 * families)
    _check_budget("rational", base, budget)
    raise AssertionError("unreachable")  # pragma: no cover


def plan_kkg(d: int, m: int, budget: int) -> Planned:
    """2m copies per family, d² + d − 1 families read at the first position (m = 1: the one-head grid)."""
    _refuse_heads(d, m)
    if m == 1:
        return plan_one_head(d, m, budget)
    families = d * d + d - 1
    predicted = _overhead(d) + _probe(m) + 2 * m * families
    _check_budget("kkg", predicted, budget)
    spare = min(families, (budget - predicted) // (4 * m))
    return Planned(Plan("kkg", rows="first", copies=2 * m, layout="grid", theta_queries=False), predicted, spare)


def plan_one_head(d: int, m: int, budget: int) -> Planned:
    """d single tokens and d² two-token queries, the first position read (m = 1 only)."""
    if m != 1:
        raise ValueError(f"method='one-head' learns one head (m = 1), got m = {m}")
    predicted = _overhead(d) + d * d
    _check_budget("one-head", predicted, budget)
    return Planned(Plan("one-head", rows="first", copies=1, layout="grid", theta_queries=False), predicted, 0)


def choose_route(d: int, m: int, budget: int) -> tuple[QueryRoute, Planned]:
    """``auto``: the applicable route with the fewest predicted queries (ties: registration order)."""
    best: tuple[QueryRoute, Planned] | None = None
    reasons, over_budget = [], False
    for route in QUERY_ROUTES.values():
        try:
            planned = route.plan(d, m, budget)
        except (ValueError, QueryBudgetExceeded) as exc:
            reasons.append(f"{route.name}: {exc}")
            over_budget |= isinstance(exc, QueryBudgetExceeded)
            continue
        if best is None or planned.predicted < best[1].predicted:
            best = (route, planned)
    if best is None and not over_budget:
        raise ValueError("no query route learns this size: " + "; ".join(reasons))
    if best is None:
        raise QueryBudgetExceeded("no query route fits: " + "; ".join(reasons), needed=budget + 1, budget=budget)
    return best


for _route in (
    QueryRoute("rational", plan_rational, "every output row: copy families' rational fits, then Θ (ours)"),
    QueryRoute("kkg", plan_kkg, "first row only, 2m copies per family (Kim, Kim & Guo, reconstructed)"),
    QueryRoute("one-head", plan_one_head, "m = 1, first row only, two-token queries (Bhattamishra et al.)"),
):
    register_query_route(_route)
