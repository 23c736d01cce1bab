"""The shared toolkit: one chunked forward pass, one relative MSE, one versions(), one strict JSON writer,
progress reporting, and the packaging around it (grids as package data, CLI modules without a cycle)."""
from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import gaussian_like, pm_one

import sculpt.toolkit.forward_pass as fp
from sculpt.toolkit import (
    Progress,
    ProgressBar,
    attention,
    attention_patterns,
    dumps,
    features,
    forward,
    relative_mse,
    to_jsonable,
    versions,
    write_json,
)

ROOT = Path(__file__).resolve().parents[2]


def direct_forward(thetas: np.ndarray, ws: np.ndarray, X: np.ndarray) -> np.ndarray:
    """F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i by plain einsum over the whole batch (max-shifted softmax)."""
    L = np.einsum("nad,ide,nbe->inab", X, thetas, X)
    L -= L.max(axis=-1, keepdims=True)
    P = np.exp(L)
    P /= P.sum(axis=-1, keepdims=True)
    return np.einsum("inab,nbd,ide->nae", P, X, ws)


@st.composite
def problems(draw):
    """(thetas, ws, X): Θ entries within 3·scale/d (scale 0.3, 3 or 40: near-uniform to saturated attention),
    W entries within 3, ±1 inputs; N up to 97 so that chunks end ragged. Drawn structured (shrinkable)."""
    N, k, d, m = (draw(st.integers(1, 97)), draw(st.integers(1, 6)), draw(st.integers(1, 7)),
                  draw(st.integers(1, 3)))
    scale = draw(st.sampled_from([0.3, 3.0, 40.0]))
    thetas = draw(gaussian_like((m, d, d), scale=scale / d), label="thetas")
    return thetas, draw(gaussian_like((m, d, d)), label="ws"), draw(pm_one((N, k, d)), label="X")


