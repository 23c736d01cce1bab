"""Variable-projection Levenberg–Marquardt from random starts: the polish of the sculpting route run without
the phases (``vp_lm``).

The projections are eliminated exactly, W(Θ) = Z(Θ)⁺Y, and LM runs on the Θ_i alone (``sculpt.phases.polish``):
the reduced problem has m·d² unknowns instead of 2m·d², and Gauss–Newton steps on it reach a planted layer from
a random start where L-BFGS on the full problem stalls — on `torch.nn.MultiheadAttention`'s own initialisation
(nearly uniform attention) every start converged in 12–15 LM iterations, where L-BFGS on a growing subset
failed within 60 s (docs/method.md, "VP-LM from random starts"). Each start runs the polish's protocol
(max(64, 8md/k) examples first, ×4 while the validation error is not tiny, a start stuck above 1e-2 after 25 iterations is
given up) and the run stops at the first start that validates.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._checks import as_generator, check_data, check_m, check_positive, check_positive_int, check_tol, held_out_split
from .model import MultiHeadAttention
from .phases.polish import PolishResult, polish
from .result import LearnResult

__all__ = ["vp_lm", "vp_lm_starts", "StartsFit"]


@dataclass
class StartsFit:
    """``vp_lm_starts``'s outcome: the ``best`` start on validation (the polish's result; None without any start),
    every start's record, total LM iterations, why it stopped."""

    best: PolishResult | None
    starts: list[dict[str, Any]]
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
        return max([s["examples"] for s in self.starts] or [0])


def vp_lm_starts(
    Xtr: np.ndarray,
    Ytr: np.ndarray,
    Xva: np.ndarray,
    Yva: np.ndarray,
    m: int,
    gen: np.random.Generator,
    *,
    restarts: int,
    scale: float,
    tol: float,
    max_examples: int = 4096,
    deadline: float = math.inf,
) -> StartsFit:
    """Up to ``restarts`` polishes from Θ_i ~ N(0, scale²) on given splits, stopping at the first that validates
    (``vp_lm`` and ``learn(method="auto")`` share it)."""
    d = Xtr.shape[2]
    starts: list[dict[str, Any]] = []
    best: PolishResult | None = None
    iterations = 0
    for r in range(restarts):
        if time.perf_counter() >= deadline:
            return StartsFit(best, starts, iterations, "time limit")
        ts = time.perf_counter()
        th0 = scale * gen.standard_normal((m, d, d))
        res, rec = polish(th0, Xtr, Ytr, Xva, Yva, max_examples=max_examples, tol=tol, rng=gen)
        iterations += res.iterations
        starts.append(
            {
                "start": r,
                "examples": max(int(st["examples"]) for st in rec.figures["stages"]),  # the largest subset fitted
                "iterations": int(res.iterations),
                "validation_error": float(res.validation_error),
                "time": time.perf_counter() - ts,
                "stages": rec.figures["stages"],
                "note": rec.message,
            }
        )
        if best is None or res.validation_error < best.validation_error:
            best = res
        if res.converged:
            return StartsFit(best, starts, iterations, "validated")
    return StartsFit(best, starts, iterations, f"{len(starts)} start(s) without validating")


def vp_lm(
    X: Any,
    Y: Any,
    m: int,
    *,
    seed: Any = None,
    restarts: int = 5,
    init_scale: float | None = None,
    tol: float = 1e-12,
    validation_size: int | None = None,
    max_examples: int = 4096,
    time_limit: float | None = None,
    single_thread: bool = True,
) -> LearnResult:
    """Up to ``restarts`` VP-LM runs from Θ_i with entries N(0, ``init_scale``²) (default 1/d, as
    ``random_init``), each on a growing random subset of the training split (at most ``max_examples``), until
    one validates at ``tol`` on the held-out split (``validation_size``, default min(2000, N/10)). No start is
    begun after ``time_limit`` seconds (a start itself is not interrupted). ``info["starts"]`` lists every
    start (examples, LM iterations, validation error, seconds, stages); ``samples_used`` counts the largest
    subset fitted plus the validation split; the model is the best start on validation."""
    from .baselines import _blas_context

    t0 = time.perf_counter()
    m = check_m(m)
    X, Y = check_data(X, Y)
    N, _, d = X.shape
    restarts = check_positive_int(restarts, "restarts")
    max_examples = check_positive_int(max_examples, "max_examples")
    scale = 1.0 / d if init_scale is None else check_positive(init_scale, "init_scale")
    tol = check_tol(tol)
    deadline = math.inf if time_limit is None else t0 + check_positive(time_limit, "time_limit")
    gen = as_generator(seed, "seed")
    Xtr, Ytr, Xva, Yva = held_out_split(X, Y, validation_size, gen, "vp_lm")
    n_val = Xva.shape[0]
    with _blas_context(single_thread):
        fit = vp_lm_starts(
            Xtr,
            Ytr,
            Xva,
            Yva,
            m,
            gen,
            restarts=restarts,
            scale=scale,
            tol=tol,
            max_examples=max_examples,
            deadline=deadline,
        )
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
        info={"starts": fit.starts, "validation_examples": int(n_val), "init_scale": scale, "stop": fit.stop},
    )
