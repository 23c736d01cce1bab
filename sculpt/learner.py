"""``learn``: the public entry point. Learn F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i from examples (X, Y).

``learn`` checks its inputs, resolves the settings for the problem size, splits off the validation examples
and runs the route named by ``method`` (``sculpt.routes``: one registry of ``Route`` objects, shared with the
command line and the benchmark). Every route holds out a validation split that no phase fits on (except the
exact route given exactly its minimum N, which checks its overdetermined systems on their own rows and says so
in ``info.validation_on``); ``converged`` means ``status`` is "exact" (the validation relative MSE is at most
``tol``, 1e-12 by default) or "noise" (the fit is at the noise floor of its labels, ``sculpt.noise``; off with
``polish={"accept_noise": False}``). Every option is a field of ``sculpt.Settings`` (defaults and reasons:
``print(Settings.describe())``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike

from oracles import backend_name

from ._checks import SeedLike, as_generator, check_data, check_m
from .diagnose import misfit_causes, supported_heads
from .model import MultiHeadAttention
from .result import LearnResult, RouteInfo
from .routes import ROUTES, Route, RouteContext, get_route, route_names, run_route
from .settings import ProblemSize, Settings, settings_from_options
from .toolkit import Progress
from .toolkit.train_rows import TrainRows

__all__ = ["learn", "METHODS", "min_examples"]

#: the built-in routes, in registration order, as of import; ``learn(method=...)`` accepts every route in
#: ``sculpt.routes.ROUTES`` (``route_names()``), including those registered later with ``register_route``
METHODS: tuple[str, ...] = route_names()


def min_examples(method: str, d: int, k: int, m: int) -> int:
    """Fewest examples (training plus validation) route ``method`` accepts: the route's own
    ``Route.min_examples`` (each module of ``sculpt.routes`` says what it counts).

    Parameters
    ----------
    method : str
        A registered route ("sculpt", "exact", "gradient", "vp-lm", "auto").
    d, k, m : int
        Token dimension, tokens per example, heads.

    Returns
    -------
    int
        ``learn(method=method)`` raises a ValueError naming this number below it.

    Examples
    --------
    >>> min_examples("gradient", 8, 4, 2)
    9
    """
    return get_route(method).min_examples(d, k, m)


def _validation_size(N: int, need_train: int, requested: object, *, allow_none: bool = False) -> int:
    """Held-out examples: ``requested``, else min(2000, N/10) but leaving ``need_train`` for training; at least
    one unless ``allow_none`` and N leaves none to spare (the exact route at its minimum N, whose overdetermined
    systems are then checked on their own rows)."""
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, (int, np.integer)) or not 1 <= requested < N:
            raise ValueError(f"validation_size must be an integer in [1, N-1] = [1, {N - 1}], got {requested!r}")
        return int(requested)
    floor = 0 if allow_none and N <= need_train else 1
    return int(max(floor, min(2000, N // 10, N - need_train)))


def _split(N: int, n_val: int, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, validation rows): the first ``n_val`` of a random permutation of range(N) validate, the
    others train, in that order (the split ``held_out_split`` draws, so a route's VP-LM step and the ``vp_lm``
    baseline fit the same rows from the same seed)."""
    perm = gen.permutation(N)
    return perm[n_val:], perm[:n_val]


def _checked_inputs(
    X: ArrayLike, Y: ArrayLike, m: int, cfg: Settings, solver: str | None, truth: object
) -> tuple[np.ndarray, np.ndarray, str]:
    """X and Y as float arrays of shape (N, k, d), and the LP backend ``solver`` names: a bad backend name or
    an unusable backend fails here, before any phase runs."""
    if X is not None and not isinstance(X, (str, bytes)) and np.ndim(X) != 3:  # (non-arrays: TypeError below)
        raise ValueError(f"X must have shape (N, k, d) (a batch of examples), got shape {np.shape(X)}")
    X3, Y3 = check_data(X, Y, boolean=(cfg.inputs == "boolean"), nonzero=True)
    d = X3.shape[2]
    lp_backend = backend_name(solver, kind="lp")
    if truth is not None and not isinstance(truth, MultiHeadAttention):
        raise TypeError(f"truth must be a MultiHeadAttention or None, got {type(truth).__name__}")
    if truth is not None and (truth.d != d or truth.m != m):
        raise ValueError(f"truth has (m, d) = ({truth.m}, {truth.d}), the data and m give ({m}, {d})")
    return X3, Y3, lp_backend


