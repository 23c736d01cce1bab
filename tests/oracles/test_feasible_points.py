"""oracles.feasible_points: a point of {A x <= b, box} on a flat (one small LP) and by a capped first-order LP."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

from oracles import SolverError, feasible_point_on_flat, first_order_feasible_point, solvers


def _system(seed: int, n: int, p: int, slack: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A x <= b with x0 (in [-0.5, 0.5]^p) strictly inside every row by up to ``slack``."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, p))
    x0 = rng.uniform(-0.5, 0.5, p)
    return A, A @ x0 + rng.uniform(0.0, slack, n), x0


def test_the_docstring_examples_run() -> None:
    import oracles.feasible_points

    assert doctest.testmod(oracles.feasible_points).failed == 0


@pytest.mark.parametrize("seed", range(4))
def test_a_flat_through_an_interior_point_gives_a_checked_point_on_it(seed: int) -> None:
    """The flat passes through x0 (inside every row): the answer meets every row and the box exactly, and lies
    on the flat (x − p in span U)."""
    A, b, x0 = _system(seed, 60, 8)
    rng = np.random.default_rng(seed + 10)
    U = np.linalg.qr(rng.standard_normal((8, 3)))[0]
    p = x0 + U @ rng.standard_normal(3)  # a point of the flat, usually outside the system
    x = feasible_point_on_flat(A, b, p, U, -2.0, 2.0)
    assert x is not None and np.all(A @ x <= b) and np.all(np.abs(x) <= 2.0)
    assert np.allclose(U @ (U.T @ (x - p)), x - p, atol=1e-9)


def test_a_flat_that_misses_the_system_gives_none() -> None:
    """x_0 >= 1 and the flat x_0 = 0: no point of the flat meets the row."""
    A = np.array([[-1.0, 0.0, 0.0]])
    b = np.array([-1.0])
    U = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert feasible_point_on_flat(A, b, np.zeros(3), U, -2.0, 2.0) is None


def test_the_box_is_a_hard_constraint_on_the_flat() -> None:
    """x_0 >= 1.5 with the box |x| <= 1: the LP cannot widen the box rows, so no point."""
    A = np.array([[-1.0, 0.0]])
    assert feasible_point_on_flat(A, np.array([-1.5]), np.zeros(2), np.eye(2), -1.0, 1.0) is None
    x = feasible_point_on_flat(A, np.array([-0.5]), np.zeros(2), np.eye(2), -1.0, 1.0)
    assert x is not None and -x[0] <= -0.5 and np.all(np.abs(x) <= 1.0)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"directions": np.zeros((3, 0))}, "directions"),
        ({"directions": np.ones((2, 1))}, "directions"),
        ({"lo": 1.0, "hi": -1.0}, "box"),
        ({"point": np.zeros(2)}, "point"),
    ],
)
def test_flat_search_rejects_malformed_input(kw: dict, match: str) -> None:
    args = {
        "A": np.ones((2, 3)),
        "b": np.ones(2),
        "point": np.zeros(3),
        "directions": np.eye(3)[:, :1],
        "lo": -1.0,
        "hi": 1.0,
    }
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        feasible_point_on_flat(
            args.pop("A"), args.pop("b"), args.pop("point"), args.pop("directions"), args.pop("lo"), args.pop("hi")
        )


@pytest.mark.skipif(not solvers.get().FIRST_ORDER_LP, reason="the default backend has no first-order LP mode")
@pytest.mark.parametrize("seed", range(3))
def test_first_order_point_is_checked_and_in_the_box(seed: int) -> None:
    A, b, _ = _system(seed, 200, 10)
    x = first_order_feasible_point(A, b, -2.0, 2.0)
    assert x is not None and np.all(A @ x <= b) and np.all(np.abs(x) <= 2.0)


@pytest.mark.skipif(not solvers.get().FIRST_ORDER_LP, reason="the default backend has no first-order LP mode")
def test_first_order_run_on_an_infeasible_system_gives_none() -> None:
    A, b, _ = _system(0, 50, 4)
    A = np.vstack([A, np.eye(4)[0], -np.eye(4)[0]])
    b = np.concatenate([b, [-1.0, -1.0]])  # x_0 <= -1 and x_0 >= 1
    assert first_order_feasible_point(A, b, -2.0, 2.0, max_iter=200) is None


def test_a_backend_without_a_first_order_mode_is_refused(lp_only_backend) -> None:
    with pytest.raises(SolverError, match="first-order") as info:
        first_order_feasible_point(np.ones((1, 2)), np.ones(1), -1.0, 1.0, solver=lp_only_backend)
    assert info.value.status == "unsupported"
