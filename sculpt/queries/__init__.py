"""Learning from queries: black-box access to a layer F, asked on inputs the learner designs.

``learn_from_queries(oracle, d, m)`` returns the same ``LearnResult`` as ``sculpt.learn``. The routes
(``QUERY_ROUTES``: "rational", ours; "kkg" and "one-head", reconstructions of two papers' algorithms) are
described in docs/queries.md; the oracle's errors are typed (``OracleError`` and its subclasses,
``QueryBudgetExceeded``); the routes' tuned constants are the fields of ``QuerySettings``
(``learn_from_queries(..., settings=...)``).
"""

from __future__ import annotations

from .api import QUERY_METHODS, learn_from_queries
from .errors import OracleError, OracleNonFinite, OracleNotDeterministic, OracleShapeError, QueryBudgetExceeded
from .oracle import as_oracle, torch_oracle
from .routes import QUERY_ROUTES, QueryRoute, kkg_bound, register_query_route
from .settings import QuerySettings

__all__ = [
    "learn_from_queries",
    "QUERY_METHODS",
    "QUERY_ROUTES",
    "QuerySettings",
    "QueryRoute",
    "register_query_route",
    "kkg_bound",
    "as_oracle",
    "torch_oracle",
    "OracleError",
    "OracleShapeError",
    "OracleNonFinite",
    "OracleNotDeterministic",
    "QueryBudgetExceeded",
]
