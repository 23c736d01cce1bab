"""Gradient baselines: fit F(X) = Σ_i softmax(XΘ_iXᵀ)XW_i to (X, Y) by L-BFGS or Adam on the squared loss.

Objective: the training relative MSE L = Σ_n ‖F(X_n) − Y_n‖² / Σ_n ‖Y_n‖² (the MSE divided by mean(Y²)),
with the analytic gradient of ``sculpt.gradients``. Random initialisation (docs/method.md#gd-baselines): Θ_i entries
N(0, 1/d²) (‖Θ_i‖_F ≈ 1), W_i entries N(0, 1/d). Several restarts keep the best; the run stops early once a
restart reaches ``tol``.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from ._checks import as_generator, check_data, check_m, check_positive, check_positive_int, check_tol, held_out_split
from .gradients import loss_and_grad_flat
from .model import MultiHeadAttention
from .result import LearnResult

__all__ = ["gradient_descent", "lbfgs_growing", "grow_lbfgs", "GrowingFit", "random_init", "work_unit"]

_METHODS = ("lbfgs", "adam")
_DEFAULT_MAX_ITER = {"lbfgs": 5000, "adam": 3000}
_STALL_WINDOW = 100  # L-BFGS: stop when the loss fell by < a relative 1e-6 over this many iterations
_STALL_RTOL = 1e-6


def random_init(m: int, d: int, rng: Any = None) -> np.ndarray:
    """Flat parameters [vec Θ, vec W] with Θ_i entries N(0, 1/d²) and W_i entries N(0, 1/d)."""
    gen = as_generator(rng)
    thetas = gen.standard_normal((m, d, d)) / d
    ws = gen.standard_normal((m, d, d)) / math.sqrt(d)
    return np.concatenate([thetas.ravel(), ws.ravel()])


def _blas_context(single_thread: bool) -> contextlib.AbstractContextManager[None]:
    """BLAS pinned to one thread during a fit when ``single_thread``: the GEMMs here are thin, and one thread
    measured 2-5x faster than two on a loaded 2-core machine. Through threadpoolctl."""
    if not single_thread:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _lbfgs_run(
    p0: np.ndarray,
    X: np.ndarray,
    Y: np.ndarray,
    m: int,
    scale: float,
    *,
    max_iter: int,
    tol: float,
    deadline: float,
    history: int,
    give_up: tuple[int, float] | None = None,
) -> tuple[np.ndarray, float, int, int, str]:
    """One L-BFGS restart: scipy L-BFGS-B (no bounds) with memory ``history``, re-entered with fresh
    memory after a line-search failure as long as that made progress; ``give_up = (i, f)`` stops it at
    iteration i if the loss is still above f. Returns (x, loss, iterations, evaluations, stop reason)."""
    best = {"x": p0.copy(), "f": math.inf}
    trace: list[float] = []
    n_eval = 0

    def fun(p: np.ndarray) -> tuple[float, np.ndarray]:
        nonlocal n_eval
        n_eval += 1
        f, g = loss_and_grad_flat(p, X, Y, m, scale=scale)
        if f < best["f"]:
            best["x"], best["f"] = p.copy(), f
        return f, g

    reason = ""

    def callback(intermediate_result: Any) -> None:
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
                "maxcor": history,
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
    *,
    max_iter: int,
    tol: float,
    deadline: float,
    lr: float,
    batch_size: int,
    gen: np.random.Generator,
    eval_every: int = 50,
) -> tuple[np.ndarray, float, int, int, str]:
    """One Adam restart (β = 0.9, 0.999, ε = 1e-8), learning rate lr cosine-decayed to lr·1e-3 over
    ``max_iter`` steps, minibatches of ``batch_size`` (full batch if N ≤ batch_size) drawn from shuffled
    epochs; the full training loss is evaluated every ``eval_every`` steps (best iterate kept)."""
    N = X.shape[0]
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
            if best_f <= tol:
                reason = "tol reached"
                break
            if time.perf_counter() > deadline:
                reason = "time limit"
                break
    if full:  # the last update has not been evaluated yet
        f_last, _ = loss_and_grad_flat(p, X, Y, m, scale=scale)
        n_eval += 1
        if f_last < best_f:
            best_x, best_f = p.copy(), f_last
    if reason == "max_iter" and best_f <= tol:
        reason = "tol reached"
    return best_x, best_f, step, n_eval, reason


def _restarts(
    X: np.ndarray,
    Y: np.ndarray,
    m: int,
    method: str,
    gen: np.random.Generator,
    init: MultiHeadAttention | None,
    restarts: int,
    scale: float,
    *,
    max_iter: int,
    tol: float,
    deadline: float,
    history: int,
    lr: float,
    batch_size: int,
    give_up: tuple[int, float] | None = None,
) -> tuple[list[dict[str, Any]], np.ndarray, float, int]:
    """Run up to ``restarts`` fits (the first from ``init`` if given), stopping once one reaches ``tol`` or
    the deadline passes; returns (per-restart figures, best parameters, best loss, total iterations)."""
    d = X.shape[2]
    runs: list[dict[str, Any]] = []
    best_x: np.ndarray | None = None
    best_f = math.inf
    total_iter = 0
    for r in range(restarts):
        if r > 0 and (best_f <= tol or time.perf_counter() > deadline):
            break
        p0 = init.params() if (r == 0 and init is not None) else random_init(m, d, gen)
        tr = time.perf_counter()
        if method == "lbfgs":
            x, f, it, nev, why = _lbfgs_run(
                p0, X, Y, m, scale, max_iter=max_iter, tol=tol, deadline=deadline, history=history, give_up=give_up
            )
        else:
            x, f, it, nev, why = _adam_run(
                p0, X, Y, m, scale, max_iter=max_iter, tol=tol, deadline=deadline, lr=lr, batch_size=batch_size, gen=gen
            )
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


def gradient_descent(
    X: Any,
    Y: Any,
    m: int,
    *,
    method: str = "lbfgs",
    seed: Any = None,
    restarts: int = 1,
    max_iter: int | None = None,
    tol: float = 1e-20,
    time_limit: float | None = None,
    init: MultiHeadAttention | None = None,
    history: int = 50,
    lr: float = 0.03,
    batch_size: int = 2000,
    single_thread: bool = True,
    give_up: tuple[int, float] | None = None,
) -> LearnResult:
    """Fit m heads to (X, Y) by minimising the training relative MSE Σ‖F(X) − Y‖² / Σ‖Y‖².

    ``method="lbfgs"``: full-batch scipy L-BFGS-B with the analytic gradient, memory ``history``, at most
    ``max_iter`` iterations per restart (default 5000); a restart stops at loss ≤ ``tol``, on the time limit,
    when the loss fell by less than a relative 1e-6 over 100 iterations, or when L-BFGS-B itself stops
    without progress. ``method="adam"``: Adam, learning rate ``lr`` cosine-decayed to lr·1e-3 over
    ``max_iter`` steps (default 3000), minibatches of ``batch_size``.
    ``restarts`` random initialisations (the first starts from ``init`` if given) drawn from ``seed``; the
    best is returned and later restarts are skipped once one reaches ``tol``. ``time_limit`` (seconds) caps
    the whole call. ``single_thread`` runs BLAS on one thread during the fit (faster for these thin
    products; results are identical). ``give_up = (i, f)`` (L-BFGS only) stops a restart whose training loss
    is still above f after i iterations. Returns a LearnResult whose ``info["restarts"]`` lists each
    restart's figures.
    """
    t0 = time.perf_counter()
    if not isinstance(method, str) or method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    m = check_m(m)
    X, Y = check_data(X, Y)
    N, k, d = X.shape
    restarts = check_positive_int(restarts, "restarts")
    max_iter = _DEFAULT_MAX_ITER[method] if max_iter is None else check_positive_int(max_iter, "max_iter")
    tol = check_tol(tol)
    deadline = math.inf if time_limit is None else t0 + check_positive(time_limit, "time_limit")
    history = check_positive_int(history, "history")
    if give_up is not None:
        if not (isinstance(give_up, tuple) and len(give_up) == 2):
            raise ValueError(f"give_up must be a pair (iterations, loss), got {give_up!r}")
        give_up = (check_positive_int(give_up[0], "give_up[0]"), check_positive(give_up[1], "give_up[1]"))
    lr = check_positive(lr, "lr")
    batch_size = check_positive_int(batch_size, "batch_size")
    if init is not None:
        if not isinstance(init, MultiHeadAttention):
            raise TypeError(f"init must be a MultiHeadAttention, got {type(init).__name__}")
        if init.m != m or init.d != d:
            raise ValueError(f"init has (m, d) = ({init.m}, {init.d}), expected ({m}, {d})")
    scale = float(np.einsum("ijk,ijk->", Y, Y))
    if scale <= 0:
        raise ValueError("Y is identically zero: the relative MSE is undefined")
    gen = as_generator(seed, "seed")

    with _blas_context(single_thread):
        runs, best_x, best_f, total_iter = _restarts(
            X,
            Y,
            m,
            method,
            gen,
            init,
            restarts,
            scale,
            max_iter=max_iter,
            tol=tol,
            deadline=deadline,
            history=history,
            lr=lr,
            batch_size=batch_size,
            give_up=give_up,
        )
    model = MultiHeadAttention.from_params(best_x, m, d)
    best_run = min(range(len(runs)), key=lambda i: runs[i]["train_error"])
    converged = best_f <= tol
    return LearnResult(
        model=model,
        method=method,
        train_error=float(best_f),
        converged=converged,
        time=time.perf_counter() - t0,
        iterations=total_iter,
        samples_used=N,
        reason=(
            f"restart {best_run}: {runs[best_run]['stop']} (training relative MSE {best_f:.2e} "
            f"{'<=' if converged else '>'} tol {tol:.0e})"
        ),
        info={
            "restarts": runs,
            "best_restart": best_run,
            "tol": tol,
            "max_iter": max_iter,
            "history": history if method == "lbfgs" else None,
            "lr": lr if method == "adam" else None,
            "batch_size": batch_size if method == "adam" else None,
            "single_thread_blas": single_thread,
        },
    )


def lbfgs_growing(
    X: Any,
    Y: Any,
    m: int,
    *,
    seed: Any = None,
    first: int = 1000,
    growth: int = 2,
    restarts: int = 3,
    tol: float = 1e-12,
    validation_size: int | None = None,
    time_limit: float | None = None,
    max_iter: int | None = None,
    single_thread: bool = True,
) -> LearnResult:
    """L-BFGS as a practitioner uses it: on the first ``first`` training examples, then ``growth`` times more,
    … until the validation relative MSE is <= ``tol`` (the strongest gradient peer of the benchmarks).

    A validation split of ``validation_size`` examples (default min(2000, N/10), at least 1) is held out. At
    each size the first attempt warm-starts from the best model so far (none at the first size) and up to
    ``restarts`` − 1 more start from random init; the run stops at the first model that validates, when the
    training split is used up, or at ``time_limit`` seconds. ``info["stages"]`` lists every attempt
    (examples, init, validation error, seconds); ``samples_used`` is the largest subset fitted plus the
    validation split. ``converged`` means validated at ``tol``."""
    t0 = time.perf_counter()
    m = check_m(m)
    X, Y = check_data(X, Y)
    tol = check_tol(tol)
    deadline = math.inf if time_limit is None else t0 + check_positive(time_limit, "time_limit")
    gen = as_generator(seed, "seed")
    Xtr, Ytr, Xva, Yva = held_out_split(X, Y, validation_size, gen, "lbfgs_growing")
    n_val = Xva.shape[0]
    fit = grow_lbfgs(
        Xtr,
        Ytr,
        Xva,
        Yva,
        m,
        gen,
        first=first,
        growth=growth,
        restarts=restarts,
        tol=float(tol),
        deadline=deadline,
        max_iter=max_iter,
        single_thread=single_thread,
    )
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
            "validation_examples": int(n_val),
            "first": first,
            "growth": growth,
            "restarts": restarts,
            "tol": tol,
        },
    )


@dataclass
class GrowingFit:
    """Outcome of ``grow_lbfgs``: the best ``model`` on validation, its errors, every attempt in ``stages``."""

    model: MultiHeadAttention | None
    validation_error: float
    train_error: float
    converged: bool
    examples: int
    iterations: int
    stages: list[dict[str, Any]]
    reason: str
    stop: str = ""  # why the protocol ended: validated, training split used up, time limit, work budget


def work_unit(k: int, d: int, m: int) -> float:
    """Cost of one L-BFGS iteration on one example, up to a constant: m·k·d·(k + d) multiply-adds for the
    logits X Θ_i Xᵀ, the outputs A_i X W_i and their gradients. ``grow_lbfgs(max_work=...)`` counts in it:
    at (8,4,2) one core did 3.6–6.3e5 example-iterations per second, i.e. 2.8–4.8e8 units per second."""
    return float(m * k * d * (k + d))


def grow_lbfgs(
    Xtr: np.ndarray,
    Ytr: np.ndarray,
    Xva: np.ndarray,
    Yva: np.ndarray,
    m: int,
    gen: np.random.Generator,
    *,
    first: int = 1000,
    growth: int = 2,
    restarts: int = 3,
    tol: float = 1e-12,
    deadline: float = math.inf,
    max_iter: int | None = None,
    init: MultiHeadAttention | None = None,
    single_thread: bool = True,
    max_examples: int | None = None,
    give_up: tuple[int, float] | None = None,
    max_work: float = math.inf,
) -> GrowingFit:
    """The growing-subset protocol on given splits (see ``lbfgs_growing``); ``init`` seeds the first attempt,
    ``max_iter`` caps each L-BFGS run, ``max_examples`` the largest subset (default: the whole training split),
    ``give_up`` is passed to each run (``gradient_descent``). ``max_work`` bounds the whole protocol
    deterministically: Σ over runs of examples × iterations × ``work_unit(k, d, m)`` (each run's iteration cap
    is what is left of it), where a deadline would make the result depend on the machine's speed."""
    first = check_positive_int(first, "first")
    growth = check_positive_int(growth, "growth")
    if growth < 2:
        raise ValueError(f"growth must be >= 2, got {growth}")
    restarts = check_positive_int(restarts, "restarts")
    from .phases.projections import relative_mse

    top = Xtr.shape[0] if max_examples is None else min(Xtr.shape[0], int(max_examples))
    unit = work_unit(Xtr.shape[1], Xtr.shape[2], m)
    work = 0.0
    stages: list[dict[str, Any]] = []
    best_val, best_model, best_train = math.inf, init, math.inf
    if init is not None:
        best_val = relative_mse(init.thetas, init.ws, Xva, Yva)
    n = min(first, top)
    iters, stop, halted = 0, "training split used up", False  # halted: a time limit or the work budget
    while True:
        for attempt in range(restarts):
            left = deadline - time.perf_counter()
            if left <= 0:
                stop, halted = "time limit", True
                break
            its_left = math.floor((max_work - work) / (n * unit)) if math.isfinite(max_work) else None
            if its_left is not None and its_left < 1:
                stop, halted = f"work budget {max_work:.3g} used up", True
                break
            run_cap = max_iter if its_left is None else min(its_left, max_iter or its_left)
            start = best_model if attempt == 0 else None
            ta = time.perf_counter()
            res = gradient_descent(
                Xtr[:n],
                Ytr[:n],
                m,
                method="lbfgs",
                seed=gen,
                init=start,
                tol=min(1e-20, tol),
                time_limit=None if math.isinf(left) else left,
                max_iter=run_cap,
                single_thread=single_thread,
                give_up=give_up,
            )
            iters += res.iterations
            run_work = n * unit * res.iterations
            work += run_work
            val = relative_mse(res.model.thetas, res.model.ws, Xva, Yva)
            stages.append(
                {
                    "examples": int(n),
                    "init": "warm" if start is not None else "random",
                    "iterations": int(res.iterations),
                    "work": float(run_work),
                    "train_error": res.train_error,
                    "validation_error": val,
                    "time": time.perf_counter() - ta,
                }
            )
            if val < best_val or best_model is None or not math.isfinite(best_val):
                best_val, best_model, best_train = val, res.model, res.train_error
            if val <= tol:
                stop = f"validated at {n} examples"
                break
        if best_val <= tol or halted or n >= top:
            break
        n = min(top, n * growth)
    converged = bool(best_val <= tol)
    reason = (
        f"{stop}: validation relative MSE {best_val:.2e} {'<=' if converged else '>'} tol {tol:.0e} after "
        f"{len(stages)} L-BFGS runs"
    )
    return GrowingFit(best_model, float(best_val), float(best_train), converged, int(n), iters, stages, reason, stop)
