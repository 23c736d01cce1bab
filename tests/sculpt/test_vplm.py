"""VP-LM from random starts (``sculpt.vplm.vp_lm``): recovers planted and torch-like layers, is reproducible,
gives up honestly, rejects bad input."""

from __future__ import annotations

import numpy as np
import pytest

from sculpt import LearnResult, plant, sample_inputs
from sculpt.vplm import vp_lm


@pytest.mark.parametrize("d, k, m, kw", [(8, 4, 2, {}), (8, 4, 3, {}), (8, 4, 2, {"weak_head": 0.01})])
def test_vp_lm_recovers_planted_layers_from_random_starts(d, k, m, kw):
    truth = plant(d, k, m, seed=3, **kw)
    X = sample_inputs(3000, k, d, rng=4)
    res = vp_lm(X, truth(X), m, seed=0)
    assert isinstance(res, LearnResult) and res.method == "vp-lm" and res.converged
    assert res.validation_error <= 1e-12 and res.info["stop"] == "validated"
    dist = truth.distance(res.model)
    assert dist.max_theta_error < 1e-6 and dist.max_w_error < 1e-6
    assert truth.prediction_error(res.model, sample_inputs(2000, k, d, rng=5)) < 1e-12
    starts = res.info["starts"]
    assert starts[-1]["validation_error"] == res.validation_error and res.iterations == sum(
        s["iterations"] for s in starts
    )
    assert res.samples_used == max(s["examples"] for s in starts) + res.info["validation_examples"]


def test_vp_lm_recovers_nearly_uniform_attention_heads():
    """Heads of torch's own scale (‖Θ_i‖_F ≈ 0.5, attention nearly uniform), where phase 1 finds no
    single-token row and L-BFGS on a growing subset stalled: Gauss–Newton on the reduced problem converges."""
    rng = np.random.default_rng(0)
    d, k, m, r = 8, 4, 2, 4
    Q, K, V, O = (rng.standard_normal((m, d, r)) / np.sqrt(d) for _ in range(4))
    from sculpt import MultiHeadAttention

    truth = MultiHeadAttention(Q @ K.transpose(0, 2, 1) / np.sqrt(r), V @ O.transpose(0, 2, 1))
    assert np.linalg.norm(truth.thetas, axis=(1, 2)).max() < 1.0
    X = sample_inputs(4000, k, d, rng=1)
    res = vp_lm(X, truth(X), m, seed=2)
    assert res.converged and truth.distance(res.model).max_theta_error < 1e-6


def test_vp_lm_is_reproducible_and_gives_up_honestly():
    truth = plant(8, 4, 2, seed=1)
    X = sample_inputs(1500, 4, 8, rng=2)
    Y = truth(X)
    a, b = vp_lm(X, Y, 2, seed=7), vp_lm(X, Y, 2, seed=7)
    assert np.array_equal(a.model.thetas, b.model.thetas) and a.info["starts"] == [
        {**s, "time": t["time"]} for s, t in zip(b.info["starts"], a.info["starts"])
    ]
    noisy = Y + 0.3 * np.random.default_rng(0).standard_normal(Y.shape)
    res = vp_lm(X, noisy, 2, seed=0, restarts=2, max_examples=256)
    assert not res.converged and res.validation_error > 1e-3 and res.model is not None
    assert res.info["stop"] == "2 start(s) without validating" and len(res.info["starts"]) == 2
    assert "without validating" in res.reason


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        ({"restarts": 0}, ValueError, "restarts"),
        ({"init_scale": -1.0}, ValueError, "init_scale"),
        ({"tol": float("nan")}, ValueError, "tol"),
        ({"validation_size": 1500}, ValueError, "validation_size"),
        ({"time_limit": 0.0}, ValueError, "time_limit"),
        ({"restarts": 2.5}, TypeError, "restarts"),
        ({"init_scale": "big"}, TypeError, "init_scale"),
    ],
)
def test_vp_lm_rejects_bad_options(kw, exc, match):
    truth = plant(6, 3, 1, seed=0)
    X = sample_inputs(1500, 3, 6, rng=0)
    with pytest.raises(exc, match=match):
        vp_lm(X, truth(X), 1, **kw)
    with pytest.raises(ValueError, match="shape"):
        vp_lm(X[:, :, :5], truth(X), 1)


