"""sculpt.phases._slack: phase 2's uniform-slack and L1-trim LPs."""
from __future__ import annotations

import numpy as np
import pytest

from sculpt.phases._slack import l1_trim, min_uniform_slack


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
