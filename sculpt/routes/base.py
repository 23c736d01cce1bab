"""The route type, the registry and what every route shares: its context (the splits and resolved
settings of one ``learn`` call), the truth summary, and the validation step of the validated routes."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..model import MultiHeadAttention
from ..noise import NoiseVerdict, assess_fit
from ..phases.polish import polish
from ..pipeline import PHASE_FAILURES
from ..result import LearnResult, PhaseRecord, RouteInfo, TruthSummary
from ..settings import ProblemSize, Settings
from ..toolkit import Progress, layer_relative_mse
from ..toolkit.train_rows import TrainRows

__all__ = [
    "Route",
    "Holdout",
    "RouteContext",
    "TrainRows",
    "ROUTES",
    "register_route",
    "get_route",
    "route_names",
    "run_route",
    "truth_summary",
    "validate_and_polish",
    "validate",
    "parameter_count_examples",
    "assess",
    "settle",
    "verdict_text",
]


class Holdout(NamedTuple):
    """What the validation split must leave a route: ``train`` training examples at least, and whether the
    split may be empty (``may_be_empty``: the route checks itself on its training rows when N has no
    example to spare)."""

    train: int
    may_be_empty: bool = False


class _TrainingSplit:
    """A ``RouteContext`` field of the training split (``Xtr`` or ``Ytr``): set with an array or a ``TrainRows``,
    kept as ``TrainRows`` in the attribute ``store``, read as the gathered array (``TrainRows.whole``: on first
    read, then kept; ``dataclasses.replace`` reads it too)."""

    def __init__(self, store: str) -> None:
        self.store = store

    def __get__(self, ctx: object | None, owner: type | None = None) -> np.ndarray:
        if ctx is None:  # (class access: the field has no default)
            raise AttributeError(self.store)
        rows: TrainRows = getattr(ctx, self.store)
        return rows.whole()

    def __set__(self, ctx: object, value: np.ndarray | TrainRows) -> None:
        object.__setattr__(ctx, self.store, value if isinstance(value, TrainRows) else TrainRows(np.asarray(value)))


@dataclass
class RouteContext:
    """One ``learn`` call after its inputs are checked: the training and validation splits, the resolved
    settings and the shared machinery (random generator, LP backend name, truth, progress lines).

    ``Xtr`` and ``Ytr`` may be given as ``TrainRows.view()`` (``learn`` does): they are gathered on first read and
    kept, so a route that reads only subsets of the training split (``train_rows``, ``train_views``) never copies
    it whole."""

    Xtr: np.ndarray
    Ytr: np.ndarray
    Xva: np.ndarray
    Yva: np.ndarray
    m: int
    N: int
    n_val: int
    gen: np.random.Generator
    solver: str | None
    truth: MultiHeadAttention | None
    progress: Progress
    settings: Settings
    #: a route that produces no model hands back a fallback least-squares fit (``vp_lm.fallback``); auto turns
    #: it off for its steps, since its own later steps are that fallback
    fallback: bool = True
    #: the training split as given, ungathered (set through ``Xtr`` and ``Ytr``)
    train_X: TrainRows = field(init=False, repr=False, compare=False)
    train_Y: TrainRows = field(init=False, repr=False, compare=False)

    def train_rows(self, rows: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``rows`` of the training split (X, Y), read without gathering the whole split."""
        return self.train_X[rows], self.train_Y[rows]

    def train_views(self) -> tuple[np.ndarray, np.ndarray]:
        """The training split (X, Y) as ``TrainRows.view``: for functions that only index it by rows."""
        return self.train_X.view(), self.train_Y.view()

    @property
    def n_train(self) -> int:
        """Training examples."""
        return int(self.train_X.shape[0])

    @property
    def tol(self) -> float:
        return float(self.settings.tol)

    @property
    def d(self) -> int:
        return int(self.train_X.shape[2])

    @property
    def k(self) -> int:
        return int(self.train_X.shape[1])

    @property
    def size(self) -> ProblemSize:
        return ProblemSize(self.d, self.k, self.m, self.N)

    def base_info(self, info: RouteInfo | None = None) -> RouteInfo:
        """``info`` (a new RouteInfo when None) with the split sizes and tol, which every route reports."""
        out = RouteInfo() if info is None else info
        out.train_examples, out.validation_examples, out.tol = self.n_train, int(self.n_val), self.tol
        return out

    def validation_error(self, model: MultiHeadAttention) -> float:
        """Relative MSE of ``model`` on the validation split."""
        return layer_relative_mse(model.thetas, model.ws, self.Xva, self.Yva)

    def train_error(self, model: MultiHeadAttention | None, rows: np.ndarray | None = None) -> float:
        """Relative MSE of ``model`` on the training split (on ``rows`` of it when given); inf without one."""
        if model is None:
            return math.inf
        if rows is None:
            return layer_relative_mse(model.thetas, model.ws, self.Xtr, self.Ytr)
        return layer_relative_mse(model.thetas, model.ws, *self.train_rows(rows))

    def with_validation(self, train_read: int) -> int:
        """Examples read in all: ``train_read`` training examples and the validation split (at most N)."""
        return min(self.N, int(train_read) + int(self.n_val))


