"""``learn``: the public entry point. Learn F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i from examples (X, Y).

Routes: "sculpt" (Chen & Li's phases 1–6 on a convex body, then a least-squares polish; the phases run as a
pipeline over one state, ``sculpt.pipeline``), "exact" (the
algebraic m = 1 route for k < d), "gradient" (full-batch L-BFGS from random initialisation) and "auto".
Every route holds out a validation split that no phase fits on (except the exact route given exactly its
minimum N, which checks its overdetermined systems on their own rows and says so in ``info``); ``converged``
means the validation relative MSE is at most ``tol`` (1e-12 by default), never less. Every option is a field of
``sculpt.Settings`` (defaults and reasons: ``print(Settings.describe())``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._checks import as_generator, check_data, check_m
from .model import MultiHeadAttention
from .phases.polish import polish
from .phases.projections import relative_mse
from .pipeline import PHASE_FAILURES, SCULPT_PHASES, LearnState, run_pipeline
from .result import LearnResult, PhaseRecord
from .settings import Settings, one_head_examples, settings_from_options
from .toolkit import Progress

__all__ = ["learn", "METHODS", "min_examples"]

METHODS = ("sculpt", "exact", "gradient", "vp-lm", "auto")
_SCULPT_NEED_PER_D2 = {2: 13, 3: 24}  # phases 1–4's examples per d² for m >= 2 (min_examples' docstring)
_COND_HINT = 100.0  # phase 1's cond(Σ̂W) above which a later phase failure mentions a possibly singular Σ W


def min_examples(method: str, d: int, k: int, m: int) -> int:
    """Fewest examples (training + validation) a route accepts.

    gradient: the parameter count 2md²/(kd) plus a validation example; exact: the exact route's own
    recommendation ``exact_sample_size(d, k)`` = max(⌈d²/(k(k−1))⌉, ⌈d²/(k(d−k+1))⌉) + 3, i.e. ⌈d²/(k(k−1))⌉ + 3
    when k <= (d + 2)/2 (its systems are overdetermined, so with no example to spare the
    validation error is measured on the training examples and the record says so); sculpt: what phases 1–4 need
    to pin the span plus a ninth for the validation split: one head the first subset max(64, ⌈2d²/(k(k−1))⌉)
    (K*'s d² equality rows; measured at that size plus a ninth, 4 seeds each: 4/4 at (8,4), (8,2), (16,4),
    (16,8), (24,4), (32,8), (4,2), (6,3), 3/4 at (8,6)); m >= 2 c(m)·d² with c = 13 (m = 2), 24 (m >= 3)
    (measured at d = 8, 4 seeds: m = 2 4/4 from 800, 2/4 at 500; m = 3 4/4 from 1,500, 1/4 at 1,000 — below
    that phase 4 has too few equality rows; at d = 16, m = 2 was 4/4 from 2,000 = 7.8 d², 3/4 at 1,000, so the
    rule is conservative there)."""
    if method in ("gradient", "vp-lm"):
        return math.ceil(2 * m * d * d / (k * d)) + 1
    if method == "exact":
        from .exact import exact_sample_size

        return exact_sample_size(d, k)
    if method == "sculpt":
        need = one_head_examples(d, k) if m == 1 else _SCULPT_NEED_PER_D2[min(m, 3)] * d * d
        return need + min(2000, max(1, need // 9))
    raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def _validation_size(N: int, need_train: int, requested: Any, *, allow_none: bool = False) -> int:
    """Held-out examples: ``requested``, else min(2000, N/10) but leaving ``need_train`` for training; at least
    one unless ``allow_none`` and N leaves none to spare (the exact route at its minimum N, whose overdetermined
    systems are then checked on their own rows)."""
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, (int, np.integer)) or not 1 <= requested < N:
            raise ValueError(f"validation_size must be an integer in [1, N-1] = [1, {N - 1}], got {requested!r}")
        return int(requested)
    floor = 0 if allow_none and N <= need_train else 1
    return int(max(floor, min(2000, N // 10, N - need_train)))


def _truth_summary(model: MultiHeadAttention | None, truth: Any) -> dict[str, Any]:
    if model is None or truth is None or not isinstance(truth, MultiHeadAttention) or truth.m != model.m:
        return {}
    dist = truth.distance(model)
    return {
        "theta_error": dist.theta_error,
        "w_error": dist.w_error,
        "max_theta_error": dist.max_theta_error,
        "max_w_error": dist.max_w_error,
        "permutation": list(dist.permutation),
    }


def _split(N: int, n_val: int, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    perm = gen.permutation(N)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


@dataclass
class _Run:
    """One learn() call after validation: the splits, resolved settings and shared machinery."""

    Xtr: np.ndarray
    Ytr: np.ndarray
    Xva: np.ndarray
    Yva: np.ndarray
    m: int
    N: int
    n_val: int
    gen: np.random.Generator
    solver: str | None
    truth: Any
    progress: Progress
    settings: Settings

    @property
    def tol(self) -> float:
        return float(self.settings.tol)

    @property
    def d(self) -> int:
        return int(self.Xtr.shape[2])

    def base_info(self) -> dict[str, Any]:
        return {"train_examples": int(self.Xtr.shape[0]), "validation_examples": int(self.n_val), "tol": self.tol}


def _failure_reason(
    failure: Any,
    records: list[PhaseRecord],
    examples: int | None = None,
    kd: tuple[int, int] | None = None,
    m: int | None = None,
) -> str:
    why = f"phase {failure.phase} failed: {failure.reason}"
    if failure.phase == "1-sum-w" and examples is not None and kd is not None and examples * kd[0] < 3 * kd[1]:
        # the crude estimate (1/kN) Σ s tᵀ has rank <= N·k: with fewer rows than d it is singular whatever
        # the layer (one training example gave "degenerate instance, condition number 1.3e49")
        k, d = kd
        return (
            f"phase 1-sum-w failed: too few training examples: {examples} example(s) give {examples * k} "
            f"single-token rows for the {d}×{d} matrix Σ W_i (phase 1 needs at least 3d = {3 * d}), so its "
            f"estimate is singular; this says nothing about the layer (give more examples, or a smaller "
            f"validation_size) [{failure.reason}]"
        )
    if failure.phase == "1-sum-w" and examples is not None and kd is not None:
        need = min_examples("sculpt", kd[1], kd[0], m) if m is not None else 0
        if examples < need:
            why += (
                f" (on {examples} training examples, below the {need} method='sculpt' asks for: phase 1's "
                "estimate is mostly noise, which need not be a property of the layer)"
            )
    first = records[0] if records else None
    cond = first.figures.get("cond", 0.0) if first is not None and first.name == "1-sum-w" else 0.0
    if failure.phase != "1-sum-w" and cond > _COND_HINT:
        # an exactly singular Σ W leaves only noise in phase 1's estimate, whose condition number ranged
        # 52–6e7 over planted W_2 = −W_1 layers (below max_cond = 1e3 in some), against <= 10 for plant()
        why += (
            f" (phase 1's Σ W estimate has condition number {cond:.3g}: Σ W_i may be singular, a "
            "degenerate instance for the sculpting route)"
        )
    return why


def _sculpt_attempt(run: _Run, sub: np.ndarray, rest: np.ndarray, records: list[PhaseRecord]) -> tuple[LearnState, Any]:
    """Phases 1–6 and the polish with phases 1–3 on the training examples ``sub``; ``rest`` (the others, in a
    random order) is what phase 4 may read."""
    X_body, Y_body = run.Xtr[sub], run.Ytr[sub]
    state = LearnState(
        run.Xtr,
        run.Ytr,
        run.Xva,
        run.Yva,
        run.m,
        run.settings,
        run.gen,
        solver=run.solver,
        truth=run.truth,
        note=run.progress.note,
        info=run.base_info(),
        X_body=X_body,
        Y_body=Y_body,
        scan_order=rest,
    )
    state.info["sculpt_examples"] = int(X_body.shape[0])
    failure = run_pipeline(SCULPT_PHASES, state, records, run.progress)
    return state, failure


def _sculpt_route(run: _Run) -> LearnResult:
    """Phases 1–6 and the polish (``SCULPT_PHASES``) on the training split; validation only selects and checks.

    Adaptive samples: phases 1–3 start on the first ``sculpt_examples`` of a random order of the training
    split; an attempt that does not validate (a phase cannot go on, or the polish stays above ``tol``) is rerun
    on ``sculpt_growth`` times more, up to ``max_sculpt_examples``. ``info["attempts"]`` says how many examples
    each attempt used and why the next one asked for more. ``train_error`` is on the last attempt's subset."""
    t_start = time.perf_counter()
    cfg = run.settings
    n_tr = run.Xtr.shape[0]
    order = run.gen.permutation(n_tr)
    cap = min(n_tr, int(cfg.max_sculpt_examples or n_tr))
    n = min(int(cfg.sculpt_examples or n_tr), cap)
    records: list[PhaseRecord] = []
    attempts: list[dict[str, Any]] = []
    while True:
        ta = time.perf_counter()
        sub = np.sort(order[:n])
        state, failure = _sculpt_attempt(run, sub, order[n:], records)
        outcome = (
            "validated"
            if failure is None and state.converged
            else f"phase {failure.phase} failed: {failure.reason}"
            if failure is not None
            else f"the polish stopped at validation relative MSE {state.validation_error:.2e} > tol {run.tol:.0e}"
        )
        attempts.append({"examples": int(n), "outcome": outcome, "time": time.perf_counter() - ta})
        if (failure is None and state.converged) or n >= cap or cfg.sculpt_growth < 2:
            break
        n = min(cap, n * int(cfg.sculpt_growth))
        run.progress.note(f"{outcome}: phases 1–3 again on {n} examples")
    state.info["attempts"] = attempts
    model = state.model
    tol = run.tol
    if failure is not None:
        reason = _failure_reason(failure, records, int(n), (run.Xtr.shape[1], run.Xtr.shape[2]), run.m)
        if model is not None:
            reason += " (model: phase 6's, unpolished)"
        converged, val = False, (relative_mse(model.thetas, model.ws, run.Xva, run.Yva) if model is not None else None)
    else:
        val = state.validation_error
        converged = state.converged
        reason = (
            f"validation relative MSE {val:.2e} <= tol {tol:.0e}"
            if converged
            else f"not converged: validation relative MSE {val:.2e} > tol {tol:.0e}"
        )
    if len(attempts) > 1:
        reason += (
            f" (phases 1–3 on {attempts[-1]['examples']} examples, attempt {len(attempts)}; earlier: "
            + "; ".join(f"{a['examples']}: {a['outcome']}" for a in attempts[:-1])
            + ")"
        )
    # on the subset the phases read, as lbfgs_growing reports its fitted subset: the whole training split cost
    # 19 ms of 0.12 s at (8,4,1) with N = 20,000 and reads examples no phase used
    train = relative_mse(model.thetas, model.ws, run.Xtr[sub], run.Ytr[sub]) if model is not None else math.inf
    state.info["truth"] = _truth_summary(model, run.truth)
    used = int(max(a["examples"] for a in attempts))
    span_read = _span_examples(records)
    if model is not None:  # phases 4–6 and the polish read the training split beyond phases 1–3's subset
        used = max(used, span_read, _polish_examples(records), min(cfg.search_examples, n_tr))
    state.info["examples_used"] = {
        "phases_1_3": int(attempts[-1]["examples"]),
        "phase_4": int(span_read),
        "training": used,
        "validation": int(run.n_val),
    }
    res = LearnResult(
        model=model,
        method="sculpt",
        train_error=train,
        validation_error=val,
        converged=converged,
        time=time.perf_counter() - t_start,
        iterations=state.iterations,
        samples_used=used + int(run.n_val),
        phases=records,
        reason=reason,
        info=state.info,
    )
    if state.body is not None and state.span is not None:
        res.attach_body(state.body, state.span.span)
    return res


