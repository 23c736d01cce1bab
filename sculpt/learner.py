"""``learn``: the public entry point. Learn F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i from examples (X, Y).

Routes: "sculpt" (Chen & Li's phases 1–6 on a convex body, then a least-squares polish), "exact" (the
algebraic m = 1 route for k < d), "gradient" (full-batch L-BFGS from random initialisation) and "auto".
Every route holds out a validation split that no phase fits on (except the exact route given exactly its
minimum N, which checks its overdetermined systems on their own rows and says so in ``info``); ``converged``
means the validation relative MSE is at most ``tol`` (1e-12 by default), never less.
"""
from __future__ import annotations

import math
import sys
import time
from typing import Any, Callable

import numpy as np

from oracles.errors import OracleError

from ._checks import as_generator, check_data, check_m
from .model import MultiHeadAttention
from .phases.heads import candidate_heads
from .phases.polish import polish
from .phases.projections import fit_projections, relative_mse
from .phases.span import extract_span
from .result import LearnResult, PhaseRecord

__all__ = ["learn", "METHODS", "min_examples"]

METHODS = ("sculpt", "exact", "gradient", "auto")
_PHASE_ERRORS = (ValueError, OracleError, np.linalg.LinAlgError, FloatingPointError)
_SCULPT_PHASES = 7  # 1-sum-w, 2-sculpt, 3-refine, 4-span, 5-heads, 6-projections, polish
# Learner-level defaults for phase options (user dicts override key by key), measured on planted layers:
# - phase 3 runs one certification round on 60 candidates: at (8,4,2) its default (up to 3 rounds × 200
#   candidates) took 80 s for a ΣW error of 1.3e-3 where one round gave 1e-3–1e-2 in about 1 s, and the
#   polish basin tolerates 1e-2;
# - m >= 3: K* keeps at least 10 d² equality rows (phase 3's default 3 d²): at (8,4,3), N = 20,000 the span angle
#   fell from 70–87° to 29–34°, the best phase-5 candidate from 0.72–1.2 to 0.34–0.38 relative Θ error, and
#   phase 5 from 1–2.6 s to 0.3 s.


# - d² > 100: phase 3 runs no certification round (certify=False; the record says "certification
#   skipped", ΣŴ is kept, K* is still re-sculpted): at d = 16 the certified margins plateau near
#   log(1/q_f) and the round took ΣW from 0.0008 to 0.0009 (median, 5 seeds) and from 0.0018 to 0.0033
#   (seed 0) while costing 2.4 s of 6 s (proxy 1.1 s, 158 LPs 1.2 s);
# - phases 1–3 use 5,000 examples for m = 1 (phase 1 is exact there; phase 1 0.32 -> 0.18 s at d = 8) and
#   10,000 otherwise.


_COND_HINT = 100.0  # phase 1's cond(Σ̂W) above which a later phase failure mentions a possibly singular Σ W


def default_sculpt_examples(d: int, m: int) -> int:
    """Training examples phases 1–3 use by default: 5,000 for m = 1 (every row agrees, phase 1 is exact and
    K* has thousands of equalities), else 10,000 (at (8,4,2) 5,000 left the span 8–25° off, 10,000 4–6°)."""
    return 5_000 if m == 1 else 10_000


def _default_phase_options(d: int, m: int) -> dict[str, dict[str, Any]]:
    refine: dict[str, Any] = {"rounds": 1, "n_candidates": 60}
    if d * d > 100:
        refine["certify"] = False
    if m >= 3:
        refine["slab_opts"] = {"min_equalities": 10 * d * d}
    return {"refine_options": refine}


def _share_box(phase_opts: dict[str, dict[str, Any]]) -> None:
    """A ``box`` given in ``sculpt_options`` bounds every body: phase 3's re-sculpts (half-space and slab)
    use it too unless ``refine_options`` sets their own."""
    if "box" not in phase_opts["sculpt_options"]:
        return
    box = phase_opts["sculpt_options"]["box"]
    refine = phase_opts["refine_options"]
    for key in ("sculpt_opts", "slab_opts"):
        refine[key] = {"box": box, **dict(refine.get(key) or {})}


