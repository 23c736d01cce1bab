"""Variable-projection Levenberg–Marquardt from random starts: the polish of the sculpting route run without
the phases (``vp_lm``).

The projections are eliminated exactly, W(Θ) = Z(Θ)⁺Y, and LM runs on the Θ_i alone (``sculpt.phases.polish``):
the reduced problem has m·d² unknowns instead of 2m·d², and Gauss–Newton steps on it reach a planted layer from
a random start where L-BFGS on the full problem stalls — on `torch.nn.MultiheadAttention`'s own initialisation
(nearly uniform attention) every start converges in 12–15 LM iterations, where L-BFGS on a growing subset
fails within 60 s (docs/method.md, "VP-LM from random starts"). Each start runs the polish's protocol
(``PolishSettings``: a small subset first, ×4 while the validation error is not at tol, a start stuck on its
subset given up) and the run stops at the first start that validates. Defaults: ``VpLmSettings``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from ._checks import (
    SeedLike,
    as_generator,
    check_data,
    check_m,
    check_positive,
    check_positive_int,
    check_tol,
    held_out_split,
)
from .model import MultiHeadAttention
from .phases.polish import PolishResult, polish
from .result import LearnResult
from .settings import PolishSettings, ProblemSize, Settings, VpLmSettings
from .toolkit import single_blas_thread

__all__ = ["vp_lm", "vp_lm_starts", "StartsFit"]

#: the validation tolerance of ``vp_lm`` when none is given: ``learn``'s (``Settings.tol``)
_VALIDATION_TOL = Settings().tol


@dataclass
class StartsFit:
    """``vp_lm_starts``'s outcome: the ``best`` start on validation (the polish's result; None without any start),
    every start's record, total LM iterations, why it stopped."""

    best: PolishResult | None
    starts: list[dict[str, object]]
    iterations: int
    stop: str

    @property
    def model(self) -> MultiHeadAttention | None:
        return None if self.best is None else MultiHeadAttention(self.best.thetas, self.best.ws)

    @property
    def validation_error(self) -> float:
        return math.inf if self.best is None else float(self.best.validation_error)

    @property
    def train_error(self) -> float:
        """On the best start's last fitting subset."""
        return math.inf if self.best is None else float(self.best.train_error)

    @property
    def examples(self) -> int:
        """The largest training subset any start fitted."""
        return max([cast(int, s["examples"]) for s in self.starts] or [0])


def vp_lm_starts(
    Xtr: np.ndarray,
    Ytr: np.ndarray,
    Xva: np.ndarray,
    Yva: np.ndarray,
    m: int,
    gen: np.random.Generator,
    settings: VpLmSettings | None = None,
    *,
    tol: float,
    deadline: float | None = None,
    polish_settings: PolishSettings | None = None,
) -> StartsFit:
    """Polishes from random starts on given splits, stopping at the first that validates (``vp_lm`` and
    ``learn(method="auto")`` share it).

    Parameters
    ----------
    Xtr, Ytr, Xva, Yva
        Training and validation splits, (n, k, d) each.
    m
        Heads.
    gen
        The starts' and the subsets' random stream.
    settings
        ``restarts`` starts at most, Θ_i entries N(0, ``init_scale``²), subsets up to ``max_examples``
        (``VpLmSettings()`` when None; "auto" fields resolved for Xtr's size).
    tol
        Validation relative MSE at which a start counts as validated.
    deadline
        ``time.perf_counter()`` value after which no start is begun (None: none).
    polish_settings
        The LM every start runs (``PolishSettings()`` when None: ``learn``'s), its ``max_examples`` replaced by
        ``settings.max_examples``.

    Returns
    -------
    StartsFit
        The best start and the record of every start.
    """
    s = (settings or VpLmSettings()).resolve(ProblemSize.of(Xtr, m))
    assert s.init_scale is not None  # resolved
    lm = (polish_settings or PolishSettings()).merged(max_examples=s.max_examples)
    d = Xtr.shape[2]
    starts: list[dict[str, object]] = []
    best: PolishResult | None = None
    iterations = 0
    for r in range(s.restarts):
        if deadline is not None and time.perf_counter() >= deadline:
            return StartsFit(best, starts, iterations, "time limit")
        ts = time.perf_counter()
        th0 = s.init_scale * gen.standard_normal((m, d, d))
        res, rec = polish(th0, Xtr, Ytr, Xva, Yva, lm, tol=tol, rng=gen)
        iterations += res.iterations
        stages = rec.figures["stages"]
        starts.append(
            {
                "start": r,
                "examples": max(int(st["examples"]) for st in stages),  # the largest subset fitted
                "iterations": int(res.iterations),
                "validation_error": float(res.validation_error),
                "time": time.perf_counter() - ts,
                "stages": stages,
                "note": rec.message,
            }
        )
        if best is None or res.validation_error < best.validation_error:
            best = res
        if res.converged:
            return StartsFit(best, starts, iterations, "validated")
    return StartsFit(best, starts, iterations, f"{len(starts)} start(s) without validating")


