"""oracles.support: a polytope's extent along directions (one kept LP model) and its slice by a flat."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import scipy.sparse as sp

from oracles import AffineSubspace, Polytope, extents, flat_slice, widths


def _random_polytope(seed: int, n: int, p: int) -> Polytope:
    """A bounded polytope: random rows around the origin plus the box |x| <= 3."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, p))
    b = rng.uniform(0.5, 2.0, n)
    return Polytope(np.vstack([A, np.eye(p), -np.eye(p)]), np.concatenate([b, np.full(2 * p, 3.0)]))


def test_the_docstring_examples_run() -> None:
    import oracles.support

    assert doctest.testmod(oracles.support).failed == 0


@pytest.mark.parametrize("algorithm", ["ipm", "simplex"])
@pytest.mark.parametrize("seed", range(3))
def test_extents_bracket_every_point_and_match_widths(seed: int, algorithm: str) -> None:
    """lo <= u·x <= hi for points of P (its vertices reached by the LPs among them), and hi − lo = widths."""
    P = _random_polytope(seed, 30, 5)
    U = np.random.default_rng(seed + 1).standard_normal((6, 5))
    lo, hi = extents(P, U, algorithm=algorithm)
    assert np.all(lo < hi)
    assert np.allclose(hi - lo, widths(P, U), atol=1e-7)
    for u, l_, h in zip(U, lo, hi):
        _, top = P.maximize(u)
        assert u @ top == pytest.approx(h, abs=1e-7) and l_ <= u @ top + 1e-9


def test_a_failed_side_is_infinite_not_an_error() -> None:
    """The half-plane x <= 1 is unbounded below along e_0 and in both directions along e_1."""
    P = Polytope(np.array([[1.0, 0.0]]), np.array([1.0]))
    lo, hi = extents(P, np.eye(2))
    assert hi[0] == pytest.approx(1.0) and lo[0] == -np.inf and lo[1] == -np.inf and hi[1] == np.inf


def test_extents_check_their_arguments() -> None:
    P = _random_polytope(0, 5, 3)
    with pytest.raises(ValueError, match="U"):
        extents(P, np.ones((2, 4)))
    with pytest.raises(TypeError, match="Polytope"):
        extents(np.eye(3), np.eye(3))  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(3))
def test_the_slice_is_the_polytope_inside_the_flat(seed: int) -> None:
    """A point y of the slice maps to x = p + B y in P and on the flat, and the slice's extents along its axes
    are P's extents along the flat's directions restricted to the flat."""
    P = _random_polytope(seed, 25, 6)
    rng = np.random.default_rng(seed + 5)
    flat = AffineSubspace(0.1 * rng.standard_normal(6), rng.standard_normal((6, 2)))
    S = flat_slice(P, flat)
    assert S is not None and S.dim == 2
    lo, hi = extents(S, np.eye(2))
    for j in range(2):
        for y in (np.eye(2)[j] * lo[j], np.eye(2)[j] * hi[j]):
            if not S.contains(y, tol=1e-7):
                continue
            assert P.contains(flat.to_global(y), tol=1e-7)
    ys = rng.uniform(-3, 3, (400, 2))
    inside = np.array([S.contains(y) for y in ys])
    assert np.array_equal(inside, np.array([P.contains(flat.to_global(y)) for y in ys]))


def test_bounds_and_equalities_carry_over_and_a_missed_flat_is_none() -> None:
    """Bounds become rows of the slice; an equality constant on the flat decides whether it meets P."""
    P = Polytope(np.zeros((0, 3)), np.zeros(0), np.array([[1.0, 0.0, 0.0]]), np.array([0.5]), lb=-1.0, ub=1.0)
    on = AffineSubspace(np.array([0.5, 0.0, 0.0]), np.eye(3)[:, 1:])  # x_0 = 0.5 on the flat: meets P
    S = flat_slice(P, on)
    assert S is not None and S.A_eq.shape[0] == 0
    lo, hi = extents(S, np.eye(2))
    assert np.allclose(lo, -1.0) and np.allclose(hi, 1.0)
    off = AffineSubspace(np.array([0.7, 0.0, 0.0]), np.eye(3)[:, 1:])
    assert flat_slice(P, off) is None
    tilted = AffineSubspace(np.zeros(3), np.array([[1.0], [1.0], [0.0]]))  # x_0 = x_1 = t: the equality fixes t
    T = flat_slice(P, tilted)
    assert T is not None and T.A_eq.shape[0] == 1
    lo, hi = extents(T, np.eye(1))
    assert lo[0] == pytest.approx(hi[0]) == pytest.approx(0.5 * np.sqrt(2))


def test_a_sparse_polytope_slices_like_its_dense_copy() -> None:
    P = _random_polytope(4, 12, 4)
    Ps = Polytope(sp.csr_matrix(P.A), P.b)
    flat = AffineSubspace(np.zeros(4), np.eye(4)[:, :2])
    S, Ss = flat_slice(P, flat), flat_slice(Ps, flat)
    assert S is not None and Ss is not None and np.allclose(S.A, Ss.A) and np.allclose(S.b, Ss.b)


def test_a_zero_dimensional_flat_is_refused() -> None:
    with pytest.raises(ValueError, match="dimension"):
        flat_slice(_random_polytope(0, 3, 3), AffineSubspace(np.zeros(3), np.zeros((3, 0))))