# the dataclass's fields Xtr and Ytr, set and read through _TrainingSplit (set after the class is made: a
# descriptor in the class body would read as a default to type checkers)
RouteContext.Xtr = _TrainingSplit("train_X")  # type: ignore[assignment]
RouteContext.Ytr = _TrainingSplit("train_Y")  # type: ignore[assignment]


def parameter_count_examples(d: int, k: int, m: int) -> int:
    """The fewest examples a route fitting every parameter by least squares accepts: ⌈2md²/(kd)⌉ + 1, the 2md²
    parameters over the kd numbers one example gives, plus a validation example.

    Parameters
    ----------
    d, k, m : int
        Token dimension, tokens per example, heads.

    Returns
    -------
    int
        ⌈2md/k⌉ + 1.

    Examples
    --------
    >>> parameter_count_examples(8, 4, 2)
    9
    """
    return math.ceil(2 * m * d * d / (k * d)) + 1


def _accepts_every_shape(d: int, k: int, m: int) -> str | None:
    return None


@dataclass(frozen=True)
class Route:
    """A way for ``learn`` to learn the layer, registered under ``name`` (``learn(method=name)``,
    ``sculpt learn --method name``, ``sculpt bench`` method ``name``).

    Parameters
    ----------
    name : str
        The ``method`` name.
    run : callable
        ``run(context) -> LearnResult`` on a ``RouteContext``. A validated route's result counts in
        ``samples_used`` the training examples it read (0: all of them); ``learn`` then adds the validation
        split. Every other route counts every example it read and sets ``converged`` itself.
    min_examples : callable
        ``min_examples(d, k, m)``: the fewest examples (training plus validation) the route accepts.
    settings : tuple of str
        The ``Settings`` groups the route reads (``sculpt settings`` lists their fields).
    summary : str
        One line for help texts.
    validated : bool
        ``learn`` scores the route's model on the validation split and polishes it (``polish``) while it is
        above ``tol``: for routes whose own fit knows nothing of the validation split.
    refusal : callable
        ``refusal(d, k, m)``: why the route cannot learn layers of these sizes whatever N, or None.
    holdout : callable or None
        ``holdout(size) -> Holdout``: what the validation split must leave (None: every example but the one
        validation example ``min_examples`` counts).
    steps : int
        Progress lines a run announces (the phases it runs).
    uses_lp : bool
        It solves LPs: its result's ``info.solver`` names the engine's LP backend.
    """

    name: str
    run: Callable[[RouteContext], LearnResult]
    min_examples: Callable[[int, int, int], int]
    settings: tuple[str, ...]
    summary: str
    validated: bool = True
    refusal: Callable[[int, int, int], str | None] = _accepts_every_shape
    holdout: Callable[[ProblemSize], Holdout] | None = None
    steps: int = 2
    uses_lp: bool = False

    def split(self, size: ProblemSize) -> Holdout:
        """What the validation split must leave at ``size``."""
        if self.holdout is not None:
            return self.holdout(size)
        return Holdout(self.min_examples(size.d, size.k, size.m) - 1)

    def settings_classes(self) -> dict[str, type]:
        """The settings groups the route reads, by name: their classes (``Settings`` field types)."""
        return {name: type(getattr(Settings(), name)) for name in self.settings}


#: every route ``learn`` can run, by name, in registration order (the built-in ones first: ``sculpt.learner.METHODS``)
ROUTES: dict[str, Route] = {}


