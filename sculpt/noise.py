"""The noise-floor test: is a fit exact, at the noise level of its labels, or failed?

Real labels carry noise, so a least-squares fit of a multi-head attention layer ends at a validation error
above any fixed tolerance. This module decides, for one fit, between three statuses (``STATUSES``):

- ``"exact"``: the validation relative MSE is at most ``tol``;
- ``"noise"``: the fit is at the noise floor: the residual variance on the validation split is statistically
  indistinguishable from the noise variance σ̂² estimated from the training residuals (an F-test with the
  fit's 2md² parameters as its degrees of freedom), the last polish stage no longer improves the validation
  error, and the relative MSE is below ``noise_max_level`` (a fit further off is a wrong model, not noise);
- ``"failed"``: anything else.

The test (``PolishSettings``'s ``noise_*`` fields hold its level and thresholds). With n = N_fit·k·d observations fitted by
p = 2md² parameters and n_v = N_val·k·d held-out observations,

    σ̂² = RSS_fit / (n − p),     F = (RSS_val / n_v) / (σ̂² · (1 + p / (n − p))),

and the fit is at the noise floor when F ≤ F⁻¹(1 − level; n_v, n − p). The factor 1 + p/(n − p) is the excess
prediction error of a least-squares fit on new inputs (p/n of σ² for a linear model with random design), so
under i.i.d. label noise of variance σ² and a fit at the least-squares optimum, F follows (approximately) the
F distribution and the test calls such a fit "failed" with probability ``noise_level``.

Assumptions: label noise independent across examples and coordinates with a common variance (heavier tails
than Gaussian widen the spread of F and raise the false-alarm rate); the fit is a (local) least-squares
optimum, which the polish's Levenberg–Marquardt stages provide. A local minimum whose residual is below
``noise_max_level`` and does not improve with more examples looks like noise: the test cannot tell them apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import cast

import numpy as np
from scipy import stats

from .settings import PolishSettings
from .toolkit.forward_pass import residual_sums

__all__ = ["STATUSES", "NoiseVerdict", "noise_sigma", "residual_sum", "noise_verdict", "assess_fit"]

#: the statuses a fit can have, best first
STATUSES: tuple[str, ...] = ("exact", "noise", "failed")


@dataclass(frozen=True)
class NoiseVerdict:
    """The noise-floor test's outcome for one fit.

    Attributes
    ----------
    status : str
        "exact", "noise" or "failed".
    sigma : float or None
        σ̂, the estimated standard deviation of the label noise per output coordinate (label units); None
        when the fit has no more observations than parameters.
    relative_sigma : float or None
        σ̂ over the root mean square of the fitted labels.
    ratio : float
        F, the validation residual variance over σ̂²·(1 + p/(n − p)) (NaN when σ̂ is undefined).
    threshold : float
        The F quantile at 1 − level the ratio is compared with.
    improvement : float or None
        Relative drop of the validation error over the last polish stage (None: one stage only).
    fit_observations, validation_observations, parameters : int
        n, n_v and p of the test.
    reason : str
        The verdict in words.
    """

    status: str
    sigma: float | None
    relative_sigma: float | None
    ratio: float
    threshold: float
    improvement: float | None
    fit_observations: int
    validation_observations: int
    parameters: int
    reason: str

    def to_dict(self) -> dict[str, object]:
        """The verdict as a JSON-ready dict."""
        return asdict(self)

    @classmethod
    def of(cls, data: Mapping[str, object]) -> NoiseVerdict:
        """The verdict from ``to_dict()``'s output (a phase record's figures, ``res.info.noise``)."""

        def opt(key: str) -> float | None:
            v = data.get(key)
            return None if v is None else float(cast(float, v))

        return cls(
            status=str(data["status"]),
            sigma=opt("sigma"),
            relative_sigma=opt("relative_sigma"),
            ratio=float(cast(float, data["ratio"])),
            threshold=float(cast(float, data["threshold"])),
            improvement=opt("improvement"),
            fit_observations=int(cast(int, data["fit_observations"])),
            validation_observations=int(cast(int, data["validation_observations"])),
            parameters=int(cast(int, data["parameters"])),
            reason=str(data["reason"]),
        )


def residual_sum(thetas: np.ndarray, ws: np.ndarray, X: np.ndarray, Y: np.ndarray) -> tuple[float, float]:
    """Residual and label sums of squares of a layer on (X, Y).

    Parameters
    ----------
    thetas, ws : np.ndarray
        The layer's heads and projections, (m, d, d).
    X, Y : np.ndarray
        Examples and labels, (N, k, d).

    Returns
    -------
    rss, yy : float
        ‖Y − F(X)‖² and ‖Y‖².
    """
    return residual_sums(thetas, ws, X, Y)  # chunked: no prediction of the data's size is held


def noise_sigma(rss: float, observations: int, parameters: int) -> float | None:
    """σ̂ = √(RSS / (n − p)): the noise level of a least-squares fit of p parameters to n observations.

    Parameters
    ----------
    rss : float
        Residual sum of squares on the fitted observations.
    observations, parameters : int
        n and p.

    Returns
    -------
    float or None
        σ̂, or None when n <= p (no degree of freedom left).

    Examples
    --------
    >>> noise_sigma(4.0, 104, 4)
    0.2
    """
    dof = int(observations) - int(parameters)
    if dof <= 0 or not math.isfinite(rss):
        return None
    return math.sqrt(max(float(rss), 0.0) / dof)


def _improvement(history: Sequence[float]) -> float | None:
    """Relative drop of the last entry of ``history`` against the one before (None with fewer than two)."""
    if len(history) < 2 or not history[-2] > 0:
        return None
    return float((history[-2] - history[-1]) / history[-2])


def noise_verdict(
    *,
    validation_error: float,
    tol: float,
    fit: tuple[float, float, int],
    validation: tuple[float, int],
    parameters: int,
    history: Sequence[float] = (),
    settings: PolishSettings | None = None,
) -> NoiseVerdict:
    """The noise-floor test (module docstring) on a fit's residual sums.

    Parameters
    ----------
    validation_error : float
        Relative MSE on the validation split.
    tol : float
        Validation relative MSE counted as exact.
    fit : (float, float, int)
        (RSS, ‖Y‖², n) on the fitted examples: residual and label sums of squares, observations (N_fit·k·d).
    validation : (float, int)
        (RSS, n_v) on the validation split.
    parameters : int
        p, the parameters fitted (2md²).
    history : sequence of float
        Validation relative MSE of successive polish stages, the fit's last (empty: unknown).
    settings : PolishSettings, optional
        ``noise_level``, ``noise_min_improvement``, ``noise_max_level`` (defaults: ``learn``'s).

    Returns
    -------
    NoiseVerdict
        The status, σ̂ and the test's figures.
    """
    s = settings or PolishSettings()
    rss, yy, n = fit
    rss_v, n_v = validation
    sigma = noise_sigma(rss, n, parameters)
    rel_sigma = None if sigma is None or yy <= 0 else sigma / math.sqrt(yy / max(n, 1))
    dof = n - parameters
    thr = float(stats.f.ppf(1.0 - s.noise_level, max(n_v, 1), max(dof, 1)))
    ratio = math.nan
    if sigma is not None and sigma > 0 and n_v > 0:
        ratio = (rss_v / n_v) / (sigma * sigma * (1.0 + parameters / dof))
    imp = _improvement(history)
    figures = (sigma, rel_sigma, ratio, thr, imp, int(n), int(n_v), int(parameters))
    if validation_error <= tol:
        return NoiseVerdict("exact", None, None, *figures[2:], f"validation relative MSE <= tol {tol:.0e}")
    why = _failure(validation_error, rss / yy if yy > 0 else math.inf, sigma, ratio, thr, imp, s)
    if why is not None:
        return NoiseVerdict("failed", *figures, why)
    assert rel_sigma is not None
    why = (
        f"at the noise floor: validation residual variance / σ̂² = {ratio:.3f} <= {thr:.3f} (F-test, level "
        f"{s.noise_level:g}, {parameters} parameters)"
        + (f", last stage improved it by {imp:.1%}" if imp is not None else "")
        + f"; σ̂ = {sigma:.3g} ({rel_sigma:.2%} of the labels' rms)"
    )
    return NoiseVerdict("noise", *figures, why)


def _failure(
    val: float,
    train: float,
    sigma: float | None,
    ratio: float,
    thr: float,
    imp: float | None,
    s: PolishSettings,
) -> str | None:
    """Why a fit above tol is not at the noise floor, or None when it is."""
    if sigma is None:
        return "too few fitted observations for a noise estimate (no more than the parameters)"
    if not math.isfinite(val) or max(val, train) > s.noise_max_level:
        return f"relative MSE {max(val, train):.2e} > polish.noise_max_level {s.noise_max_level:.0e}: a wrong fit, not noise"
    if not ratio <= thr:
        return (
            f"validation residual variance / σ̂² = {ratio:.3f} > {thr:.3f} (F-test, level {s.noise_level:g}): the fit "
            "predicts held-out labels worse than the noise explains"
        )
    if imp is not None and imp > s.noise_min_improvement:
        return f"still improving: the last polish stage lowered the validation error by {imp:.1%}"
    return None


def assess_fit(
    thetas: np.ndarray,
    ws: np.ndarray,
    fitted: tuple[np.ndarray, np.ndarray],
    held_out: tuple[np.ndarray, np.ndarray],
    *,
    tol: float,
    history: Sequence[float] = (),
    settings: PolishSettings | None = None,
) -> NoiseVerdict:
    """The noise-floor test of a layer fitted on ``fitted`` and validated on ``held_out``.

    Parameters
    ----------
    thetas, ws : np.ndarray
        The fitted layer, (m, d, d).
    fitted : (np.ndarray, np.ndarray)
        The examples the layer was fitted on (X, Y), (N_fit, k, d).
    held_out : (np.ndarray, np.ndarray)
        The validation split (X, Y).
    tol : float
        Validation relative MSE counted as exact.
    history : sequence of float
        Validation relative MSE of the fit's successive polish stages (empty: unknown).
    settings : PolishSettings, optional
        The test's ``noise_*`` fields (defaults: ``learn``'s).

    Returns
    -------
    NoiseVerdict
        The verdict (``noise_verdict``).

    Examples
    --------
    >>> from sculpt import plant, sample_inputs
    >>> layer = plant(4, 3, 1, seed=0)
    >>> X = sample_inputs(200, 3, 4, rng=1)
    >>> assess_fit(layer.thetas, layer.ws, (X[:100], layer(X[:100])), (X[100:], layer(X[100:])), tol=1e-12).status
    'exact'
    """
    Xf, Yf = fitted
    Xv, Yv = held_out
    m, d = thetas.shape[0], thetas.shape[1]
    rss_v, yy_v = residual_sum(thetas, ws, Xv, Yv)
    val = rss_v / yy_v if yy_v > 0 else math.inf
    if val <= tol:  # exact: the verdict needs no pass over the fitted examples (the figures scale the held-out sums)
        scale = Yf.size / max(Yv.size, 1)
        rss, yy = rss_v * scale, yy_v * scale
    else:
        rss, yy = residual_sum(thetas, ws, Xf, Yf)
    return noise_verdict(
        validation_error=val,
        tol=tol,
        fit=(rss, yy, int(Yf.size)),
        validation=(rss_v, int(Yv.size)),
        parameters=2 * m * d * d,
        history=history,
        settings=settings,
    )