@settings(max_examples=40, deadline=None)
@given(problems(), st.sampled_from([None, 7, 50]))
def test_chunked_forward_equals_direct_einsum(problem, chunk_elements) -> None:
    thetas, ws, X = problem
    N, k, d = X.shape
    m = thetas.shape[0]
    old = fp.FORWARD_CHUNK_ELEMENTS
    try:
        if chunk_elements is not None:  # small chunks: N is rarely a multiple of the chunk size
            fp.FORWARD_CHUNK_ELEMENTS = chunk_elements
        F = forward(thetas, ws, X)
        P = attention_patterns(thetas, X)
        Pa = attention(thetas, X)
        Z = features(thetas, X)
    finally:
        fp.FORWARD_CHUNK_ELEMENTS = old
    ref = direct_forward(thetas, ws, X)
    np.testing.assert_allclose(F, ref, rtol=1e-12, atol=1e-12 * max(1.0, float(np.abs(ref).max())))
    L = np.einsum("nad,ide,nbe->inab", X, thetas, X)
    Pref = np.exp(L - L.max(axis=-1, keepdims=True))
    Pref /= Pref.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(P, Pref.transpose(1, 0, 2, 3), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(Pa, Pref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose((Z @ ws.reshape(m * d, d)).reshape(N, k, d), ref, rtol=1e-12,
                               atol=1e-12 * max(1.0, float(np.abs(ref).max())))


def test_ragged_last_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    thetas, ws = rng.standard_normal((2, 5, 5)) / 3, rng.standard_normal((2, 5, 5))
    X = rng.standard_normal((10, 4, 5))
    monkeypatch.setattr(fp, "FORWARD_CHUNK_ELEMENTS", 3 * 4 * 2 * 5)  # chunks of 3 sequences: 3 + 3 + 3 + 1
    assert fp.chunk_size(4, 5, 2) == 3
    np.testing.assert_allclose(forward(thetas, ws, X), direct_forward(thetas, ws, X), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(forward(thetas, ws, X[9:]), direct_forward(thetas, ws, X[9:]), rtol=1e-13,
                               atol=1e-13)
    assert forward(thetas, ws, X[:0]).shape == (0, 4, 5)


def test_chunked_errors_equal_the_unchunked_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """The error sums run over chunks of examples (``sculpt.settings.ERROR_CHUNK_ELEMENTS``, one place): with
    chunks of 2 sequences (a ragged last one) they equal the error of the whole prediction, and model.prediction_error
    follows the same setting."""
    from sculpt import MultiHeadAttention
    from sculpt import settings as settings_mod
    from sculpt.toolkit import layer_relative_mse

    rng = np.random.default_rng(5)
    thetas, ws = rng.standard_normal((2, 5, 5)) / 3, rng.standard_normal((2, 5, 5))
    other_t, other_w = thetas + 0.1 * rng.standard_normal(thetas.shape), ws + 0.1 * rng.standard_normal(ws.shape)
    X = rng.choice([-1.0, 1.0], size=(11, 4, 5))
    Y = direct_forward(other_t, other_w, X)
    whole = relative_mse(direct_forward(thetas, ws, X), Y)
    assert fp.error_chunk(4, 5) == settings_mod.ERROR_CHUNK_ELEMENTS // 20 >= 11  # the default: one chunk here
    assert layer_relative_mse(thetas, ws, X, Y) == pytest.approx(whole, rel=1e-13)
    monkeypatch.setattr(fp, "ERROR_CHUNK_ELEMENTS", 2 * 4 * 5)  # chunks of 2 sequences: 2 + … + 2 + 1
    assert fp.error_chunk(4, 5) == 2
    assert layer_relative_mse(thetas, ws, X, Y) == pytest.approx(whole, rel=1e-13)
    assert layer_relative_mse(thetas, ws, X, Y, chunk=3) == pytest.approx(whole, rel=1e-13)
    truth, model = MultiHeadAttention(other_t, other_w), MultiHeadAttention(thetas, ws)
    assert truth.prediction_error(model, X) == pytest.approx(whole, rel=1e-13)
    assert layer_relative_mse(other_t, other_w, X, Y) < 1e-28  # the labels' own layer
    R = Y - direct_forward(thetas, ws, X)
    rss, yy = fp.residual_sums(thetas, ws, X, Y)  # chunks of 2 sequences here
    assert rss == pytest.approx(float(np.vdot(R, R)), rel=1e-13) and yy == pytest.approx(float(np.vdot(Y, Y)), rel=1e-13)
    bad = thetas.copy()
    bad[0, 0, 0] = np.inf
    with np.errstate(invalid="ignore", over="ignore"):  # inf logits: the prediction is not finite
        assert layer_relative_mse(bad, ws, X, Y) == math.inf


def test_attention_stacks_keep_their_leading_axes() -> None:
    rng = np.random.default_rng(1)
    grid = rng.standard_normal((3, 2, 4, 4))
    X = rng.standard_normal((9, 3, 4))
    P = attention(grid, X)
    assert P.shape == (3, 2, 9, 3, 3)
    np.testing.assert_allclose(P[2, 1], attention(grid[2, 1], X), rtol=0, atol=0)
    np.testing.assert_allclose(P.sum(axis=-1), 1.0, rtol=1e-14)
    assert attention(np.empty((0, 4, 4)), X).shape == (0, 9, 3, 3)


def test_forward_does_not_overflow_on_peaked_attention() -> None:
    thetas = np.eye(3)[None] * 1e3
    X = np.array([[[1.0, 0, 0], [0, 1.0, 0]]])
    F = forward(thetas, np.eye(3)[None], X)
    np.testing.assert_allclose(F, X)  # each token attends to itself


def test_relative_mse_definition_and_edge_cases() -> None:
    Y = np.array([[3.0, 4.0]])
    assert relative_mse(Y, Y) == 0.0
    assert relative_mse(np.zeros_like(Y), Y) == 1.0
    assert relative_mse(Y + np.array([[0.0, 1.0]]), Y) == pytest.approx(1 / 25)
    assert relative_mse(np.zeros(2), np.zeros(2)) == 0.0
    assert relative_mse(np.ones(2), np.zeros(2)) == math.inf
    assert relative_mse(np.array([np.nan, 1.0]), np.ones(2)) == math.inf
    with pytest.raises(ValueError, match="shapes differ"):
        relative_mse(np.ones(3), np.ones(2))


def test_public_names_stay_importable_and_share_the_kernel() -> None:
    from sculpt.bench import trials
    from sculpt.model import MultiHeadAttention
    from sculpt.model import forward as model_forward
    from sculpt.phases import projections

    assert model_forward is forward and projections.attention is attention and projections.features is features
    rng = np.random.default_rng(0)
    model = MultiHeadAttention(rng.standard_normal((2, 4, 4)), rng.standard_normal((2, 4, 4)))
    X = rng.standard_normal((30, 3, 4))
    Y = model(X)
    np.testing.assert_array_equal(projections.predict(model.thetas, model.ws, X), Y)
    np.testing.assert_array_equal(trials.predict(model, X), Y)
    Y2 = Y + 0.01 * rng.standard_normal(Y.shape)
    assert projections.layer_relative_mse(model.thetas, model.ws, X, Y2) == relative_mse(Y, Y2)
    assert model.prediction_error(MultiHeadAttention(model.thetas, 1.1 * model.ws), X) == pytest.approx(0.01)


# ------------------------------------------------------------------------------------------ JSON
def _strict_loads(text: str):
    def refuse(name: str):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


@dataclass
class _Point:
    x: float
    label: str


class _WithToDict:
    def to_dict(self):
        return {"v": np.float32(0.5), "bad": float("-inf")}


def test_json_writer_writes_null_for_non_finite_numbers(tmp_path: Path) -> None:
    value = {"nan": float("nan"), "inf": np.inf, "ninf": np.float64("-inf"), "ok": np.float32(1.5),
             "ints": np.arange(3), "bools": (np.bool_(True), False), "nested": [{"a": np.array([np.nan, 2.0])}],
             "scalar_array": np.array(7), "path": tmp_path, "point": _Point(np.nan, "p"), "obj": _WithToDict(),
             "set": {3, 1}, 4: "int key", "none": None}
    path = write_json(tmp_path / "sub" / "out.json", value)
    doc = _strict_loads(path.read_text())
    assert doc["nan"] is None and doc["inf"] is None and doc["ninf"] is None and doc["ok"] == 1.5
    assert doc["ints"] == [0, 1, 2] and doc["bools"] == [True, False] and doc["nested"] == [{"a": [None, 2.0]}]
    assert doc["scalar_array"] == 7 and doc["path"] == str(tmp_path) and doc["point"] == {"x": None, "label": "p"}
    assert doc["obj"] == {"v": 0.5, "bad": None} and doc["set"] == [1, 3] and doc["4"] == "int key"
    assert doc["none"] is None
    assert _strict_loads(dumps({"x": [np.nan, np.inf]})) == {"x": [None, None]}


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                                max_size=4),
                    max_leaves=20))
