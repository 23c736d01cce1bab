"""Typed settings for ``learn_from_queries``: the query routes' tuned constants in one frozen dataclass.

Every field has its default and a one-line what/why reason (``QuerySettings.describe()`` prints them). Values are
validated on construction; ``QuerySettings().merged(fit_rtol=1e-9)`` (or a mapping) changes named fields and keeps
the others, and an unknown name is a ``TypeError`` naming it and the closest valid name, as for ``sculpt.Settings``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..settings import _Group, nonneg_int, opt, pos_int, positive

__all__ = ["QuerySettings", "query_settings"]


@dataclass(frozen=True)
class QuerySettings(_Group):
    """The constants of the query routes (``learn_from_queries``); docs/queries.md explains the steps.

    Attributes
    ----------
    fit_rtol, max_condition, max_family_logit, max_shrink : float
        When a noise-free copy family is redrawn, and how far it shrinks.
    noise_fit, noise_condition : float
        The same tests with output noise σ.
    match_rtol : float
        The largest relative disagreement of one head's residues across families.
    target_logit, probe_queries, probe_rounds : float, int, int
        The scale probe.
    polish_above, polish_below : float
        The validation errors between which a noise-free model gets the LM polish.
    theta_min_weight, theta_shrink, theta_rounds : float, float, int
        Smaller Θ queries while the equations of non-negligible attention weights leave Θ undetermined.
    validation_queries, redraw_rounds, refine_rounds, attempts, max_repeats : int
        Query and round counts.
    repeat_rtol, repeat_sigmas : float
        The test that the oracle is a function of its input (one query asked twice).
    """

    fit_rtol: float = opt(
        1e-10, "a noise-free family fit with a larger relative residual is redrawn (ill-conditioned poles)", positive
    )
    match_rtol: float = opt(
        0.05,
        "one head's residues disagreeing across families by more (relative) are no match; smaller gaps are fit "
        "error that the refinement and the LM polish correct",
        positive,
    )
    target_logit: float = opt(
        1.5, "the probe brings the median |logit difference| near this (spread poles, no saturation)", positive
    )
    noise_fit: float = opt(
        6.0,
        "with noise σ, a family whose fit residual rms is above this × σ is redrawn (noise alone gives ~2σ)",
        positive,
    )
    noise_condition: float = opt(
        1e-2,
        "with noise σ (averaged over r repeats), a family's design condition must stay below this × √r/σ",
        positive,
    )
    max_condition: float = opt(
        1e5, "a family whose fit's design Φ has a larger condition number is redrawn (nearly equal poles)", positive
    )
    max_family_logit: float = opt(
        8.0,
        "a noise-free family with a larger |logit difference| in either block is redrawn at a smaller scale",
        positive,
    )
    max_shrink: float = opt(
        0.25,
        "the most a redrawn saturated family shrinks in one round: a saturated fit's largest pole overstates the "
        "logits by orders, and a family shrunk to logits ≈ 0 has coinciding poles it cannot leave",
        positive,
    )
    polish_above: float = opt(
        1e-18,
        "a noise-free model validating above this (round-off of an exact model is ~1e-25) gets the LM polish",
        positive,
    )
    polish_below: float = opt(
        1e-4, "... and below this (a model further off is a wrong matching, which the next attempt redraws)", positive
    )
    probe_queries: int = opt(6, "two-token queries per round of the scale probe", pos_int)
    probe_rounds: int = opt(3, "rounds of the scale probe while its median logit is off target", pos_int)
    theta_min_weight: float = opt(
        1e-8,
        "a log-ratio equation whose attention weight is below this does not count for Θ's rank (its error is the "
        "weights' round-off over it)",
        positive,
    )
    theta_shrink: float = opt(
        0.5, "extra Θ queries, asked while the reliable rank is short, use this × the last round's scale", positive
    )
    theta_rounds: int = opt(4, "rounds of smaller Θ queries while a head's reliable rank is below d²", nonneg_int)
    validation_queries: int = opt(2, "fresh random queries that score the model after the fit", pos_int)
    redraw_rounds: int = opt(
        8, "rounds of redrawing bad families (each redraws every bad one while spares last)", pos_int
    )
    refine_rounds: int = opt(
        3, "rounds of (W | Θ) then (Θ | W) least squares when the first model does not validate", pos_int
    )
    attempts: int = opt(
        3, "attempts with new random queries while the last did not validate and the budget allows", pos_int
    )
    max_repeats: int = opt(16, "with noise, the most answers averaged per algebraic query", pos_int)
    repeat_rtol: float = opt(
        1e-12, "two answers to one query differing by more × its largest entry: not a function of its input", positive
    )
    repeat_sigmas: float = opt(
        12.0, "with noise σ, repeated answers may also differ by this × σ in an entry (never by chance)", positive
    )


def query_settings(settings: QuerySettings | Mapping[str, object] | None) -> QuerySettings:
    """``settings`` as a ``QuerySettings``: None gives the defaults, a mapping overrides them by name.

    Parameters
    ----------
    settings : QuerySettings, mapping or None
        The settings, or field overrides of the defaults.

    Returns
    -------
    QuerySettings
        The validated settings.

    Raises
    ------
    TypeError
        ``settings`` is of another type, or a mapping names an unknown field (the message names it).
    """
    if settings is None:
        return QuerySettings()
    if isinstance(settings, QuerySettings):
        return settings
    if isinstance(settings, Mapping):
        return QuerySettings().merged(settings)
    raise TypeError(f"settings must be a QuerySettings, a mapping of its fields or None, got {type(settings).__name__}")
