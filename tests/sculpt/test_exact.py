"""The exact m = 1 route: recovery from ⌈d²/(k(k−1))⌉ + 3 examples, dependent-token filtering, rank checks."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import attention_layers, gaussian_like, inputs, well_conditioned

from sculpt import MultiHeadAttention, plant, sample_inputs
from sculpt.exact import _streaming_lstsq, exact_equation_counts, exact_sample_size, exact_single_head
from sculpt.settings import ExactSettings, ProblemSize


def _check_recovered(res, truth: MultiHeadAttention, k: int, distribution: str, rng: np.random.Generator) -> None:
    assert res.converged, res.reason
    assert res.method == "exact"
    assert res.train_error <= 1e-12
    dist = truth.distance(res.model)
    assert dist.theta_error <= 1e-6 and dist.w_error <= 1e-6, dist
    X_test = sample_inputs(2000, k, truth.d, rng=rng, distribution=distribution)
    assert truth.prediction_error(res.model, X_test) <= 1e-12


@pytest.mark.parametrize("distribution", ["boolean", "gaussian"])
@pytest.mark.parametrize("d,k,seeds", [(8, 4, range(5)), (16, 4, range(2))])
def test_recovers_from_recommended_sample_size(d: int, k: int, seeds: range, distribution: str) -> None:
    N = exact_sample_size(d, k)
    assert N == math.ceil(d * d / (k * (k - 1))) + 3
    for seed in seeds:
        truth = plant(d, k, 1, seed=seed)
        rng = np.random.default_rng(100 + seed)
        X = sample_inputs(N, k, d, rng=rng, distribution=distribution)
        res = exact_single_head(X, truth(X), truth=truth)
        _check_recovered(res, truth, k, distribution, rng)
        assert [p.name for p in res.phases] == ["exact-w", "exact-theta"]
        assert res.phase("exact-w").figures["rank"] == d * d
        assert res.phase("exact-theta").figures["rank"] == d * d
        assert res.phase("exact-theta").truth["theta_error"] <= 1e-6
        assert res.samples_used == N - res.phase("exact-w").figures["examples_dropped"]


@settings(max_examples=12, deadline=None)
@given(truth=attention_layers(d=8, m=1, theta_norm=2.5, sum_w_cond=10.0), N=st.integers(2, 14),
       distribution=st.sampled_from(["boolean", "gaussian"]), data=st.data())
def test_never_silently_wrong(truth: MultiHeadAttention, N: int, distribution: str, data) -> None:
    """Whatever the examples: either an exact model (converged) or no model with a reason naming the deficient
    system. The head (‖Θ‖_F <= 2.5, cond W <= 10, as plant's) and the N examples are drawn structured."""
    d, k = 8, 4
    X = data.draw(inputs((N, k, d), distribution), label="X")
    res = exact_single_head(X, truth(X), truth=truth)
    if res.converged:
        _check_recovered(res, truth, k, distribution, np.random.default_rng(0))
    else:
        assert res.model is None
        assert re.search(r"(W⁻¹|Θ)-system rank deficient|no example", res.reason), res.reason
        assert res.phases[-1].status == "failed"


@pytest.mark.parametrize("N,system", [(3, "W⁻¹"), (5, "Θ")])
def test_too_few_examples_names_the_system_and_the_count(N: int, system: str) -> None:
    d, k = 8, 4
    truth = plant(d, k, 1, seed=3)
    X = sample_inputs(N, k, d, rng=np.random.default_rng(0), distribution="gaussian")
    res = exact_single_head(X, truth(X))
    assert not res.converged and res.model is None
    assert f"{system}-system rank deficient" in res.reason
    more = int(re.search(r"need about (\d+) more examples", res.reason).group(1))
    per_w, per_theta = exact_equation_counts(d, k)
    rank = res.phases[-1].figures["rank"]
    assert rank < d * d
    assert more >= math.ceil((d * d - rank) / (per_w if system == "W⁻¹" else per_theta))
    assert str(exact_sample_size(d, k)) in res.reason
    # following the advice works
    X2 = np.concatenate([X, sample_inputs(more, k, d, rng=np.random.default_rng(1), distribution="gaussian")])
    assert exact_single_head(X2, truth(X2)).converged


def test_dependent_examples_are_dropped() -> None:
    d, k = 8, 4
    truth = plant(d, k, 1, seed=1)
    rng = np.random.default_rng(7)
    X_good = sample_inputs(exact_sample_size(d, k), k, d, rng=rng, distribution="gaussian")
    bad = sample_inputs(4, k, d, rng=rng, distribution="gaussian")
    bad[0, 1] = bad[0, 0]                        # repeated token
    bad[1, 2] = -bad[1, 0]                       # opposite token
    bad[2, 3] = bad[2, 0] + 2.0 * bad[2, 1]      # a linear combination
    bad[3, :] = bad[3, 0]                        # all tokens equal
    X = np.concatenate([bad[:2], X_good, bad[2:]])
    res = exact_single_head(X, truth(X), truth=truth)
    assert res.phase("exact-w").figures["examples_dropped"] == 4
    assert "4 of" in res.phase("exact-w").message
    _check_recovered(res, truth, k, "gaussian", rng)
    # the dropped examples are still fitted by the learned layer
    assert truth.prediction_error(res.model, bad) <= 1e-12


def test_boolean_data_with_repeats_only() -> None:
    d, k = 8, 4
    truth = plant(d, k, 1, seed=2)
    X = sample_inputs(3, k, d, rng=np.random.default_rng(0))
    X[:, 1] = X[:, 0]
    res = exact_single_head(X, truth(X))
    assert not res.converged and res.model is None
    assert "no example" in res.reason and "3 of 3" in res.reason


def test_noisy_labels_do_not_converge_but_give_a_close_model() -> None:
    d, k = 8, 4
    truth = plant(d, k, 1, seed=4)
    rng = np.random.default_rng(4)
    X = sample_inputs(400, k, d, rng=rng)
    Y = truth(X)
    Y = Y + 1e-4 * np.sqrt(np.mean(Y**2)) * rng.standard_normal(Y.shape)
    res = exact_single_head(X, Y, truth=truth)
    assert not res.converged and res.model is not None
    assert 1e-12 < res.train_error < 1e-5
    assert "tol" in res.reason
    assert truth.distance(res.model).theta_error < 1e-2


@pytest.mark.parametrize("shape,m,match", [((5, 8, 8), 1, "k < d"), ((5, 9, 8), 1, "k < d"),
                                           ((5, 1, 8), 1, "k >= 2"), ((20, 4, 8), 2, "m = 1")])
def test_bad_input(shape: tuple[int, int, int], m: int, match: str) -> None:
    X = np.random.default_rng(0).standard_normal(shape)
    with pytest.raises(ValueError, match=match):
        exact_single_head(X, X, m=m)


def test_bad_options() -> None:
    X = np.random.default_rng(0).standard_normal((10, 4, 8))
    with pytest.raises(ValueError, match="weighting"):
        exact_single_head(X, X, ExactSettings(weighting="log"))
    with pytest.raises(ValueError, match="rank_tol"):
        exact_single_head(X, X, ExactSettings().merged(rank_tol=0.0))
    with pytest.raises(ValueError, match="shape"):
        exact_single_head(X, X[:, :3])
    with pytest.raises(ValueError, match="k < d"):
        exact_sample_size(4, 4)


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 60), n=st.integers(1, 12), rank=st.integers(1, 12), block=st.integers(1, 25),
       data=st.data())
