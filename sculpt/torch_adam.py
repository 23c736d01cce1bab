"""Adam in PyTorch (float64) with a cosine learning-rate schedule: the fast Adam baseline.

Minimises the normalised loss L = mean‖F_θ(X) − Y‖² / mean‖Y‖² over (Θ_1..Θ_m, W_1..W_m) from a random
start (Θ entries N(0, 1/d²), so ‖Θ_i‖_F ≈ 1; W entries N(0, 1/d)), with lr_t = lr_min + ½(lr − lr_min)
(1 + cos(π t / max_iter)). torch is imported lazily; ``sculpt.baselines.gradient_descent(method="adam")``
is the numpy fallback when torch is absent. Defaults are the numpy Adam's (``GradientSettings``: ``restarts``,
``adam_max_iter``, ``adam_lr``, ``adam_batch_size``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ._checks import SeedLike, as_generator, check_data, check_m, check_positive, check_positive_int
from .model import MultiHeadAttention
from .result import LearnResult, PhaseRecord
from .settings import GradientSettings, ProblemSize

if TYPE_CHECKING:
    import torch

__all__ = ["torch_adam"]

_EVAL_EVERY = 50  # minibatches: the full training loss is checked every this many steps


def _import_torch() -> ModuleType:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "torch_adam needs torch (pip install 'sculpt-attention[torch]'); "
            "use sculpt.baselines.gradient_descent(method='adam') instead"
        ) from exc
    return torch


def _forward(torch: ModuleType, thetas: torch.Tensor, ws: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """Σ_i softmax(X Θ_i Xᵀ) X W_i for X (n, k, d): logits (n, m, k, k), output (n, k, d)."""
    logits = torch.einsum("nad,hde,nbe->nhab", X, thetas, X)
    att = torch.softmax(logits, dim=-1)
    return torch.einsum("nhab,nbd,hde->nae", att, X, ws)


@dataclass(frozen=True)
class _Config:
    """One ``torch_adam`` call's options, validated; ``full``: N <= batch_size, every step on all examples."""

    restarts: int
    max_iter: int
    lr: float
    lr_min: float
    batch_size: int
    full: bool
    tol: float
    time_limit: float | None
    threads: int | None


@dataclass
class _Restart:
    """One restart's outcome: the final full-batch loss, the parameters, steps taken, last learning rate."""

    loss: float
    thetas: np.ndarray
    ws: np.ndarray
    steps: int
    last_lr: float
    timed_out: bool


def _config(
    s: GradientSettings,
    n: int,
    *,
    restarts: int | None,
    max_iter: int | None,
    lr: float | None,
    lr_min: float | None,
    batch_size: int | None,
    tol: float,
    time_limit: float | None,
    threads: int | None,
) -> _Config:
    """Each keyword when given (validated), else the settings' Adam field."""
    rate = check_positive(s.adam_lr if lr is None else lr, "lr")
    floor = rate * 1e-3 if lr_min is None else check_positive(lr_min, "lr_min")
    if floor > rate:
        raise ValueError(f"lr_min must be <= lr, got lr_min={floor}, lr={rate}")
    batch = check_positive_int(s.adam_batch_size if batch_size is None else batch_size, "batch_size")
    return _Config(
        restarts=check_positive_int(s.restarts if restarts is None else restarts, "restarts"),
        max_iter=check_positive_int(s.adam_max_iter if max_iter is None else max_iter, "max_iter"),
        lr=rate,
        lr_min=floor,
        batch_size=batch,
        full=batch >= n,
        tol=check_positive(tol, "tol"),
        time_limit=None if time_limit is None else check_positive(time_limit, "time_limit"),
        threads=None if threads is None else check_positive_int(threads, "threads"),
    )


