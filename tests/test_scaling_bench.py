"""benchmarks/scaling.py: the ladder's lines, the exponent fit, the tables, the step names; one run end to end in
its own process; and benchmarks/_isolated.py's outcomes (returned, killed, out of memory, raised, crashed)."""
from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from sculpt.result import PhaseRecord

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


scaling = _load("scaling")
isolated = _load("_isolated")
AXES = ("d", "k", "m", "N")


# ------------------------------------------------------------------------------------------------ the ladder
def test_the_ladder_spans_the_issue_sizes_with_valid_cells() -> None:
    ladder = scaling.LADDER
    assert 15 <= len(ladder) <= 20
    assert len({c.name for c in ladder}) == len(ladder)
    assert {c.d for c in ladder} == {8, 16, 32, 64}
    assert {c.k for c in ladder} == {4, 8, 16, 32, 64}
    assert {c.m for c in ladder} == {1, 2, 4, 8}
    assert {c.dist for c in ladder} == {"boolean", "gaussian"} and {c.torch for c in ladder} == {False, True}
    for c in ladder:
        assert c.torch or c.plant.get("max_cond") == (100.0 if c.d >= 24 else None), c.name
        assert not (c.torch and c.plant), c.name   # torch heads are not planted
        assert c.d % c.m == 0 or not c.torch, c.name   # torch needs heads of dimension d/m


def test_each_axis_has_a_line_of_three_or_more_cells_with_the_rest_held() -> None:
    lines = scaling.axis_lines(scaling.LADDER)
    for axis in AXES:
        line = lines[axis]
        assert len(line) >= 3, axis
        sizes = [scaling.size(c, axis) for c in line]
        assert sizes == sorted(set(sizes)), axis
        for other in (a for a in AXES if a != axis):
            assert len({scaling.size(c, other) for c in line}) == 1, (axis, other)
        assert len({(c.dist, c.torch) for c in line}) == 1, axis
    assert scaling.held_text(lines["d"], "d") == "(k,m,N) = (8,2,80k)"   # the lines the docstring documents
    assert scaling.held_text(lines["k"], "k") == "(d,m,N) = (8,2,20k)"
    assert scaling.held_text(lines["m"], "m") == "(d,k,N) = (16,8,60k)"
    assert scaling.held_text(lines["N"], "N") == "(d,k,m) = (8,4,2)"
    assert [c.d for c in lines["d"]] == [8, 16, 32, 64] and [c.n for c in lines["N"]] == [2_000, 20_000, 200_000]


def test_a_line_never_mixes_inputs_or_heads_but_ignores_max_cond() -> None:
    cells = [scaling.cell(8, 8, 2, 80_000), scaling.cell(16, 8, 2, 80_000), scaling.cell(32, 8, 2, 80_000),
             scaling.cell(16, 8, 2, 80_000, "gaussian"), scaling.cell(64, 8, 2, 80_000, torch=True)]
    lines = scaling.axis_lines(cells)
    assert [c.name for c in lines["d"]] == ["bool-8.8.2-80k", "bool-16.8.2-80k", "bool-32.8.2-80k"]
    assert lines["k"] == [] and lines["m"] == [] and lines["N"] == []


# --------------------------------------------------------------------------------------------- the exponents
def test_the_fit_recovers_a_known_exponent() -> None:
    rng = np.random.default_rng(0)
    sizes = np.array([8, 16, 32, 64])
    slope, err = scaling.fit_exponent(sizes, 0.01 * sizes**2.5 * np.exp(rng.normal(0, 0.02, 4)))
    assert abs(slope - 2.5) < 0.05 and err is not None and 0 < err < 0.05
    slope, err = scaling.fit_exponent([2_000, 20_000, 200_000], [0.1, 1.0, 10.0])
    assert slope == pytest.approx(1.0) and err == pytest.approx(0.0, abs=1e-12)
    assert scaling.fit_exponent([4, 8], [1.0, 8.0]) == (pytest.approx(3.0), None)
    with pytest.raises(ValueError):
        scaling.fit_exponent([8, 8], [1.0, 2.0])


def _run(name: str, method: str, t: float | None, exact: bool, **extra: object) -> dict[str, object]:
    return {"cell": name, "method": method, "time": t, "exact": exact, "status": "ok", "step": "polish",
            "peak_mb": 100.0, **extra}