def test_json_writer_output_always_parses_strictly(value) -> None:
    doc = _strict_loads(dumps(value))
    again = _strict_loads(dumps(doc))
    assert again == doc  # a fixed point: what it wrote is already plain JSON


def test_jsonable_summaries_keep_records_small() -> None:
    out = to_jsonable({"big": np.ones((20, 20)), "trace": list(range(1000))}, max_array=64)
    assert out["big"] == {"array_shape": [20, 20], "norm": 20.0}
    assert out["trace"]["list_length"] == 1000 and out["trace"]["last"] == 999
    assert to_jsonable(np.ones((20, 20)))[19][19] == 1.0  # no summary unless asked


# ------------------------------------------------------------------------------------------ versions
def test_versions_is_one_flat_dict_of_strings() -> None:
    v = versions()
    assert {"python", "machine", "cpus", "sculpt", "numpy", "scipy", "cvxpy", "torch"} <= set(v)
    assert all(isinstance(key, str) and isinstance(val, str) for key, val in v.items())
    v["python"] = "changed"
    assert versions()["python"] != "changed"  # callers get a copy of the cached answer


def test_every_caller_uses_the_one_versions() -> None:
    from sculpt import cli
    from sculpt.bench import trials

    assert cli.versions is versions and trials.versions is versions


