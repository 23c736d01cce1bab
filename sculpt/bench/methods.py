"""The methods a sweep can run, behind one signature: ``fn(X, Y, m, *, seed, truth, **options) -> LearnResult``.

One registry, two kinds of entries:

- every learner route (``sculpt.routes.ROUTES``: sculpt, exact, gradient, vp-lm, auto, ...) under its own name,
  run as ``learn(X, Y, m, method=name, ...)`` with ``options`` as settings (``vp_lm={"restarts": 3}``); it refuses the cells its ``refusal`` and
  ``min_examples`` rule out. Routes are looked up in the registry when a sweep asks, so one registered with
  ``sculpt.routes.register_route`` is a method here too;
- the benchmark-only peers, ``PEERS``: methods with their own protocol and no learner validation step:

  - ``lbfgs``: :func:`sculpt.baselines.gradient_descent` with ``method="lbfgs"`` from a random start;
  - ``lbfgs-growing``: :func:`sculpt.baselines.lbfgs_growing`, L-BFGS on 1,000, 2,000, … examples until exact
    on held-out data (restarts per size): the strongest gradient peer;
  - ``adam``: :func:`sculpt.torch_adam.torch_adam` (PyTorch, float64, cosine schedule) when torch is
    installed, else the numpy Adam of ``gradient_descent(method="adam")``.

:func:`register` adds a method (tests use it for cheap stand-ins); imports are lazy so a sweep only loads
what it runs. ``options`` come from grid files (JSON values), so they are passed on untyped.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..result import LearnResult
from . import Json

if TYPE_CHECKING:
    from ..model import MultiHeadAttention
    from .grid import Cell

__all__ = ["register", "get_method", "registered", "adam_implementation", "warm_up", "refusal", "PEERS", "Peer"]


class Method(Protocol):
    """``fn(X, Y, m, *, seed, truth, **options) -> LearnResult``."""

    def __call__(
        self,
        X: np.ndarray,
        Y: np.ndarray,
        m: int,
        *,
        seed: int,
        truth: MultiHeadAttention | None = None,
        **options: Json,
    ) -> LearnResult: ...


_REGISTRY: dict[str, Method] = {}
_WARM_UPS: dict[str, Callable[[], None]] = {}
_WARMED: set[str] = set()
_REQUIRES: dict[str, Callable[[Cell], str | None]] = {}


def register(
    name: str,
    fn: Method,
    *,
    warm: Callable[[], None] | None = None,
    requires: Callable[[Cell], str | None] | None = None,
) -> None:
    """Make ``fn(X, Y, m, *, seed, truth, **options) -> LearnResult`` runnable under ``name``.

    Parameters
    ----------
    name : str
        The method's name in grids and records.
    fn : callable
        The method.
    warm : callable, optional
        The one-off work of a process (imports, first-call set-up), run outside the timed call.
    requires : callable, optional
        ``requires(cell)``: why the method refuses a cell (e.g. too few examples), or None.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"method name must be a non-empty string, got {name!r}")
    if not callable(fn):
        raise TypeError(f"method {name!r} must be callable, got {type(fn).__name__}")
    _REGISTRY[name] = fn
    _WARMED.discard(name)
    if warm is None:
        _WARM_UPS.pop(name, None)
    else:
        _WARM_UPS[name] = warm
    if requires is None:
        _REQUIRES.pop(name, None)
    else:
        _REQUIRES[name] = requires


def _is_route(name: str) -> bool:
    """``name`` runs a learner route: a registered route that no method registered here replaces."""
    from ..routes import ROUTES

    return name in ROUTES and name not in _REGISTRY


def refusal(name: str, cell: Cell) -> str | None:
    """Why method ``name`` does not accept ``cell`` (a sculpt.bench.grid.Cell), or None if it does."""
    fn = _route_requires(name) if _is_route(name) else _REQUIRES.get(name)
    return None if fn is None else fn(cell)


def warm_up(name: str) -> None:
    """Run ``name``'s warm-up once per process (so timings exclude imports); its errors are left to the
    timed call to surface."""
    if name in _WARMED:
        return
    _WARMED.add(name)
    fn = _warm_learner if _is_route(name) else _WARM_UPS.get(name)
    if fn is not None:
        try:
            fn()
        except Exception:  # the real call reports the problem in its record
            pass


