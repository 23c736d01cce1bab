"""The methods a sweep can run, behind one signature: ``fn(X, Y, m, *, seed, truth, **options) -> LearnResult``.

- ``sculpt``: :func:`sculpt.learner.learn` with ``method="sculpt"`` (the Chen & Li pipeline).
- ``exact``:  :func:`sculpt.learner.learn` with ``method="exact"`` (the m = 1 route only).
- ``auto``:   :func:`sculpt.learner.learn` with ``method="auto"``.
- ``lbfgs``:  :func:`sculpt.baselines.gradient_descent` with ``method="lbfgs"`` from a random start.
- ``lbfgs-growing``: :func:`sculpt.baselines.lbfgs_growing`, L-BFGS on 1,000, 2,000, … examples until exact
  on held-out data (restarts per size): the strongest gradient peer.
- ``vp-lm``:  :func:`sculpt.vplm.vp_lm`, the polish's variable-projection Levenberg–Marquardt from random
  starts (the fastest peer measured on most rows).
- ``adam``:   :func:`sculpt.torch_adam.torch_adam` (PyTorch, float64, cosine schedule) when torch is
  installed, else the numpy Adam of ``gradient_descent(method="adam")``.

:func:`register` adds a method (tests use it for cheap stand-ins); imports are lazy so a sweep only loads
what it runs.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from ..result import LearnResult

__all__ = ["register", "get_method", "registered", "adam_implementation", "warm_up", "refusal"]

Method = Callable[..., LearnResult]
_REGISTRY: dict[str, Method] = {}
_WARM_UPS: dict[str, Callable[[], None]] = {}
_WARMED: set[str] = set()
_REQUIRES: dict[str, Callable[[Any], str | None]] = {}


def register(
    name: str,
    fn: Method,
    *,
    warm: Callable[[], None] | None = None,
    requires: Callable[[Any], str | None] | None = None,
) -> None:
    """Make ``fn(X, Y, m, *, seed, truth, **options) -> LearnResult`` runnable under ``name``; ``warm``
    (optional) does the one-off work of a process (imports, first-call set-up) outside the timed call;
    ``requires(cell)`` (optional) returns why the method refuses a cell (e.g. too few examples), or None."""
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


def refusal(name: str, cell: Any) -> str | None:
    """Why method ``name`` does not accept ``cell`` (a sculpt.bench.grid.Cell), or None if it does."""
    fn = _REQUIRES.get(name)
    return None if fn is None else fn(cell)


def warm_up(name: str) -> None:
    """Run ``name``'s warm-up once per process (so timings exclude imports); its errors are left to the
    timed call to surface."""
    if name in _WARMED:
        return
    _WARMED.add(name)
    fn = _WARM_UPS.get(name)
    if fn is not None:
        try:
            fn()
        except Exception:  # the real call reports the problem in its record
            pass


def registered() -> list[str]:
    return sorted(_REGISTRY)


def get_method(name: str) -> Method:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; registered: {registered()}") from None


def adam_implementation() -> str:
    """'torch' when PyTorch is importable, else 'numpy'."""
    return "torch" if importlib.util.find_spec("torch") is not None else "numpy"


def _learn(route: str) -> Method:
    def run(X: Any, Y: Any, m: int, *, seed: int, truth: Any = None, **options: Any) -> LearnResult:
        from ..learner import learn

        return learn(X, Y, m, method=route, seed=seed, truth=truth, **options)

    run.__name__ = f"learn_{route}"
    return run


def _lbfgs(X: Any, Y: Any, m: int, *, seed: int, truth: Any = None, **options: Any) -> LearnResult:
    from ..baselines import gradient_descent

    return gradient_descent(X, Y, m, method="lbfgs", seed=seed, **options)


def _lbfgs_growing(X: Any, Y: Any, m: int, *, seed: int, truth: Any = None, **options: Any) -> LearnResult:
    """The strongest gradient peer: L-BFGS on 1,000, 2,000, … examples until exact on held-out data."""
    from ..baselines import lbfgs_growing

    return lbfgs_growing(X, Y, m, seed=seed, **options)


def _vp_lm(X: Any, Y: Any, m: int, *, seed: int, truth: Any = None, **options: Any) -> LearnResult:
    from ..vplm import vp_lm

    return vp_lm(X, Y, m, seed=seed, **options)


def _warm_vp_lm() -> None:
    X, Y = _tiny()
    _vp_lm(X, Y, 1, seed=0, restarts=1)


def _adam(X: Any, Y: Any, m: int, *, seed: int, truth: Any = None, **options: Any) -> LearnResult:
    if adam_implementation() == "torch":
        from ..torch_adam import torch_adam

        return torch_adam(X, Y, m, seed=seed, **options)
    from ..baselines import gradient_descent

    numpy_opts = {k: v for k, v in options.items() if k not in _TORCH_ONLY}
    return gradient_descent(X, Y, m, method="adam", seed=seed, **numpy_opts)


# options only the torch Adam understands; dropped when falling back to the numpy Adam
_TORCH_ONLY = frozenset({"lr_min", "threads"})


def _tiny() -> tuple[Any, Any]:
    from ..data import plant, sample_inputs

    truth = plant(2, 2, 1, seed=0)
    X = sample_inputs(8, 2, 2, rng=0)
    return X, truth(X)


def _warm_learner() -> None:
    import importlib

    importlib.import_module("sculpt.learner")


def _warm_lbfgs() -> None:
    X, Y = _tiny()
    _lbfgs(X, Y, 1, seed=0, max_iter=2)


def _warm_adam() -> None:
    X, Y = _tiny()
    _adam(X, Y, 1, seed=0, max_iter=2)


def _requires(route: str) -> Callable[[Any], str | None]:
    def check(cell: Any) -> str | None:
        from ..learner import min_examples

        if route == "exact" and (cell.m != 1 or not 2 <= cell.k < cell.d):
            return f"the exact route needs m = 1 and 2 <= k < d, got (d, k, m) = ({cell.d}, {cell.k}, {cell.m})"
        need = min_examples(route, cell.d, cell.k, cell.m)
        if cell.N < need:
            return (
                f"learn(method={route!r}) needs N >= {need} examples for (d, k, m) = "
                f"({cell.d}, {cell.k}, {cell.m}), got N = {cell.N}"
            )
        return None

    return check


register("sculpt", _learn("sculpt"), warm=_warm_learner, requires=_requires("sculpt"))
register("exact", _learn("exact"), warm=_warm_learner, requires=_requires("exact"))
register("lbfgs", _lbfgs, warm=_warm_lbfgs)
register("lbfgs-growing", _lbfgs_growing, warm=_warm_lbfgs)
register("auto", _learn("auto"), warm=_warm_learner)
register("vp-lm", _vp_lm, warm=_warm_vp_lm)
register("adam", _adam, warm=_warm_adam)
