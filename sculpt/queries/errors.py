"""The exceptions of learning from queries: a bad oracle, and a query budget too small for a route.

Each names the query that exposed the problem (its number in the order the learner asked, the phase that asked
it, its number of tokens) and keeps that query's input (``query``) for the caller to replay.
"""

from __future__ import annotations

import numpy as np

from ..errors import SculptError

__all__ = ["OracleError", "OracleShapeError", "OracleNonFinite", "OracleNotDeterministic", "QueryBudgetExceeded"]


class OracleError(SculptError):
    """The oracle's answer cannot be an attention layer's: ``index`` is the query's number (0-based, in the order
    asked), ``phase`` the step that asked it, ``query`` its input (k, d)."""

    def __init__(self, message: str, *, index: int, phase: str, query: np.ndarray) -> None:
        super().__init__(f"query #{index} ({phase}, {query.shape[0]} tokens): {message}")
        self.index = index
        self.phase = phase
        self.query = query


class OracleShapeError(OracleError):
    """The oracle returned an array of another shape than its input's (n, k, d)."""


class OracleNonFinite(OracleError):
    """The oracle returned NaN or inf."""


class OracleNotDeterministic(OracleError):
    """The oracle answered the same query twice with different outputs (it is randomised, or stateful), and no
    ``noise`` level was declared."""


class QueryBudgetExceeded(SculptError):
    """A route needs more queries than ``max_queries`` allows: ``needed`` (predicted or reached) and ``budget``."""

    def __init__(self, message: str, *, needed: int, budget: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.budget = budget
