"""The package's own exceptions.

Bad input is a ``ValueError`` (or ``TypeError`` for a wrong type or an unknown option) raised before any
work starts. A learner phase that cannot go on with the data it was given raises ``PhaseFailed``; the
pipeline records it and stops the route (``converged=False``, the reason names the phase). Solver
failures come from the engine as ``oracles.OracleError`` subclasses. Anything else (a ``ValueError`` or
``IndexError`` from inside a phase) is a bug and propagates.
"""

from __future__ import annotations

__all__ = ["SculptError", "PhaseFailed"]


class SculptError(Exception):
    """Base class of the exceptions ``sculpt`` raises on purpose (besides ValueError/TypeError for input)."""


class PhaseFailed(SculptError):
    """A phase of the learner cannot go on: ``phase`` is its name (e.g. "4-span"), ``reason`` says why."""

    def __init__(self, phase: str, reason: str) -> None:
        super().__init__(f"{phase}: {reason}")
        self.phase = phase
        self.reason = reason