def _span_examples(records: list[PhaseRecord]) -> int:
    """Examples phase 4's last run read for its rows (phases 1–3's subset plus what it scanned)."""
    runs = [int(r.figures.get("examples", 0)) for r in records if r.name == "4-span"]
    return runs[-1] if runs else 0


def _polish_examples(records: list[PhaseRecord]) -> int:
    return max([int(r.figures.get("examples", 0)) for r in records if r.name in ("polish", "5-heads")] or [0])


def _exact_route(run: _Run) -> LearnResult:
    from .exact import exact_sample_size, exact_single_head

    run.progress.start("exact")
    kw = run.settings.exact.kwargs()
    cap = kw.pop("train_examples")
    if cap is None:
        cap = 20 * exact_sample_size(run.d, run.Xtr.shape[1])
    n = min(run.Xtr.shape[0], int(cap))
    return exact_single_head(run.Xtr[:n], run.Ytr[:n], m=1, truth=run.truth, **kw)


def _gradient_route(run: _Run) -> LearnResult:
    t0 = run.progress.start("gradient")
    return _gradient(run, None, t0)


def _validated(res: LearnResult, run: _Run) -> LearnResult:
    """Score a non-sculpt route's model on the validation split; polish it if it is not yet at ``tol``."""
    if res.phases:
        run.progress.end(res.phases[-1])
    res.info.update(run.base_info())
    if run.n_val == 0:
        res.info["validation_on"] = (
            f"the {run.Xtr.shape[0]} training examples (N = {run.N} is the exact route's "
            "minimum; give more for a held-out check)"
        )
    read = int(res.samples_used or run.Xtr.shape[0])  # the training examples the route read
    res.samples_used = min(run.N, read + int(run.n_val))
    if res.model is None:
        res.converged = False
        return res
    tol = run.tol
    val = relative_mse(res.model.thetas, res.model.ws, run.Xva, run.Yva)
    if val > tol and np.isfinite(val):
        t0 = run.progress.start("polish")
        try:
            pol, rec = polish(
                res.model.thetas,
                run.Xtr,
                run.Ytr,
                run.Xva,
                run.Yva,
                tol=tol,
                rng=run.gen,
                truth=run.truth,
                callback=run.progress.note,
                **run.settings.polish.kwargs(),
            )
        except PHASE_FAILURES as exc:
            pol = None
            rec = PhaseRecord(
                "polish", time=time.perf_counter() - t0, status="failed", message=f"{type(exc).__name__}: {exc}"
            )
        res.phases.append(rec)
        run.progress.end(rec)
        if pol is not None:
            res.samples_used = min(run.N, max(read, int(rec.figures.get("examples", 0))) + int(run.n_val))
        if pol is not None and pol.validation_error < val:
            res.model = MultiHeadAttention(pol.thetas, pol.ws)
            val = pol.validation_error
            res.train_error = relative_mse(pol.thetas, pol.ws, run.Xtr, run.Ytr)
    res.validation_error = val
    res.converged = bool(val <= tol)
    # the route's own reason speaks of its training fit ("tol reached" is the training loss); say what decided
    verdict = f"validation relative MSE {val:.2e} {'<=' if res.converged else '>'} tol {tol:.0e}"
    res.reason = (
        f"{res.reason}; {verdict}"
        if res.converged
        else f"not converged: {verdict} ({res.reason})"
        if res.reason
        else f"not converged: {verdict}"
    )
    res.info["truth"] = _truth_summary(res.model, run.truth)
    return res