def _restart(
    torch: ModuleType,
    Xt: torch.Tensor,
    Yt: torch.Tensor,
    y_norm: float,
    m: int,
    gen: np.random.Generator,
    cfg: _Config,
    t0: float,
) -> _Restart:
    """Adam from a random start until the training loss is <= tol, ``max_iter`` steps or the time limit; the
    loss is divided by ``y_norm`` = mean(Y²)."""
    n, _, d = Xt.shape
    th = torch.tensor(gen.standard_normal((m, d, d)) / d, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(gen.standard_normal((m, d, d)) / math.sqrt(d), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([th, w], lr=cfg.lr)
    it, loss_val, timed_out = 0, math.inf, False
    for it in range(1, cfg.max_iter + 1):
        for group in opt.param_groups:
            group["lr"] = cfg.lr_min + 0.5 * (cfg.lr - cfg.lr_min) * (1 + math.cos(math.pi * (it - 1) / cfg.max_iter))
        if cfg.full:
            xb, yb = Xt, Yt
        else:
            idx = torch.from_numpy(gen.choice(n, size=cfg.batch_size, replace=False))
            xb, yb = Xt[idx], Yt[idx]
        opt.zero_grad(set_to_none=True)
        loss = torch.mean((_forward(torch, th, w, xb) - yb) ** 2) / y_norm
        loss.backward()
        opt.step()
        if cfg.full:
            loss_val = float(loss.detach())
        elif it % _EVAL_EVERY == 0:
            with torch.no_grad():
                loss_val = float(torch.mean((_forward(torch, th, w, Xt) - Yt) ** 2)) / y_norm
        if loss_val <= cfg.tol or math.isnan(loss_val):
            break
        if cfg.time_limit is not None and time.perf_counter() - t0 > cfg.time_limit:
            timed_out = True
            break
    with torch.no_grad():
        final = float(torch.mean((_forward(torch, th, w, Xt) - Yt) ** 2)) / y_norm
    last_lr = float(opt.param_groups[0]["lr"])
    return _Restart(final, th.detach().numpy().copy(), w.detach().numpy().copy(), it, last_lr, timed_out)


def torch_adam(
    X: ArrayLike,
    Y: ArrayLike,
    m: int,
    settings: GradientSettings | None = None,
    *,
    seed: SeedLike = None,
    restarts: int | None = None,
    max_iter: int | None = None,
    lr: float | None = None,
    lr_min: float | None = None,
    batch_size: int | None = None,
    tol: float = 1e-18,
    time_limit: float | None = None,
    threads: int | None = 1,
) -> LearnResult:
    """Fit m heads to (X, Y) with Adam (float64, cosine schedule from ``lr`` to ``lr_min`` over ``max_iter``
    steps), keeping the best of the random starts.

    Parameters
    ----------
    X, Y
        Examples (N, k, d) and labels of the same shape.
    m
        Heads to fit.
    settings
        Defaults (``GradientSettings()`` when None), shared with the numpy Adam of ``gradient_descent``.
    seed
        Seed or Generator of the starts and the minibatches.
    restarts, max_iter, lr, batch_size
        Override ``restarts``, ``adam_max_iter``, ``adam_lr``, ``adam_batch_size``; minibatches are drawn at
        random, full batch when N <= batch_size.
    lr_min
        The schedule's last learning rate (default lr·1e-3, as the numpy Adam's).
    tol
        A restart stops once its full-batch training loss is <= tol.
    time_limit
        Seconds for the whole call (None: no limit).
    threads
        torch's intra-op threads during the fit (None: leave as is).

    Returns
    -------
    LearnResult
        Method "adam-torch", one PhaseRecord "adam-<r>" per restart.
    """
    torch = _import_torch()
    X3, Y3 = check_data(X, Y)
    m = check_m(m)
    n, k, d = X3.shape
    s = (settings or GradientSettings()).resolve(ProblemSize(d, k, m, n))
    cfg = _config(
        s,
        n,
        restarts=restarts,
        max_iter=max_iter,
        lr=lr,
        lr_min=lr_min,
        batch_size=batch_size,
        tol=tol,
        time_limit=time_limit,
        threads=threads,
    )
    gen = as_generator(seed, "seed")
    t0 = time.perf_counter()
    saved_threads = torch.get_num_threads()
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    try:
        y_norm = float(np.mean(Y3**2)) or 1.0
        return _restarts(torch, torch.from_numpy(X3), torch.from_numpy(Y3), y_norm, m, gen, cfg, t0)
    finally:
        torch.set_num_threads(saved_threads)


def _restarts(
    torch: ModuleType,
    Xt: torch.Tensor,
    Yt: torch.Tensor,
    y_norm: float,
    m: int,
    gen: np.random.Generator,
    cfg: _Config,
    t0: float,
) -> LearnResult:
    """Up to ``cfg.restarts`` restarts, stopping at the first at tol or on the time limit; the best one's result."""
    n = int(Xt.shape[0])
    best: _Restart | None = None
    best_restart = -1
    phases: list[PhaseRecord] = []
    total_iter, timed_out = 0, False
    for r in range(cfg.restarts):
        t_r = time.perf_counter()
        run = _restart(torch, Xt, Yt, y_norm, m, gen, cfg, t0)
        total_iter += run.steps
        timed_out = run.timed_out
        finite = math.isfinite(run.loss)
        phases.append(
            PhaseRecord(
                f"adam-{r}",
                figures={"iterations": run.steps, "train_error": run.loss, "final_lr": run.last_lr},
                time=time.perf_counter() - t_r,
                status="ok" if finite else "failed",
            )
        )
        if finite and (best is None or run.loss < best.loss):
            best, best_restart = run, r
        if (best is not None and best.loss <= cfg.tol) or timed_out:
            break
    if best is None:
        return LearnResult(
            model=None,
            method="adam-torch",
            train_error=math.inf,
            converged=False,
            time=time.perf_counter() - t0,
            iterations=total_iter,
            samples_used=n,
            phases=phases,
            reason="every restart diverged",
            info={"implementation": "torch"},
        )
    err = best.loss
    reason = (
        "training loss <= tol"
        if err <= cfg.tol
        else "time limit"
        if timed_out
        else f"{cfg.max_iter} steps per restart done"
    )
    return LearnResult(
        model=MultiHeadAttention(best.thetas, best.ws),
        method="adam-torch",
        train_error=err,
        converged=err <= cfg.tol,
        time=time.perf_counter() - t0,
        iterations=total_iter,
        samples_used=n,
        phases=phases,
        reason=reason,
        info={
            "implementation": "torch",
            "lr": cfg.lr,
            "lr_min": cfg.lr_min,
            "batch_size": cfg.batch_size,
            "restarts_run": len(phases),
            "best_restart": best_restart,
        },
    )
