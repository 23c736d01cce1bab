"""The command line: recover / learn subcommands, files written, exit statuses 0 / 1 / 2."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sculpt import MultiHeadAttention, plant, sample_inputs
from sculpt.cli import build_parser, main, phase_table
from sculpt.result import PhaseRecord

ROOT = Path(__file__).resolve().parents[2]
EXACT = ["recover", "--d", "8", "--k", "4", "--m", "1", "--samples", "40", "--seed", "0", "--method", "exact"]


def _strict_json(path: Path) -> dict:
    def no_constants(name: str) -> None:
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(path.read_text(), parse_constant=no_constants)


def test_recover_exact_writes_result_and_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main([*EXACT, "--verbose", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for word in ("exact-w", "exact-theta", "converged", "test rel MSE (fresh)", "head-matched theta_error"):
        assert word in text
    doc = _strict_json(out / "result.json")
    assert doc["converged"] is True and doc["method"] == "exact"
    assert doc["command"].startswith("sculpt recover --d 8")
    assert doc["seed"] == 0 and doc["solver"] is None and doc["exit_status"] == 0
    assert {"python", "numpy", "scipy", "cvxpy", "sculpt"} <= set(doc["versions"])
    assert [p["name"] for p in doc["phases"]][:2] == ["exact-w", "exact-theta"]
    assert doc["config"]["samples"] == 40 and doc["config"]["distribution"] == "boolean"
    assert doc["evaluation"]["test_error"] <= 1e-12
    model = MultiHeadAttention.load(out / "model.npz")
    truth = MultiHeadAttention.load(out / "truth.npz")
    planted = plant(8, 4, 1, scale=2.5, seed=0)
    assert np.array_equal(truth.thetas, planted.thetas) and np.array_equal(truth.ws, planted.ws)
    dist = truth.distance(model)
    assert max(dist.theta_error, dist.w_error) <= 1e-6


def test_recover_is_reproducible(tmp_path: Path) -> None:
    for name in ("a", "b"):
        assert main([*EXACT, "--distribution", "gaussian", "--quiet", "--out", str(tmp_path / name)]) == 0
    a, b = (MultiHeadAttention.load(tmp_path / n / "model.npz") for n in ("a", "b"))
    assert np.array_equal(a.thetas, b.thetas) and np.array_equal(a.ws, b.ws)


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "sculpt", *EXACT, "--quiet", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "converged = True" in proc.stdout and ": exact." in proc.stdout.splitlines()[0]
    assert _strict_json(tmp_path / "result.json")["converged"] is True
    assert proc.stderr == ""  # --quiet: no progress lines


def test_not_converged_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["recover", "--d", "8", "--k", "4", "--m", "1", "--samples", "60", "--method", "exact", "--noise", "0.01",
            "--set", "polish.accept_noise=false", "--quiet", "--out", str(tmp_path)]  # noisy labels: tol only
    assert main(args) == 1
    assert "not converged" in capsys.readouterr().err
    doc = _strict_json(tmp_path / "result.json")
    assert doc["converged"] is False and doc["exit_status"] == 1 and doc["config"]["noise"] == 0.01
    assert (tmp_path / "model.npz").exists()


@pytest.mark.parametrize("argv,message", [
    (["recover", "--k", "4", "--m", "1", "--samples", "40"], "required: --d"),
    ([*EXACT[:-2], "--method", "magic"], "invalid choice"),
    (["recover", "--d", "8", "--k", "4", "--m", "1", "--samples", "-5"], "positive integer"),
    ([*EXACT, "--noise", "-1"], ">= 0"),
    ([*EXACT, "--scale", "nan"], "finite"),
    (["recover", "--d", "8", "--k", "4", "--m", "2", "--samples", "40", "--method", "exact"], "m = 1"),
    (["recover", "--d", "8", "--k", "4", "--m", "1", "--samples", "5", "--method", "exact"], "too few examples"),
    ([*EXACT, "--solver", "NOPE"], "unknown backend"),
    (["recover", "--d", "100000", "--k", "4", "--m", "1000", "--samples", "40"], "--m × --d × --d"),
    (["recover", "--d", "8", "--k", "4", "--m", "1", "--samples", str(10**12)], "--samples × --k × --d"),
    (["frobnicate"], "invalid choice"),
    ([], "required"),
])
def test_bad_input_exits_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err and "usage:" in err


def test_out_that_is_a_file_exits_2_before_learning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "taken"
    target.write_text("x")
    assert main([*EXACT, "--quiet", "--out", str(target)]) == 2
    captured = capsys.readouterr()
    assert "not a directory" in captured.err and "converged" not in captured.out
    assert target.read_text() == "x"


def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "recover" in text and "learn" in text
    assert main(["recover", "--help"]) == 0
    assert "--samples" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert "sculpt" in capsys.readouterr().out


def test_learn_from_npz_round_trip(tmp_path: Path) -> None:
    truth = plant(8, 4, 1, seed=5)
    X = sample_inputs(30, 4, 8, rng=np.random.default_rng(5))
    data = tmp_path / "data.npz"
    np.savez(data, X=X, Y=truth(X))
    truth.save(tmp_path / "truth.npz")
    out = tmp_path / "out"
    assert main(["learn", "--data", str(data), "--m", "1", "--method", "exact", "--truth", str(tmp_path / "truth.npz"),
                 "--quiet", "--out", str(out)]) == 0
    doc = _strict_json(out / "result.json")
    assert doc["converged"] is True and doc["config"]["examples"] == 30 and doc["config"]["d"] == 8
    assert doc["info"]["truth"]["theta_error"] <= 1e-6
    model = MultiHeadAttention.load(out / "model.npz")
    X_test = sample_inputs(1000, 4, 8, rng=np.random.default_rng(6))
    assert truth.prediction_error(model, X_test) <= 1e-12


def test_learn_auto_picks_exact_for_one_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    truth = plant(8, 4, 1, seed=6)
    X = sample_inputs(30, 4, 8, rng=np.random.default_rng(6), distribution="gaussian")
    np.savez(tmp_path / "d.npz", X=X, Y=truth(X))
    assert main(["learn", "--data", str(tmp_path / "d.npz"), "--m", "1", "--verbose"]) == 0
    assert any(line.split() == ["route", "exact"] for line in capsys.readouterr().out.splitlines())


@pytest.mark.parametrize("arrays,message", [
    ({"X": np.ones((5, 4, 8))}, "no array Y"),
    ({"A": np.ones((5, 4, 8))}, "no arrays X and Y"),
    ({"X": np.ones((5, 4, 8)), "Y": np.ones((5, 4, 7))}, "same shape"),
    ({"X": np.ones((4, 8)), "Y": np.ones((4, 8))}, "(N, k, d)"),
    ({"X": np.array([["a"]]), "Y": np.ones((5, 4, 8))}, "dtype"),
])
def test_learn_bad_data_exits_2(tmp_path: Path, arrays: dict, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    assert main(["learn", "--data", str(path), "--m", "1"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_learn_unreadable_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["learn", "--data", str(tmp_path / "missing.npz"), "--m", "1"]) == 2
    assert "cannot read" in capsys.readouterr().err
    pickled = tmp_path / "obj.npz"
    np.savez(pickled, X=np.array([{"a": 1}], dtype=object), Y=np.ones((1, 4, 8)))
    assert main(["learn", "--data", str(pickled), "--m", "1"]) == 2
    assert "pickle" in capsys.readouterr().err
    np.save(tmp_path / "single.npy", np.ones((2, 4, 8)))
    assert main(["learn", "--data", str(tmp_path / "single.npy"), "--m", "1"]) == 2
    assert "single .npy" in capsys.readouterr().err


def test_phase_table_shows_every_phase_and_failures() -> None:
    phases = [PhaseRecord("exact-w", figures={"rank": 64, "condition": 7.25, "vector": [1, 2]},
                          truth={"w_error": 1e-15}, time=0.5),
              PhaseRecord("exact-theta", figures={"rank": 60}, status="failed", message="Θ-system rank deficient")]
    text = phase_table(phases)
    lines = text.splitlines()
    assert lines[2].startswith("exact-w") and "rank=64" in lines[2] and "w_error=1e-15" in lines[2]
    assert "vector" not in text  # non-scalar figures stay in result.json
    assert any(line.startswith("exact-theta") and "failed" in line for line in lines)
    assert "^ Θ-system rank deficient" in text


def test_subcommands_registered() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert {"recover", "learn"} <= set(sub.choices)


def test_settings_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--set NAME=VALUE reaches learn() (result.json records the resolved settings); a typo or a value out
    of range is one line naming the item, exit 2; `sculpt settings` lists every dotted name."""
    out = tmp_path / "run"
    argv = [*EXACT, "--quiet", "--out", str(out), "--set", "validation_size=5", "--set", "exact.rank_tol=1e-8"]
    assert main(argv) == 0
    doc = json.loads((out / "result.json").read_text())
    assert doc["info"]["settings"]["exact"]["rank_tol"] == 1e-8 and doc["info"]["validation_examples"] == 5
    for item, message in (("exact.rank_tl=1e-8", "did you mean 'exact.rank_tol'"),
                          ("exact.rank_tol=-1", "exact.rank_tol must lie in"), ("novalue", "NAME=VALUE")):
        capsys.readouterr()
        assert main([*EXACT, "--quiet", "--set", item]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    capsys.readouterr()
    assert main(["settings"]) == 0
    listing = capsys.readouterr().out
    assert "refine.slabs.tau = 0.01" in listing and "auto.peer_iterations = auto" in listing


def test_settings_group_filter(capsys: pytest.CaptureFixture[str]) -> None:
    """`sculpt settings polish` lists the polish group's fields only; an unknown group is exit 2 naming the
    valid groups."""
    assert main(["settings", "polish"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# polish:") and len(lines) > 2
    assert all(line.startswith("polish.") for line in lines[1:]), lines
    assert any(line.startswith("polish.max_examples = ") for line in lines)
    assert main(["settings", "polsh"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'polsh'" in err and "'polish'" in err and "'sum_w'" in err and "Traceback" not in err


def test_closed_pipe_is_quiet() -> None:
    """`sculpt settings | head -1`: the reader closes the pipe after one line; sculpt ends quietly with exit 0
    (no "internal error: BrokenPipeError", no "Exception ignored" at interpreter exit)."""
    import fcntl

    read_fd, write_fd = os.pipe()
    if hasattr(fcntl, "F_SETPIPE_SZ"):  # Linux: a one-page pipe, so the listing (~28 kB) cannot fit before the close
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 4096)
    proc = subprocess.Popen([sys.executable, "-m", "sculpt", "settings"], stdout=write_fd, stderr=subprocess.PIPE,
                            text=True, cwd=Path(__file__).resolve().parents[2])
    os.close(write_fd)
    with os.fdopen(read_fd) as reader:
        assert reader.readline().strip()
    _, err = proc.communicate(timeout=120)
    assert "BrokenPipeError" not in err and "internal error" not in err and "Exception ignored" not in err, err
    assert proc.returncode == 0, err


def test_default_output_is_a_short_plain_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The default route is auto; the output says what was learned, the outcome, the errors, the time and where
    the files went, in a few short lines, without the phase table (that is --verbose)."""
    args = ["recover", "--d", "6", "--k", "3", "--m", "2", "--samples", "1500", "--out", str(tmp_path)]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Recovered a planted 2-head attention layer (d = 6, k = 3)") and lines[0].endswith(
        ": exact."
    )
    assert len(lines) <= 12 and max(map(len, lines)) <= 140
    text = "\n".join(lines)
    for word in ("status:", "errors:", "time:", "test:", "certificate:", "files:"):
        assert word in text
    assert "2-sculpt" not in text and "phase" not in text.split("(--verbose")[0]
    assert _strict_json(tmp_path / "result.json")["config"]["method"] == "auto"


def test_noise_too_large_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["recover", "--d", "4", "--k", "2", "--m", "1", "--samples", "50", "--noise", "1e300", "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--noise" in err.splitlines()[-1] and "Y has an entry" not in err


def test_fewer_supported_heads_warn_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    truth = plant(6, 3, 1, seed=0)
    X = sample_inputs(600, 3, 6, rng=np.random.default_rng(1))
    np.savez(tmp_path / "d.npz", X=X, Y=truth(X))
    assert main(["learn", "--data", str(tmp_path / "d.npz"), "--m", "2", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "sculpt learn: warning: the data support m̂ = 1 of the m = 2 heads" in err
    assert "UserWarning" not in err
    assert "only 1 of its 2 heads carry the output (--m 1 would do)" in out.splitlines()[0]


def test_verbose_and_quiet_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*EXACT, "--verbose", "--quiet"]) == 2
    assert "not allowed with" in capsys.readouterr().err