def test_the_exponents_use_exact_runs_only_and_count_the_rest() -> None:
    line = [scaling.cell(8, k, 2, 20_000) for k in (4, 8, 16, 32)]
    runs = []
    for c in line:
        for seed in range(3):   # exact runs: time = k^1.5 (× 1, 2, 0.5: the median is k^1.5)
            runs.append(_run(c.name, "peer", c.k**1.5 * (1.0, 2.0, 0.5)[seed], True))
        runs.append(_run(c.name, "peer", 1e6, False))   # a failure with a huge time, left out
    runs = [r for r in runs if not (r["cell"] == line[-1].name and r["exact"])]   # k = 32: no exact run
    fits = scaling.exponents(runs, {"k": line}, ["peer"])
    k_fit = next(f for f in fits if f["axis"] == "k")
    assert k_fit["exponent"] == pytest.approx(1.5) and k_fit["stderr"] == pytest.approx(0.0, abs=1e-12)
    assert k_fit["cells"] == [c.name for c in line[:3]] and k_fit["cells_without_exact_run"] == [line[-1].name]
    assert k_fit["runs_excluded"] == 4
    assert all(f["exponent"] is None for f in fits if f["axis"] != "k")


# ------------------------------------------------------------------------------------------------ the tables
def test_the_ladder_table_gives_exact_seeds_median_time_peak_memory_and_step() -> None:
    c = scaling.cell(8, 4, 2, 2_000)
    runs = [_run(c.name, "sculpt", 1.0, True, peak_mb=120.0), _run(c.name, "sculpt", 3.0, False, peak_mb=130.4,
            step="fail@2-sculpt"), _run(c.name, "sculpt", 2.0, True, peak_mb=110.0),
            _run(c.name, "peer", 12.345, True, step="4k ex, 2 runs")]
    table = scaling.ladder_table(runs, [c, scaling.cell(16, 8, 2, 80_000)], ["sculpt", "peer"]).splitlines()
    assert table[0] == "| cell | (d,k,m) | N | inputs | sculpt | peer |"
    assert table[2] == ("| bool-8.4.2-2k | (8,4,2) | 2,000 | Boolean, planted | "
                        "2/3 · 2.00 s · 130 MB · polish ×2, fail@2-sculpt ×1 | 1/1 · 12.3 s · 100 MB · 4k ex, 2 runs |")
    assert len(table) == 3   # a cell without runs has no row


def test_killed_runs_read_as_such_in_the_table() -> None:
    timeouts = [{"cell": "x", "method": "auto", "time": None, "exact": False, "status": "timeout",
                 "step": "timeout", "peak_mb": 5900.0}] * 2
    assert scaling.summary_cell(timeouts, 600.0) == "0/2 · > 600 s · 5,900 MB · timeout"
    memory = [{"cell": "x", "method": "vplm", "time": None, "exact": False, "status": "memory", "peak_mb": None}]
    assert scaling.summary_cell(memory, 600.0) == "0/1 · – · – MB · memory"
    assert scaling.summary_cell([], 600.0) == "–"


def test_the_exponent_table_names_the_cells_of_each_line() -> None:
    line = [scaling.cell(8, k, 2, 20_000) for k in (4, 8, 16)]
    fits = [{"method": "vplm", "axis": a, "exponent": 1.234 if a == "k" else None, "stderr": 0.05 if a == "k"
             else None, "cells": [c.name for c in line] if a == "k" else [], "cells_without_exact_run": [],
             "runs_excluded": 2 if a == "k" else 0} for a in AXES]
    text = scaling.exponent_table(fits, {"k": line}, ["vplm"]).splitlines()
    assert text[0] == "| method | d: – | k: (d,m,N) = (8,2,20k) | m: – | N: – |"
    assert text[2] == "| vplm | – (0 cells) | 1.23 ± 0.05 (3 cells); 2 excluded | – (0 cells) | – (0 cells) |"
    assert "- k-axis: bool-8.4.2-20k, bool-8.8.2-20k, bool-8.16.2-20k" in text
    assert scaling.exponent_table(fits, {"k": line[:1]}, ["vplm"]).startswith("No exponent")


# ------------------------------------------------------------------------------------------- the work steps
def _phases(*spec: tuple[str, str, float | None]) -> list[PhaseRecord]:
    return [PhaseRecord(n, status=s, figures={} if v is None else {"validation_error": v}) for n, s, v in spec]


def test_sculpt_step_says_whether_the_phases_or_the_polish_got_there_or_where_it_failed() -> None:
    ok = [("1-sum-w", "ok", None), ("2-sculpt", "ok", None), ("6-projections", "ok", 1e-20), ("polish", "ok", 1e-30)]
    assert scaling.sculpt_step(_phases(*ok), True, 1e-12) == "phases"
    ok[2] = ("6-projections", "ok", 1e-3)
    assert scaling.sculpt_step(_phases(*ok), True, 1e-12) == "polish"
    assert scaling.sculpt_step(_phases(*ok), False, 1e-12) == "polish > tol"
    twice = [("1-sum-w", "ok", None), ("2-sculpt", "failed", None), ("1-sum-w", "ok", None),
             ("2-sculpt", "ok", None), ("4-span", "failed", None)]
    assert scaling.sculpt_step(_phases(*twice), False, 1e-12) == "fail@4-span, 2 attempts"
    assert scaling.sculpt_step([], False, 1e-12) == "no phases"


