"""Result types shared by the learner and the gradient baselines."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class PhaseRecord:
    """What one phase did: its ``name``, its own ``figures``, ground-truth ``truth`` figures (when the true
    model was given), wall ``time`` in seconds, ``status`` ("ok", "failed", "skipped") and a ``message``."""

    name: str
    figures: dict[str, Any] = field(default_factory=dict)
    truth: dict[str, Any] = field(default_factory=dict)
    time: float = 0.0
    status: str = "ok"
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LearnResult:
    """Outcome of learning: the ``model`` (a MultiHeadAttention, or None if no phase produced one), the
    per-phase records, samples used, training/validation relative MSE, whether it ``converged``, wall
    ``time``; ``iterations`` for iterative methods; ``method`` says which route ran and ``reason`` why."""

    model: Any
    method: str
    train_error: float
    validation_error: float | None = None
    converged: bool = False
    time: float = 0.0
    iterations: int = 0
    samples_used: int = 0
    phases: list[PhaseRecord] = field(default_factory=list)
    reason: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    def phase(self, name: str) -> PhaseRecord:
        """The record of phase ``name``; the last one when the phases ran more than once (adaptive samples)."""
        for p in reversed(self.phases):
            if p.name == name:
                return p
        raise KeyError(f"no phase named {name!r}; phases are {[p.name for p in self.phases]}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the model itself is saved separately as npz)."""
        return {
            "method": self.method, "train_error": self.train_error, "validation_error": self.validation_error,
            "converged": self.converged, "time": self.time, "iterations": self.iterations,
            "samples_used": self.samples_used, "reason": self.reason,
            "phases": [p.to_dict() for p in self.phases], "info": self.info,
        }