def test_streaming_lstsq_matches_dense(rows: int, n: int, rank: int, block: int, data) -> None:
    """Blockwise TSQR gives numpy's minimum-norm least-squares solution, rank and residual."""
    r = min(rank, rows, n)
    # rank exactly r: a product of two full-rank factors with condition numbers <= 10
    A = data.draw(well_conditioned(rows, r), label="L") @ data.draw(well_conditioned(r, n), label="R")
    b = data.draw(gaussian_like(rows), label="b")
    sol = _streaming_lstsq(((A[i:i + block], b[i:i + block]) for i in range(0, rows, block)), n, 1e-9)
    x, _, rank_np, _ = np.linalg.lstsq(A, b, rcond=1e-9)
    assert sol.rank == rank_np == r
    assert np.allclose(sol.x, x, atol=1e-8 * (1 + np.linalg.norm(x)))
    assert sol.rows == rows
    assert sol.residual == pytest.approx(np.linalg.norm(A @ x - b), abs=1e-8 * (1 + np.linalg.norm(b)))


@pytest.mark.parametrize("d,k", [(8, 2), (8, 4), (8, 7), (16, 4), (16, 15)])
def test_sample_size_covers_both_systems(d: int, k: int) -> None:
    per_w, per_theta = exact_equation_counts(d, k)
    S = exact_sample_size(d, k)
    assert (S - 3) * per_w >= d * d and (S - 3) * per_theta >= d * d
    assert (S - 4) * per_w < d * d or (S - 4) * per_theta < d * d


