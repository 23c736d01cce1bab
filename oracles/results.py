"""The engine's result types: ``CompactResult`` (short repr and ``summary()`` for every result dataclass) and
``EllipsoidResult``, shared by the ellipsoid method and the analytic-centre cutting-plane method.

Both methods localise the body K inside a set E_k that shrinks with every cut; the result reports the
final localisation ellipsoid {y : (y - center)ᵀ shape⁻¹ (y - center) <= 1} together with how the run ended.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

__all__ = ["EllipsoidResult", "CompactResult"]

Status = Literal["feasible", "empty", "optimal", "max_iter", "flat", "stalled"]

STATUSES: tuple[str, ...] = ("feasible", "empty", "optimal", "max_iter", "flat", "stalled")

REPR_LIMIT = 200  # characters: a result's repr fits one line of a log or a notebook cell


def _field_names(obj: object) -> list[str]:
    if dataclasses.is_dataclass(obj):
        return [f.name for f in dataclasses.fields(obj) if f.repr]
    return list(getattr(obj, "_fields", ()))  # a NamedTuple


def _brief(value: object, width: int = 40) -> str:
    """One field for a repr: numbers to 4 digits, arrays by shape, long text and objects cut to ``width``."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return repr(bool(value)) if value is not None else "None"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4g}"
    if isinstance(value, np.ndarray):
        return f"<array {'x'.join(map(str, value.shape))}>" if value.ndim else _brief(value.item(), width)
    if isinstance(value, dict):
        return f"<dict {len(value)} keys>"
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


class CompactResult:
    """Mixin for the engine's result dataclasses (and NamedTuples): a one-line ``repr`` under 200 characters
    (``status`` first when there is one, numbers to 4 digits, arrays as ``<f6x6>`` = float of shape (6, 6),
    long text cut) and a readable multi-line ``summary()``."""

    _repr_fields: tuple[str, ...] = ()  # the fields the repr shows, in order (empty: every field)

    def __repr__(self) -> str:
        names = list(getattr(self, "_repr_fields", ())) or _field_names(self)
        names = (["status"] if "status" in names else []) + [n for n in names if n != "status"]
        head = f"{type(self).__name__}("
        parts: list[str] = []
        for name in names:
            part = f"{name}={_brief(getattr(self, name))}"
            if len(head) + sum(len(p) + 2 for p in parts) + len(part) + 5 > REPR_LIMIT:
                parts.append("…")
                break
            parts.append(part)
        return head + ", ".join(parts) + ")"

    def summary(self) -> str:
        """Several lines: one per field, arrays by shape with their value range, text in full."""
        lines = [type(self).__name__]
        for name in _field_names(self):
            value = getattr(self, name)
            if isinstance(value, np.ndarray) and value.size and value.dtype.kind in "iuf":
                shown = f"array of shape {value.shape}, entries in [{value.min():.4g}, {value.max():.4g}]"
            elif isinstance(value, np.ndarray):
                shown = f"array of shape {value.shape}"
            elif isinstance(value, str):
                shown = value
            else:
                shown = _brief(value, 100)
            lines.append(f"  {name}: {shown}")
        return "\n".join(lines)


@dataclass(repr=False)
class EllipsoidResult(CompactResult):
    """Outcome of ``ellipsoid`` or ``cutting_plane``.

    Attributes
    ----------
    status : {"feasible", "optimal", "empty", "flat", "stalled", "max_iter"}
        "feasible": ``x`` is a point of the body (within the oracle tolerance). "optimal": ``x`` minimises
        the objective over the body within ``tol`` (``value - lower_bound <= tol``); when ``is_flat`` the
        body was found flat and the minimisation ran inside its flat (see ``flat_directions``). "empty": the
        body has no point in the starting region (certified by a cut missing the localisation set, or by the
        localisation set becoming thinner than the oracle tolerance). "flat" (no objective): the
        localisation ellipsoid became thinner than ``flat_tol`` in ``flat_directions`` while no point was
        found yet: the body lies in that thin slab (see ``affine_hull_by_ellipsoid``). "stalled" (with an
        objective): neither the best value nor the lower bound improved for the stall budget; ``x`` is the
        best point found, ``value - lower_bound`` the gap reached and ``message`` the reason. "max_iter": the
        budget ran out, or an answer could not be certified in float64 (``message`` says which; ``x`` is the
        best point found, if any).
    x, value : ndarray or None, float or None
        The point found (None if none) and ``objective @ x`` (None without an objective).
    iterations, oracle_calls : int
        Localisation-set updates; ``body.separate`` calls.
    center, shape : ndarray
        The final localisation ellipsoid {y : (y - center)ᵀ shape⁻¹ (y - center) <= 1} (for the
        cutting-plane method: the analytic centre and an ellipsoid containing the localisation polytope).
    lower_bound : float or None
        A certified lower bound on min objective over the body (optimisation only).
    log_volumes : ndarray
        log(vol E_k / vol unit ball) after each update (non-increasing for the ellipsoid method).
    flat_directions, flat_widths : ndarray
        (n, r) orthonormal columns u with the body inside {y : |uᵀ(y - center)| <= flat_widths}, and the (r,)
        half-widths. With an objective the run goes on inside the flat through a point of the body
        orthogonal to these directions, and ``lower_bound`` bounds the objective over the body's points in
        that flat.
    recycled_cuts : int
        Updates made without an oracle call (a stored cut, or the start ball's tangent cut).
    message : str
        Why the run ended.
    """

    status: Status
    x: np.ndarray | None
    value: float | None
    iterations: int
    oracle_calls: int
    center: np.ndarray
    shape: np.ndarray
    lower_bound: float | None = None
    log_volumes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    flat_directions: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    flat_widths: np.ndarray = field(default_factory=lambda: np.zeros(0))
    recycled_cuts: int = 0
    message: str = ""

    _repr_fields = ("status", "value", "lower_bound", "iterations", "oracle_calls", "x", "flat_widths")

    @property
    def gap(self) -> float | None:
        """value - lower_bound (None without both)."""
        if self.value is None or self.lower_bound is None:
            return None
        return self.value - self.lower_bound

    def summary(self) -> str:
        """A few readable lines: the status and why, the point and bounds, the work done, flatness."""
        lines = [f"{type(self).__name__}: {self.status} ({self.message})" if self.message else self.status]
        if self.x is not None:
            lines.append(f"  x: {self.x.shape[0]}-vector, ‖x‖ = {float(np.linalg.norm(self.x)):.6g}")
        if self.value is not None:
            lines.append(f"  value: {self.value:.10g}")
        if self.lower_bound is not None:
            gap = self.gap
            lines.append(f"  lower bound: {self.lower_bound:.10g}" + ("" if gap is None else f" (gap {gap:.3g})"))
        lines.append(
            f"  work: {self.iterations} updates, {self.oracle_calls} oracle calls, {self.recycled_cuts} free cuts"
        )
        if self.is_flat:
            lines.append(
                f"  flat: {self.flat_widths.size} thin directions, half-widths <= {float(self.flat_widths.max()):.3g}"
            )
        return "\n".join(lines)

    @property
    def success(self) -> bool:
        """True when the run answered the question: a point, an optimum, or a certificate of emptiness."""
        return self.status in ("feasible", "optimal", "empty")

    @property
    def is_flat(self) -> bool:
        """True when some direction of the localisation ellipsoid was found thinner than ``flat_tol``."""
        return self.flat_widths.size > 0