def _check_size(route: Route, size: ProblemSize) -> None:
    """A ValueError when ``route`` cannot learn layers of this size, or N is below its minimum."""
    d, k, m, N = size.d, size.k, size.m, size.N
    why = route.refusal(d, k, m)
    if why is not None:
        raise ValueError(why)
    need = route.min_examples(d, k, m)
    if N < need:
        raise ValueError(
            f"too few examples for method={route.name!r}: got N = {N}, need at least {need} for (d, k, m) = "
            f"({d}, {k}, {m})"
        )


def _context(
    route: Route,
    X: np.ndarray,
    Y: np.ndarray,
    cfg: Settings,
    size: ProblemSize,
    gen: np.random.Generator,
    solver: str | None,
    truth: MultiHeadAttention | None,
    progress: bool,
) -> RouteContext:
    """The splits (validation first: ``route.split`` says what it must leave) and the route's context. The
    validation split is gathered; the training split is not (``TrainRows``): a route gathers what it reads."""
    holdout = route.split(size)
    n_val = _validation_size(size.N, holdout.train, cfg.validation_size, allow_none=holdout.may_be_empty)
    tr, va = _split(size.N, n_val, gen)
    Xtr, Ytr = TrainRows(X, tr).view(), TrainRows(Y, tr).view()
    Xva, Yva = np.take(X, va, axis=0), np.take(Y, va, axis=0)
    if n_val == 0:  # the exact route at its minimum N: no example to spare, check on the training rows
        Xva, Yva = np.take(X, tr, axis=0), np.take(Y, tr, axis=0)
    prog = Progress(progress, route.name, route.steps)
    return RouteContext(Xtr, Ytr, Xva, Yva, size.m, size.N, n_val, gen, solver, truth, prog, cfg)


def learn(
    X: ArrayLike,
    Y: ArrayLike,
    m: int,
    *,
    method: str = "auto",
    seed: SeedLike = None,
    solver: str | None = None,
    progress: bool = False,
    truth: MultiHeadAttention | None = None,
    settings: Settings | Mapping[str, object] | None = None,
    **overrides: object,
) -> LearnResult:
    """Learn m heads (Θ_i, W_i) of F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i from examples X, Y of shape (N, k, d).

    Parameters
    ----------
    X, Y : array_like, shape (N, k, d)
        Inputs (rows are tokens) and the layer's outputs.
    m : int
        Heads to learn.
    method : str
        A route of ``sculpt.routes.ROUTES`` (``METHODS``): "auto" (the default: the other routes' steps in the
        order of their expected cost until one validates; ``info.tried``, ``info.model_from``), "sculpt" (phases
        1–6 + polish), "exact" (m = 1, 2 ≤ k < d), "gradient" (L-BFGS), "vp-lm" (the polish from random starts).
    seed : None, int or numpy.random.Generator
        The validation split's and the route's randomness.
    solver : str or None
        The engine's LP backend (``oracles.backend_names()``); None: the engine's default.
    progress : bool
        Phase lines on stderr.
    truth : MultiHeadAttention or None
        The true layer, for ground-truth figures in every phase; it never changes the result.
    settings : Settings, mapping or None
        Every option (``Settings.describe()``); a nested dict is merged into the defaults.
    **overrides
        Settings merged in deeply, e.g. ``tol=1e-10, refine={"slabs": {"tau": 0.02}}``; the old
        ``*_options`` dicts still work with a DeprecationWarning.

    Returns
    -------
    LearnResult
        The model, its training and validation relative MSE, ``status`` ("exact": validation ≤ ``tol``;
        "noise": at the labels' noise floor, σ̂ in ``noise_sigma``; "failed") and ``converged``, each
        phase's record, the ``reason``, and ``info`` (a ``RouteInfo``: the route, split sizes, resolved
        settings, ...).

    Raises
    ------
    ValueError
        Bad input: shapes, NaN/inf, non-±1 with inputs="boolean", m < 1, too few examples, an unknown method
        or solver, a setting out of range.
    TypeError
        An unknown setting at any depth (named, with the closest valid name).
    oracles.SolverError
        A known solver that is unusable here (MOSEK without a licence).

    Warns
    -----
    UserWarning
        Heads that add nothing to the output: the warning names m̂, the heads the data support
        (``sculpt.diagnose.supported_heads``).

    Notes
    -----
    A phase that cannot go on ends the route with ``converged=False`` and a reason naming the phase; a model
    that misfits (above ``misfit_residual``) gets its likely causes in ``reason`` (``sculpt.diagnose``).

    Examples
    --------
    >>> from sculpt import learn, plant, sample_inputs
    >>> layer = plant(8, 4, 2, seed=1)
    >>> X = sample_inputs(2000, 4, 8, rng=2)
    >>> res = learn(X, layer(X), 2, seed=3)
    >>> res.converged, res.status, res.validation_error <= res.info.tol
    (True, 'exact', True)
    >>> layer.distance(res.model).max_theta_error < 1e-6
    True
    >>> learn(X, layer(X), 2, method="sculpt", seed=3).info.route
    'sculpt'
    """
    t_start = time.perf_counter()
    route = get_route(method)
    m = check_m(m)
    cfg = settings_from_options(settings, overrides)
    X3, Y3, lp_backend = _checked_inputs(X, Y, m, cfg, solver, truth)
    gen = as_generator(seed, "seed")
    size = ProblemSize.of(X3, m)
    _check_size(route, size)
    cfg = cfg.resolve(size.d, size.k, size.m, size.N)
    ctx = _context(route, X3, Y3, cfg, size, gen, solver, truth, progress)
    try:
        res = run_route(route, ctx)
    finally:
        ctx.progress.close()
    res.attach_held_out(ctx.Xva, ctx.Yva)
    _diagnose(res, X3, Y3, m, cfg, (ctx.Xva, ctx.Yva) if ctx.n_val else None)
    res.time = time.perf_counter() - t_start
    _stamp(res.info, route, cfg, lp_backend)
    return res