def _exact_need(m: int, k: int, d: int) -> int:
    """Examples the exact route needs, or a number no data set reaches when it does not apply."""
    return min_examples("exact", d, k, m) if m == 1 and 2 <= k < d else 10**18


def _exact_applies(m: int, k: int, d: int, N: int) -> bool:
    return m == 1 and 2 <= k < d and N >= min_examples("exact", d, k, m)


def _fit_result(fit: Any, run: _Run, name: str, t0: float) -> LearnResult:
    """A LearnResult from a ``grow_lbfgs`` fit on the learner's splits, with its run recorded as a phase."""
    model = fit.model
    train = relative_mse(model.thetas, model.ws, run.Xtr, run.Ytr) if model is not None else math.inf
    rec = PhaseRecord(
        name,
        figures={
            "stages": fit.stages,
            "iterations": fit.iterations,
            "examples": fit.examples,
            "validation_error": fit.validation_error,
        },
        time=time.perf_counter() - t0,
        message=fit.reason,
    )
    if run.truth is not None and model is not None:
        rec.truth.update(_truth_summary(model, run.truth))
    return LearnResult(
        model=model,
        method="gradient",
        train_error=train,
        validation_error=fit.validation_error,
        converged=fit.converged,
        time=time.perf_counter() - t0,
        iterations=fit.iterations,
        samples_used=int(fit.examples + run.n_val),
        phases=[rec],
        reason=fit.reason,
        info={**run.base_info(), "truth": _truth_summary(model, run.truth)},
    )


