"""Result types shared by the learner and the gradient baselines: ``LearnResult``, its per-phase
``PhaseRecord`` and its typed ``RouteInfo``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

if TYPE_CHECKING:
    from oracles import ConvexBody

    from .certify import Certificate
    from .model import MultiHeadAttention
    from .phases.sculpting import SculptedBody
    from .settings import Settings

__all__ = ["LearnResult", "PhaseRecord", "RouteInfo", "TruthSummary", "SculptAttempt", "ExamplesUsed"]


@dataclass
class PhaseRecord:
    """What one phase did: its ``name``, its own ``figures``, ground-truth ``truth`` figures (when the true
    model was given), wall ``time`` in seconds, ``status`` ("ok", "failed", "skipped") and a ``message``.
    Figures are JSON values (numbers, strings, lists and dicts of them), one set per phase."""

    name: str
    figures: dict[str, Any] = field(default_factory=dict)
    truth: dict[str, Any] = field(default_factory=dict)
    time: float = 0.0
    status: str = "ok"
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TruthSummary(TypedDict, total=False):
    """Head-matched distance of the returned model to the true layer (``MultiHeadAttention.distance``)."""

    theta_error: float
    w_error: float
    max_theta_error: float
    max_w_error: float
    permutation: list[int]


class SculptAttempt(TypedDict):
    """One attempt of the sculpting route: the examples phases 1–3 used, its outcome, wall seconds."""

    examples: int
    outcome: str
    time: float


class ExamplesUsed(TypedDict):
    """Examples the sculpting route read: phases 1–3's subset, phase 4's last run, the training split as a
    whole (the most any phase read) and the validation split."""

    phases_1_3: int
    phase_4: int
    training: int
    validation: int


@dataclass
class RouteInfo(Mapping[str, object]):
    """What a route reports beside the model and errors: one typed field per fact, None when the route does
    not report it.

    It also reads as a mapping of the fields that are set (``res.info["tried"]``, ``res.info.get("truth")``,
    ``"attempts" in res.info``), with ``details`` flattened in and ``settings`` as a plain dict; ``to_dict()``
    is that mapping as a JSON-ready dict. ``details`` holds what a route's own algorithm reports (the gradient
    baselines' ``restarts``, the exact route's ``recommended_samples``, ...)."""

    #: training examples after the validation split
    train_examples: int | None = None
    #: held-out examples (0: the exact route at its minimum N, checked on its training rows)
    validation_examples: int | None = None
    #: validation relative MSE counted as converged
    tol: float | None = None
    #: where the validation error was measured when no example was held out
    validation_on: str | None = None
    #: the sculpting route: phases 1–3's subset on its last attempt
    sculpt_examples: int | None = None
    #: the sculpting route: fraction of agreeing rows fitted by one-hot attention (the argmax test)
    onehot_fraction: float | None = None
    #: the sculpting route: why the argmax branch was left for the body route
    argmax_route: str | None = None
    #: the sculpting route: phase 4's estimate of the head count
    m_estimate: int | None = None
    #: the sculpting route: each attempt's examples and outcome
    attempts: list[SculptAttempt] | None = None
    #: distance of the returned model to ``truth`` when it was given (empty otherwise)
    truth: TruthSummary | None = None
    #: the sculpting route: examples read, by phase
    examples_used: ExamplesUsed | None = None
    #: ``auto``: each step tried, in order, with its time and outcome
    tried: list[str] | None = None
    #: the route whose model is returned ("sculpt", "exact", "gradient", "vp-lm")
    route: str | None = None
    #: the step that produced the model (for auto: "exact", "auto-peer", "auto-vp-lm", "sculpt",
    #: "fallback-gradient"; else the route)
    model_from: str | None = None
    #: the settings the run used, every "auto" field resolved
    settings: Settings | None = None
    #: the engine's LP backend (routes that solve LPs)
    solver: str | None = None
    #: the noise-floor test of the returned model (``sculpt.noise.NoiseVerdict.to_dict()``)
    noise: dict[str, object] | None = None
    #: why the route's own method produced no model, when the model is a fallback least-squares fit
    fallback: str | None = None
    #: what the route's own algorithm reports (JSON values)
    details: dict[str, object] = field(default_factory=dict)

    @classmethod
    def of(cls, info: Mapping[str, object] | None) -> RouteInfo:
        """A RouteInfo from a mapping (a RouteInfo is copied): known names fill their field, the rest go to
        ``details``."""
        if isinstance(info, RouteInfo):
            return RouteInfo(**{f.name: getattr(info, f.name) for f in fields(info)} | {"details": dict(info.details)})
        out = cls()
        for key, value in (info or {}).items():
            out[key] = value
        return out

    @staticmethod
    def _typed() -> tuple[str, ...]:
        return tuple(f.name for f in fields(RouteInfo) if f.name != "details")

    def __setitem__(self, key: str, value: object) -> None:
        """Set a field by name, or a ``details`` entry for any other name."""
        if key in self._typed():
            setattr(self, key, value)
        else:
            self.details[key] = value

    def __getitem__(self, key: str) -> object:
        if key == "settings" and self.settings is not None:
            return self.settings.to_dict()
        if key in self._typed():
            value = getattr(self, key)
            if value is None:
                raise KeyError(key)
            return value
        return self.details[key]

    def __iter__(self) -> Iterator[str]:
        yield from (k for k in self._typed() if getattr(self, k) is not None)
        yield from self.details

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def to_dict(self) -> dict[str, object]:
        """The set fields and ``details`` as one JSON-ready dict (``settings`` as a nested dict)."""
        return {k: self[k] for k in self}


class LearnResult:
    """Outcome of learning: the ``model`` (every route returns its best model; None only from a baseline given
    nothing it could fit), the per-phase records, samples used, training/validation relative MSE, the
    ``status`` ("exact", "noise" or "failed", ``sculpt.noise``) and whether it ``converged``, the noise level
    ``noise_sigma``, wall ``time``; ``iterations`` for iterative methods; ``method`` says which route ran and
    ``reason`` why; ``info`` is the route's ``RouteInfo`` (a mapping too: ``res.info["route"]``).
    ``summary()`` says it in a few plain lines.

    Parameters
    ----------
    model : MultiHeadAttention or None
        The learned layer.
    method : str
        The route or baseline that produced it.
    train_error, validation_error : float, float or None
        Relative MSE on the examples fitted and on the held-out examples (None: none held out).
    converged : bool
        Status "exact" (``validation_error <= tol``), or "noise" when ``polish.accept_noise`` (a baseline without
        a validation split: its own stopping rule).
    time : float
        Wall seconds.
    iterations : int
        Iterations of iterative methods.
    samples_used : int
        Examples read (training and validation).
    phases : list of PhaseRecord
        What each phase did, in order.
    reason : str
        Why the run stopped, in words.
    info : RouteInfo or mapping, optional
        What the route reports; a mapping is converted (``RouteInfo.of``).
    status : str, optional
        "exact", "noise" or "failed" (default: "exact" when converged, else "failed").
    noise_sigma : float, optional
        σ̂, the label noise's estimated standard deviation per output coordinate, when status is "noise".
    """

    def __init__(
        self,
        model: MultiHeadAttention | None,
        method: str,
        train_error: float,
        validation_error: float | None = None,
        converged: bool = False,
        time: float = 0.0,
        iterations: int = 0,
        samples_used: int = 0,
        phases: list[PhaseRecord] | None = None,
        reason: str = "",
        info: RouteInfo | Mapping[str, object] | None = None,
        status: str | None = None,
        noise_sigma: float | None = None,
    ) -> None:
        self.model = model
        self.method = method
        self.train_error = train_error
        self.validation_error = validation_error
        self.converged = converged
        self.time = time
        self.iterations = iterations
        self.samples_used = samples_used
        self.phases: list[PhaseRecord] = [] if phases is None else phases
        self.reason = reason
        self.info: RouteInfo = info if isinstance(info, RouteInfo) else RouteInfo.of(info)
        self.status: str = status if status is not None else ("exact" if converged else "failed")
        self.noise_sigma: float | None = noise_sigma
        self._held_out: tuple[np.ndarray, np.ndarray] | None = None
        self._certificate: Certificate | None = None
        self._body: tuple[SculptedBody | ConvexBody, np.ndarray] | None = None

    def __repr__(self) -> str:
        """One short line: route, status, validation error, σ̂, heads, samples, time."""
        val = "-" if self.validation_error is None else f"{self.validation_error:.3g}"
        sigma = "" if self.noise_sigma is None else f", noise_sigma={self.noise_sigma:.3g}"
        heads = "" if self.model is None else f", m={self.model.m}"
        return (
            f"LearnResult(method={self.method!r}, status={self.status!r}, converged={self.converged}, "
            f"validation_error={val}{sigma}{heads}, samples_used={self.samples_used}, time={self.time:.3g})"
        )

    def summary(self) -> str:
        """A few plain lines: the outcome, the errors, the noise level, the time and examples, the route and
        the heads.

        Returns
        -------
        str
            Multi-line text, no trailing newline.
        """
        said = {
            "exact": "learned exactly (validation error at most tol)",
            "noise": "learned to the noise level of the labels (the validation error is the labels' noise)",
            "failed": "not learned",
        }
        if self.info.fallback is not None:
            said["failed"] = "the route could not finish; the model is a fallback least-squares fit (see why)"
        route = self.info.route or self.method
        step = self.info.model_from
        via = f" (model from step {step})" if step and step != route else ""
        val = "none held out" if self.validation_error is None else f"{self.validation_error:.3g}"
        lines = [
            f"status:      {self.status}: {said.get(self.status, self.status)}; converged = {self.converged}",
            f"errors:      validation relative MSE {val}, training {self.train_error:.3g}",
        ]
        if self.noise_sigma is not None:
            lines.append(f"noise:       σ̂ = {self.noise_sigma:.3g} per output coordinate")
        lines += [
            f"time:        {self.time:.2f} s on {self.samples_used:,} examples",
            f"route:       {route}{via}",
            "heads:       no model" if self.model is None else f"heads:       {self.model.m} (d = {self.model.d})",
        ]
        if self.status == "failed" and self.reason:
            lines.append(f"why:         {self.reason[:300]}{'…' if len(self.reason) > 300 else ''}")
        return "\n".join(lines)

    def attach_held_out(self, X: np.ndarray, Y: np.ndarray) -> None:
        """Keep the held-out examples the result was validated on, for ``certificate``."""
        self._held_out = (X, Y)
        self._certificate = None

    @property
    def certificate(self) -> Certificate | None:
        """``sculpt.certify`` of the model on the held-out examples (computed on first access, then cached):
        local identifiability, noise estimate, standard errors and intervals. None without a model."""
        if self._certificate is None:
            if self.model is None or self._held_out is None:
                return None
            self._certificate = self.certify()
        return self._certificate

    def attach_body(self, body: SculptedBody | ConvexBody, span_basis: np.ndarray) -> None:
        """Keep the sculpted body K* and the recovered span basis, for ``certify(widths=True)``."""
        self._body = (body, span_basis)

    def certify(
        self, X: np.ndarray | None = None, Y: np.ndarray | None = None, *, widths: bool = False, **options: Any
    ) -> Certificate:
        """``sculpt.certify(self.model, X, Y, **options)``; (X, Y) default to the held-out examples. With
        ``widths=True`` (sculpt runs) it also measures K*'s widths normal to the recovered span (LPs)."""
        from .certify import certify

        if widths:
            if self._body is None:
                raise ValueError("widths=True needs a sculpt run's body (this result has none)")
            options = {"body": self._body[0], "span_basis": self._body[1], **options}
        if X is None or Y is None:
            if self._held_out is None:
                raise ValueError("this result keeps no held-out examples: pass X and Y")
            X, Y = self._held_out
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
        cert = self._certificate
        extra = {"certificate": cert.to_dict()} if cert is not None else {}
        return {
            **extra,
            "method": self.method,
            "train_error": self.train_error,
            "validation_error": self.validation_error,
            "converged": self.converged,
            "status": self.status,
            "noise_sigma": self.noise_sigma,
            "time": self.time,
            "iterations": self.iterations,
            "samples_used": self.samples_used,
            "reason": self.reason,
            "phases": [p.to_dict() for p in self.phases],
            "info": self.info.to_dict(),
        }
