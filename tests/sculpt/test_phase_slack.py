"""sculpt.phases._slack: phase 2's uniform-slack and L1-trim LPs."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sculpt.phases._slack import hinge_feasible_point, l1_trim, min_uniform_slack


def _random_body(seed: int, n: int, p: int):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, p))
    x0 = rng.uniform(-0.5, 0.5, p)
    b = A @ x0 + rng.uniform(0.0, 1.0, n)          # x0 is feasible
    return A, b, x0


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


def test_empty_system_and_bad_box():
    eta, x = min_uniform_slack(np.zeros((0, 3)), np.zeros(0), -1.0, 1.0)
    assert eta == 0.0 and np.all(x == 0.0)
    assert l1_trim(np.zeros((0, 3)), np.zeros(0), -1.0, 1.0).total == 0.0
    A, b, _ = _random_body(0, 5, 3)
    with pytest.raises(ValueError, match="box"):
        min_uniform_slack(A, b, 1.0, -1.0)
    with pytest.raises(ValueError, match="b must"):
        l1_trim(A, b[:-1], -1.0, 1.0)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 300), st.integers(1, 30))
def test_hinge_point_is_feasible_whenever_returned_and_found_on_bodies_with_room(seed, n, p):
    """A returned point meets every row and the box exactly; a body with an interior point at slack >= 0.01
    (so the tightened rows still have room) always gets one; the reported worst violation is ≤ 0 then."""
    A, b, _ = _random_body(seed, n, p)
    b = b + 0.01
    x, worst, _ = hinge_feasible_point(A, b, 2.0)
    assert x is not None and worst <= 0.0
    assert np.all(A @ x <= b) and np.all(np.abs(x) <= 2.0)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 100), st.integers(1, 10), st.floats(0.05, 5.0))
def test_hinge_point_never_claims_an_infeasible_body(seed, n, p, gap):
    """x_0 <= −gap and −x_0 <= −gap cannot both hold: None, and the last iterate violates some row by
    at least gap (what phase 2 reads as evidence of infeasibility)."""
    A, b, _ = _random_body(seed, n, p)
    A2 = np.vstack([A, np.eye(p)[0], -np.eye(p)[0]])
    b2 = np.concatenate([b, [-gap, -gap]])
    x, worst, last = hinge_feasible_point(A2, b2, 2.0)
    assert x is None and worst >= gap - 1e-9
