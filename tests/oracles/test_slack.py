"""oracles.slack: the least uniform and total violations of A x <= b in a box, and the hinge feasible point."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oracles
from oracles import hinge_feasible_point, min_max_violation, min_total_violation


def _random_system(seed: int, n: int, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A x <= b with the point x0 (in [-0.5, 0.5]^p) strictly inside every row."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, p))
    x0 = rng.uniform(-0.5, 0.5, p)
    b = A @ x0 + rng.uniform(0.0, 1.0, n)
    return A, b, x0


def _contradiction(A: np.ndarray, b: np.ndarray, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """The system with x_0 <= −gap and −x_0 <= −gap added: no point meets both."""
    p = A.shape[1]
    return np.vstack([A, np.eye(p)[0], -np.eye(p)[0]]), np.concatenate([b, [-gap, -gap]])


def test_the_docstring_examples_run() -> None:
    import oracles.slack

    assert doctest.testmod(oracles.slack).failed == 0


def test_feasible_system_has_zero_violation_and_a_point_in_it() -> None:
    A, b, _ = _random_system(3, 40, 5)
    eta, x = min_max_violation(A, b, -2, 2)
    assert eta == pytest.approx(0.0, abs=1e-9) and np.all(A @ x <= b + 1e-7) and np.all(np.abs(x) <= 2)
    fit = min_total_violation(A, b, -2, 2)
    assert fit.total == pytest.approx(0.0, abs=1e-7) and fit.keep.all()


@pytest.mark.parametrize("gap", [0.3, 1.0, 1.7])
def test_a_contradiction_alone_costs_its_gap(gap: float) -> None:
    """x_0 <= −g and x_0 >= g: every point violates one of them by at least g, x_0 = 0 violates both by g
    (η* = g); the L1 fit pays 2g in total, wherever x_0 lies in [−g, g]."""
    A, b = _contradiction(np.zeros((0, 3)), np.zeros(0), gap)
    eta, x = min_max_violation(A, b, -2, 2)
    assert eta == pytest.approx(gap, abs=1e-8) and np.all(A @ x <= b + eta + 1e-8)
    assert min_total_violation(A, b, -2, 2).total == pytest.approx(2 * gap, abs=1e-8)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 60), st.integers(1, 8), st.floats(0.05, 1.5))
def test_max_and_total_violation_bound_each_other(seed: int, n: int, p: int, gap: float) -> None:
    """total/(n + 2) <= η* <= total (the max over rows is at most their sum at the L1 point, and the sum at
    most n times the max at the η* point); the L1 point meets every kept row and its ``violation`` is
    recomputed there; the η* point is in the box and meets every row widened by η*."""
    A, b, _ = _random_system(seed, n, p)
    A2, b2 = _contradiction(A, b, gap)
    eta, x = min_max_violation(A2, b2, -2, 2)
    fit = min_total_violation(A2, b2, -2, 2)
    assert np.all(np.abs(x) <= 2) and np.all(A2 @ x <= b2 + eta + 1e-7)
    assert eta >= gap - 1e-7 and fit.total >= 2 * gap - 1e-7
    assert fit.total / A2.shape[0] - 1e-7 <= eta <= fit.total + 1e-7
    np.testing.assert_allclose(fit.violation, np.maximum(A2 @ fit.x - b2, 0.0))
    assert fit.total == pytest.approx(float(fit.violation.sum()))
    assert (~fit.keep).sum() >= 1 and np.all(A2[fit.keep] @ fit.x <= b2[fit.keep] + 1e-6)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 12))
def test_one_variable_optima_match_a_fine_grid(seed: int, n: int) -> None:
    """In one variable both objectives are convex and piecewise linear: the LP optima equal their minimum
    over a grid of the box to the grid's resolution, and never exceed it."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, 1))
    b = rng.standard_normal(n)
    grid = np.linspace(-1.0, 1.0, 200_001)
    V = np.maximum(A @ grid[None, :] - b[:, None], 0.0)  # (n, grid)
    step = 2.0 / 200_000 * float(np.abs(A).sum())
    eta, _ = min_max_violation(A, b, -1.0, 1.0)
    total = min_total_violation(A, b, -1.0, 1.0).total
    assert V.max(0).min() - step - 1e-9 <= eta <= V.max(0).min() + 1e-9
    assert V.sum(0).min() - step - 1e-9 <= total <= V.sum(0).min() + 1e-9


