"""Adam in PyTorch (float64) with a cosine learning-rate schedule: the fast Adam baseline.

Minimises the normalised loss L = mean‖F_θ(X) − Y‖² / mean‖Y‖² over (Θ_1..Θ_m, W_1..W_m) from a random
start (Θ entries N(0, 1/d²), so ‖Θ_i‖_F ≈ 1; W entries N(0, 1/d)), with lr_t = lr_min + ½(lr − lr_min)
(1 + cos(π t / max_iter)). torch is imported lazily; ``sculpt.baselines.gradient_descent(method="adam")``
is the numpy fallback when torch is absent.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ._checks import as_generator, check_data, check_m, check_positive, check_positive_int
from .model import MultiHeadAttention
from .result import LearnResult, PhaseRecord

__all__ = ["torch_adam"]


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "torch_adam needs torch (pip install 'sculpt[torch]'); "
            "use sculpt.baselines.gradient_descent(method='adam') instead"
        ) from exc
    return torch


def _forward(torch: Any, thetas: Any, ws: Any, X: Any) -> Any:
    """Σ_i softmax(X Θ_i Xᵀ) X W_i for X (n, k, d): logits (n, m, k, k), output (n, k, d)."""
    logits = torch.einsum("nad,hde,nbe->nhab", X, thetas, X)
    att = torch.softmax(logits, dim=-1)
    return torch.einsum("nhab,nbd,hde->nae", att, X, ws)


def torch_adam(
    X: Any,
    Y: Any,
    m: int,
    *,
    seed: Any = None,
    restarts: int = 1,
    max_iter: int = 3000,
    lr: float = 0.03,
    lr_min: float | None = None,
    batch_size: int | None = 2000,
    tol: float = 1e-18,
    time_limit: float | None = None,
    threads: int | None = 1,
) -> LearnResult:
    """Fit m heads to (X, Y) with Adam (float64, cosine schedule from ``lr`` to ``lr_min`` over ``max_iter``
    steps; default lr·1e-3, as the numpy Adam of ``gradient_descent``); minibatches of ``batch_size``
    drawn at random (full batch when N ≤ batch_size or batch_size is None); stop a restart when the
    full-batch training loss is ≤ ``tol``; keep the best of ``restarts`` random starts; stop everything after
    ``time_limit`` seconds. ``threads`` pins torch's intra-op threads during the fit (None: leave as is).
    Returns a LearnResult with method "adam-torch" and one PhaseRecord "adam" per restart."""
    torch = _import_torch()
    X3, Y3 = check_data(X, Y)
    m = check_m(m)
    restarts = check_positive_int(restarts, "restarts")
    max_iter = check_positive_int(max_iter, "max_iter")
    lr, tol = check_positive(lr, "lr"), check_positive(tol, "tol")
    lr_min = lr * 1e-3 if lr_min is None else check_positive(lr_min, "lr_min")
    if lr_min > lr:
        raise ValueError(f"lr_min must be <= lr, got lr_min={lr_min}, lr={lr}")
    if batch_size is not None:
        batch_size = check_positive_int(batch_size, "batch_size")
    if time_limit is not None:
        time_limit = check_positive(time_limit, "time_limit")
    if threads is not None:
        threads = check_positive_int(threads, "threads")
    gen = as_generator(seed, "seed")
    n, _, d = X3.shape
    t0 = time.perf_counter()
    saved_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        Xt = torch.from_numpy(X3)
        Yt = torch.from_numpy(Y3)
        y_norm = float(np.mean(Y3**2)) or 1.0
        best: tuple[float, np.ndarray, np.ndarray] | None = None
        best_restart = -1
        full = batch_size is None or batch_size >= n
        phases: list[PhaseRecord] = []
        total_iter = 0
        timed_out = False
        for r in range(restarts):
            t_r = time.perf_counter()
            th = torch.tensor(gen.standard_normal((m, d, d)) / d, dtype=torch.float64, requires_grad=True)
            w = torch.tensor(gen.standard_normal((m, d, d)) / math.sqrt(d), dtype=torch.float64, requires_grad=True)
            opt = torch.optim.Adam([th, w], lr=lr)
            it, loss_val = 0, math.inf
            for it in range(1, max_iter + 1):
                for group in opt.param_groups:
                    group["lr"] = lr_min + 0.5 * (lr - lr_min) * (1 + math.cos(math.pi * (it - 1) / max_iter))
                if full:
                    xb, yb = Xt, Yt
                else:
                    idx = torch.from_numpy(gen.choice(n, size=batch_size, replace=False))
                    xb, yb = Xt[idx], Yt[idx]
                opt.zero_grad(set_to_none=True)
                loss = torch.mean((_forward(torch, th, w, xb) - yb) ** 2) / y_norm
                loss.backward()
                opt.step()
                if full:
                    loss_val = float(loss.detach())
                elif it % 50 == 0:  # minibatches: check the full training loss every 50 steps
                    with torch.no_grad():
                        loss_val = float(torch.mean((_forward(torch, th, w, Xt) - Yt) ** 2)) / y_norm
                if loss_val <= tol or math.isnan(loss_val):
                    break
                if time_limit is not None and time.perf_counter() - t0 > time_limit:
                    timed_out = True
                    break
            with torch.no_grad():
                final = float(torch.mean((_forward(torch, th, w, Xt) - Yt) ** 2)) / y_norm
            total_iter += it
            phases.append(
                PhaseRecord(
                    f"adam-{r}",
                    figures={"iterations": it, "train_error": final, "final_lr": opt.param_groups[0]["lr"]},
                    time=time.perf_counter() - t_r,
                    status="ok" if math.isfinite(final) else "failed",
                )
            )
            if math.isfinite(final) and (best is None or final < best[0]):
                best = (final, th.detach().numpy().copy(), w.detach().numpy().copy())
                best_restart = r
            if (best is not None and best[0] <= tol) or timed_out:
                break
    finally:
        torch.set_num_threads(saved_threads)
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
    err, th_best, w_best = best
    reason = (
        "training loss <= tol" if err <= tol else "time limit" if timed_out else f"{max_iter} steps per restart done"
    )
    return LearnResult(
        model=MultiHeadAttention(th_best, w_best),
        method="adam-torch",
        train_error=err,
        converged=err <= tol,
        time=time.perf_counter() - t0,
        iterations=total_iter,
        samples_used=n,
        phases=phases,
        reason=reason,
        info={
            "implementation": "torch",
            "lr": lr,
            "lr_min": lr_min,
            "batch_size": batch_size,
            "restarts_run": len(phases),
            "best_restart": best_restart,
        },
    )