def _diagnose(
    res: LearnResult,
    X: np.ndarray,
    Y: np.ndarray,
    m: int,
    cfg: Settings,
    validation: tuple[np.ndarray, np.ndarray] | None,
) -> None:
    """Say what went wrong in the user's terms: a misfit's likely causes lead its ``reason`` (and go to
    ``info.details["diagnosis"]``); a fit with idle heads warns naming the supported m̂."""
    causes = misfit_causes(X, Y, m, res.validation_error, cfg.misfit_residual)
    if causes is not None:
        res.info.details["diagnosis"] = causes
        res.reason = f"{causes}. {res.reason}" if res.reason else causes
        return
    if res.model is None or m == 1:
        return
    # an exact fit needs only the norm test (a head that matters moves the error far above tol); the removal
    # test, m passes over the validation split, is for fits at the noise level, where an idle head fits noise
    held_out = validation if res.status != "exact" else None
    m_hat, idle = supported_heads(res.model, cfg.idle_head, held_out, cfg.idle_head_rise, cfg.tol)
    if idle:
        res.info.details["supported_heads"] = m_hat
        warnings.warn(
            f"the data support m̂ = {m_hat} of the m = {m} heads: {_heads(idle)} no measurable effect on the output "
            f"(‖W_i‖_F ≤ {cfg.idle_head:g} × the largest, or the validation error rises by at most "
            f"{cfg.idle_head_rise:g} of itself without it); learn with m={m_hat}",
            UserWarning,
            stacklevel=3,
        )


def _stamp(info: RouteInfo, route: Route, cfg: Settings, lp_backend: str) -> None:
    """What every result reports: the route whose model it is and the step that made it (unless the route
    said so: auto), the resolved settings, and the LP backend when that route solves LPs."""
    if info.route is None:
        info.route = route.name
    if info.model_from is None:
        info.model_from = route.name
    info.settings = cfg
    ran = ROUTES.get(info.route)
    if ran is not None and ran.uses_lp and info.solver is None:
        info.solver = lp_backend


def _heads(idle: list[int]) -> str:
    """ "head 3 has" / "heads 3, 4 have": the idle heads as the subject of the warning."""
    if len(idle) == 1:
        return f"head {idle[0]} has"
    return f"heads {', '.join(map(str, idle))} have"
