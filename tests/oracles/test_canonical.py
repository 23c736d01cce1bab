"""One set of canonical bodies run against every backend (the cvxpy pattern).

Bodies: cube, simplex, flat simplex, empty, unbounded (orthant), degenerate (a cube with duplicated rows
and redundant rows through its optimal vertex). Shared checkers: feasibility, optimal value, duality gap,
affine dimension, hull-equation residual, min-norm point, Chebyshev radius. MOSEK skips with the reason
when absent or unlicensed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from conftest import backend_param

from oracles import EmptyBodyError, Polytope, UnboundedError, affine_hull, chebyshev_center, min_norm_point, solvers

C = np.array([1.0, -2.0, 0.5])


@dataclass
class Canon:
    name: str
    poly: Polytope
    min_value: float | None  # min C·x; None: unbounded; nan: empty
    dim: int | None  # affine dimension (None when empty)
    min_norm: np.ndarray | None
    cheb_radius: float | None  # None: unbounded or empty


def _cube() -> Canon:  # [1, 3]^3: min C·x at x = (1, 3, 1)
    A = np.vstack([np.eye(3), -np.eye(3)])
    return Canon("cube", Polytope(A, np.r_[np.full(3, 3.0), np.full(3, -1.0)]),
                 1.0 - 6.0 + 0.5, 3, np.ones(3), 1.0)


def _simplex() -> Canon:  # x >= 0, Σx <= 1
    A = np.vstack([-np.eye(3), np.ones((1, 3))])
    return Canon("simplex", Polytope(A, np.r_[np.zeros(3), 1.0]), -2.0, 3, np.zeros(3), 1.0 / (3.0 + np.sqrt(3.0)))


def _flat_simplex() -> Canon:  # x >= 0, Σx = 1 written as two inequalities
    A = np.vstack([-np.eye(3), np.ones((1, 3)), -np.ones((1, 3))])
    return Canon("flat_simplex", Polytope(A, np.r_[np.zeros(3), 1.0, -1.0]), -2.0, 2, np.full(3, 1 / 3), 0.0)


def _empty() -> Canon:
    A = np.vstack([np.eye(3), -np.ones((1, 3))])
    return Canon("empty", Polytope(A, np.r_[np.zeros(3), -1.0]), float("nan"), None, None, None)


def _unbounded() -> Canon:  # the shifted orthant x >= 1
    return Canon("unbounded", Polytope(-np.eye(3), -np.ones(3)), None, 3, np.ones(3), None)


def _degenerate() -> Canon:  # the cube with every row twice and 4 extra rows tight at the optimum (1, 3, 1)
    base = _cube().poly
    xs = np.array([1.0, 3.0, 1.0])
    rng = np.random.default_rng(0)
    # rows a with a·x <= a·xs valid on the cube: a = combination of the active rows' normals
    active = np.array([[-1.0, 0, 0], [0, 1.0, 0], [0, 0, -1.0]])
    extra = rng.uniform(0.1, 1.0, (4, 3)) @ active
    A = np.vstack([base.A, base.A * 2.0, extra])
    b = np.r_[base.b, base.b * 2.0, extra @ xs]
    return Canon("degenerate", Polytope(A, b), 1.0 - 6.0 + 0.5, 3, np.ones(3), 1.0)


CANON = [_cube(), _simplex(), _flat_simplex(), _empty(), _unbounded(), _degenerate()]
IDS = [c.name for c in CANON]


@pytest.mark.parametrize("backend", backend_param("lp"))
@pytest.mark.parametrize("case", CANON, ids=IDS)
def test_lp(case, backend):
    P = case.poly
    if case.min_value is None:
        with pytest.raises(UnboundedError):
            solvers.solve_lp(C, P.A, P.b, solver=backend)
        return
    if np.isnan(case.min_value):
        with pytest.raises(EmptyBodyError):
            solvers.solve_lp(C, P.A, P.b, solver=backend)
        return
    sol = solvers.solve_lp(C, P.A, P.b, solver=backend)
    assert P.contains(sol.x, tol=1e-7)
    assert abs(sol.value - case.min_value) <= 1e-7
    # duality: C + Aᵀλ = 0, λ >= 0, gap Cᵀx + bᵀλ = 0
    lam = sol.dual_ub
    assert lam.min() >= 0
    assert np.max(np.abs(C + P.A.T @ lam)) <= 1e-6
    assert abs(sol.value + P.b @ lam) <= 1e-6


@pytest.mark.parametrize("backend", backend_param("lp"))
@pytest.mark.parametrize("case", CANON, ids=IDS)
def test_affine_hull(case, backend):
    P = case.poly
    if case.dim is None:
        with pytest.raises(EmptyBodyError):
            affine_hull(P, solver=backend)
        return
    hull = affine_hull(P, solver=backend)
    assert hull.dim == case.dim
    A_eq, b_eq = hull.equations
    # the hull's equations hold at every vertex / point we know of the body, to 1e-8
    if case.min_value is not None:
        x = solvers.solve_lp(C, P.A, P.b, solver="HIGHS").x
        assert np.max(np.abs(A_eq @ x - b_eq), initial=0.0) <= 1e-8
    if case.name == "flat_simplex":
        assert np.allclose(np.abs(A_eq), 1 / np.sqrt(3)) and np.allclose(hull.point, np.full(3, 1 / 3))


@pytest.mark.parametrize("backend", backend_param("qp"))
@pytest.mark.parametrize("case", CANON, ids=IDS)
def test_min_norm_point(case, backend):
    P = case.poly
    if case.min_norm is None:
        with pytest.raises(EmptyBodyError):
            min_norm_point(P, solver=backend)
        return
    x = min_norm_point(P, solver=backend)
    assert np.allclose(x, case.min_norm, atol=1e-6)


@pytest.mark.parametrize("backend", backend_param("lp"))
@pytest.mark.parametrize("case", CANON, ids=IDS)
def test_chebyshev(case, backend):
    P = case.poly
    if case.cheb_radius is None:
        with pytest.raises(EmptyBodyError if case.dim is None else UnboundedError):
            chebyshev_center(P, solver=backend)
        return
    c, r = chebyshev_center(P, solver=backend)
    assert abs(r - case.cheb_radius) <= 1e-6
    assert P.contains(c, tol=1e-7)