# ------------------------------------------------------------------------------------------ threads
def test_single_blas_thread_pins_blas_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside the block BLAS runs one thread; after it, the previous counts; ``children`` also sets the thread
    variables spawned processes read (keeping a caller's own value) and removes them again."""
    import os

    from threadpoolctl import threadpool_info

    from sculpt.toolkit import single_blas_thread
    from sculpt.toolkit.threads import THREAD_VARIABLES

    def blas() -> list[int]:
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas()
    for v in THREAD_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    with single_blas_thread():
        assert all(n == 1 for n in blas())
        assert "OMP_NUM_THREADS" not in os.environ
    with single_blas_thread(children=True):
        assert all(n == 1 for n in blas())
        assert os.environ["OMP_NUM_THREADS"] == os.environ["OPENBLAS_NUM_THREADS"] == "1"
        assert os.environ["MKL_NUM_THREADS"] == "3"
    assert blas() == before
    assert "OMP_NUM_THREADS" not in os.environ and os.environ["MKL_NUM_THREADS"] == "3"
    with single_blas_thread(False, children=True):
        assert blas() == before and "OMP_NUM_THREADS" not in os.environ


def test_every_blas_pin_is_the_toolkit_one() -> None:
    """The fits, the certificate and the benchmark's pool use ``single_blas_thread``, not threadpoolctl directly."""
    root = Path(__file__).resolve().parents[2] / "sculpt"
    users = [p for p in root.rglob("*.py") if "threadpoolctl" in p.read_text(encoding="utf-8")]
    assert [p.relative_to(root).as_posix() for p in users] == ["toolkit/threads.py"]


# ------------------------------------------------------------------------------------------ progress
@dataclass
class _Rec:
    name: str
    status: str = "ok"
    time: float = 0.5
    message: str = ""


def test_phase_progress_plain_lines() -> None:
    buf = io.StringIO()
    bar = Progress(True, "sculpt", 2, stream=buf)
    t0 = bar.start("1-sum-w")
    assert isinstance(t0, float)
    bar.note("estimate done")
    bar.end(_Rec("1-sum-w"))
    bar.start("2-sculpt")
    bar.end(_Rec("2-sculpt", "failed", 1.25, "no body"))
    lines = buf.getvalue().splitlines()
    assert lines == ["[sculpt 1/2] 1-sum-w ...", "[sculpt 1/2]   estimate done",
                     "[sculpt 1/2] [#.] 1-sum-w: ok in 0.50 s", "[sculpt 2/2] 2-sculpt ...",
                     "[sculpt 2/2] [##] 2-sculpt: failed in 1.25 s no body"]


def test_progress_disabled_writes_nothing_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    buf = io.StringIO()
    with caplog.at_level("DEBUG", logger="sculpt"):
        bar = Progress(False, "exact", 1, stream=buf)
        bar.start("exact-w")
        bar.end(_Rec("exact-w"))
    assert buf.getvalue() == ""
    assert any("exact-w: ok" in r.getMessage() for r in caplog.records)


def test_progress_bar_uses_tqdm_when_asked() -> None:
    pytest.importorskip("tqdm")
    buf = io.StringIO()
    bar = ProgressBar(3, label="runs", stream=buf, use_tqdm=True)
    bar.write("hello")
    for i in range(3):
        bar.advance(f"step {i}")
    bar.close()
    text = buf.getvalue()
    assert "hello" in text and "3/3" in text


def test_progress_bar_plain_line() -> None:
    buf = io.StringIO()
    bar = ProgressBar(4, stream=buf, width=8)
    bar.advance("a")
    assert buf.getvalue().startswith("[##......] 1/4 | 0m00s elapsed, ~0m00s left | a")


# ------------------------------------------------------------------------------------------ packaging
def test_grids_are_package_data() -> None:
    from importlib import resources

    from sculpt.bench.grid import builtin_grid, builtin_grids

    folder = resources.files("sculpt.bench") / "grids"
    assert {"default.toml", "quick.toml"} <= {p.name for p in folder.iterdir()}
    assert {"default", "quick"} <= set(builtin_grids())
    assert builtin_grid("quick").name == "quick" and builtin_grid("quick").runs()
    with pytest.raises(ValueError, match="no built-in grid 'nope'"):
        builtin_grid("nope")


def test_pyproject_ships_the_grids() -> None:
    tomllib = pytest.importorskip("tomllib")
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = meta["tool"]["setuptools"]["package-data"]
    assert "grids/*.toml" in data["sculpt.bench"]


@pytest.mark.parametrize("first", ["sculpt.bench.cli", "sculpt.cli"])
def test_cli_modules_import_alone_without_a_cycle(first: str) -> None:
    """Each CLI module imports in a fresh interpreter on its own; the bench CLI does not import the main one."""
    code = (f"import sys, {first}\n"
            f"assert ('sculpt.cli' in sys.modules) == ({first!r} == 'sculpt.cli')\n"
            "import sculpt.cli\n"
            "args = sculpt.cli.build_parser().parse_args(['bench', '--quick'])\n"
            "assert args.func.__module__ == 'sculpt.bench.cli' and args.quick\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    src = (ROOT / "sculpt" / "bench" / "cli.py").read_text()
    assert "from ..cli import" not in src and "import sculpt.cli" not in src


def test_a_broken_bench_module_is_an_import_error_not_an_invalid_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    from sculpt import cli

    monkeypatch.setitem(sys.modules, "sculpt.bench.cli", None)  # importing it now raises ImportError
    with pytest.raises(ImportError):
        cli.build_parser()


# ------------------------------------------------------------------------------ small SPD systems in bulk
@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 8), r=st.integers(1, 4), data=st.data())
def test_batched_cholesky_solve_matches_numpy_and_flags_indefinite_systems(n: int, r: int, data) -> None:
    """Every positive definite system is solved as numpy solves it; an indefinite one is flagged (ok False)
    without touching its neighbours; the factors reproduce A."""
    from strategies import well_conditioned

    from sculpt.toolkit.small_spd import batched_cholesky, batched_cholesky_solve

    A = np.stack([(lambda M: M @ M.T)(data.draw(well_conditioned(n, n), label=f"A{t}")) for t in range(5)])
    B = data.draw(gaussian_like((5, n, r)), label="B")
    bad = data.draw(st.integers(0, 4), label="bad")
    A[bad] -= 2.0 * np.linalg.eigvalsh(A[bad])[-1] * np.eye(n)  # negative definite
    X, ok = batched_cholesky_solve(A, B)
    assert ok.tolist() == [t != bad for t in range(5)]
    np.testing.assert_allclose(X[ok], np.linalg.solve(A[ok], B[ok]), rtol=1e-8, atol=1e-8)
    L = np.moveaxis(batched_cholesky(A)[0], -1, 0)
    np.testing.assert_allclose((L @ L.transpose(0, 2, 1))[ok], A[ok], atol=1e-10)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 8), shift=st.floats(0.01, 0.99), data=st.data())