def test_examples_beyond_the_system_cap_check_the_solution() -> None:
    """Only max_examples enter the linear systems; every example enters the training error."""
    d, k = 8, 4
    truth, other = plant(d, k, 1, seed=8), plant(d, k, 1, seed=9)
    X = sample_inputs(60, k, d, rng=np.random.default_rng(8), distribution="gaussian")
    Y = np.concatenate([truth(X[:40]), other(X[40:])])
    res = exact_single_head(X, Y, ExactSettings(max_examples=30))
    assert res.phase("exact-w").figures["examples_used"] == 30
    assert not res.converged and res.train_error > 1e-6
    clean = exact_single_head(X, truth(X), ExactSettings(max_examples=30), truth=truth)
    assert clean.converged and clean.samples_used == 30
    assert truth.distance(clean.model).theta_error <= 1e-6
    with pytest.raises(ValueError, match="max_examples"):
        exact_single_head(X, Y, ExactSettings(max_examples=0))


def test_settings_resolve_the_example_counts_from_the_budget() -> None:
    """ExactSettings.resolve fills the systems' cap (10 ×) and the examples read (20 × the budget) where the
    route applies, leaves them unset where it does not, and keeps values that were given; the route reads only
    ``train_examples`` examples, so one beyond them cannot spoil the training error."""
    d, k = 8, 4
    S = exact_sample_size(d, k)
    s = ExactSettings().resolve(ProblemSize(d, k, 1, 10_000))
    assert (s.max_examples, s.train_examples) == (10 * S, 20 * S)
    assert s.resolve(ProblemSize(d, k, 1)) == s  # idempotent
    assert ExactSettings(train_examples=7).resolve(ProblemSize(d, k, 1)).train_examples == 7
    assert ExactSettings().resolve(ProblemSize(4, 4, 1)).max_examples is None  # k = d: the route does not apply
    truth = plant(d, k, 1, seed=3)
    X = sample_inputs(60, k, d, rng=np.random.default_rng(3), distribution="gaussian")
    Y = truth(X)
    Y[50:] += 1.0  # labels no attention layer gives, beyond the examples read
    res = exact_single_head(X, Y, ExactSettings(train_examples=50))
    assert res.converged and res.phase("exact-w").figures["examples_given"] == 50
    assert not exact_single_head(X, Y).converged  # all 60 read: the training error sees the bad labels


def test_advice_accounts_for_dropped_examples() -> None:
    """With half the examples dropped, the advised count doubles the usable examples still missing."""
    d, k = 8, 4
    truth = plant(d, k, 1, seed=10)
    X = sample_inputs(6, k, d, rng=np.random.default_rng(10), distribution="gaussian")
    X[:3, 1] = X[:3, 0]
    res = exact_single_head(X, truth(X))
    assert not res.converged and res.phase("exact-w").figures["examples_dropped"] == 3
    more = int(re.search(r"need about (\d+) more examples", res.reason).group(1))
    missing_usable = exact_sample_size(d, k) - 3
    assert more == 2 * missing_usable