def _finish(fit: Any, run: _Run) -> None:
    """A first try that validated only just (validation relative MSE above 1e-3·tol: it stopped at its
    iteration cap) is run on, on the same examples, to training relative MSE 1e-3·tol, in place. At (32,8,2)
    the capped try validated at 4e-13–7e-13 with W errors up to 1.2e-6; run on to 1e-20 it cost 0.9 s."""
    if not fit.converged or fit.model is None or fit.validation_error <= 1e-3 * run.tol:
        return
    from .baselines import gradient_descent

    t0 = time.perf_counter()
    n = int(fit.examples)
    g = run.settings.gradient
    fin = gradient_descent(
        run.Xtr[:n],
        run.Ytr[:n],
        run.m,
        method="lbfgs",
        seed=run.gen,
        init=fit.model,
        tol=1e-3 * run.tol,
        max_iter=g.max_iter,
        single_thread=g.single_thread,
    )
    val = relative_mse(fin.model.thetas, fin.model.ws, run.Xva, run.Yva)
    fit.stages.append(
        {
            "examples": n,
            "init": "finish (the validated model, run on to 1e-3·tol)",
            "iterations": int(fin.iterations),
            "train_error": fin.train_error,
            "validation_error": val,
            "time": time.perf_counter() - t0,
        }
    )
    fit.iterations += int(fin.iterations)
    if val <= fit.validation_error:
        fit.model, fit.validation_error, fit.train_error = fin.model, float(val), float(fin.train_error)