def test_vp_lm_runs_in_the_recovery_sweep():
    """``sculpt bench`` runs VP-LM as the registered route of that name (one name everywhere): ``learn`` with
    the method's options as settings."""
    from sculpt.bench.methods import PEERS, get_method, refusal, registered

    assert "vp-lm" in registered() and "vp-lm" not in PEERS
    truth = plant(6, 3, 2, seed=4)
    X = sample_inputs(1500, 3, 6, rng=3)
    res = get_method("vp-lm")(X, truth(X), 2, seed=1, truth=truth, vp_lm={"restarts": 3})
    starts = res.phase("vp-lm").figures["starts"]
    assert res.method == "vp-lm" and res.info["route"] == "vp-lm" and res.converged and 1 <= len(starts) <= 3
    assert res.info["settings"]["vp_lm"]["restarts"] == 3
    from sculpt.bench.grid import Cell

    assert "needs N >=" in refusal("vp-lm", Cell(regime="generic", d=6, k=3, m=2, N=5))


def test_learn_runs_vp_lm_as_a_route_with_its_settings():
    """``learn(method="vp-lm")``: the learner's validation split, ``vp_lm`` settings, a "vp-lm" phase record
    with every start, and the samples it read (the largest subset fitted plus the validation split)."""
    from sculpt import learn
    from sculpt.learner import min_examples

    truth = plant(8, 4, 2, seed=2)
    X = sample_inputs(3000, 4, 8, rng=1)
    res = learn(X, truth(X), 2, method="vp-lm", seed=0, truth=truth, vp_lm={"restarts": 2})
    rec = res.phase("vp-lm")
    assert res.converged and res.method == "vp-lm" and 1 <= len(rec.figures["starts"]) <= 2
    assert res.info["truth"]["max_theta_error"] < 1e-6
    assert res.samples_used == rec.figures["examples"] + res.info["validation_examples"]
    assert res.info["settings"]["vp_lm"]["restarts"] == 2
    assert min_examples("vp-lm", 8, 4, 2) == min_examples("gradient", 8, 4, 2)
    with pytest.raises(ValueError, match="restarts"):
        learn(X, truth(X), 2, method="vp-lm", vp_lm={"restarts": 0})


def test_vp_lm_reads_its_defaults_from_vp_lm_settings():
    """The settings object and the same values as keywords give the same run; init_scale resolves to 1/d; the
    subsets stop at max_examples; the starts share vp_lm_starts with learn."""
    from sculpt.settings import VpLmSettings
    from sculpt.vplm import vp_lm_starts

    truth = plant(6, 3, 2, seed=4)
    X = sample_inputs(1500, 3, 6, rng=3)
    Y = truth(X)
    a = vp_lm(X, Y, 2, VpLmSettings(restarts=1, max_examples=128), seed=2)
    b = vp_lm(X, Y, 2, seed=2, restarts=1, max_examples=128)
    assert np.array_equal(a.model.thetas, b.model.thetas) and a.info["init_scale"] == 1 / 6
    assert len(a.info["starts"]) == 1 and a.info["starts"][0]["examples"] <= 128
    gen = np.random.default_rng(0)
    fit = vp_lm_starts(X[:1000], Y[:1000], X[1000:], Y[1000:], 2, gen, VpLmSettings(restarts=2), tol=1e-12)
    assert fit.stop == "validated" and fit.validation_error <= 1e-12 and 1 <= len(fit.starts) <= 2
    late = vp_lm_starts(X[:1000], Y[:1000], X[1000:], Y[1000:], 2, gen, tol=1e-12, deadline=0.0)
    assert late.stop == "time limit" and late.best is None and late.model is None


def test_vp_lm_with_matrix_free_steps_recovers_a_planted_layer(monkeypatch):
    """With ``matrix_free_above`` below m·d², every start's LM solves its steps by CG (no normal equations are
    built) and VP-LM from random starts still recovers the planted layer exactly."""
    from sculpt.phases import polish as polish_module
    from sculpt.settings import PolishSettings

    monkeypatch.setattr(polish_module, "_normal_equations", None)  # any dense build would fail
    truth = plant(8, 4, 2, seed=3)
    X = sample_inputs(3000, 4, 8, rng=4)
    res = vp_lm(X, truth(X), 2, seed=0, polish_settings=PolishSettings(matrix_free_above=0))
    assert res.converged and res.validation_error <= 1e-12
    assert truth.distance(res.model).max_theta_error < 1e-6
