"""from_torch / to_torch against torch.nn.MultiheadAttention (float64)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (optional extra 'sculpt-attention[torch]')")

from sculpt import MultiHeadAttention, from_torch, plant, sample_inputs, to_torch  # noqa: E402


def torch_forward(module, X: np.ndarray) -> np.ndarray:
    t = torch.from_numpy(X)
    with torch.no_grad():
        return module(t, t, t, need_weights=False)[0].numpy()


@pytest.mark.parametrize("d, h", [(1, 1), (4, 1), (6, 2), (8, 4), (9, 3), (16, 2)])
@pytest.mark.parametrize("distribution", ["boolean", "gaussian"])
def test_from_torch_matches_torch_forward(d, h, distribution):
    torch.manual_seed(d * 10 + h)
    module = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True).double()
    with torch.no_grad():  # larger weights than the default init, so attention is far from uniform
        module.in_proj_weight.mul_(3.0)
    model = from_torch(module)
    assert (model.m, model.d) == (h, d)
    X = sample_inputs(64, 5, d, rng=d + h, distribution=distribution)
    np.testing.assert_allclose(model(X), torch_forward(module, X), rtol=0, atol=1e-10)


def test_from_torch_float32_module_is_converted_to_float64():
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(4, 2, bias=False, batch_first=True)  # float32 weights
    model = from_torch(module)
    assert model.thetas.dtype == np.float64
    X = sample_inputs(16, 3, 4, rng=0)
    expected = torch_forward(module.double(), X)
    np.testing.assert_allclose(model(X), expected, atol=1e-10)


def test_from_torch_eval_mode_with_dropout_is_accepted():
    module = torch.nn.MultiheadAttention(4, 2, bias=False, batch_first=True, dropout=0.1).double().eval()
    X = sample_inputs(8, 3, 4, rng=1)
    np.testing.assert_allclose(from_torch(module)(X), torch_forward(module, X), atol=1e-10)


@pytest.mark.parametrize("kwargs", [
    {"bias": True}, {"batch_first": False}, {"add_bias_kv": True}, {"add_zero_attn": True},
    {"kdim": 3, "vdim": 3}, {"dropout": 0.5},
])
def test_from_torch_rejects_unsupported_configurations(kwargs):
    base = {"bias": False, "batch_first": True}
    module = torch.nn.MultiheadAttention(4, 2, **{**base, **kwargs})
    with pytest.raises(ValueError):
        from_torch(module)


@pytest.mark.parametrize("obj", [torch.nn.Linear(4, 4), "attention", None, np.zeros((2, 4, 4))])
def test_from_torch_rejects_other_objects(obj):
    with pytest.raises(TypeError):
        from_torch(obj)


def test_to_torch_roundtrip_single_head():
    model = plant(6, 3, 1, seed=2)
    module = to_torch(model)
    X = sample_inputs(32, 3, 6, rng=3)
    np.testing.assert_allclose(torch_forward(module, X), model(X), atol=1e-10)
    back = from_torch(module)
    assert model.distance(back).theta_error < 1e-12 and model.distance(back).w_error < 1e-12


def test_to_torch_low_rank_heads():
    rng = np.random.default_rng(4)
    d, m = 6, 3  # head dimension 2: heads of rank <= 2 are representable
    a, b = rng.normal(size=(m, d, 2)), rng.normal(size=(m, 2, d))
    model = MultiHeadAttention(a @ b, rng.normal(size=(m, d, 2)) @ rng.normal(size=(m, 2, d)))
    X = sample_inputs(32, 4, d, rng=5)
    np.testing.assert_allclose(torch_forward(to_torch(model), X), model(X), atol=1e-10)


def test_to_torch_rejects_unrepresentable_layers():
    with pytest.raises(ValueError):
        to_torch(plant(8, 4, 2, seed=0))  # full-rank heads, head dimension 4
    with pytest.raises(ValueError):
        to_torch(plant(9, 4, 2, seed=0))  # 9 not divisible by 2
    with pytest.raises(ValueError):
        to_torch(plant(8, 4, 1, seed=0), num_heads=2)
    with pytest.raises(TypeError):
        to_torch("model")
