"""MultiHeadAttention: forward against a direct per-example computation, symmetries, stability, io, metrics."""
from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import softmax
from strategies import gaussian_like, layers_with_inputs, shapes

import sculpt.toolkit.forward_pass as model_mod  # the kernels behind sculpt.model
from sculpt import MultiHeadAttention, sample_inputs
from sculpt.model import softmax_axis1

SETTINGS = settings(max_examples=25, deadline=None)


def direct_forward(thetas: np.ndarray, ws: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Σ_i softmax(XΘ_iXᵀ) X W_i one example and one head at a time (the reference)."""
    out = np.zeros(X.shape)
    for n in range(X.shape[0]):
        for i in range(thetas.shape[0]):
            P = softmax(X[n] @ thetas[i] @ X[n].T, axis=1)
            out[n] += P @ X[n] @ ws[i]
    return out


def random_model(rng: np.random.Generator, m: int, d: int, scale: float = 1.0) -> MultiHeadAttention:
    return MultiHeadAttention(rng.normal(size=(m, d, d)) * scale / d, rng.normal(size=(m, d, d)) / np.sqrt(d))


sizes = shapes(N=(1, 6), k=(1, 5), d=(1, 5), m=(1, 3))


@SETTINGS
@given(layers_with_inputs(sizes, st.sampled_from(["boolean", "gaussian"]), theta_norm=3.0))
def test_forward_matches_direct_loop(layer_and_X):
    model, X = layer_and_X
    np.testing.assert_allclose(model(X), direct_forward(model.thetas, model.ws, X), rtol=1e-12, atol=1e-12)


def test_forward_is_chunked_consistently(monkeypatch):
    rng = np.random.default_rng(0)
    model = random_model(rng, 2, 4)
    X = sample_inputs(37, 3, 4, rng=1)
    full = model(X)
    monkeypatch.setattr(model_mod, "FORWARD_CHUNK_ELEMENTS", 50)  # forces chunks of a couple of sequences
    assert model_mod.chunk_size(3, 4, 2) < 37
    np.testing.assert_allclose(model(X), full, rtol=0, atol=1e-14)
    np.testing.assert_allclose(model.attention(X), MultiHeadAttention(model.thetas, model.ws).attention(X))


def test_single_sequence_shape():
    rng = np.random.default_rng(1)
    model = random_model(rng, 2, 3)
    X = sample_inputs(4, 5, 3, rng=2)
    assert model(X[1]).shape == (5, 3)
    np.testing.assert_allclose(model(X[1]), model(X)[1], rtol=0, atol=1e-15)
    assert model.attention(X[1]).shape == (2, 5, 5)
    assert model.attention(X).shape == (4, 2, 5, 5)


@SETTINGS
@given(layers_with_inputs(sizes, "boolean", theta_norm=2.0))
def test_attention_is_row_stochastic_and_matches_softmax(layer_and_X):
    model, X = layer_and_X
    P = model.attention(X)
    np.testing.assert_allclose(P.sum(axis=-1), 1.0, atol=1e-14)
    ref = softmax(np.einsum("nap,ipq,nbq->niab", X, model.thetas, X), axis=-1)
    np.testing.assert_allclose(P, ref, atol=1e-14)


@SETTINGS
@given(layers_with_inputs(sizes, "boolean", theta_norm=2.0), st.data())
def test_permuting_tokens_permutes_output_rows(layer_and_X, data):
    model, X = layer_and_X
    perm = np.array(data.draw(st.permutations(range(X.shape[1])), label="token permutation"))
    np.testing.assert_allclose(model(X[:, perm]), model(X)[:, perm], rtol=1e-12, atol=1e-12)


@SETTINGS
@given(layers_with_inputs(sizes, "boolean", theta_norm=2.0), st.data())
def test_permuting_heads_changes_nothing(layer_and_X, data):
    model, X = layer_and_X
    perm = np.array(data.draw(st.permutations(range(model.m)), label="head permutation"))
    other = MultiHeadAttention(model.thetas[perm], model.ws[perm])
    np.testing.assert_allclose(other(X), model(X), rtol=1e-12, atol=1e-12)


@SETTINGS
@given(st.integers(1, 6), st.integers(1, 5), st.data())
def test_softmax_kernel_invariant_to_row_constant(k, c, data):
    L = data.draw(gaussian_like((3, k, c), scale=5.0), label="logits")
    # one constant per softmax row (axis 1 is the key axis)
    shift = data.draw(gaussian_like((3, 1, c), scale=100.0), label="shift")
    np.testing.assert_allclose(softmax_axis1(L + shift), softmax_axis1(L.copy()), atol=1e-13)


def test_logit_row_shift_through_parameters_changes_nothing():
    # With a token coordinate fixed to 1, Θ + u e_dᵀ adds x_aᵀu to every logit of row a: same outputs.
    rng = np.random.default_rng(3)
    d, k, m = 5, 4, 2
    model = random_model(rng, m, d, scale=3.0)
    X = sample_inputs(20, k, d, rng=4)
    X[:, :, -1] = 1.0
    thetas = model.thetas.copy()
    thetas[:, :, -1] += rng.normal(size=(m, d)) * 10
    shifted = MultiHeadAttention(thetas, model.ws)
    np.testing.assert_allclose(shifted(X), model(X), rtol=1e-11, atol=1e-11)


def test_huge_logits_stay_finite_and_correct():
    rng = np.random.default_rng(5)
    d, k, m = 6, 5, 2
    thetas = rng.normal(size=(m, d, d))
    X = sample_inputs(30, k, d, rng=6)
    logits = np.einsum("nap,ipq,nbq->niab", X, thetas, X)
    thetas *= 1e3 / np.abs(logits).max()  # logits up to 1e3 in magnitude
    model = MultiHeadAttention(thetas, rng.normal(size=(m, d, d)))
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow to 0 is expected
        out = model(X)
        P = model.attention(X)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(P))
    np.testing.assert_allclose(out, direct_forward(model.thetas, model.ws, X), rtol=1e-10, atol=1e-10)


def test_constructor_and_params_roundtrip():
    rng = np.random.default_rng(7)
    model = random_model(rng, 3, 4)
    assert (model.m, model.d, model.n_params) == (3, 4, 96)
    assert model.thetas.dtype == np.float64 and model.ws.dtype == np.float64
    again = MultiHeadAttention.from_params(model.params(), 3, 4)
    assert np.array_equal(again.thetas, model.thetas) and np.array_equal(again.ws, model.ws)
    single = MultiHeadAttention(np.eye(3), np.eye(3))  # a (d, d) pair is one head
    assert single.m == 1 and single.d == 3
    src = rng.normal(size=(1, 2, 2))
    copy = MultiHeadAttention(src, src)
    src[0, 0, 0] = 99.0
    assert copy.thetas[0, 0, 0] != 99.0  # the constructor copies


@pytest.mark.parametrize("thetas, ws, exc", [
    (np.zeros((2, 3, 3)), np.zeros((2, 3, 4)), ValueError),
    (np.zeros((2, 3, 3)), np.zeros((1, 3, 3)), ValueError),
    (np.zeros((2, 3, 4)), np.zeros((2, 3, 4)), ValueError),
    (np.zeros((3,)), np.zeros((3,)), ValueError),
    (np.full((1, 2, 2), np.nan), np.zeros((1, 2, 2)), ValueError),
    (np.zeros((1, 2, 2)), np.full((1, 2, 2), np.inf), ValueError),
    ("abc", np.zeros((1, 2, 2)), TypeError),
    (np.ones((1, 2, 2)) * 1j, np.zeros((1, 2, 2)), TypeError),  # complex is not silently cast to its real part
])
def test_constructor_rejects_bad_parameters(thetas, ws, exc):
    with pytest.raises(exc):
        MultiHeadAttention(thetas, ws)


@pytest.mark.parametrize("X, exc", [
    (np.zeros((2, 3, 5)), ValueError),  # wrong d
    (np.zeros(4), ValueError),  # 1-D
    (np.zeros((1, 2, 3, 4)), ValueError),  # 4-D
    (np.full((2, 3, 4), np.nan), ValueError),
    (np.zeros((0, 3, 4)), None),  # empty batch is fine
    ("tokens", TypeError),
    (np.ones((2, 3, 4), dtype=complex), TypeError),
])
def test_forward_rejects_bad_inputs(X, exc):
    model = random_model(np.random.default_rng(8), 2, 4)
    if exc is None:
        assert model(X).shape == (0, 3, 4)
        return
    with pytest.raises(exc):
        model(X)
    with pytest.raises(exc):
        model.attention(X)


def test_save_load_roundtrip_exact(tmp_path):
    model = random_model(np.random.default_rng(9), 3, 5)
    path = tmp_path / "layer.model"  # no .npz suffix appended
    model.save(path)
    assert path.exists()
    loaded = MultiHeadAttention.load(path)
    assert np.array_equal(loaded.thetas, model.thetas) and np.array_equal(loaded.ws, model.ws)
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["metadata"]))
    assert meta == {"format": "sculpt.MultiHeadAttention", "version": 1, "m": 3, "d": 5}
    MultiHeadAttention.load(str(path))  # str paths too


def _write_npz(path, **arrays):
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def test_load_rejects_corrupted_and_foreign_files(tmp_path):
    model = random_model(np.random.default_rng(10), 2, 3)
    good = tmp_path / "good.npz"
    model.save(good)
    raw = good.read_bytes()
    def meta(**kw: object) -> np.ndarray:
        return np.array(json.dumps({"format": "sculpt.MultiHeadAttention", "version": 1, "m": 2, "d": 3, **kw}))

    cases = {
        "missing.npz": None,
        "garbage.npz": b"this is not a zip archive at all",
        "truncated.npz": raw[: len(raw) // 2],
        "empty.npz": b"",
    }
    for name, content in cases.items():
        if content is not None:
            (tmp_path / name).write_bytes(content)
    _write_npz(tmp_path / "foreign.npz", a=np.zeros(3))
    _write_npz(tmp_path / "wrongformat.npz", thetas=model.thetas, ws=model.ws, metadata=meta(format="other"))
    _write_npz(tmp_path / "wrongversion.npz", thetas=model.thetas, ws=model.ws, metadata=meta(version=99))
    _write_npz(tmp_path / "wrongshape.npz", thetas=model.thetas, ws=model.ws, metadata=meta(m=3))
    _write_npz(tmp_path / "badjson.npz", thetas=model.thetas, ws=model.ws, metadata=np.array("{not json"))
    _write_npz(tmp_path / "nanvalues.npz", thetas=model.thetas * np.nan, ws=model.ws, metadata=meta())
    _write_npz(tmp_path / "intarrays.npz", thetas=np.zeros((2, 3, 3), int), ws=model.ws, metadata=meta())
    np.save(tmp_path / "plain.npy", np.zeros(3))
    names = list(cases) + ["foreign.npz", "wrongformat.npz", "wrongversion.npz", "wrongshape.npz",
                           "badjson.npz", "nanvalues.npz", "intarrays.npz", "plain.npy"]
    for name in names:
        with pytest.raises(ValueError):
            MultiHeadAttention.load(tmp_path / name)
    with zipfile.ZipFile(good) as z:  # sanity: the good file really is an npz with the three arrays
        assert sorted(z.namelist()) == ["metadata.npy", "thetas.npy", "ws.npy"]


def test_distance_zero_to_itself_and_invariant_under_head_permutation():
    rng = np.random.default_rng(11)
    model = random_model(rng, 4, 3)
    dist = model.distance(model)
    assert dist.theta_error == 0.0 and dist.w_error == 0.0 and dist.permutation == (0, 1, 2, 3)
    perm = np.array([2, 0, 3, 1])
    shuffled = MultiHeadAttention(model.thetas[perm], model.ws[perm])
    dist = model.distance(shuffled)
    assert dist.theta_error == 0.0 and dist.w_error == 0.0
    assert all(perm[dist.permutation[i]] == i for i in range(4))  # head i is matched to its copy
    noisy = MultiHeadAttention(shuffled.thetas + 1e-3 * rng.normal(size=(4, 3, 3)), shuffled.ws)
    dn = model.distance(noisy)
    expected = np.linalg.norm(noisy.thetas - shuffled.thetas) / np.linalg.norm(model.thetas)
    assert dn.theta_error == pytest.approx(expected, rel=1e-12)
    assert dn.w_error == 0.0 and dn.max_theta_error >= dn.theta_error * 0.5 > 0


def test_prediction_error():
    rng = np.random.default_rng(12)
    model = random_model(rng, 2, 4, scale=2.0)
    X = sample_inputs(200, 3, 4, rng=13)
    assert model.prediction_error(model, X) == 0.0
    other = MultiHeadAttention(model.thetas, model.ws * 1.1)  # F̂ = 1.1 F exactly
    assert model.prediction_error(other, X) == pytest.approx(0.01, rel=1e-10)
    zero = MultiHeadAttention(model.thetas, np.zeros_like(model.ws))
    assert zero.prediction_error(zero, X) == 0.0
    assert zero.prediction_error(model, X) == float("inf")


def test_metrics_reject_mismatched_models():
    rng = np.random.default_rng(14)
    a, b, c = random_model(rng, 2, 3), random_model(rng, 3, 3), random_model(rng, 2, 4)
    with pytest.raises(ValueError):
        a.distance(b)
    with pytest.raises(ValueError):
        a.distance(c)
    with pytest.raises(TypeError):
        a.distance("model")
    with pytest.raises(ValueError):
        a.prediction_error(c, sample_inputs(5, 2, 3, rng=0))
