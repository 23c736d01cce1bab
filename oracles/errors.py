"""Typed errors of the engine: every solver failure surfaces as one of these, never as a wrong answer."""

from __future__ import annotations

__all__ = ["OracleError", "EmptyBodyError", "UnboundedError", "SolverError", "MissingOracleError"]


class OracleError(Exception):
    """Base class of the engine's errors."""


class EmptyBodyError(OracleError):
    """The body has no point (an infeasible LP, or an ellipsoid that shrank to nothing)."""


class UnboundedError(OracleError):
    """An objective is unbounded over the body."""


class SolverError(OracleError):
    """A backend failed or returned a status we cannot trust.

    Attributes: ``backend`` (the solver's name) and ``status`` (its own status text).
    """

    def __init__(self, message: str, *, backend: str | None = None, status: str | None = None):
        super().__init__(message)
        self.backend = backend
        self.status = status


class MissingOracleError(TypeError):
    """An algorithm needs an oracle (``separate``, ``contains`` or ``maximize``) that the body lacks."""