def test_batched_positive_definite_is_the_smallest_eigenvalue_test(n: int, shift: float, data) -> None:
    from sculpt.toolkit.small_spd import batched_positive_definite

    G = data.draw(gaussian_like((6, n, n + 1)), label="G")
    A = G @ G.transpose(0, 2, 1) / (n + 1)
    ev = np.linalg.eigvalsh(A)[:, 0]
    clear = np.abs(ev - shift) > 1e-9
    assert np.array_equal(batched_positive_definite(A, shift)[clear], (ev > shift)[clear])


def test_batched_cholesky_reports_late_failures_reads_the_lower_triangle_and_checks_shapes() -> None:
    from sculpt.toolkit.small_spd import batched_cholesky, batched_cholesky_solve, batched_positive_definite

    A = np.array([[[1.0, 2.0], [2.0, 1.0]], [[4.0, 99.0], [2.0, 3.0]], [[1.0, 0.0], [0.0, np.nan]]])
    L, ok = batched_cholesky(A)  # indefinite at the second pivot; upper triangle ignored; NaN
    assert ok.tolist() == [False, True, False]
    np.testing.assert_allclose(L[:, :, 1], [[2.0, 0.0], [1.0, np.sqrt(2.0)]])
    X, ok = batched_cholesky_solve(A, np.ones((3, 2, 1)))
    assert ok.tolist() == [False, True, False]
    np.testing.assert_allclose(X[1, :, 0], np.linalg.solve([[4.0, 2.0], [2.0, 3.0]], [1.0, 1.0]))
    # a spread of pivots beyond rcond fails the conditioning test
    assert batched_cholesky(np.diag([1.0, 1e-12])[None], rcond=1e-10)[1].tolist() == [False]
    assert batched_cholesky(np.diag([1.0, 1e-12])[None])[1].tolist() == [True]
    assert batched_cholesky_solve(np.zeros((0, 3, 3)), np.zeros((0, 3, 2)))[0].shape == (0, 3, 2)
    assert batched_positive_definite(np.eye(3, dtype=int)[None] * 2, 1.0).tolist() == [True]
    with pytest.raises(ValueError, match="square"):
        batched_cholesky(np.zeros((2, 3, 2)))
    with pytest.raises(ValueError, match="B must have shape"):
        batched_cholesky_solve(np.eye(2)[None], np.ones((4, 2, 1)))