def register_route(route: Route) -> Route:
    """Make ``route`` runnable as ``learn(method=route.name)``, by the command line and by the benchmark.

    Parameters
    ----------
    route : Route
        The route; registering a name again replaces the route of that name.

    Returns
    -------
    Route
        ``route`` (so that a module can write ``ROUTE = register_route(Route(...))``).

    Raises
    ------
    TypeError
        ``route`` is not a Route.
    ValueError
        An empty name, or a settings group ``Settings`` does not have.
    """
    if not isinstance(route, Route):
        raise TypeError(f"route must be a sculpt.routes.Route, got {type(route).__name__}")
    if not isinstance(route.name, str) or not route.name:
        raise ValueError(f"a route's name must be a non-empty string, got {route.name!r}")
    unknown = [g for g in route.settings if g not in Settings.field_names()]
    if unknown:
        raise ValueError(f"route {route.name!r} reads unknown settings groups {unknown}")
    ROUTES[route.name] = route
    return route


def route_names() -> tuple[str, ...]:
    """The registered route names, in registration order."""
    return tuple(ROUTES)


def get_route(name: str) -> Route:
    """The route registered as ``name``.

    Parameters
    ----------
    name : str
        A route name (``route_names()``).

    Returns
    -------
    Route
        The registered route.

    Raises
    ------
    ValueError
        ``name`` is not a registered route name (the message lists them).
    """
    if not isinstance(name, str) or name not in ROUTES:
        raise ValueError(f"method must be one of {route_names()}, got {name!r}")
    return ROUTES[name]


def run_route(route: Route, ctx: RouteContext) -> LearnResult:
    """Run ``route`` on ``ctx`` as ``learn`` does: ``route.run(ctx)``, then, for a validated route, the
    validation step (``validate_and_polish``). ``auto`` composes routes through it.

    Parameters
    ----------
    route : Route
        The route.
    ctx : RouteContext
        The splits and settings of the call.

    Returns
    -------
    LearnResult
        The route's result, validated (``converged`` means validation relative MSE <= tol).
    """
    res = route.run(ctx)
    return validate_and_polish(res, ctx) if route.validated else res


def truth_summary(model: MultiHeadAttention | None, truth: MultiHeadAttention | None) -> TruthSummary:
    """Head-matched distance of ``model`` to the true layer (``MultiHeadAttention.distance``).

    Parameters
    ----------
    model : MultiHeadAttention or None
        The learned layer.
    truth : MultiHeadAttention or None
        The true layer.

    Returns
    -------
    TruthSummary
        θ and W errors (mean and worst head) and the head permutation; empty without either layer, or when
        their head counts differ.
    """
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


def assess(
    model: MultiHeadAttention, ctx: RouteContext, fitted: int | None = None, history: tuple[float, ...] = ()
) -> NoiseVerdict:
    """The noise-floor test (``sculpt.noise.assess_fit``) of ``model`` fitted on the first ``fitted`` training
    examples (None: all of them) and validated on the validation split, with the polish settings' noise fields."""
    n = ctx.n_train if fitted is None else max(1, min(int(fitted), ctx.n_train))
    return assess_fit(
        model.thetas,
        model.ws,
        ctx.train_rows(slice(0, n)),
        (ctx.Xva, ctx.Yva),
        tol=ctx.tol,
        history=history,
        settings=ctx.settings.polish,
    )


def settle(res: LearnResult, ctx: RouteContext, verdict: NoiseVerdict) -> None:
    """Set ``res``'s status, noise_sigma, converged and ``info.noise`` from the noise-floor test: "exact" and
    "noise" (when ``polish.accept_noise``) converge; a fallback model (``info.fallback``) never does.

    Parameters
    ----------
    res : LearnResult
        A route's result with a model; updated in place.
    ctx : RouteContext
        The call's settings.
    verdict : NoiseVerdict
        The test of ``res.model``.
    """
    accept = ctx.settings.polish.accept_noise
    fallback = res.info.fallback is not None
    val = res.validation_error
    if val is None or not math.isfinite(val):  # a validation error the test did not see (non-finite): failed
        fallback = True
    res.status = "failed" if fallback else verdict.status
    res.noise_sigma = verdict.sigma if verdict.status == "noise" else None
    res.converged = not fallback and (verdict.status == "exact" or (verdict.status == "noise" and accept))
    res.info.noise = verdict.to_dict()


def verdict_text(val: float, ctx: RouteContext, verdict: NoiseVerdict) -> str:
    """The validation verdict in words: exact, at the noise level (with the test's figures), or not converged."""
    tol = ctx.tol
    if verdict.status == "exact":
        return f"validation relative MSE {val:.2e} <= tol {tol:.0e}"
    if verdict.status == "noise":
        head = "" if ctx.settings.polish.accept_noise else "not converged (polish.accept_noise is off): "
        return f"{head}validation relative MSE {val:.2e} > tol {tol:.0e}, {verdict.reason}"
    return f"not converged: validation relative MSE {val:.2e} > tol {tol:.0e}; {verdict.reason}"


