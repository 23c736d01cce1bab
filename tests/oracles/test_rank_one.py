"""RankOneRows: rows vec(a bᵀ) kept as factors give what the dense rows give (products, Gram matrices, flats)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oracles.rank_one as rank_one
from oracles import RankOneRows, fit_flat


def _rows(seed: int, groups: int, per: int, p: int, q: int) -> RankOneRows:
    """Rows in ``groups`` groups of ``per`` rows sharing a left factor, shuffled."""
    rng = np.random.default_rng(seed)
    left = rng.choice([-1.0, 1.0], size=(groups, p))
    order = rng.permutation(np.repeat(np.arange(groups), per))
    return RankOneRows(left[order], rng.standard_normal((groups * per, q)))


def _sizes(side: int) -> dict[str, st.SearchStrategy[int]]:
    """The seed, the groups, the rows per group and the factor sizes p, q (from ``side`` to ``side`` + 4)."""
    return {
        "seed": st.integers(0, 10_000),
        "groups": st.integers(1, 12),
        "per": st.integers(1, 4),
        "p": st.integers(side, side + 4),
        "q": st.integers(side, side + 4),
    }


@settings(max_examples=25, deadline=None)
@given(**_sizes(1))
def test_products_equal_those_of_the_dense_rows(seed: int, groups: int, per: int, p: int, q: int) -> None:
    """Row r is kron(a_r, b_r); rows @ vec(Θ) = a_rᵀ Θ b_r; rmatvec and take agree with the dense rows."""
    rows = _rows(seed, groups, per, p, q)
    D = rows.dense()
    assert D.shape == rows.shape == (groups * per, p * q)
    assert np.array_equal(D[0], np.kron(rows.left[0], rows.right[0]))
    rng = np.random.default_rng(seed + 1)
    x, X, y = rng.standard_normal(p * q), rng.standard_normal((p * q, 3)), rng.standard_normal(len(rows))
    assert np.allclose(rows @ x, D @ x) and np.allclose(rows @ X, D @ X)
    assert np.allclose(rows.rmatvec(y), D.T @ y)
    pick = rng.permutation(len(rows))[: max(1, len(rows) // 2)]
    assert np.array_equal(rows.take(pick).dense(), D[pick])


@settings(max_examples=25, deadline=None)
@given(**_sizes(2))
def test_grouped_gram_equals_the_dense_gram(seed: int, groups: int, per: int, p: int, q: int) -> None:
    """Σ_g kron(a_g a_gᵀ, B_g), built from the distinct entries only (in chunks of a few groups), is the Gram matrix
    of diag(w)·rows, exactly symmetric, also written into a view of a larger array; joined rows sum their blocks'
    Gram matrices, a remembered one included."""
    rows = _rows(seed, groups, per, p, q)
    w = np.random.default_rng(seed).random(len(rows))
    D = rows.dense() * w[:, None]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rank_one, "GROUPED_GRAM_FROM", 1)
        mp.setattr(rank_one, "GROUPED_CHUNK_ENTRIES", 2 * p * q)  # a chunk holds 2–4 groups: several chunks
        mp.setattr(RankOneRows, "grouped_gram_pays", lambda self: len(self) > 0)  # the grouped path, whatever sizes
        G = rows.gram(w)
        assert np.allclose(G, D.T @ D, atol=1e-12 * max(1.0, np.abs(D.T @ D).max()))
        assert np.array_equal(G, G.T)
        big = np.full((p * q + 2, p * q + 3), np.nan)
        assert rows.gram(w, out=big[1:-1, 2:-1]) is not None
        assert np.array_equal(big[1:-1, 2:-1], G) and np.isnan(big[0]).all() and np.isnan(big[:, :2]).all()
        other = _rows(seed + 1, 3, 2, p, q)
        w2 = np.random.default_rng(seed + 2).random(len(other))
        first = rows.gram(w)  # remembered when the grouped product was taken
        both = RankOneRows.concatenate([rows, other])
        D2 = both.dense() * np.concatenate([w, w2])[:, None]
        assert np.allclose(both.gram(np.concatenate([w, w2])), D2.T @ D2, atol=1e-11 * max(1.0, np.abs(D2).max() ** 2))
        assert np.allclose(first, D.T @ D, atol=1e-11 * max(1.0, np.abs(D).max() ** 2))


def test_the_grouped_gram_is_taken_only_where_it_pays() -> None:
    """Below GROUPED_GRAM_FROM columns, or with no rows sharing a left factor and few rows, the dense product."""
    assert not _rows(0, 50, 4, 8, 8).grouped_gram_pays()  # 64 columns
    assert _rows(0, 40, 6, 32, 32).grouped_gram_pays()  # 1,024 columns, 6 rows a group
    assert not RankOneRows(np.empty((0, 32)), np.empty((0, 32))).grouped_gram_pays()


def test_fit_flat_on_factored_rows_equals_the_dense_fit() -> None:
    """The flat through two matrices Θ_1, Θ_2 from exact bilinear measurements ⟨Θ_i, a bᵀ⟩ = c (rows shared by
    both) is the same from the factors (grouped Gram, shift-invert Lanczos) as from the dense rows."""
    rng = np.random.default_rng(3)
    p = q = 32
    T1, T2 = rng.standard_normal((p, q)), rng.standard_normal((p, q))
    left = rng.choice([-1.0, 1.0], size=(700, p))[np.repeat(np.arange(700), 3)]
    right = rng.standard_normal((2100, q))
    # rows whose measurement agrees on both matrices: project b onto {b : aᵀ(Θ_1 − Θ_2) b = 0}
    u = left @ (T1 - T2)
    rows = RankOneRows(left, right - (np.sum(u * right, 1) / np.sum(u * u, 1))[:, None] * u)
    c = rows @ T1.reshape(-1)
    assert np.allclose(c, rows @ T2.reshape(-1))
    kw = {"dim": 1, "max_dim": 1, "smallest": 4, "iterative_from": 1000}
    factored = fit_flat(rows, c, **kw)
    dense = fit_flat(rows.dense(), c, **kw)
    assert rows.grouped_gram_pays()
    for fit in (factored, dense):
        assert np.allclose(fit.flat.distance(np.vstack([T1.reshape(-1), T2.reshape(-1)])), 0.0, atol=1e-6)
    for fit in (factored, dense):  # the two null directions at round-off level (√eps·σ_max), the next one clear
        assert fit.singular_values[1] < 1e-6 * fit.singular_values[-1] < fit.singular_values[2]
    assert np.isclose(factored.singular_values[2], dense.singular_values[2], rtol=1e-9)


def test_bad_factors_are_refused_with_a_message() -> None:
    with pytest.raises(ValueError, match="same number of rows"):
        RankOneRows(np.ones((3, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="finite"):
        RankOneRows(np.array([[np.nan, 1.0]]), np.ones((1, 2)))
    with pytest.raises(ValueError, match="factor sizes differ"):
        RankOneRows.concatenate(
            [RankOneRows(np.ones((1, 2)), np.ones((1, 2))), RankOneRows(np.ones((1, 3)), np.ones((1, 2)))]
        )
    with pytest.raises(ValueError, match="shape"):
        RankOneRows(np.ones((1, 2)), np.ones((1, 2))) @ np.ones(3)
    with pytest.raises(ValueError, match="weights"):
        RankOneRows(np.ones((2, 2)), np.ones((2, 2))).gram(np.ones(3))
    with pytest.raises(ValueError, match="finite"):
        RankOneRows(np.ones((2, 2)), np.ones((2, 2))).gram(np.array([1.0, np.nan]))


def test_the_factors_are_its_own_and_read_only() -> None:
    """The rows keep copies of the factors, read-only: a caller's later change cannot make a remembered Gram
    matrix stale."""
    left, right = np.ones((3, 2)), np.arange(6.0).reshape(3, 2)
    rows = RankOneRows(left, right)
    before = rows.dense().copy()
    left[0, 0] = 5.0
    assert np.array_equal(rows.dense(), before)
    with pytest.raises(ValueError):
        rows.left[0, 0] = 5.0
