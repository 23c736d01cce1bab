"""Learning routes: the ways ``learn`` can learn a layer, in one registry shared by ``learn``, the command line
(``--method``) and the benchmark (``sculpt bench`` methods).

A route is a ``Route``: its name, ``min_examples(d, k, m)``, the settings groups it reads, ``run(context)``
and whether ``learn`` validates and polishes its model. ``register_route`` adds one (or replaces one of the
same name); ``ROUTES`` holds them by name. The built-in routes, one module each:

- ``sculpt`` (``sculpt.routes.sculpting``): Chen & Li's phases 1–6 on a sculpted convex body, then the polish;
- ``exact`` (``sculpt.routes.exact``): one head exactly from two linear systems (m = 1, 2 <= k < d);
- ``gradient`` (``sculpt.routes.gradient``): full-batch L-BFGS from a random initialisation;
- ``vp-lm`` (``sculpt.routes.vp_lm``): the polish's variable-projection LM from random starts;
- ``auto`` (``sculpt.routes.auto``): the others (and L-BFGS peers) in turn, by name, until one validates.
"""

from __future__ import annotations

from . import auto, exact, gradient, sculpting, vp_lm
from .base import (
    ROUTES,
    Holdout,
    Route,
    RouteContext,
    get_route,
    register_route,
    route_names,
    run_route,
    truth_summary,
)

__all__ = [
    "Route",
    "RouteContext",
    "Holdout",
    "ROUTES",
    "register_route",
    "get_route",
    "route_names",
    "run_route",
    "truth_summary",
]

# the built-in routes, in the order ``sculpt.learner.METHODS`` lists them
for _route in (sculpting.ROUTE, exact.ROUTE, gradient.ROUTE, vp_lm.ROUTE, auto.ROUTE):
    register_route(_route)
