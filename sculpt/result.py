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

    def attach_held_out(self, X: Any, Y: Any) -> None:
        """Keep the held-out examples the result was validated on, for ``certificate``."""
        self._held_out = (X, Y)
        self._certificate = None

    @property
    def certificate(self) -> Any:
        """``sculpt.certify`` of the model on the held-out examples (computed on first access, then cached):
        local identifiability, noise estimate, standard errors and intervals. None without a model."""
        if getattr(self, "_certificate", None) is None:
            held = getattr(self, "_held_out", None)
            if self.model is None or held is None:
                return None
            self._certificate = self.certify()
        return self._certificate

    def attach_body(self, body: Any, span_basis: Any) -> None:
        """Keep the sculpted body K* and the recovered span basis, for ``certify(widths=True)``."""
        self._body = (body, span_basis)

    def certify(self, X: Any = None, Y: Any = None, *, widths: bool = False, **options: Any) -> Any:
        """``sculpt.certify(self.model, X, Y, **options)``; (X, Y) default to the held-out examples. With
        ``widths=True`` (sculpt runs) it also measures K*'s widths normal to the recovered span (LPs)."""
        from .certify import certify

        if widths:
            kept = getattr(self, "_body", None)
            if kept is None:
                raise ValueError("widths=True needs a sculpt run's body (this result has none)")
            options = {"body": kept[0], "span_basis": kept[1], **options}
        if X is None or Y is None:
            held = getattr(self, "_held_out", None)
            if held is None:
                raise ValueError("this result keeps no held-out examples: pass X and Y")
            X, Y = held
        if self.model is None:
            raise ValueError("this result has no model to certify")
        return certify(self.model, X, Y, **options)

    def phase(self, name: str) -> PhaseRecord:
        """The record of phase ``name``; the last one when the phases ran more than once (adaptive samples)."""
        for p in reversed(self.phases):
            if p.name == name:
                return p
        raise KeyError(f"no phase named {name!r}; phases are {[p.name for p in self.phases]}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the model itself is saved separately as npz); the certificate when it has been
        computed (``certificate``)."""
        cert = getattr(self, "_certificate", None)
        extra = {"certificate": cert.to_dict()} if cert is not None else {}
        return {
            **extra,
            "method": self.method,
            "train_error": self.train_error,
            "validation_error": self.validation_error,
            "converged": self.converged,
            "time": self.time,
            "iterations": self.iterations,
            "samples_used": self.samples_used,
            "reason": self.reason,
            "phases": [p.to_dict() for p in self.phases],
            "info": self.info,
        }
