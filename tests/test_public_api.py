"""The public names the issues list are a contract: import them exactly as written there and check the
keyword arguments other code calls them with."""
from __future__ import annotations

import inspect

import numpy as np
import pytest


def _keywords(fn) -> set[str]:
    return set(inspect.signature(fn).parameters)


def test_oracles_contract_imports_and_keywords() -> None:
    import oracles
    from oracles import (AffineSubspace, Ball, Cut, EmptyBodyError, OracleBody, Polytope, SolverError,
                         UnboundedError, affine_hull, chebyshev_center, cutting_plane, ellipsoid, linear_span,
                         min_norm_point, solvers, width)

    for name in oracles.__all__:  # everything advertised is importable
        assert hasattr(oracles, name), name
    assert {"body", "center", "radius", "objective", "tol", "max_iter"} <= _keywords(ellipsoid)
    assert {"body", "center", "radius", "objective", "tol", "max_iter"} <= _keywords(cutting_plane)
    assert {"body", "method", "tol", "solver"} <= _keywords(affine_hull)
    assert {"body_or_points", "tol"} <= _keywords(linear_span)
    for fn in (min_norm_point, chebyshev_center, width):
        assert "solver" in _keywords(fn)
    assert {"A", "b", "A_eq", "b_eq"} <= _keywords(Polytope)
    assert {"dim", "separate", "contains", "maximize"} <= _keywords(OracleBody)
    assert {"center", "radius"} <= _keywords(Ball) and {"normal", "offset"} <= _keywords(Cut)
    for err in (EmptyBodyError, UnboundedError, SolverError):
        assert issubclass(err, Exception)
    assert solvers.default() in solvers.available()

    P = Polytope(np.vstack([np.eye(3), -np.eye(3)]), np.ones(6))
    for method in ("add_halfspaces", "add_equalities", "add_slabs", "contains", "separate", "maximize"):
        assert callable(getattr(P, method)), method
    P.add_equalities(np.array([[1.0, 0.0, 0.0]]), np.array([0.0]))
    assert (P.dim, P.n_constraints) == (3, 7)
    hull = affine_hull(P)
    assert isinstance(hull, AffineSubspace) and hull.dim == 2
    for attr in ("point", "basis", "equations", "contains", "project", "to_local", "to_global"):
        assert hasattr(hull, attr), attr


def test_sculpt_contract_imports_and_keywords() -> None:
    from sculpt import MultiHeadAttention, from_torch, learn, nondegeneracy, plant, sample_inputs
    from sculpt.baselines import gradient_descent

    assert {"X", "Y", "m", "method", "seed", "solver", "progress"} <= _keywords(learn)
    assert {"X", "Y", "m", "method", "seed", "restarts", "max_iter", "tol"} <= _keywords(gradient_descent)
    assert {"n", "k", "d", "rng", "distribution"} <= _keywords(sample_inputs)
    assert {"d", "k", "m", "scale", "seed"} <= _keywords(plant)
    assert {"model"} <= _keywords(nondegeneracy) and {"module"} <= _keywords(from_torch)
    assert {"thetas", "ws"} <= _keywords(MultiHeadAttention)
    for attr in ("save", "load", "distance", "prediction_error", "attention"):
        assert callable(getattr(MultiHeadAttention, attr)), attr


def test_oracles_never_imports_sculpt() -> None:
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "oracles"
    offenders = [str(p) for p in root.rglob("*.py")
                 if any(line.lstrip().startswith(("import sculpt", "from sculpt"))
                        for line in p.read_text().splitlines())]
    assert offenders == [], f"oracles/ must not import sculpt: {offenders}"


@pytest.mark.parametrize("name", ["Polytope", "affine_hull", "ellipsoid", "min_norm_point"])
def test_contract_names_have_docstrings(name: str) -> None:
    import oracles

    assert (getattr(oracles, name).__doc__ or "").strip(), f"oracles.{name} has no docstring"
