"""Tests of the PyTorch Adam baseline (sculpt.torch_adam)."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch not installed (optional extra 'torch'): torch_adam is unavailable")

from sculpt.data import plant, sample_inputs
from sculpt.torch_adam import torch_adam


def _data(d: int, k: int, m: int, n: int, seed: int) -> tuple[object, np.ndarray, np.ndarray]:
    truth = plant(d, k, m, seed=seed)
    X = sample_inputs(n, k, d, rng=seed + 1)
    return truth, X, truth(X)


def test_recovers_a_small_single_head_layer() -> None:
    truth, X, Y = _data(4, 2, 1, 300, 0)
    res = torch_adam(X, Y, 1, seed=0, max_iter=2000, tol=1e-15)
    assert res.model is not None and res.method == "adam-torch" and res.samples_used == 300
    X_test = sample_inputs(500, 2, 4, rng=99)
    assert truth.prediction_error(res.model, X_test) < 1e-10
    assert truth.distance(res.model).theta_error < 1e-4
    assert res.converged and res.train_error <= 1e-15


def test_same_seed_same_result_and_restarts_keep_the_best() -> None:
    _, X, Y = _data(4, 2, 2, 200, 3)
    a = torch_adam(X, Y, 2, seed=5, max_iter=60)
    b = torch_adam(X, Y, 2, seed=5, max_iter=60)
    assert np.array_equal(a.model.thetas, b.model.thetas) and a.train_error == b.train_error
    c = torch_adam(X, Y, 2, seed=5, max_iter=60, restarts=3)
    assert len(c.phases) == 3 and c.train_error == min(p.figures["train_error"] for p in c.phases)
    assert c.phases[0].figures["train_error"] == a.train_error   # the first restart is the same run


def test_minibatches_and_the_cosine_schedule() -> None:
    _, X, Y = _data(3, 2, 1, 120, 1)
    res = torch_adam(X, Y, 1, seed=0, max_iter=100, batch_size=32, lr=0.01)
    assert res.iterations == 100 and not res.converged
    lr_min = 1e-5                                                                 # default lr·1e-3
    expected = lr_min + 0.5 * (0.01 - lr_min) * (1 + math.cos(math.pi * 99 / 100))  # cosine at the last step
    assert res.phases[0].figures["final_lr"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("kw, exc", [({"lr": 0.0}, ValueError), ({"max_iter": 0}, ValueError),
                                     ({"restarts": 1.5}, TypeError), ({"lr": 0.01, "lr_min": 0.1}, ValueError),
                                     ({"batch_size": -1}, ValueError), ({"time_limit": -1.0}, ValueError)])
def test_bad_arguments_raise(kw: dict, exc: type) -> None:
    _, X, Y = _data(3, 2, 1, 20, 0)
    with pytest.raises(exc):
        torch_adam(X, Y, 1, **kw)