def _vp_lm_route(run: _Run) -> LearnResult:
    """``method="vp-lm"``: VP-LM from ``vp_lm.restarts`` random starts on the learner's splits."""
    v = run.settings.vp_lm
    scale = 1.0 / run.d if v.init_scale is None else float(v.init_scale)
    res, _, _ = _vp_lm_step(run, "vp-lm", v.restarts, scale, v.max_examples)
    res.samples_used -= int(run.n_val)  # training examples: ``_validated`` adds the validation split
    return res


def _vp_lm_step(run: _Run, name: str, starts: int, scale: float, max_examples: int) -> tuple[LearnResult, str, float]:
    """VP-LM from random starts (``sculpt.vplm.vp_lm_starts``) on the learner's splits, recorded as the phase
    ``name``: auto's second step, and the whole ``method="vp-lm"`` route. Returns (result, label, start time)."""
    from .baselines import _blas_context
    from .vplm import vp_lm_starts

    t0 = run.progress.start(name)
    g = run.settings.gradient
    with _blas_context(g.single_thread):
        fit = vp_lm_starts(
            run.Xtr,
            run.Ytr,
            run.Xva,
            run.Yva,
            run.m,
            run.gen,
            restarts=starts,
            scale=scale,
            tol=run.tol,
            max_examples=max_examples,
            deadline=math.inf if g.time_limit is None else t0 + g.time_limit,
        )
    val = fit.validation_error
    rec = PhaseRecord(
        name,
        figures={"starts": fit.starts, "iterations": fit.iterations, "examples": fit.examples, "validation_error": val},
        time=time.perf_counter() - t0,
        message=f"{fit.stop} after {len(fit.starts)} start(s)",
    )
    if run.truth is not None and fit.model is not None:
        rec.truth.update(_truth_summary(fit.model, run.truth))
    run.progress.end(rec)
    res = LearnResult(
        model=fit.model,
        method="vp-lm",
        train_error=fit.train_error,
        validation_error=val,
        converged=bool(val <= run.tol),
        iterations=fit.iterations,
        samples_used=int(fit.examples + run.n_val),
        phases=[rec],
        reason=rec.message,
        info=run.base_info(),
    )
    return res, f"{name}: VP-LM from {len(fit.starts)} random start(s), {fit.iterations} LM iterations", t0