def validate_and_polish(res: LearnResult, ctx: RouteContext) -> LearnResult:
    """Score a validated route's model on the validation split; polish it while it is above ``tol``.

    Parameters
    ----------
    res : LearnResult
        The route's result; its ``samples_used`` counts the training examples the route read (0: all).
    ctx : RouteContext
        The splits and settings of the call.

    Returns
    -------
    LearnResult
        ``res``, updated in place: the model (polished when that validates better), its validation error,
        ``converged``, ``samples_used`` with the validation split, ``info`` with the split sizes and truth, and
        a ``reason`` that states the validation verdict (the route's own reason speaks of its training fit).
    """
    if res.phases:
        ctx.progress.end(res.phases[-1])
    return validate(res, ctx)


def validate(res: LearnResult, ctx: RouteContext) -> LearnResult:
    """``validate_and_polish`` without closing the route's last progress line: the validation step of a model
    whose step has already been reported (auto's L-BFGS steps at the noise floor).

    Parameters
    ----------
    res : LearnResult
        The result; its ``samples_used`` counts the training examples its model read (0: all).
    ctx : RouteContext
        The splits and settings of the call.

    Returns
    -------
    LearnResult
        ``res``, updated in place as ``validate_and_polish`` does.
    """
    ctx.base_info(res.info)
    if ctx.n_val == 0:
        res.info.validation_on = (
            f"the {ctx.n_train} training examples (N = {ctx.N} is the exact route's "
            "minimum; give more for a held-out check)"
        )
    read = int(res.samples_used or ctx.n_train)  # the training examples the route read
    res.samples_used = ctx.with_validation(read)
    if res.model is None:
        res.converged, res.status = False, "failed"
        return res
    val = ctx.validation_error(res.model)
    test: NoiseVerdict | None = None
    own = res.info.noise  # the route's own polish's test (VP-LM): a model at the floor needs no second polish
    if own is not None and own.get("status") == "noise":
        test = NoiseVerdict.of(own)
    elif val > ctx.tol and np.isfinite(val):
        val, test = _polish(res, ctx, val, read)
    res.validation_error = val
    if test is None:  # exact at once, or the route's own model validated better than its polish
        test = assess(res.model, ctx)
    settle(res, ctx, test)
    verdict = verdict_text(val, ctx, test)
    if res.info.fallback is not None:
        res.reason = f"{res.info.fallback}; the model is a fallback fit: {verdict}"
    elif res.converged:
        res.reason = f"{res.reason}; {verdict}" if res.reason else verdict
    else:
        res.reason = f"{verdict} ({res.reason})" if res.reason else verdict
    res.info.truth = truth_summary(res.model, ctx.truth)
    return res


def _polish(res: LearnResult, ctx: RouteContext, val: float, read: int) -> tuple[float, NoiseVerdict | None]:
    """The polish of ``res.model`` (validation relative MSE ``val``) on the training split, recorded as a
    phase; keeps the polished model when it validates better, or when it is at the noise floor (its
    least-squares fit on more examples is the better model whatever the validation split's noise says).
    Returns the validation relative MSE kept and the polish's noise-floor test (None: the model was not
    replaced)."""
    assert res.model is not None
    t0 = ctx.progress.start("polish")
    try:
        pol, rec = polish(
            res.model.thetas,
            ctx.Xtr,
            ctx.Ytr,
            ctx.Xva,
            ctx.Yva,
            ctx.settings.polish,
            tol=ctx.tol,
            rng=ctx.gen,
            truth=ctx.truth,
            callback=ctx.progress.note,
        )
    except PHASE_FAILURES as exc:
        pol = None
        rec = PhaseRecord(
            "polish", time=time.perf_counter() - t0, status="failed", message=f"{type(exc).__name__}: {exc}"
        )
    res.phases.append(rec)
    ctx.progress.end(rec)
    if pol is not None:
        res.samples_used = ctx.with_validation(max(read, int(rec.figures.get("examples", 0))))
    at_floor = pol is not None and pol.noise is not None and pol.noise.status == "noise"
    if pol is not None and (pol.validation_error < val or at_floor):
        res.model = MultiHeadAttention(pol.thetas, pol.ws)
        res.train_error = layer_relative_mse(pol.thetas, pol.ws, ctx.Xtr, ctx.Ytr)
        return float(pol.validation_error), pol.noise
    return val, None