def registered() -> list[str]:
    """Every method a sweep can run: the learner's routes (``sculpt.routes.ROUTES``, looked up when asked, so
    a route registered later is here too) and the methods registered here."""
    from ..routes import ROUTES

    return sorted(set(_REGISTRY) | set(ROUTES))


def get_method(name: str) -> Method:
    if _is_route(name):
        return _route_method(name)
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; registered: {registered()}") from None


def adam_implementation() -> str:
    """'torch' when PyTorch is importable, else 'numpy'."""
    return "torch" if importlib.util.find_spec("torch") is not None else "numpy"


# ----------------------------------------------------------------------------------------- learner routes
def _route_method(route: str) -> Method:
    def run(
        X: np.ndarray, Y: np.ndarray, m: int, *, seed: int, truth: MultiHeadAttention | None = None, **options: Json
    ) -> LearnResult:
        from ..learner import learn

        return learn(X, Y, m, method=route, seed=seed, truth=truth, **options)

    run.__name__ = f"learn_{route}"
    return run


def _route_requires(route: str) -> Callable[[Cell], str | None]:
    """The route's own refusal of the cell's sizes, then its ``min_examples``."""

    def check(cell: Cell) -> str | None:
        from ..routes import get_route

        r = get_route(route)
        why = r.refusal(cell.d, cell.k, cell.m)
        if why is not None:
            return why
        need = r.min_examples(cell.d, cell.k, cell.m)
        if cell.N < need:
            return (
                f"learn(method={route!r}) needs N >= {need} examples for (d, k, m) = "
                f"({cell.d}, {cell.k}, {cell.m}), got N = {cell.N}"
            )
        return None

    return check


def _warm_learner() -> None:
    importlib.import_module("sculpt.learner")


# ----------------------------------------------------------------------------------------- peers
def _lbfgs(
    X: np.ndarray, Y: np.ndarray, m: int, *, seed: int, truth: MultiHeadAttention | None = None, **options: Json
) -> LearnResult:
    from ..baselines import gradient_descent

    return gradient_descent(X, Y, m, method="lbfgs", seed=seed, **options)


def _lbfgs_growing(
    X: np.ndarray, Y: np.ndarray, m: int, *, seed: int, truth: MultiHeadAttention | None = None, **options: Json
) -> LearnResult:
    from ..baselines import lbfgs_growing

    return lbfgs_growing(X, Y, m, seed=seed, **options)


# options only the torch Adam understands; dropped when falling back to the numpy Adam
_TORCH_ONLY = frozenset({"lr_min", "threads"})


def _adam(
    X: np.ndarray, Y: np.ndarray, m: int, *, seed: int, truth: MultiHeadAttention | None = None, **options: Json
) -> LearnResult:
    if adam_implementation() == "torch":
        from ..torch_adam import torch_adam

        return torch_adam(X, Y, m, seed=seed, **options)
    from ..baselines import gradient_descent

    numpy_opts = {k: v for k, v in options.items() if k not in _TORCH_ONLY}
    return gradient_descent(X, Y, m, method="adam", seed=seed, **numpy_opts)


def _tiny() -> tuple[np.ndarray, np.ndarray]:
    from ..data import plant, sample_inputs

    truth = plant(2, 2, 1, seed=0)
    X = sample_inputs(8, 2, 2, rng=0)
    return X, truth(X)


def _warm_lbfgs() -> None:
    X, Y = _tiny()
    _lbfgs(X, Y, 1, seed=0, max_iter=2)


def _warm_adam() -> None:
    X, Y = _tiny()
    _adam(X, Y, 1, seed=0, max_iter=2)


@dataclass(frozen=True)
class Peer:
    """A benchmark-only method: the function and its per-process warm-up."""

    fn: Method
    warm: Callable[[], None]


#: the benchmark-only peers by name, registered here (a method registered under a route's name takes its place)
PEERS: dict[str, Peer] = {
    "lbfgs": Peer(_lbfgs, _warm_lbfgs),
    "lbfgs-growing": Peer(_lbfgs_growing, _warm_lbfgs),
    "adam": Peer(_adam, _warm_adam),
}


for _name, _peer in PEERS.items():
    register(_name, _peer.fn, warm=_peer.warm)
