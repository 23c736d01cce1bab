"""Property-based fuzzing of the command line (issue 10): for random argument vectors, hostile data, model and
grid files, ``sculpt recover|learn|bench|settings`` exits 0, 1 or 2, never prints a traceback, and a failure
is one error line (after argparse's usage line) naming the flag, file or field; hostile --data / --truth /
--grid files are named in that line.

The learner's routes and the benchmark sweep are replaced by stubs (learn() itself still runs every input
check before calling them), so every example costs milliseconds. ``EXAMPLES`` counts the cases drawn.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import re
import zipfile
from datetime import timedelta
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sculpt import MultiHeadAttention, plant, sample_inputs
from sculpt.cli import main
from sculpt.result import LearnResult

EXAMPLES = {"argv": 120, "data_files": 14, "grid_files": 80}  # data_files: every hostile file once


def _fuzz(name: str):
    return settings(max_examples=EXAMPLES[name], deadline=timedelta(seconds=5),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large])


# ------------------------------------------------------------------------------------------------- stubs
def _fake_route(run):
    """What a route returns, instantly: a zero layer for sculpt (converged, so files get written), none else."""
    m, d = run.m, run.Xtr.shape[2]
    if run.Xtr.shape[0] % 2:
        return LearnResult(model=None, method="stub", train_error=math.inf, reason="stub: no model")
    model = MultiHeadAttention(np.zeros((m, d, d)), np.zeros((m, d, d)))
    return LearnResult(model=model, method="sculpt", train_error=0.0, validation_error=0.0, converged=True,
                       reason="stub: converged")


@contextlib.contextmanager
def _stubbed():
    import dataclasses

    import sculpt.bench.runner as runner
    from sculpt.routes import ROUTES

    routes = {name: dataclasses.replace(route, run=_fake_route) for name, route in ROUTES.items()}
    # the size limits stay in force but at 32 MiB arrays: a drawn --d 1e3 --m 1e3 (8 GiB per parameter, under the
    # real 16 GiB limit) is refused at once instead of allocated
    with mock.patch.dict(ROUTES, routes), mock.patch("sculpt.cli.MAX_ENTRIES", 2**22), \
            mock.patch.object(runner, "run_sweep", side_effect=RuntimeError("stub sweep: grid accepted")), \
            mock.patch("sculpt.result.LearnResult.certificate", new=None):
        yield


def _run(argv: list[str]) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    with _stubbed(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # pragma: no cover - main() must not exit by itself
            pytest.fail(f"main() raised SystemExit({exc.code}) for {argv}")
    return code, [ln for ln in err.getvalue().splitlines() if ln.strip()], out.getvalue()


def _check_failure(code: int, lines: list[str], argv: list[str]) -> str | None:
    """Exit status and stderr shape; returns the error line of a failure (None on success)."""
    text = "\n".join(lines)
    assert code in (0, 1, 2), (code, argv, text)
    assert "Traceback" not in text, (argv, text)
    if code != 2:
        return None
    errors = [ln for ln in lines if not ln.startswith(("usage:", " "))]
    assert len(errors) == 1, (argv, text)  # one error line after the usage line(s)
    assert re.match(r"^sculpt( \w+)?: ", errors[0]), errors[0]
    return errors[0]


# ------------------------------------------------------------------------------------------------- files
def _npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _absurd_npz(names: tuple[str, ...]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for n in names:
            head = io.BytesIO()
            np.lib.format.write_array_header_1_0(head, {"descr": "<f8", "fortran_order": False,
                                                        "shape": (10**7, 10**6, 4)})
            z.writestr(n + ".npy", head.getvalue() + b"\0" * 64)
    return buf.getvalue()


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, dict[str, Path]]:
    """Good and hostile --data, --truth and --grid files (name -> path), written once."""
    root = tmp_path_factory.mktemp("cli_fuzz")
    truth = plant(4, 3, 1, seed=0)
    X = sample_inputs(40, 3, 4, rng=0)
    data = {
        "good": _npz_bytes(X=X, Y=truth(X)),
        "odd": _npz_bytes(X=X[:39], Y=truth(X[:39])),
        "nan": _npz_bytes(X=np.full_like(X, np.nan), Y=truth(X)),
        "huge": _npz_bytes(X=X * 1e200, Y=truth(X)),
        "complex": _npz_bytes(X=X * 1j, Y=truth(X)),
        "shape": _npz_bytes(X=X, Y=truth(X)[:, :2]),
        "missing": _npz_bytes(X=X),
        "absurd": _absurd_npz(("X", "Y")),
        "text": b"X,Y\n1,2\n",
        "empty": b"",
        "npy": (lambda b: (np.save(b, X), b.getvalue())[1])(io.BytesIO()),
        "objects": (lambda b: (np.savez(b, X=np.array([{}], dtype=object), Y=X), b.getvalue())[1])(io.BytesIO()),
    }
    models = {
        "good": None, "absurd": _absurd_npz(("thetas", "ws", "metadata")), "junk": b"\x00\x01junk",
        "nested": _npz_bytes(thetas=truth.thetas, ws=truth.ws, metadata=np.array("[" * 2000 + "]" * 2000)),
        "wrong_d": None,
    }
    grids = {
        "good.json": json.dumps({"cells": [{"d": 4, "k": 3, "m": 1, "N": 10}], "methods": ["lbfgs"]}),
        "good.toml": 'methods = ["lbfgs"]\n[[cells]]\nd = 4\nk = 3\nm = 1\nN = 10\n',
        "bytes.toml": b"\xff\xfe\x00 = 1",
        "syntax.toml": "[[cells]\nd = 4\n",
        "syntax.json": '{"cells": [}',
        "nested.json": "[" * 5000 + "]" * 5000,
        "list.json": "[1, 2]",
        "yaml.yaml": "cells: []",
        "types.toml": '[[cells]]\nd = 4\nk = 3\nm = 1\nN = 10\nmethod_options = 5\n',
        "threshold.toml": 'threshold = "abc"\n[[cells]]\nd = 4\nk = 3\nm = 1\nN = 10\n',
        "samples.toml": 'test_samples = [1]\n[[cells]]\nd = 4\nk = 3\nm = 1\nN = 10\n',
        "huge.json": json.dumps({"cells": [{"d": list(range(1, 60)), "k": list(range(1, 60)),
                                            "m": list(range(1, 60)), "N": 10}]}),
        "seeds.json": json.dumps({"seeds": 10**12, "cells": [{"d": 4, "k": 3, "m": 1, "N": 10}]}),
        "regime.json": json.dumps({"cells": [{"d": 4, "k": 3, "m": 1, "N": 10, "regime": [[1]]}]}),
        "float.json": json.dumps({"cells": [{"d": 4.5, "k": 3, "m": 1, "N": 10}]}),
        "nan.json": '{"cells": [{"d": 4, "k": 3, "m": 1, "N": 10, "scale": NaN}]}',
    }
    out: dict[str, dict[str, Path]] = {"data": {}, "truth": {}, "grid": {}}
    for name, raw in data.items():
        (root / f"data_{name}.npz").write_bytes(raw)
        out["data"][name] = root / f"data_{name}.npz"
    for name, raw in models.items():
        p = root / f"model_{name}.npz"
        if name == "good":
            truth.save(p)
        elif name == "wrong_d":
            plant(5, 3, 1, seed=0).save(p)
        else:
            p.write_bytes(raw)
        out["truth"][name] = p
    for name, text in grids.items():
        p = root / f"grid_{name}"
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        out["grid"][name] = p
    out["dir"] = {"root": root}
    return out


# ------------------------------------------------------------------------------------------------- argv
INTS = st.sampled_from(["1", "2", "3", "4", "8", "0", "-1", "x", "", "1e3", "2.5", "nan", str(10**12), "٣"])
REALS = st.sampled_from(["0", "1e-12", "2.5", "-1", "nan", "inf", "1e999", "x", "", "1e-320"])
SETTINGS = st.sampled_from(["tol=1e-10", "tolx=1", "refine.slabs.tau=0.02", "refine.slabs.tua=0.02",
                            "exact.rank_tol=-1", "validation_size=" + "9" * 50, "novalue", "=3",
                            "tol=" + "[" * 500, "gradient.max_iter=\"10\"", "sum_w={\"improve\": 3}",
                            "auto.fallback=false", "heads=5"])


_FILE_FLAGS = {"--data": "data", "--truth": "truth", "--grid": "grid"}
_WORDS = st.sampled_from(["sculpt", "exact", "gradient", "auto", "boolean", "gaussian", "lbfgs,adam", "magic", ""])
_VALUES = {
    "--noise": REALS,
    "--scale": REALS,
    "--tol": REALS,
    "--set": SETTINGS,
    "--method": _WORDS,
    "--distribution": _WORDS,
    "--methods": _WORDS,
    "--solver": st.sampled_from(["highs", "CLARABEL", "MOSEK", "NOPE", ""]),
    "--scheduler": st.sampled_from(["serial", "local", "tcp://nohost:1"]),
    "--only": st.text(max_size=4),
}


def _flag_value(draw, files, flag: str, named: set[str]) -> list[str]:
    """The value(s) following ``flag`` in a random command line (a hostile file's path is recorded in ``named``)."""
    if flag in ("--quiet", "--quick"):
        return []
    if flag in _FILE_FLAGS:
        kind = _FILE_FLAGS[flag]
        name = draw(st.sampled_from(sorted(files[kind])))
        named.add(f"{kind}:{name}")
        return [str(files[kind][name])]
    if flag == "--bogus":
        return ["x"] if draw(st.booleans()) else []
    return [draw(_VALUES.get(flag, INTS))]


@st.composite
def argvs(draw, files) -> tuple[list[str], set[str]]:
    """A random argument vector (and the names of the hostile files it names)."""
    cmd = draw(st.sampled_from(["recover", "learn", "settings", "bench", "frobnicate", "--version"]))
    argv: list[str] = [cmd]
    named: set[str] = set()
    flags = {
        "recover": ["--d", "--k", "--m", "--samples", "--seed", "--distribution", "--noise", "--scale",
                    "--test-samples", "--method", "--solver", "--tol", "--set", "--quiet", "--bogus"],
        "learn": ["--data", "--m", "--seed", "--truth", "--method", "--solver", "--tol", "--set", "--quiet"],
        "bench": ["--grid", "--quick", "--seeds", "--methods", "--only", "--workers", "--scheduler"],
    }.get(cmd, ["--bogus"])
    if cmd == "recover" and draw(st.booleans()):
        argv += ["--d", "4", "--k", "3", "--m", "1", "--samples", "40"]  # often a complete command line
    if cmd == "learn" and draw(st.booleans()):
        argv += ["--data", str(files["data"]["good"]), "--m", "1"]
    for flag in draw(st.lists(st.sampled_from(flags), max_size=6)):
        argv += [flag, *_flag_value(draw, files, flag, named)]
    if cmd in ("recover", "learn", "bench") and draw(st.booleans()):
        out = files["dir"]["root"] / draw(st.sampled_from(["out", "data_good.npz", "missing/deeper"]))
        argv += ["--out", str(out)]
    elif cmd == "bench":
        argv += ["--out", str(files["dir"]["root"] / "bench_out")]
    return argv, named


@_fuzz("argv")
@given(data=st.data())
def test_random_command_lines_exit_cleanly(files, data) -> None:
    """Any argument vector: exit 0/1/2, no traceback, a failure is one line (class 5)."""
    argv, named = data.draw(argvs(files), label="argv")
    code, lines, _ = _run(argv)
    _check_failure(code, lines, argv)


@_fuzz("data_files")
@given(which=st.sampled_from(["data", "truth"]), name=st.data())
def test_hostile_data_and_model_files_are_named(files, which, name) -> None:
    """learn --data / --truth with a hostile file: exit 2 and the one error line names the flag and (for file
    errors) the file; never MemoryError, RecursionError or a traceback (classes 4 and 5)."""
    pick = name.draw(st.sampled_from(sorted(n for n in files[which] if n not in ("good", "odd"))), label="file")
    path = files[which][pick]
    argv = ["learn", "--data", str(path if which == "data" else files["data"]["good"]), "--m", "1", "--quiet"]
    if which == "truth":
        argv += ["--truth", str(path)]
    code, lines, _ = _run(argv)
    line = _check_failure(code, lines, argv)
    assert code == 2 and line is not None, (argv, lines)
    assert f"--{which}" in line and str(path) in line, line


@_fuzz("grid_files")
@given(data=st.data())
def test_random_grid_documents_are_refused_by_field(files, data, tmp_path_factory) -> None:
    """A grid document with random values in its fields (JSON) is either accepted (the stub sweep then says
    so) or refused in one line that names the grid file; never a traceback (class 5)."""
    value = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.floats(allow_nan=True, allow_infinity=True),
                      st.text(max_size=3), st.lists(st.integers(-1, 5), max_size=3),
                      st.dictionaries(st.sampled_from(["lbfgs", "x"]), st.integers(), max_size=2))
    cell = data.draw(st.fixed_dictionaries(
        {"d": st.one_of(st.just(4), value), "k": st.one_of(st.just(3), value), "m": st.one_of(st.just(1), value)},
        optional={"N": value, "n_factor": value, "scale": value, "noise": value, "distribution": value,
                  "regime": value, "weak_head": value, "seeds": value, "methods": value, "bogus": value}),
        label="cell")
    top = data.draw(st.fixed_dictionaries({}, optional={
        "name": value, "seeds": value, "methods": value, "threshold": value, "test_samples": value,
        "method_options": value, "description": value, "extra": value}), label="top")
    doc = {**top, "cells": data.draw(st.sampled_from([[cell], cell, [], [cell, 3]]), label="cells")}
    path = tmp_path_factory.mktemp("grid") / "fuzz.json"
    path.write_text(json.dumps(doc, allow_nan=True))
    argv = ["bench", "--grid", str(path), "--out", str(path.parent / "out"), "--no-progress"]
    code, lines, _ = _run(argv)
    line = _check_failure(code, lines, argv)
    assert code == 2 and line is not None
    assert "stub sweep" in line or str(path) in line, line