def _auto_route(run: _Run, N: int, k: int, d: int) -> LearnResult:
    """``method="auto"``. Order, measured (docs/method.md): the exact route when m = 1 and k < d; else, when
    ``auto.peer_first`` (auto: when m·d² > 256 (> 1,024 when m >= 3): e.g. d = 16 with two heads or more
    than four, d = 32, or more than 16 heads at d = 8, where VP-LM's normal equations and its
    spurious fits of a first small subset cost more than L-BFGS's try; at d = 8 VP-LM first is 2–3× faster),
    L-BFGS on ``auto.peer_examples`` examples capped at ``auto.peer_iterations`` iterations; else (or then)
    VP-LM from ``auto.vp_lm_starts`` random starts; else the sculpting route when N allows it (it recovers the
    layers gradient descent fails on); else, or if that did not validate, L-BFGS on growing subsets with ``auto.restarts`` starts per
    size, the first from the best model so far, within ``auto.fallback_work`` (a work budget, not seconds).
    Every step is deterministic given the seed (iteration caps and work budgets, no time budgets unless
    ``gradient.time_limit`` is set). ``reason`` lists what was tried, in order, with times."""
    m, cfg, tol = run.m, run.settings, run.tol
    a = cfg.auto
    tried: list[str] = []
    best: LearnResult | None = None
    records: list[PhaseRecord] = []

    def keep(res: LearnResult, label: str, t0: float) -> bool:
        nonlocal best
        records.extend(res.phases)
        val = res.validation_error if res.validation_error is not None else math.inf
        tried.append(
            f"{label} ({time.perf_counter() - t0:.2f} s: "
            + (
                "validated"
                if res.converged
                else f"validation relative MSE {val:.2e}"
                if math.isfinite(val)
                else "no model"
            )
            + ")"
        )
        if res.model is not None and (
            best is None or val < (best.validation_error if best.validation_error is not None else math.inf)
        ):
            best = res
            best.info["model_from"] = label.split(":")[0].split(" ")[0]
        return bool(res.converged)

    from .baselines import grow_lbfgs

    done = False
    if _exact_applies(m, k, d, N):
        t0 = time.perf_counter()
        done = keep(_validated(_exact_route(run), run), "exact", t0)
    else:

        def peer_try() -> bool:
            assert a.peer_give_up is not None  # Settings.resolve sets it (30·m when unset)
            t0 = run.progress.start("auto-peer")
            fit = grow_lbfgs(
                run.Xtr,
                run.Ytr,
                run.Xva,
                run.Yva,
                m,
                run.gen,
                first=a.peer_examples,
                restarts=1,
                tol=tol,
                max_iter=a.peer_iterations,
                max_examples=a.peer_examples,
                give_up=(int(a.peer_give_up), float(a.peer_give_up_loss)),
                single_thread=cfg.gradient.single_thread,
            )
            _finish(fit, run)
            res = _fit_result(fit, run, "auto-peer", t0)
            run.progress.end(res.phases[-1])
            return keep(
                res,
                f"auto-peer: L-BFGS on {fit.examples} examples, <= {a.peer_iterations} iterations "
                f"(given up after {a.peer_give_up} above {a.peer_give_up_loss:.0e})",
                t0,
            )

        def vp_lm_try() -> bool:
            if a.vp_lm_starts <= 0:
                return False
            return keep(*_vp_lm_step(run, "auto-vp-lm", a.vp_lm_starts, 1.0 / d, cfg.vp_lm.max_examples))

        # the L-BFGS try only when m·d² is large (Settings.resolve: auto.peer_first), where VP-LM costs more than
        # L-BFGS's capped try; below, VP-LM validated first on every row measured
        for step in (peer_try, vp_lm_try) if a.peer_first else (vp_lm_try,):
            if not done:
                done = step()
        need = min_examples("sculpt", d, k, m)
        if not done and N >= need:
            t0 = time.perf_counter()
            done = keep(_sculpt_route(run), "sculpt", t0)
        elif not done:
            tried.append(f"sculpt skipped (N = {N} < {need} examples it needs)")
    if not done and a.fallback:
        t0 = run.progress.start("fallback-gradient")
        init = best.model if a.warm_start and best is not None and best.model is not None else None
        g = cfg.gradient
        deadline = math.inf if g.time_limit is None else t0 + g.time_limit
        fit = grow_lbfgs(
            run.Xtr,
            run.Ytr,
            run.Xva,
            run.Yva,
            m,
            run.gen,
            first=a.peer_examples,
            restarts=a.restarts,
            tol=tol,
            deadline=deadline,
            max_iter=g.max_iter,
            init=init,
            single_thread=g.single_thread,
            max_work=math.inf if a.fallback_work is None else float(a.fallback_work),
        )
        res = _fit_result(fit, run, "fallback-gradient", t0)
        res.phases[-1].figures["init"] = "warm, then random" if init is not None else "random"
        run.progress.end(res.phases[-1])
        keep(
            res, f"fallback-gradient: L-BFGS on growing subsets, {a.restarts} starts per size, ended by {fit.stop}", t0
        )
    out = (
        best if best is not None else LearnResult(model=None, method="auto", train_error=math.inf, info=run.base_info())
    )
    out.phases = records
    val = out.validation_error
    out.converged = bool(val is not None and val <= tol)
    out.info["tried"] = tried
    out.info["route"] = out.method
    out.info["truth"] = _truth_summary(out.model, run.truth)
    tail = (
        f"validation relative MSE {val:.2e} {'<=' if out.converged else '>'} tol {tol:.0e}"
        if val is not None and math.isfinite(val)
        else "no step produced a usable model"
    )
    out.reason = f"auto tried {'; then '.join(tried)}. Kept the model of {out.info.get('model_from', 'none')}: {tail}"
    out.samples_used = max([int(r.figures.get("examples", 0)) for r in records] + [out.samples_used or 0])
    return out