def min_examples(method: str, d: int, k: int, m: int) -> int:
    """Fewest examples (training + validation) a route accepts.

    gradient: the parameter count 2md²/(kd) plus a validation example; exact: the exact route's own
    recommendation ``exact_sample_size(d, k)`` = max(⌈d²/(k(k−1))⌉, ⌈d²/(k(d−k+1))⌉) + 3, i.e. ⌈d²/(k(k−1))⌉ + 3
    when k <= (d + 2)/2 (its systems are overdetermined, so with no example to spare the
    validation error is measured on the training examples and the record says so); sculpt: 20·d² (phases 2–3 keep only the rare rows where all heads agree; the
    targets were met with 20,000 at d = 8)."""
    if method == "gradient":
        return math.ceil(2 * m * d * d / (k * d)) + 1
    if method == "exact":
        from .exact import exact_sample_size

        return exact_sample_size(d, k)
    if method == "sculpt":
        return max(1000, 20 * d * d)
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


class _Progress:
    """Plain-text progress lines on stderr: one when a phase starts, one when it ends."""

    def __init__(self, enabled: bool, route: str, total: int):
        self.enabled, self.route, self.total, self.i = bool(enabled), route, total, 0

    def start(self, name: str) -> float:
        self.i += 1
        if self.enabled:
            print(f"[{self.route} {self.i}/{self.total}] {name} ...", file=sys.stderr, flush=True)
        return time.perf_counter()

    def note(self, text: str) -> None:
        if self.enabled:
            print(f"[{self.route} {self.i}/{self.total}]   {text}", file=sys.stderr, flush=True)

    def end(self, rec: PhaseRecord) -> None:
        if self.enabled:
            bar = "#" * self.i + "." * max(self.total - self.i, 0)
            msg = f" {rec.message}" if rec.message else ""
            print(f"[{self.route} {self.i}/{self.total}] [{bar}] {rec.name}: {rec.status} in {rec.time:.2f} s"
                  f"{msg}", file=sys.stderr, flush=True)


def _failed(name: str, exc: BaseException, t0: float) -> PhaseRecord:
    return PhaseRecord(name, time=time.perf_counter() - t0, status="failed",
                       message=f"{type(exc).__name__}: {exc}")


def _truth_summary(model: MultiHeadAttention | None, truth: Any) -> dict[str, Any]:
    if model is None or truth is None or not isinstance(truth, MultiHeadAttention) or truth.m != model.m:
        return {}
    dist = truth.distance(model)
    return {"theta_error": dist.theta_error, "w_error": dist.w_error, "max_theta_error": dist.max_theta_error,
            "max_w_error": dist.max_w_error, "permutation": list(dist.permutation)}


