"""oracles.working_set: sound working-set LP bounds, and min_norm_point(method="working_set")."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import gaussian_like, grid_arrays

from oracles import BoundResult, Polytope, WorkingSetMinimizer, min_norm_point, solvers


def _random_body(seed: int, n: int, p: int):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, p))
    x0 = rng.uniform(-0.5, 0.5, p)
    b = A @ x0 + rng.uniform(0.0, 1.0, n)          # x0 is feasible
    return A, b, x0


@settings(max_examples=20, deadline=None)
@given(n=st.integers(5, 80), p=st.integers(2, 12), shared=st.booleans(), rounds=st.integers(1, 4), data=st.data())
def test_working_set_bound_is_sound_and_exact_when_flagged(n, p, shared, rounds, data):
    A = data.draw(gaussian_like((n, p)), label="A")
    x0 = data.draw(grid_arrays(p, -0.5, 0.5, zero=0.0), label="x0")
    b = A @ x0 + data.draw(grid_arrays(n, 0.0, 1.0), label="slack")        # x0 is feasible
    lpm = WorkingSetMinimizer(A, b, -2.0, 2.0, working=min(4, n), add=3, max_rounds=rounds, shared=shared)
    for c in data.draw(gaussian_like((3, p)), label="objectives"):
        true = solvers.solve_lp(c, A, b, bounds=(-2.0, 2.0)).value
        res = lpm.bound(c)
        assert isinstance(res, BoundResult)
        assert res.lower <= true + 1e-7
        if res.exact:
            assert res.lower == pytest.approx(true, abs=1e-6)
            assert np.all(A @ res.x <= b + 1e-6)


def test_per_variable_box_and_stop_above():
    A, b, _ = _random_body(1, 40, 4)
    lo, hi = np.array([-1.0, -2.0, -3.0, -4.0]), np.array([1.0, 2.0, 3.0, 4.0])
    c = np.array([1.0, -1.0, 0.5, 2.0])
    true = solvers.solve_lp(c, A, b, bounds=(lo, hi)).value
    res = WorkingSetMinimizer(A, b, lo, hi, max_rounds=50).bound(c)
    assert res.exact and res.lower == pytest.approx(true, abs=1e-7)
    early = WorkingSetMinimizer(A, b, lo, hi, working=1, add=1, max_rounds=50, shared=False)
    got = early.bound(c, stop_above=-1e9)        # any bound clears -1e9: one LP, a sound bound
    assert got.lps == 1 and got.lower <= true + 1e-9


def test_working_set_min_norm_point_matches_the_full_qp():
    rng = np.random.default_rng(7)
    p = 6
    A = rng.standard_normal((200, p))
    b = A @ rng.uniform(-1.5, 1.5, p) + rng.uniform(0.0, 0.3, 200)   # feasible; 0 violates many rows
    assert np.sum(b < 0) > 20
    box = Polytope(np.vstack([A, np.eye(p), -np.eye(p)]), np.concatenate([b, np.full(2 * p, 5.0)]))
    x = min_norm_point(box, method="working_set", options={"start": 10, "add": 10})
    full = solvers.solve_qp(np.eye(p), np.zeros(p), A, b, bounds=(-5, 5)).x
    np.testing.assert_allclose(x, full, atol=1e-5)
    np.testing.assert_allclose(x, min_norm_point(box), atol=1e-5)


def test_working_set_min_norm_point_with_equalities_and_no_inequalities():
    P = Polytope(np.zeros((0, 3)), np.zeros(0), A_eq=np.array([[1.0, 1.0, 1.0]]), b_eq=np.array([3.0]))
    np.testing.assert_allclose(min_norm_point(P, method="working_set"), [1.0, 1.0, 1.0], atol=1e-7)
    Q = Polytope(-np.eye(3), -np.ones(3), A_eq=np.array([[1.0, -1.0, 0.0]]), b_eq=np.array([0.0]))
    np.testing.assert_allclose(min_norm_point(Q, method="working_set"), np.ones(3), atol=1e-7)


def test_bad_input():
    A, b, _ = _random_body(0, 5, 3)
    with pytest.raises(ValueError, match="box"):
        WorkingSetMinimizer(A, b, 1.0, -1.0)
    with pytest.raises(ValueError):
        WorkingSetMinimizer(A, b, -1, 1, working=0)
    with pytest.raises(TypeError, match="strat"):
        min_norm_point(Polytope(A, b), method="working_set", options={"strat": 3})