def test_a_run_that_returns_after_the_limit_is_a_timeout() -> None:
    c = scaling.cell(8, 4, 2, 2_000)
    late = isolated.Outcome("ok", result={"status": "ok", "time": 700.0, "exact": True, "step": "polish"},
                            wall=705.0, peak_mb=300.0)
    rec = scaling.record(c, 0, "sculpt", late, 600.0)
    assert rec["status"] == "timeout" and rec["exact"] is False and rec["peak_mb"] == 300.0
    killed = scaling.record(c, 1, "auto", isolated.Outcome("timeout", wall=690.0, message="killed"), 600.0)
    assert killed["status"] == killed["step"] == "timeout" and killed["time"] is None and killed["d"] == 8


# --------------------------------------------------------------------------------------- isolated processes
CHILD = textwrap.dedent("""
    import os, time

    def echo(p):
        return {"twice": 2 * p["x"]}

    def sleep(p):
        time.sleep(p["seconds"])
        return {}

    def allocate(p):
        return {"n": len(bytearray(p["bytes"]))}

    def fail(p):
        raise RuntimeError("no luck")

    def die(p):
        os._exit(3)
""")


def test_isolated_runs_return_time_out_run_out_of_memory_raise_and_crash(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    ok = isolated.run_isolated(script, "echo", {"x": 21}, kill_after=30)
    assert ok.status == "ok" and ok.result == {"twice": 42} and ok.peak_mb is not None and ok.peak_mb > 1
    slow = isolated.run_isolated(script, "sleep", {"seconds": 60}, kill_after=1.0)
    assert slow.status == "timeout" and slow.result is None and 1.0 <= slow.wall < 30
    big = isolated.run_isolated(script, "allocate", {"bytes": 2**30}, kill_after=30, memory_limit=512 * 2**20)
    assert big.status == "memory" and "MemoryError" in big.message
    small = isolated.run_isolated(script, "allocate", {"bytes": 2**20}, kill_after=30, memory_limit=512 * 2**20)
    assert small.status == "ok" and small.result == {"n": 2**20}
    err = isolated.run_isolated(script, "fail", {}, kill_after=30)
    assert err.status == "error" and "RuntimeError: no luck" in err.message
    dead = isolated.run_isolated(script, "die", {}, kill_after=30)
    assert dead.status == "crash" and "exit code 3" in dead.message


# --------------------------------------------------------------------------------------------- end to end
def test_one_run_end_to_end_writes_the_table_the_json_and_a_record_per_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "scaling.json"
    assert scaling.main(["--cells", "bool-8.4.2-2k", "--methods", "vplm", "--seeds", "1", "--time-limit", "60",
                         "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| bool-8.4.2-2k | (8,4,2) | 2,000 | Boolean, planted | " in text and "No exponent" in text
    report = json.loads(out.read_text())
    (run,) = report["runs"]
    assert run["method"] == "vplm" and run["seed"] == 0 and run["status"] == "ok"
    assert run["time"] > 0 and run["peak_mb"] >= run["rss_before_mb"] > 0 and run["wall"] > run["time"]
    exact = run["test_rel_mse"] <= 1e-12 and max(run["max_theta_error"], run["max_w_error"]) <= 1e-6
    assert run["exact"] == exact and run["step"].startswith("start ")
    assert report["meta"]["time_limit"] == 60 and report["meta"]["cells"][0]["name"] == "bool-8.4.2-2k"


def test_merge_reports_recorded_runs_the_later_file_winning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    old = [_run("bool-8.8.2-80k", "auto", None, False, status="error", step="error", seed=0),
           _run("bool-8.8.2-80k", "peer", 0.5, True, seed=0, step="1k ex, 1 run")]
    new = [_run("bool-8.8.2-80k", "auto", 0.3, True, seed=0, step="auto-vp-lm")]
    first.write_text(json.dumps({"meta": {"time_limit": 600.0}, "runs": old}))
    second.write_text(json.dumps({"meta": {"time_limit": 600.0}, "runs": new}))
    assert scaling.main(["--merge", str(first), str(second), "--out", str(tmp_path / "m.json")]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("| bool-8.8.2-80k"))
    assert row.endswith("| 1/1 · 0.30 s · 100 MB · auto-vp-lm | 1/1 · 0.50 s · 100 MB · 1k ex, 1 run |")
    assert "sculpt" not in row and len(json.loads((tmp_path / "m.json").read_text())["runs"]) == 2