def _split(N: int, n_val: int, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    perm = gen.permutation(N)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def _sculpt_route(Xtr: np.ndarray, Ytr: np.ndarray, Xva: np.ndarray, Yva: np.ndarray, m: int,
                  gen: np.random.Generator, solver: Any, truth: Any, progress: _Progress, tol: float,
                  opts: dict[str, Any]) -> LearnResult:
    """Phases 1–6 and the polish on the training split; the validation split only selects and verifies."""
    from .phases.refine import refine_sum_w
    from .phases.sculpting import sculpt
    from .phases.sum_w import estimate_sum_w

    t_start = time.perf_counter()
    N = Xtr.shape[0] + Xva.shape[0]
    n_val = Xva.shape[0]
    search_examples = int(opts.pop("search_examples", 1000))
    sculpt_examples = opts.pop("sculpt_examples", None)
    if sculpt_examples is None:
        sculpt_examples = default_sculpt_examples(Xtr.shape[2], m)
    if isinstance(sculpt_examples, bool) or not isinstance(sculpt_examples, (int, np.integer)) or sculpt_examples < 1:
        raise ValueError(f"sculpt_examples must be a positive integer, got {sculpt_examples!r}")
    defaults = _default_phase_options(Xtr.shape[2], m)
    phase_opts = {key: {**defaults.get(key, {}), **dict(opts.pop(key, None) or {})} for key in
                  ("sum_w_options", "sculpt_options", "refine_options", "span_options", "heads_options",
                   "polish_options")}
    if opts:
        raise TypeError(f"learn() got unexpected options for method 'sculpt': {sorted(opts)}")
    _share_box(phase_opts)
    phases: list[PhaseRecord] = []
    info: dict[str, Any] = {"train_examples": int(Xtr.shape[0]), "validation_examples": int(n_val), "tol": tol}

    def finish(model: MultiHeadAttention | None, reason: str, converged: bool = False,
               val: float | None = None, iters: int = 0) -> LearnResult:
        train = relative_mse(model.thetas, model.ws, Xtr, Ytr) if model is not None else math.inf
        if model is not None and val is None:
            val = relative_mse(model.thetas, model.ws, Xva, Yva)
        info["truth"] = _truth_summary(model, truth)
        return LearnResult(model=model, method="sculpt", train_error=train, validation_error=val,
                           converged=converged, time=time.perf_counter() - t_start, iterations=iters,
                           samples_used=N, phases=phases, reason=reason, info=info)

    def run(name: str, fn: Callable[[], tuple]) -> tuple | None:
        t0 = progress.start(name)
        try:
            out = fn()
        except _PHASE_ERRORS as exc:
            rec = _failed(name, exc, t0)
            phases.append(rec)
            progress.end(rec)
            return None
        rec = out[-1]
        phases.append(rec)
        progress.end(rec)
        return out

    def failed_reason() -> str:
        rec = phases[-1]
        why = f"phase {rec.name} failed: {rec.message}"
        cond = phases[0].figures.get("cond", 0.0) if phases and phases[0].name == "1-sum-w" else 0.0
        if rec.name != "1-sum-w" and cond > _COND_HINT:
            # an exactly singular Σ W leaves only noise in phase 1's estimate, whose condition number ranged
            # 52–6e7 over planted W_2 = −W_1 layers (below max_cond = 1e3 in some), against <= 10 for plant()
            why += (f" (phase 1's Σ W estimate has condition number {cond:.3g}: Σ W_i may be singular, a "
                    "degenerate instance for the sculpting route)")
        return why

    # phases 1–3 (the body) on a random subset of at most ``sculpt_examples`` training examples: at
    # (8,4,2) 2,500–10,000 examples already gave exact recoveries (span 4–34° off) and the phases' cost
    # grows linearly with N, while phases 5–6 and the polish need far fewer
    n13 = min(int(sculpt_examples), Xtr.shape[0])
    sub = np.sort(gen.permutation(Xtr.shape[0])[:n13])
    X13, Y13 = Xtr[sub], Ytr[sub]
    info["sculpt_examples"] = int(n13)
    out = run("1-sum-w", lambda: estimate_sum_w(X13, Y13, truth=truth, **phase_opts["sum_w_options"]))
    if out is None or out[-1].status == "failed":
        return finish(None, failed_reason())
    W_sum = out[0]
    out = run("2-sculpt", lambda: sculpt(X13, Y13, W_sum, rng=gen, solver=solver, truth=truth,
                                         **phase_opts["sculpt_options"]))
    if out is None or out[-1].status == "failed":
        return finish(None, failed_reason())
    body = out[0]
    out = run("3-refine", lambda: refine_sum_w(X13, Y13, W_sum, body, rng=gen, solver=solver, truth=truth,
                                               **phase_opts["refine_options"]))
    if out is None or out[-1].status == "failed":
        return finish(None, failed_reason())
    W_sum, body = out[0], out[1]
    out = run("4-span", lambda: extract_span(body, m, solver=solver, rng=gen, truth=truth,
                                             **phase_opts["span_options"]))
    if out is None or out[-1].status == "failed":
        return finish(None, failed_reason())
    span = out[0]
    info["m_estimate"] = span.m_estimate
    out = run("5-heads", lambda: candidate_heads(span, Xtr, Ytr, m, rng=gen, truth=truth,
                                                 **phase_opts["heads_options"]))
    if out is None or out[-1].status == "failed":
        return finish(None, failed_reason())
    cands = out[0]
    ns = min(search_examples, Xtr.shape[0])
    out = run("6-projections", lambda: fit_projections(list(cands.thetas), Xtr[:ns], Ytr[:ns], Xva, Yva,
                                                       truth=truth))
    if out is None or out[-1].status == "failed":
        return finish(None, failed_reason())
    fit = out[0]
    pre = MultiHeadAttention(fit.thetas, fit.ws)
    popts = {"tol": tol, **phase_opts["polish_options"]}
    out = run("polish", lambda: polish(fit.thetas, Xtr, Ytr, Xva, Yva, rng=gen, truth=truth,
                                       callback=progress.note, **popts))
    if out is None or out[-1].status == "failed":
        return finish(pre, failed_reason() + " (model: phase 6's, unpolished)")
    pol = out[0]
    model = MultiHeadAttention(pol.thetas, pol.ws)
    reason = (f"validation relative MSE {pol.validation_error:.2e} <= tol {tol:.0e}" if pol.converged else
              f"not converged: validation relative MSE {pol.validation_error:.2e} > tol {tol:.0e}")
    return finish(model, reason, converged=pol.converged, val=pol.validation_error, iters=pol.iterations)


def _with_validation(res: LearnResult, Xtr: np.ndarray, Ytr: np.ndarray, Xva: np.ndarray, Yva: np.ndarray,
                     tol: float, gen: np.random.Generator, truth: Any, progress: _Progress, N: int,
                     polish_options: dict[str, Any]) -> LearnResult:
    """Score a route's model on the validation split; polish it if it is not yet at ``tol``."""
    res.samples_used = N
    if res.model is None:
        res.converged = False
        return res
    val = relative_mse(res.model.thetas, res.model.ws, Xva, Yva)
    if val > tol and np.isfinite(val):
        t0 = progress.start("polish")
        try:
            pol, rec = polish(res.model.thetas, Xtr, Ytr, Xva, Yva, tol=tol, rng=gen, truth=truth,
                              callback=progress.note, **polish_options)
        except _PHASE_ERRORS as exc:
            rec, pol = _failed("polish", exc, t0), None
        res.phases.append(rec)
        progress.end(rec)
        if pol is not None and pol.validation_error < val:
            res.model = MultiHeadAttention(pol.thetas, pol.ws)
            val = pol.validation_error
            res.train_error = relative_mse(pol.thetas, pol.ws, Xtr, Ytr)
    res.validation_error = val
    res.converged = bool(val <= tol)
    res.info["truth"] = _truth_summary(res.model, truth)
    return res


def learn(X: Any, Y: Any, m: int, *, method: str = "sculpt", seed: Any = None, solver: str | None = None,
          progress: bool = False, truth: MultiHeadAttention | None = None, **options: Any) -> LearnResult:
    """Learn m heads (Θ_i, W_i) of F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i from examples X, Y of shape (N, k, d).

    ``method``: "sculpt" (phases 1–6 + polish), "exact" (m = 1, 2 ≤ k < d), "gradient" (L-BFGS from random
    init), "auto" (exact when it applies, else sculpt when N ≥ min_examples("sculpt"), else gradient; a route
    that does not converge hands its model to a warm-started gradient polish; ``result.reason`` says which
    and why). ``seed``: reproducibility (None, int or Generator); ``solver``: the engine's LP/QP backend;
    ``progress``: phase lines on stderr; ``truth``: the true layer, for ground-truth figures in every phase.
    Options: ``tol`` (validation relative MSE counted as converged, 1e-12), ``validation_size``,
    ``inputs="boolean"`` (require ±1 entries), ``sculpt_examples`` (phases 1–3 use at most this many
    training examples; default 5,000 for m = 1, 10,000 otherwise), ``search_examples`` (phase 6 training subset, 1000), per-phase
    dicts ``sum_w_options``, ``sculpt_options``, ``refine_options``, ``span_options``, ``heads_options``,
    ``polish_options``; the gradient route passes ``gradient_options`` to ``gradient_descent``.
    Bad input (shapes, NaN/inf, non-±1 with inputs="boolean", m < 1, too few examples, an unknown solver) is a
    ValueError; a known solver that is unusable here (MOSEK without a licence) is an ``oracles.SolverError``.
    """
    t_start = time.perf_counter()
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    m = check_m(m)
    inputs = options.pop("inputs", None)
    if inputs not in (None, "boolean", "gaussian", "real"):
        raise ValueError(f"inputs must be None, 'boolean', 'gaussian' or 'real', got {inputs!r}")
    if X is not None and not isinstance(X, (str, bytes)) and np.ndim(X) != 3:  # (non-arrays: TypeError below)
        raise ValueError(f"X must have shape (N, k, d) (a batch of examples), got shape {np.shape(X)}")
    X, Y = check_data(X, Y, boolean=(inputs == "boolean"))
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

    reason_auto = ""
    route = method
    if method == "auto":
        if m == 1 and 2 <= k < d and N >= min_examples("exact", d, k, m):
            route, reason_auto = "exact", f"m = 1 and k = {k} < d = {d}: the algebraic route is exact and fast"
        elif N >= min_examples("sculpt", d, k, m):
            route, reason_auto = "sculpt", (f"N = {N} >= {min_examples('sculpt', d, k, m)} examples: enough for "
                                            "the sculpting phases")
        else:
            route, reason_auto = "gradient", (f"N = {N} < {min_examples('sculpt', d, k, m)} examples needed by "
                                              f"sculpt{' and exact needs m = 1, k < d' if m > 1 or k >= d else ''}"
                                              ": L-BFGS from random initialisation")
    need = min_examples(route, d, k, m) if not (route == "exact" and not (2 <= k < d)) else 0
    if route == "exact":
        if m != 1:
            raise ValueError(f"method='exact' learns one head (m = 1), got m = {m}")
        if not 2 <= k < d:
            raise ValueError(f"method='exact' needs 2 <= k < d, got k = {k}, d = {d}")
    if N < need:
        raise ValueError(f"too few examples for method={route!r}: got N = {N}, need at least {need} for "
                         f"(d, k, m) = ({d}, {k}, {m})")

    tol = options.pop("tol", 1e-12)
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating)) or not 0 <= float(tol) < math.inf:
        raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")
    tol = float(tol)
    need_train = {"sculpt": 0, "exact": need}.get(route, need - 1)
    n_val = _validation_size(N, need_train, options.pop("validation_size", None), allow_none=route == "exact")
    tr, va = _split(N, n_val, gen)
    Xtr, Ytr, Xva, Yva = X[tr], Y[tr], X[va], Y[va]
    if n_val == 0:  # the exact route at its minimum N: no example to spare, check on the training rows
        Xva, Yva = Xtr, Ytr
    prog = _Progress(progress, route, _SCULPT_PHASES if route == "sculpt" else 2)
    gopts = dict(options.pop("gradient_options", None) or {})
    if route == "sculpt":
        res = _sculpt_route(Xtr, Ytr, Xva, Yva, m, gen, solver, truth, prog, tol, dict(options))
    else:
        polish_options = dict(options.pop("polish_options", None) or {})
        if options:
            raise TypeError(f"learn() got unexpected options for method {route!r}: {sorted(options)}")
        t0 = prog.start(route)
        if route == "exact":
            from .exact import exact_single_head

            res = exact_single_head(Xtr, Ytr, m=1, truth=truth)
        else:
            res = _gradient(Xtr, Ytr, m, gen, None, gopts, t0)
        if res.phases:
            prog.end(res.phases[-1])
        res.info.update({"train_examples": int(Xtr.shape[0]), "validation_examples": int(n_val), "tol": tol})
        if n_val == 0:
            res.info["validation_on"] = (f"the {Xtr.shape[0]} training examples (N = {N} is the exact route's "
                                         "minimum; give more for a held-out check)")
        res = _with_validation(res, Xtr, Ytr, Xva, Yva, tol, gen, truth, prog, N, polish_options)

    tail = res.reason
    if method == "auto" and not res.converged and route != "gradient":
        # fall back: L-BFGS on the same training split, warm-started from the route's model when there is one;
        # the better model on the validation split is kept
        init = res.model if res.model is not None and res.model.m == m else None
        t0 = time.perf_counter()
        g = _gradient(Xtr, Ytr, m, gen, init, gopts, t0)
        g_val = relative_mse(g.model.thetas, g.model.ws, Xva, Yva)
        rec = g.phases[-1]
        rec.name = "fallback-gradient"
        rec.figures["validation_error"] = g_val
        res.phases.append(rec)
        prev = res.validation_error if res.validation_error is not None else math.inf
        reason_auto += (f"; {route} did not converge ({res.reason}), so L-BFGS "
                        f"{'warm-started from its model' if init is not None else 'from random init'} ran on the "
                        "training split")
        if g_val < prev:
            res.model, res.train_error, res.validation_error = g.model, g.train_error, g_val
            res.converged = bool(g_val <= tol)
            res.info["truth"] = _truth_summary(res.model, truth)
            res.info["model_from"] = "fallback-gradient"
            reason_auto += " and its model was kept"
        # the route's own reason is already quoted above; end with the outcome of what was kept
        val = res.validation_error
        tail = (f"validation relative MSE {val:.2e} {'<=' if res.converged else '>'} tol {tol:.0e}"
                if val is not None and math.isfinite(val) else "neither route produced a usable model")
    if method == "auto":
        res.reason = f"auto chose {route}: {reason_auto}. {tail}"
    res.time = time.perf_counter() - t_start
    res.info.setdefault("route", route)
    res.info.setdefault("model_from", route)  # "fallback-gradient" when auto kept the fallback's model
    if route == "sculpt":
        res.info.setdefault("solver", lp_backend)  # the engine's LP backend (the other routes use none)
    return res


def _gradient(Xtr: np.ndarray, Ytr: np.ndarray, m: int, gen: np.random.Generator,
              init: MultiHeadAttention | None, gopts: dict[str, Any], t0: float) -> LearnResult:
    """The L-BFGS baseline on the training split, with its run recorded as a phase."""
    from .baselines import gradient_descent

    res = gradient_descent(Xtr, Ytr, m, method="lbfgs", seed=gen, init=init, **gopts)
    res.method = "gradient"
    res.phases.append(PhaseRecord("gradient", figures={"train_error": res.train_error, "iterations": res.iterations,
                                                       "init": "warm" if init is not None else "random"},
                                  time=time.perf_counter() - t0, message=res.reason))
    return res
