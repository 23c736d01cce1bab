"""oracles.sculpting_tools: slack and L1-trim LPs, sound working-set bounds, generated min-norm point."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from oracles import solvers
from oracles.sculpting_tools import WorkingSetMinimizer, l1_trim, min_norm_point_generated, min_uniform_slack


def _random_body(seed: int, n: int, p: int):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, p))
    x0 = rng.uniform(-0.5, 0.5, p)
    b = A @ x0 + rng.uniform(0.0, 1.0, n)          # x0 is feasible
    return A, b, x0


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(5, 80), p=st.integers(2, 12),
       shared=st.booleans(), rounds=st.integers(1, 4))
def test_working_set_bound_is_sound_and_exact_when_flagged(seed, n, p, shared, rounds):
    A, b, _ = _random_body(seed, n, p)
    lpm = WorkingSetMinimizer(A, b, -2.0, 2.0, working=min(4, n), add=3, max_rounds=rounds, shared=shared)
    rng = np.random.default_rng(seed + 1)
    for _ in range(3):
        c = rng.standard_normal(p)
        true = solvers.solve_lp(c, A, b, bounds=(-2.0, 2.0)).value
        res = lpm.bound(c)
        assert res.lower <= true + 1e-7
        if res.exact:
            assert res.lower == pytest.approx(true, abs=1e-6)
            assert np.all(A @ res.x <= b + 1e-6)


def test_slack_and_trim():
    A, b, x0 = _random_body(3, 40, 5)
    eta, x = min_uniform_slack(A, b, -2, 2)
    assert eta == pytest.approx(0.0, abs=1e-9) and np.all(A @ x <= b + 1e-7)
    # two contradictory rows: x_0 <= -1 and -x_0 <= -1 (x_0 >= 1) need a slack of 1 in total
    A2 = np.vstack([A, np.eye(5)[0], -np.eye(5)[0]])
    b2 = np.concatenate([b, [-1.0, -1.0]])
    eta2, _ = min_uniform_slack(A2, b2, -2, 2)
    assert eta2 >= 1.0 - 1e-7
    tr = l1_trim(A2, b2, -2, 2)
    assert tr.total >= 2.0 - 1e-7
    assert (~tr.keep).sum() >= 1
    assert np.all(A2[tr.keep] @ tr.x <= b2[tr.keep] + 1e-6)


def test_generated_min_norm_point_matches_full_qp():
    rng = np.random.default_rng(7)
    p = 6
    A = rng.standard_normal((200, p))
    b = A @ rng.uniform(-1.5, 1.5, p) + rng.uniform(0.0, 0.3, 200)   # feasible; 0 violates many rows
    assert np.sum(b < 0) > 20
    x, used = min_norm_point_generated(A, b, -5, 5, start=10, add=10)
    full = solvers.solve_qp(np.eye(p), np.zeros(p), A, b, bounds=(-5, 5)).x
    np.testing.assert_allclose(x, full, atol=1e-5)
    assert used <= 200


def test_bad_box():
    A, b, _ = _random_body(0, 5, 3)
    with pytest.raises(ValueError):
        min_uniform_slack(A, b, 1.0, -1.0)
    with pytest.raises(ValueError):
        WorkingSetMinimizer(A, b, -1, 1, working=0)