def vp_lm(
    X: ArrayLike,
    Y: ArrayLike,
    m: int,
    settings: VpLmSettings | None = None,
    *,
    seed: SeedLike = None,
    restarts: int | None = None,
    init_scale: float | None = None,
    tol: float | None = None,
    validation_size: int | None = None,
    max_examples: int | None = None,
    time_limit: float | None = None,
    single_thread: bool = True,
    polish_settings: PolishSettings | None = None,
) -> LearnResult:
    """VP-LM from random starts, each on a growing random subset of the training split, until one validates
    on the held-out split.

    Parameters
    ----------
    X, Y
        Examples (N, k, d) and labels of the same shape.
    m
        Heads to fit.
    settings
        Defaults (``VpLmSettings()`` when None); the keywords below override its fields.
    seed
        Seed or Generator of the split, the starts and the subsets.
    restarts
        Starts at most (settings: ``restarts``).
    init_scale
        Θ_i entries of a start are N(0, init_scale²) (settings: ``init_scale``, auto 1/d as ``random_init``).
    tol
        Validation relative MSE that counts as converged (default ``Settings.tol``, learn's).
    validation_size
        Held-out examples (default min(2000, N/10)).
    max_examples
        Largest subset a start fits (settings: ``max_examples``).
    time_limit
        Seconds after which no start is begun (a start itself is not interrupted); None: no limit.
    single_thread
        One BLAS thread during the fit.
    polish_settings
        The LM of every start (``PolishSettings()`` when None), e.g. its ``matrix_free_above``; ``max_examples``
        comes from ``settings``.

    Returns
    -------
    LearnResult
        Method "vp-lm", the best start's model on validation; ``info["starts"]`` lists every start (examples,
        LM iterations, validation error, seconds, stages); ``samples_used`` counts the largest subset fitted
        plus the validation split.
    """
    t0 = time.perf_counter()
    m = check_m(m)
    X3, Y3 = check_data(X, Y)
    N, k, d = X3.shape
    s = (settings or VpLmSettings()).resolve(ProblemSize(d, k, m, N))
    s = s.merged(
        restarts=check_positive_int(s.restarts if restarts is None else restarts, "restarts"),
        max_examples=check_positive_int(s.max_examples if max_examples is None else max_examples, "max_examples"),
        init_scale=s.init_scale if init_scale is None else check_positive(init_scale, "init_scale"),
    )
    tol = check_tol(_VALIDATION_TOL if tol is None else tol)
    deadline = None if time_limit is None else t0 + check_positive(time_limit, "time_limit")
    gen = as_generator(seed, "seed")
    Xtr, Ytr, Xva, Yva = held_out_split(X3, Y3, validation_size, gen, "vp_lm")
    n_val = Xva.shape[0]
    with single_blas_thread(single_thread):
        fit = vp_lm_starts(Xtr, Ytr, Xva, Yva, m, gen, s, tol=tol, deadline=deadline, polish_settings=polish_settings)
    val = fit.validation_error
    return LearnResult(
        model=fit.model,
        method="vp-lm",
        train_error=fit.train_error,
        validation_error=val,
        converged=bool(val <= tol),
        time=time.perf_counter() - t0,
        iterations=fit.iterations,
        samples_used=int(fit.examples + n_val),
        reason=(
            f"{fit.stop}: validation relative MSE {val:.2e} after {len(fit.starts)} start(s), "
            f"{fit.iterations} LM iterations"
        ),
        info={"starts": fit.starts, "validation_examples": int(n_val), "init_scale": s.init_scale, "stop": fit.stop},
    )