def test_empty_system_and_malformed_input() -> None:
    eta, x = min_max_violation(np.zeros((0, 3)), np.zeros(0), -1.0, 1.0)
    assert eta == 0.0 and np.all(x == 0.0)
    assert min_total_violation(np.zeros((0, 3)), np.zeros(0), -1.0, 1.0).total == 0.0
    hp = hinge_feasible_point(np.zeros((0, 2)), np.zeros(0), 1.0, 2.0)
    assert hp.x is not None and np.all(hp.x == 1.0) and hp.worst == 0.0  # the origin clipped to the box
    A, b, _ = _random_system(0, 5, 3)
    with pytest.raises(ValueError, match="box"):
        min_max_violation(A, b, 1.0, -1.0)
    with pytest.raises(ValueError, match="box"):
        hinge_feasible_point(A, b, -np.inf, 1.0)
    with pytest.raises(ValueError, match="b must"):
        min_total_violation(A, b[:-1], -1.0, 1.0)
    with pytest.raises(ValueError, match="A contains NaN"):
        min_max_violation(np.full((2, 2), np.nan), np.zeros(2), -1.0, 1.0)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 300), st.integers(1, 30))
def test_hinge_point_is_feasible_whenever_returned_and_found_on_bodies_with_room(seed: int, n: int, p: int) -> None:
    """A returned point meets every row and the box exactly; a system with an interior point at slack >= 0.01
    (so the tightened rows still have room) always gets one; the reported worst violation is <= 0 then."""
    A, b, _ = _random_system(seed, n, p)
    b = b + 0.01
    x, worst, _ = hinge_feasible_point(A, b, -2.0, 2.0)
    assert x is not None and worst <= 0.0
    assert np.all(A @ x <= b) and np.all(np.abs(x) <= 2.0)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 100), st.integers(1, 10), st.floats(0.05, 5.0))
def test_hinge_point_never_claims_an_infeasible_system(seed: int, n: int, p: int, gap: float) -> None:
    """x_0 <= −gap and −x_0 <= −gap cannot both hold: no point, and the last iterate violates some row by at
    least gap (an upper bound on η*, which is at least gap too)."""
    A, b, _ = _random_system(seed, n, p)
    A2, b2 = _contradiction(A, b, gap)
    x, worst, last = hinge_feasible_point(A2, b2, -2.0, 2.0)
    assert x is None and worst >= gap - 1e-9
    assert np.all(np.abs(last) <= 2.0) and worst == pytest.approx(float(np.max(A2 @ last - b2)))


def test_exported_from_the_engine() -> None:
    for name in ("min_max_violation", "MaxViolation", "min_total_violation", "TotalViolation"):
        assert name in oracles.__all__ and hasattr(oracles, name)
    assert {"hinge_feasible_point", "HingePoint"} <= set(oracles.__all__)


def _rank_one_system(seed: int, n: int, p: int, q: int, room: float) -> tuple[oracles.RankOneRows, np.ndarray]:
    """Rows vec(a bᵀ) with ±1 / {−2, 0, 2} factors and a point strictly inside every row by >= ``room``."""
    rng = np.random.default_rng(seed)
    rows = oracles.RankOneRows(rng.choice([-1.0, 1.0], (n, p)), rng.choice([-2.0, 0.0, 2.0], (n, q)))
    x0 = rng.uniform(-0.3, 0.3, p * q)
    return rows, rows @ x0 + rng.uniform(room, 1.0, n)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 200), st.integers(1, 6), st.integers(1, 6))
def test_hinge_point_on_factored_rows_meets_the_rows_whole(seed: int, n: int, p: int, q: int) -> None:
    """Rows given as rank-one factors: the point found meets every row of the dense matrix they stand for and
    the box, and the reported worst violation is that of the dense rows at it."""
    rows, b = _rank_one_system(seed, n, p, q, 0.01)
    x, worst, last = hinge_feasible_point(rows, b, -2.0, 2.0)
    A = rows.dense()
    assert x is not None and np.all(A @ x <= b) and np.all(np.abs(x) <= 2.0)
    assert worst == pytest.approx(float(np.max(A @ last - b)), abs=1e-12)


def test_hinge_point_on_factored_rows_refuses_a_contradiction_and_bad_input() -> None:
    """u ⊗ v and −u ⊗ v with offsets −g each cannot both hold: no point, and the worst violation is >= g (as on
    the dense rows); a right-hand side of the wrong length is refused naming b."""
    rows, b = _rank_one_system(5, 30, 3, 4, 0.1)
    u, v = rows.left[:1], rows.right[:1]
    both = oracles.RankOneRows.concatenate([rows, oracles.RankOneRows(np.vstack([u, -u]), np.vstack([v, v]))])
    x, worst, _ = hinge_feasible_point(both, np.concatenate([b, [-0.5, -0.5]]), -2.0, 2.0)
    assert x is None and worst >= 0.5 - 1e-9
    with pytest.raises(ValueError, match="b must"):
        hinge_feasible_point(rows, b[:-1], -2.0, 2.0)
    with pytest.raises(ValueError, match="box"):
        hinge_feasible_point(rows, b, 1.0, -1.0)
