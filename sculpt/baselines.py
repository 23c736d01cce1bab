"""Gradient baselines: fit F(X) = Σ_i softmax(XΘ_iXᵀ)XW_i to (X, Y) by L-BFGS or Adam on the squared loss.

Objective: the training relative MSE L = Σ_n ‖F(X_n) − Y_n‖² / Σ_n ‖Y_n‖² (the MSE divided by mean(Y²)),
with the analytic gradient of ``sculpt.gradients``. Random initialisation (docs/method.md#gd-baselines): Θ_i entries
N(0, 1/d²) (‖Θ_i‖_F ≈ 1), W_i entries N(0, 1/d). Several restarts keep the best; the run stops early once a
restart reaches ``tol``. ``lbfgs_growing`` runs L-BFGS on growing subsets until a held-out split validates.
Defaults come from ``GradientSettings`` (``sculpt.settings``); keyword arguments override them one by one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize

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
from .gradients import loss_and_grad_flat
from .model import MultiHeadAttention
from .result import LearnResult
from .settings import GradientSettings, ProblemSize, Settings
from .toolkit import single_blas_thread
from .toolkit.forward_pass import layer_relative_mse
from .toolkit.train_rows import TrainRows

if TYPE_CHECKING:
    from scipy.optimize import OptimizeResult

__all__ = ["gradient_descent", "lbfgs_growing", "GrowingFit", "random_init", "work_unit"]

_METHODS = ("lbfgs", "adam")
_STALL_WINDOW = 100  # L-BFGS: stop when the loss fell by < a relative 1e-6 over this many iterations
_STALL_RTOL = 1e-6
#: the validation tolerance of ``lbfgs_growing`` when none is given: ``learn``'s (``Settings.tol``)
_VALIDATION_TOL = Settings().tol


def random_init(m: int, d: int, rng: SeedLike = None) -> np.ndarray:
    """Flat parameters [vec Θ, vec W] with Θ_i entries N(0, 1/d²) and W_i entries N(0, 1/d).

    Parameters
    ----------
    m, d
        Heads and token dimension.
    rng
        Seed or Generator of the draw.

    Returns
    -------
    numpy.ndarray
        The 2md² parameters in the layout of ``MultiHeadAttention.params()``.
    """
    gen = as_generator(rng)
    thetas = gen.standard_normal((m, d, d)) / d
    ws = gen.standard_normal((m, d, d)) / math.sqrt(d)
    return np.concatenate([thetas.ravel(), ws.ravel()])


@dataclass(frozen=True)
class _Options:
    """One ``gradient_descent`` call's options, validated, with the settings' defaults filled in."""

    method: str
    restarts: int
    max_iter: int
    tol: float
    deadline: float
    history: int
    lr: float
    batch_size: int
    single_thread: bool
    give_up: tuple[int, float] | None


def _lbfgs_run(
    p0: np.ndarray, X: np.ndarray, Y: np.ndarray, m: int, scale: float, opt: _Options
) -> tuple[np.ndarray, float, int, int, str]:
    """One L-BFGS restart: scipy L-BFGS-B (no bounds) with memory ``opt.history``, re-entered with fresh
    memory after a line-search failure as long as that made progress; ``opt.give_up = (i, f)`` stops it at
    iteration i if the loss is still above f. Returns (x, loss, iterations, evaluations, stop reason)."""
    best = {"x": p0.copy(), "f": math.inf}
    trace: list[float] = []
    n_eval = 0
    give_up, tol, deadline, max_iter = opt.give_up, opt.tol, opt.deadline, opt.max_iter

    def fun(p: np.ndarray) -> tuple[float, np.ndarray]:
        nonlocal n_eval
        n_eval += 1
        f, g = loss_and_grad_flat(p, X, Y, m, scale=scale)
        if f < best["f"]:
            best["x"], best["f"] = p.copy(), f
        return f, g

    reason = ""

    def callback(intermediate_result: OptimizeResult) -> None:
        nonlocal reason
        f = float(intermediate_result.fun)
        trace.append(f)
        if f <= tol:
            reason = "tol reached"
        elif time.perf_counter() > deadline:
            reason = "time limit"
        elif len(trace) > _STALL_WINDOW and f > (1.0 - _STALL_RTOL) * trace[-1 - _STALL_WINDOW]:
            reason = "stalled"
        elif give_up is not None and len(trace) >= give_up[0] and f > give_up[1]:
            reason = f"gave up: loss {f:.1e} > {give_up[1]:.0e} after {len(trace)} iterations"
        if reason:
            raise StopIteration

    x = p0.copy()
    while True:
        start_f = best["f"]
        remaining = max_iter - len(trace)
        if remaining <= 0:
            reason = reason or "max_iter"
            break
        res = minimize(
            fun,
            x,
            jac=True,
            method="L-BFGS-B",
            callback=callback,
            options={
                "maxcor": opt.history,
                "maxiter": remaining,
                "maxfun": 4 * remaining + 20,
                "ftol": 0.0,
                "gtol": 0.0,
                "maxls": 40,
            },
        )
        x = best["x"]
        if reason:
            break
        if len(trace) >= max_iter:
            reason = "max_iter"
            break
        # scipy stopped on its own (line search failure / no progress): re-enter with fresh memory only
        # if this call still made real progress.
        if not best["f"] < (1.0 - 1e-3) * start_f:
            reason = f"no progress ({res.message})"
            break
    return best["x"], best["f"], len(trace), n_eval, reason


def _adam_run(
    p0: np.ndarray,
    X: np.ndarray,
    Y: np.ndarray,
    m: int,
    scale: float,
    opt: _Options,
    gen: np.random.Generator,
    eval_every: int = 50,
) -> tuple[np.ndarray, float, int, int, str]:
    """One Adam restart (β = 0.9, 0.999, ε = 1e-8), learning rate lr cosine-decayed to lr·1e-3 over
    ``max_iter`` steps, minibatches of ``batch_size`` (full batch if N ≤ batch_size) drawn from shuffled
    epochs; the full training loss is evaluated every ``eval_every`` steps (best iterate kept)."""
    N = X.shape[0]
    lr, batch_size, max_iter = opt.lr, opt.batch_size, opt.max_iter
    full = N <= batch_size
    b1, b2, eps = 0.9, 0.999, 1e-8
    p = p0.copy()
    mom = np.zeros_like(p)
    vel = np.zeros_like(p)
    best_x, best_f = p.copy(), math.inf
    order = gen.permutation(N)
    cursor = 0
    n_eval = 0
    reason = "max_iter"
    step = 0
    for step in range(1, max_iter + 1):
        if full:
            Xb, Yb, sb = X, Y, scale
        else:
            if cursor + batch_size > N:
                order, cursor = gen.permutation(N), 0
            idx = order[cursor : cursor + batch_size]
            cursor += batch_size
            Xb, Yb = X[idx], Y[idx]
            sb = scale * batch_size / N
        f, g = loss_and_grad_flat(p, Xb, Yb, m, scale=sb)
        n_eval += 1
        if full and f < best_f:
            best_x, best_f = p.copy(), f
        if not np.all(np.isfinite(g)):
            reason = "diverged"
            break
        mom = b1 * mom + (1 - b1) * g
        vel = b2 * vel + (1 - b2) * g * g
        rate = lr * (1e-3 + (1 - 1e-3) * 0.5 * (1 + math.cos(math.pi * (step - 1) / max_iter)))
        p = p - rate * (mom / (1 - b1**step)) / (np.sqrt(vel / (1 - b2**step)) + eps)
        if step % eval_every == 0 or step == max_iter:
            if not full:
                f_full, _ = loss_and_grad_flat(p, X, Y, m, scale=scale)
                n_eval += 1
                if f_full < best_f:
                    best_x, best_f = p.copy(), f_full
            if best_f <= opt.tol:
                reason = "tol reached"
                break
            if time.perf_counter() > opt.deadline:
                reason = "time limit"
                break
    if full:  # the last update has not been evaluated yet
        f_last, _ = loss_and_grad_flat(p, X, Y, m, scale=scale)
        n_eval += 1
        if f_last < best_f:
            best_x, best_f = p.copy(), f_last
    if reason == "max_iter" and best_f <= opt.tol:
        reason = "tol reached"
    return best_x, best_f, step, n_eval, reason


def _restarts(
    X: np.ndarray,
    Y: np.ndarray,
    m: int,
    gen: np.random.Generator,
    init: MultiHeadAttention | None,
    scale: float,
    opt: _Options,
) -> tuple[list[dict[str, object]], np.ndarray, float, int]:
    """Run up to ``opt.restarts`` fits (the first from ``init`` if given), stopping once one reaches ``tol`` or
    the deadline passes; returns (per-restart figures, best parameters, best loss, total iterations)."""
    d = X.shape[2]
    runs: list[dict[str, object]] = []
    best_x: np.ndarray | None = None
    best_f = math.inf
    total_iter = 0
    for r in range(opt.restarts):
        if r > 0 and (best_f <= opt.tol or time.perf_counter() > opt.deadline):
            break
        p0 = init.params() if (r == 0 and init is not None) else random_init(m, d, gen)
        tr = time.perf_counter()
        if opt.method == "lbfgs":
            x, f, it, nev, why = _lbfgs_run(p0, X, Y, m, scale, opt)
        else:
            x, f, it, nev, why = _adam_run(p0, X, Y, m, scale, opt, gen)
        total_iter += it
        runs.append(
            {
                "restart": r,
                "init": "given" if (r == 0 and init is not None) else "random",
                "train_error": f,
                "iterations": it,
                "evaluations": nev,
                "time": time.perf_counter() - tr,
                "stop": why,
            }
        )
        if f < best_f or best_x is None:
            best_x, best_f = x, f
    assert best_x is not None
    return runs, best_x, best_f, total_iter


def _check_give_up(give_up: object) -> tuple[int, float] | None:
    """None, or a validated pair (iterations, loss)."""
    if give_up is None:
        return None
    if not (isinstance(give_up, tuple) and len(give_up) == 2):
        raise ValueError(f"give_up must be a pair (iterations, loss), got {give_up!r}")
    return check_positive_int(give_up[0], "give_up[0]"), check_positive(give_up[1], "give_up[1]")


def _check_init(init: object, m: int, d: int) -> MultiHeadAttention | None:
    """None, or a layer with m heads of dimension d."""
    if init is None:
        return None
    if not isinstance(init, MultiHeadAttention):
        raise TypeError(f"init must be a MultiHeadAttention, got {type(init).__name__}")
    if init.m != m or init.d != d:
        raise ValueError(f"init has (m, d) = ({init.m}, {init.d}), expected ({m}, {d})")
    return init


def _options(
    s: GradientSettings,
    method: str,
    t0: float,
    *,
    restarts: int | None,
    max_iter: int | None,
    tol: float | None,
    time_limit: float | None,
    history: int | None,
    lr: float | None,
    batch_size: int | None,
    single_thread: bool | None,
    give_up: tuple[int, float] | None,
) -> _Options:
    """The call's options: each keyword when given (validated), else the resolved settings' field."""
    default_iter = s.adam_max_iter if method == "adam" else s.max_iter
    limit = s.time_limit if time_limit is None else time_limit
    return _Options(
        method=method,
        restarts=check_positive_int(s.restarts if restarts is None else restarts, "restarts"),
        max_iter=check_positive_int(default_iter if max_iter is None else max_iter, "max_iter"),
        tol=check_tol(s.tol if tol is None else tol),
        deadline=math.inf if limit is None else t0 + check_positive(limit, "time_limit"),
        history=check_positive_int(s.history if history is None else history, "history"),
        give_up=_check_give_up(give_up),
        lr=check_positive(s.adam_lr if lr is None else lr, "lr"),
        batch_size=check_positive_int(s.adam_batch_size if batch_size is None else batch_size, "batch_size"),
        single_thread=bool(s.single_thread if single_thread is None else single_thread),
    )


def gradient_descent(
    X: ArrayLike,
    Y: ArrayLike,
    m: int,
    settings: GradientSettings | None = None,
    *,
    method: str = "lbfgs",
    seed: SeedLike = None,
    restarts: int | None = None,
    max_iter: int | None = None,
    tol: float | None = None,
    time_limit: float | None = None,
    init: MultiHeadAttention | None = None,
    history: int | None = None,
    lr: float | None = None,
    batch_size: int | None = None,
    single_thread: bool | None = None,
    give_up: tuple[int, float] | None = None,
) -> LearnResult:
    """Fit m heads to (X, Y) by minimising the training relative MSE Σ‖F(X) − Y‖² / Σ‖Y‖².

    ``method="lbfgs"``: full-batch scipy L-BFGS-B with the analytic gradient; a restart stops at loss ≤ tol,
    on the time limit, when the loss fell by less than a relative 1e-6 over 100 iterations, or when L-BFGS-B
    itself stops without progress. ``method="adam"``: Adam, learning rate lr cosine-decayed to lr·1e-3 over
    max_iter steps, minibatches of batch_size. The best of the restarts is returned; later restarts are
    skipped once one reaches tol.

    Parameters
    ----------
    X, Y
        Examples (N, k, d) and labels of the same shape.
    m
        Heads to fit.
    settings
        Defaults of every numeric option (``GradientSettings()`` when None); a keyword below overrides one.
    method
        "lbfgs" or "adam".
    seed
        Seed or Generator of the random initialisations (and of Adam's minibatches).
    restarts
        Initialisations; the first starts from ``init`` when given (settings: ``restarts``).
    max_iter
        Iterations per restart (settings: ``max_iter`` for L-BFGS, ``adam_max_iter`` for Adam).
    tol
        Training relative MSE at which a restart stops (settings: ``tol``).
    time_limit
        Seconds for the whole call, None: no limit (settings: ``time_limit``).
    init
        A layer to start the first restart from.
    history
        L-BFGS memory (settings: ``history``).
    lr, batch_size
        Adam's learning rate and minibatch (settings: ``adam_lr``, ``adam_batch_size``).
    single_thread
        One BLAS thread during the fit; results are identical (settings: ``single_thread``).
    give_up
        (i, f): an L-BFGS restart whose training loss is still above f after i iterations stops.

    Returns
    -------
    LearnResult
        Method "lbfgs" or "adam"; ``info["restarts"]`` lists each restart's figures.
    """
    t0 = time.perf_counter()
    if not isinstance(method, str) or method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    m = check_m(m)
    X3, Y3 = check_data(X, Y)
    N, k, d = X3.shape
    s = (settings or GradientSettings()).resolve(ProblemSize(d, k, m, N))
    opt = _options(
        s,
        method,
        t0,
        restarts=restarts,
        max_iter=max_iter,
        tol=tol,
        time_limit=time_limit,
        history=history,
        lr=lr,
        batch_size=batch_size,
        single_thread=single_thread,
        give_up=give_up,
    )
    start = _check_init(init, m, d)
    scale = float(np.einsum("ijk,ijk->", Y3, Y3))
    if scale <= 0:
        raise ValueError("Y is identically zero: the relative MSE is undefined")
    gen = as_generator(seed, "seed")
    with single_blas_thread(opt.single_thread):
        runs, best_x, best_f, total_iter = _restarts(X3, Y3, m, gen, start, scale, opt)
    return _descent_result(MultiHeadAttention.from_params(best_x, m, d), runs, best_f, total_iter, N, opt, t0)


def _descent_result(
    model: MultiHeadAttention,
    runs: list[dict[str, object]],
    best_f: float,
    total_iter: int,
    N: int,
    opt: _Options,
    t0: float,
) -> LearnResult:
    """``gradient_descent``'s LearnResult: the best restart's model and the figures of every restart."""
    best_run = min(range(len(runs)), key=lambda i: cast(float, runs[i]["train_error"]))
    converged = best_f <= opt.tol
    lbfgs = opt.method == "lbfgs"
    return LearnResult(
        model=model,
        method=opt.method,
        train_error=float(best_f),
        converged=converged,
        time=time.perf_counter() - t0,
        iterations=total_iter,
        samples_used=N,
        reason=(
            f"restart {best_run}: {runs[best_run]['stop']} (training relative MSE {best_f:.2e} "
            f"{'<=' if converged else '>'} tol {opt.tol:.0e})"
        ),
        info={
            "restarts": runs,
            "best_restart": best_run,
            "tol": opt.tol,
            "max_iter": opt.max_iter,
            "history": opt.history if lbfgs else None,
            "lr": None if lbfgs else opt.lr,
            "batch_size": None if lbfgs else opt.batch_size,
            "single_thread_blas": opt.single_thread,
        },
    )


# --------------------------------------------------------------------------------------------------
# L-BFGS on growing subsets
# --------------------------------------------------------------------------------------------------


@dataclass
class GrowingFit:
    """Outcome of ``lbfgs_growing`` on the learner's own splits (``GrowingFit.of(result)``): the best ``model``
    on validation, its errors, the largest subset fitted, every attempt in ``stages``, why it ended."""

    model: MultiHeadAttention | None
    validation_error: float
    train_error: float
    converged: bool
    examples: int
    iterations: int
    stages: list[dict[str, object]]
    reason: str
    stop: str = ""  # why the protocol ended: validated, training split used up, time limit, work budget

    @classmethod
    def of(cls, result: LearnResult) -> GrowingFit:
        """The fit an ``lbfgs_growing`` result describes (its ``info`` holds the stages and the stop)."""
        info = result.info
        return cls(
            model=result.model,
            validation_error=float(result.validation_error if result.validation_error is not None else math.inf),
            train_error=float(result.train_error),
            converged=bool(result.converged),
            examples=cast(int, info["examples"]),
            iterations=int(result.iterations),
            stages=cast("list[dict[str, object]]", info["stages"]),
            reason=result.reason,
            stop=cast(str, info["stop"]),
        )


def work_unit(k: int, d: int, m: int) -> float:
    """Cost of one L-BFGS iteration on one example, up to a constant: m·k·d·(k + d) multiply-adds for the
    logits X Θ_i Xᵀ, the outputs A_i X W_i and their gradients. ``lbfgs_growing(max_work=...)`` counts in it:
    at (8,4,2) one core did 3.6–6.3e5 example-iterations per second, i.e. 2.8–4.8e8 units per second.

    Parameters
    ----------
    k, d, m
        Tokens, token dimension, heads.

    Returns
    -------
    float
        m·k·d·(k + d).
    """
    return float(m * k * d * (k + d))


@dataclass(frozen=True)
class _Plan:
    """One ``lbfgs_growing`` call's protocol, validated: subset sizes, starts, stopping rules."""

    first: int
    growth: int
    restarts: int
    tol: float
    deadline: float
    max_examples: int | None
    give_up: tuple[int, float] | None
    max_work: float
    runs: GradientSettings  # every L-BFGS run's settings (its cap, deadline and tol are set per run)


def _plan(
    s: GradientSettings,
    t0: float,
    *,
    first: int | None,
    growth: int | None,
    restarts: int | None,
    tol: float | None,
    time_limit: float | None,
    max_iter: int | None,
    max_examples: int | None,
    give_up: tuple[int, float] | None,
    max_work: float | None,
    single_thread: bool | None,
) -> _Plan:
    """``lbfgs_growing``'s protocol: each keyword when given (validated), else the resolved settings' field."""
    tol = check_tol(_VALIDATION_TOL if tol is None else tol)
    limit = s.time_limit if time_limit is None else time_limit
    grow = check_positive_int(s.growth if growth is None else growth, "growth")
    if grow < 2:
        raise ValueError(f"growth must be >= 2, got {grow}")
    runs = s.merged(  # one start per run; the protocol's own deadline bounds each run (its time left)
        restarts=1,
        time_limit=None,
        max_iter=s.max_iter if max_iter is None else check_positive_int(max_iter, "max_iter"),
        single_thread=s.single_thread if single_thread is None else bool(single_thread),
    )
    return _Plan(
        first=check_positive_int(s.growing_first if first is None else first, "first"),
        growth=grow,
        restarts=check_positive_int(s.growing_restarts if restarts is None else restarts, "restarts"),
        tol=tol,
        deadline=math.inf if limit is None else t0 + check_positive(limit, "time_limit"),
        max_examples=None if max_examples is None else check_positive_int(max_examples, "max_examples"),
        give_up=_check_give_up(give_up),
        max_work=math.inf if max_work is None else check_positive(max_work, "max_work"),
        runs=runs,
    )


def lbfgs_growing(
    X: ArrayLike,
    Y: ArrayLike,
    m: int,
    settings: GradientSettings | None = None,
    *,
    seed: SeedLike = None,
    validation: tuple[ArrayLike, ArrayLike] | None = None,
    first: int | None = None,
    growth: int | None = None,
    restarts: int | None = None,
    tol: float | None = None,
    validation_size: int | None = None,
    time_limit: float | None = None,
    max_iter: int | None = None,
    max_examples: int | None = None,
    init: MultiHeadAttention | None = None,
    give_up: tuple[int, float] | None = None,
    max_work: float | None = None,
    single_thread: bool | None = None,
) -> LearnResult:
    """L-BFGS as a practitioner uses it: on the first ``first`` training examples, then ``growth`` times more,
    … until the validation relative MSE is <= ``tol`` (the strongest gradient peer of the benchmarks).

    At each size the first attempt warm-starts from the best model so far (``init``, or none, at the first
    size) and up to ``restarts`` − 1 more start from random init; the run stops at the first model that
    validates, when the training examples are used up, at ``time_limit`` seconds or when ``max_work`` is
    spent: Σ over runs of examples × iterations × ``work_unit(k, d, m)`` (each run's iteration cap is what is
    left of it), a deterministic bound where a deadline depends on the machine's speed.

    Parameters
    ----------
    X, Y
        Examples (N, k, d) and labels; the training split when ``validation`` is given (``learn``'s, as
        ``TrainRows`` views, is read by rows without a copy).
    m
        Heads to fit.
    settings
        Defaults (``GradientSettings()`` when None): ``growing_first``, ``growth``, ``growing_restarts``, and
        each L-BFGS run's ``max_iter``, ``history``, ``tol``, ``single_thread``; ``time_limit`` for the call.
    seed
        Seed or Generator of the split and of the random starts.
    validation
        A held-out split (X_val, Y_val); None: ``validation_size`` examples of (X, Y) are held out at random.
    validation_size
        Examples held out when ``validation`` is None (default min(2000, N/10), at least 1).
    first, growth, restarts
        First subset, growth factor (>= 2) and starts per size (settings: ``growing_first``, ``growth``,
        ``growing_restarts``).
    tol
        Validation relative MSE that counts as converged (default ``Settings.tol``, learn's).
    time_limit, max_iter, single_thread
        Override the settings' fields of the same names.
    max_examples
        Largest subset (default: every training example).
    init
        The first attempt's start.
    give_up
        (i, f): passed to each run (``gradient_descent``).
    max_work
        Work budget in ``work_unit`` (None: no bound).

    Returns
    -------
    LearnResult
        Method "lbfgs-growing"; ``info["stages"]`` lists every attempt (examples, init, iterations, work,
        errors, seconds), ``info["examples"]`` the largest subset fitted and ``info["stop"]`` why it ended;
        ``samples_used`` is that subset plus the validation split; ``converged`` means validated at ``tol``.
    """
    t0 = time.perf_counter()
    m = check_m(m)
    X3, Y3 = _checked_or_split(X, Y)
    N, k, d = X3.shape
    s = (settings or GradientSettings()).resolve(ProblemSize(d, k, m, N))
    plan = _plan(
        s,
        t0,
        first=first,
        growth=growth,
        restarts=restarts,
        tol=tol,
        time_limit=time_limit,
        max_iter=max_iter,
        max_examples=max_examples,
        give_up=give_up,
        max_work=max_work,
        single_thread=single_thread,
    )
    start = _check_init(init, m, d)
    gen = as_generator(seed, "seed")
    if validation is None:
        Xtr, Ytr, Xva, Yva = held_out_split(X3, Y3, validation_size, gen, "lbfgs_growing")
    else:
        Xtr, Ytr = X3, Y3
        Xva, Yva = check_data(*validation)
        if Xva.shape[1:] != X3.shape[1:]:
            raise ValueError(f"validation examples have shape {Xva.shape[1:]}, training ones {X3.shape[1:]}")
    fit = _grow(Xtr, Ytr, Xva, Yva, m, gen, plan, start)
    return _growing_result(fit, plan, Xva.shape[0], t0)


def _checked_or_split(X: ArrayLike, Y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``check_data(X, Y)``, or X and Y as they are when both are ``learn``'s training split as ``TrainRows``
    views (checked already): the protocol only slices them by rows, so the split is never gathered whole (at
    (64,8,2), N = 80,000 the copy was 656 MB and 1.0 s of auto's L-BFGS step)."""
    if isinstance(X, TrainRows) and isinstance(Y, TrainRows):
        return cast(np.ndarray, X), cast(np.ndarray, Y)
    return check_data(X, Y)


def _growing_result(fit: GrowingFit, plan: _Plan, n_val: int, t0: float) -> LearnResult:
    """``lbfgs_growing``'s LearnResult: the fit, its stages, and the protocol it ran."""
    return LearnResult(
        model=fit.model,
        method="lbfgs-growing",
        train_error=fit.train_error,
        validation_error=fit.validation_error,
        converged=fit.converged,
        time=time.perf_counter() - t0,
        iterations=fit.iterations,
        samples_used=int(fit.examples + n_val),
        reason=fit.reason,
        info={
            "stages": fit.stages,
            "examples": fit.examples,
            "stop": fit.stop,
            "validation_examples": int(n_val),
            "first": plan.first,
            "growth": plan.growth,
            "restarts": plan.restarts,
            "tol": plan.tol,
        },
    )


def _grow(
    Xtr: np.ndarray,
    Ytr: np.ndarray,
    Xva: np.ndarray,
    Yva: np.ndarray,
    m: int,
    gen: np.random.Generator,
    plan: _Plan,
    init: MultiHeadAttention | None,
) -> GrowingFit:
    """The growing-subset protocol on given splits (see ``lbfgs_growing``)."""
    top = Xtr.shape[0] if plan.max_examples is None else min(Xtr.shape[0], plan.max_examples)
    unit = work_unit(Xtr.shape[1], Xtr.shape[2], m)
    stages: list[dict[str, object]] = []
    best = _Best(init, math.inf, math.inf)
    if init is not None:
        best.validation = layer_relative_mse(init.thetas, init.ws, Xva, Yva)
    n = min(plan.first, top)
    iters, work, stop, halted = 0, 0.0, "training split used up", False  # halted: a time limit or the budget
    while True:
        for attempt in range(plan.restarts):
            left = plan.deadline - time.perf_counter()
            if left <= 0:
                stop, halted = "time limit", True
                break
            its_left = math.floor((plan.max_work - work) / (n * unit)) if math.isfinite(plan.max_work) else None
            if its_left is not None and its_left < 1:
                stop, halted = f"work budget {plan.max_work:.3g} used up", True
                break
            stage = _attempt(Xtr[:n], Ytr[:n], Xva, Yva, m, gen, plan, best, attempt == 0, left, its_left)
            iters += cast(int, stage["iterations"])
            work += n * unit * cast(int, stage["iterations"])
            stage["work"] = float(n * unit * cast(int, stage["iterations"]))
            stages.append(stage)
            if cast(float, stage["validation_error"]) <= plan.tol:
                stop = f"validated at {n} examples"
                break
        if best.validation <= plan.tol or halted or n >= top:
            break
        n = min(top, n * plan.growth)
    converged = bool(best.validation <= plan.tol)
    reason = (
        f"{stop}: validation relative MSE {best.validation:.2e} {'<=' if converged else '>'} tol {plan.tol:.0e} "
        f"after {len(stages)} L-BFGS runs"
    )
    return GrowingFit(
        best.model, float(best.validation), float(best.train), converged, int(n), iters, stages, reason, stop
    )


@dataclass
class _Best:
    """The best model on validation so far, with its validation and training errors."""

    model: MultiHeadAttention | None
    validation: float
    train: float


def _attempt(
    X: np.ndarray,
    Y: np.ndarray,
    Xva: np.ndarray,
    Yva: np.ndarray,
    m: int,
    gen: np.random.Generator,
    plan: _Plan,
    best: _Best,
    warm: bool,
    left: float,
    its_left: int | None,
) -> dict[str, object]:
    """One L-BFGS run on the subset (X, Y), warm from the best model when ``warm``, within the time ``left``
    and the iterations ``its_left`` of the work budget; updates ``best`` and returns the stage's figures."""
    cap = plan.runs.max_iter
    assert cap is not None  # resolved
    run_cap = cap if its_left is None else min(its_left, cap)
    start = best.model if warm else None
    ta = time.perf_counter()
    res = gradient_descent(
        X,
        Y,
        m,
        plan.runs.merged(max_iter=run_cap, tol=min(plan.runs.tol, plan.tol)),
        method="lbfgs",
        seed=gen,
        init=start,
        time_limit=None if math.isinf(left) else left,
        give_up=plan.give_up,
    )
    model = cast(MultiHeadAttention, res.model)
    val = layer_relative_mse(model.thetas, model.ws, Xva, Yva)
    if val < best.validation or best.model is None or not math.isfinite(best.validation):
        best.model, best.validation, best.train = model, val, res.train_error
    return {
        "examples": int(X.shape[0]),
        "init": "warm" if start is not None else "random",
        "iterations": int(res.iterations),
        "work": 0.0,
        "train_error": res.train_error,
        "validation_error": val,
        "time": time.perf_counter() - ta,
    }
