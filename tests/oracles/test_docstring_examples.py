"""Every Examples section in the engine's docstrings runs and prints what it shows (doctest)."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import oracles

MODULES = sorted(
    ["oracles.solvers"]
    + [f"oracles.{m.name}" for m in pkgutil.iter_modules(oracles.__path__) if not m.name.startswith("_")]
)


def test_the_public_api_has_examples():
    """The main entry points carry an Examples section (a doctest), so none of them is only prose."""
    for name in ("ellipsoid", "cutting_plane", "affine_hull", "implicit_equalities", "min_norm_point",
                 "chebyshev_center", "width", "widths", "fit_flat", "backend_name", "Polytope", "Ellipsoid"):
        assert ">>> " in (getattr(oracles, name).__doc__ or ""), f"oracles.{name} has no example"


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE, report=True)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed (see the output above)"