def learn(
    X: Any,
    Y: Any,
    m: int,
    *,
    method: str = "sculpt",
    seed: Any = None,
    solver: str | None = None,
    progress: bool = False,
    truth: MultiHeadAttention | None = None,
    settings: Settings | Mapping[str, Any] | None = None,
    **overrides: Any,
) -> LearnResult:
    """Learn m heads (Θ_i, W_i) of F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i from examples X, Y of shape (N, k, d).

    ``method``: "sculpt" (phases 1–6 + polish), "exact" (m = 1, 2 ≤ k < d), "gradient" (L-BFGS from random
    init), "vp-lm" (the polish's variable-projection LM from random starts, ``sculpt.vplm``), "auto" (exact when it applies; else a capped L-BFGS try on a small subset, then sculpt when
    N ≥ min_examples("sculpt"), then L-BFGS on growing subsets with restarts, stopping at the first model that
    validates; ``result.reason`` lists what it tried, in order, with times; ``info["model_from"]`` names the
    step whose model was kept). ``seed``: reproducibility (None, int or Generator); ``solver``: the engine's LP/QP backend;
    ``progress``: phase lines on stderr; ``truth``: the true layer, for ground-truth figures in every phase
    (it never changes the result). ``settings``: a ``sculpt.Settings`` (or nested dict); keyword
    ``overrides`` are merged into it deeply, e.g. ``tol=1e-10, refine={"slabs": {"tau": 0.02}}``. An unknown
    setting at any depth is a TypeError naming it; the old ``*_options`` dicts still work with a
    DeprecationWarning. ``res.info["settings"]`` holds the resolved settings.
    Bad input (shapes, NaN/inf, non-±1 with inputs="boolean", m < 1, too few examples, an unknown solver, a
    setting out of range) is a ValueError; a known solver that is unusable here (MOSEK without a licence) is
    an ``oracles.SolverError``. A phase that cannot go on ends the route with ``converged=False`` and a reason
    naming the phase (``sculpt.errors.PhaseFailed``); anything else raised inside a phase propagates.
    """
    t_start = time.perf_counter()
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    m = check_m(m)
    cfg = settings_from_options(settings, overrides)
    if X is not None and not isinstance(X, (str, bytes)) and np.ndim(X) != 3:  # (non-arrays: TypeError below)
        raise ValueError(f"X must have shape (N, k, d) (a batch of examples), got shape {np.shape(X)}")
    X, Y = check_data(X, Y, boolean=(cfg.inputs == "boolean"))
    N, k, d = X.shape
    from oracles import solvers

    # a bad backend name or an unusable backend fails here, before any phase runs
    lp_backend = solvers.get(solver, kind="lp").name if solver is not None else solvers.default()
    if not np.any(Y):
        raise ValueError("Y is identically zero: there is nothing to learn (the relative MSE is undefined)")
    if truth is not None and not isinstance(truth, MultiHeadAttention):
        raise TypeError(f"truth must be a MultiHeadAttention or None, got {type(truth).__name__}")
    if truth is not None and (truth.d != d or truth.m != m):
        raise ValueError(f"truth has (m, d) = ({truth.m}, {truth.d}), the data and m give ({m}, {d})")
    gen = as_generator(seed, "seed")

    route = method
    if route == "exact":
        if m != 1:
            raise ValueError(f"method='exact' learns one head (m = 1), got m = {m}")
        if not 2 <= k < d:
            raise ValueError(f"method='exact' needs 2 <= k < d, got k = {k}, d = {d}")
    need = (
        min_examples(route, d, k, m)
        if route != "auto"
        else min(min_examples("gradient", d, k, m), _exact_need(m, k, d))
    )
    if N < need:
        raise ValueError(
            f"too few examples for method={route!r}: got N = {N}, need at least {need} for (d, k, m) = ({d}, {k}, {m})"
        )
    cfg = cfg.resolve(d, k, m, N)
    need_train = {"sculpt": 0, "exact": need}.get(route, need - 1)
    if route == "auto" and _exact_applies(m, k, d, N):
        need_train = min_examples("exact", d, k, m)
    n_val = _validation_size(
        N,
        need_train,
        cfg.validation_size,
        allow_none=route == "exact" or (route == "auto" and _exact_applies(m, k, d, N)),
    )
    tr, va = _split(N, n_val, gen)
    Xtr, Ytr, Xva, Yva = X[tr], Y[tr], X[va], Y[va]
    if n_val == 0:  # the exact route at its minimum N: no example to spare, check on the training rows
        Xva, Yva = Xtr, Ytr
    prog = Progress(progress, route, {"sculpt": len(SCULPT_PHASES), "auto": len(SCULPT_PHASES) + 3}.get(route, 2))
    run = _Run(Xtr, Ytr, Xva, Yva, m, N, n_val, gen, solver, truth, prog, cfg)
    try:
        if route == "auto":
            res = _auto_route(run, N, k, d)
        else:
            res = _ROUTES[route](run)
            if route != "sculpt":
                res = _validated(res, run)
    finally:
        prog.close()
    res.attach_held_out(Xva, Yva)
    res.time = time.perf_counter() - t_start
    res.info.setdefault("route", route)
    res.info.setdefault("model_from", route)  # for auto: the step whose model was kept
    res.info["settings"] = cfg.to_dict()
    if res.info.get("route") == "sculpt":
        res.info.setdefault("solver", lp_backend)  # the engine's LP backend (the other routes use none)
    return res


def _gradient(run: _Run, init: MultiHeadAttention | None, t0: float) -> LearnResult:
    """The L-BFGS baseline on the training split, with its run recorded as a phase."""
    from .baselines import gradient_descent

    res = gradient_descent(
        run.Xtr, run.Ytr, run.m, method="lbfgs", seed=run.gen, init=init, **run.settings.gradient.kwargs()
    )
    res.method = "gradient"
    res.phases.append(
        PhaseRecord(
            "gradient",
            figures={
                "train_error": res.train_error,
                "iterations": res.iterations,
                "init": "warm" if init is not None else "random",
            },
            time=time.perf_counter() - t0,
            message=res.reason,
        )
    )
    return res


_ROUTES = {"sculpt": _sculpt_route, "exact": _exact_route, "gradient": _gradient_route, "vp-lm": _vp_lm_route}
