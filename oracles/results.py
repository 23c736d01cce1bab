"""Result dataclass shared by the ellipsoid method and the analytic-centre cutting-plane method.

Both methods localise the body K inside a set E_k that shrinks with every cut; the result reports the
final localisation ellipsoid {y : (y - center)ᵀ shape⁻¹ (y - center) <= 1} together with how the run ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

__all__ = ["EllipsoidResult"]

Status = Literal["feasible", "empty", "optimal", "max_iter", "flat"]

STATUSES: tuple[str, ...] = ("feasible", "empty", "optimal", "max_iter", "flat")


@dataclass
class EllipsoidResult:
    """Outcome of ``ellipsoid`` or ``cutting_plane``.

    Attributes
    ----------
    status : {"feasible", "optimal", "empty", "flat", "max_iter"}
        "feasible": ``x`` is a point of the body (within the oracle tolerance). "optimal": ``x`` minimises
        the objective over the body within ``tol`` (``value - lower_bound <= tol``). "empty": the body has no
        point in the starting region (certified by a cut missing the localisation set, or by the
        localisation set becoming thinner than the oracle tolerance). "flat": the localisation ellipsoid
        became thinner than ``flat_tol`` in ``flat_directions`` while no point was found yet: the body lies
        in that thin slab (see ``affine_hull_by_ellipsoid``). "max_iter": the budget ran out, or an answer
        could not be certified in float64 (``message`` says which; ``x`` is the best point found, if any).
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
        half-widths.
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

    @property
    def success(self) -> bool:
        """True when the run answered the question: a point, an optimum, or a certificate of emptiness."""
        return self.status in ("feasible", "optimal", "empty")

    @property
    def is_flat(self) -> bool:
        """True when some direction of the localisation ellipsoid was found thinner than ``flat_tol``."""
        return self.flat_widths.size > 0
