"""The argmax route for peaked heads (sculpt.phases.argmax): detection, the robust Σ̂W, the per-head W split, each
head's Θ from its own attention rows, and the route through ``learn``."""
from __future__ import annotations

import numpy as np
import pytest

from sculpt import learn, plant, sample_inputs
from sculpt.errors import PhaseFailed
from sculpt.phases.argmax import (
    argmax_heads,
    argmax_route_applies,
    head_attention,
    heads_from_attention,
    onehot_fraction,
    robust_sum_w,
)
from sculpt.phases.sum_w import crude_sum_w, estimate_sum_w
from sculpt.settings import Settings

ARGMAX = Settings().argmax  # learn's settings of the route


def _peaked(n: int, seed: int, scale: float = 40.0):
    model = plant(8, 4, 2, seed=seed, scale=scale)
    X = sample_inputs(n, 4, 8, rng=np.random.default_rng([seed, 8, 4, 2, 0]))
    return model, X, model(X)


@pytest.mark.parametrize("seed", [0, 3])
def test_peaked_heads_recovered_before_any_polish(seed: int) -> None:
    model, X, Y = _peaked(1500, seed)
    W1, _ = estimate_sum_w(X, Y)
    rng = np.random.default_rng(seed)
    W, fig = robust_sum_w(X, Y, [W1, crude_sum_w(X, Y)], ARGMAX, rng=rng)
    assert len(fig["exact_row_fraction_per_start"]) == 2 + ARGMAX.robust_perturbed
    S = model.ws.sum(0)
    assert np.linalg.norm(W - S) / np.linalg.norm(S) < 1e-6
    assert onehot_fraction(X, Y, W, ARGMAX.onehot_tol) > 0.2
    thetas, ws, recs = argmax_heads(X, Y, W, 2, ARGMAX, rng=rng, truth=model)
    assert [r.name for r in recs] == ["2-sculpt", "3-refine", "5-heads"]
    assert recs[0].figures["explained_fraction"] >= ARGMAX.stop_fraction
    assert len(recs[1].figures["refine_rounds"]) <= ARGMAX.refine_rounds
    assert recs[2].truth["best_theta_error"] < 1e-5
    assert recs[2].truth["best_w_error"] < 1e-5


def test_generic_layers_do_not_take_the_route() -> None:
    for seed in range(2):
        model = plant(8, 4, 2, seed=seed)
        X = sample_inputs(1500, 4, 8, rng=seed)
        Y = model(X)
        W, _ = estimate_sum_w(X, Y)
        assert onehot_fraction(X, Y, W, ARGMAX.onehot_tol) < ARGMAX.detect_fraction


def test_route_conditions() -> None:
    f = ARGMAX.min_fraction
    assert argmax_route_applies(0.3, 2, 4, 8, f)
    assert not argmax_route_applies(0.3, 3, 4, 8, f)    # m·k > d: a row does not determine each head's row
    assert not argmax_route_applies(0.3, 1, 4, 8, f)    # m = 1 has its own exact route
    assert not argmax_route_applies(f / 2, 2, 4, 8, f)


def test_head_attention_is_exact_with_the_true_projections() -> None:
    model, X, Y = _peaked(200, 1, scale=2.5)
    P, res, ok = head_attention(X, Y, model.ws)
    A = model.attention(X)                                   # (N, m, k, k)
    assert np.median(res) < 1e-10
    assert np.max(np.abs(P[ok].transpose(0, 2, 1, 3) - A[ok])) < 1e-6


def test_too_few_log_ratios_fail_explicitly() -> None:
    model, X, Y = _peaked(3, 0)
    P, _, ok = head_attention(X, Y, model.ws)
    with pytest.raises(PhaseFailed, match="argmax route"):
        heads_from_attention(X, P, ok, p_min=ARGMAX.p_min)


def test_learn_takes_the_argmax_route_on_peaked_heads() -> None:
    model, X, Y = _peaked(5000, 0)
    res = learn(X, Y, 2, method="sculpt", seed=0, truth=model)
    assert res.converged
    assert res.phase("2-sculpt").figures["route"] == "argmax"
    assert res.phase("4-span").status == "skipped"
    assert res.phase("6-projections").truth["theta_error"] < 1e-4
    assert res.info["truth"]["max_theta_error"] < 1e-6
    off = learn(X, Y, 2, method="sculpt", seed=0, argmax={"enabled": False}, max_sculpt_examples=1500)
    assert "route" not in off.phase("2-sculpt").figures


def test_split_without_a_converging_start_fails_explicitly() -> None:
    from sculpt.phases.argmax import split_projections

    model, X, Y = _peaked(1500, 0)
    W = model.ws.sum(0)
    with pytest.raises(PhaseFailed, match="mixed regression"):
        split_projections(X, Y, W, 2, ARGMAX.merged(restarts=1, max_iter=1, stop_fraction=0.9),
                          rng=np.random.default_rng(0))


def test_moderately_peaked_heads_fall_back_to_the_body_route() -> None:
    """‖Θ_i‖_F = 12: one-hot rows exist (11 %) but the split finds no start; the body route still recovers."""
    model = plant(8, 4, 2, seed=0, scale=12.0)
    X = sample_inputs(5000, 4, 8, rng=7)
    res = learn(X, model(X), 2, method="sculpt", seed=0)
    assert res.converged
    assert all(p.figures.get("route") != "argmax" for p in res.phases if p.name == "2-sculpt")
    assert "fell back to the body route" in res.info.get("argmax_route", "fell back to the body route")
