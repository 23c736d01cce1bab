"""Tests of the recovery benchmark machinery (sculpt.bench): grids, seeding, records, schedulers, resume,
report and plots. Learners are exercised through cheap settings; the machinery through a stand-in
method ("oracle": the truth, optionally perturbed) registered here only."""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sculpt.bench import SCHEMA, strip_timings, validate_record
from sculpt.bench.cli import add_bench_parser, build_parser, run_bench
from sculpt.bench.grid import Cell, RunSpec, builtin_grid, derive_seed, grid_from_dict, load_grid
from sculpt.bench.methods import register
from sculpt.bench.report import render_summary, summarize
from sculpt.bench.runner import RecordStore, execute, run_sweep
from sculpt.bench.trials import make_problem, run_trial
from sculpt.model import MultiHeadAttention
from sculpt.result import LearnResult, PhaseRecord


def _oracle(X: np.ndarray, Y: np.ndarray, m: int, *, seed: int, truth: Any = None, eps: float = 0.0,
            fail: bool = False) -> LearnResult:
    """Stand-in learner: the truth plus eps-sized noise drawn from ``seed`` (raises when ``fail``)."""
    if fail:
        raise RuntimeError("stand-in failure")
    rng = np.random.default_rng(seed)
    model = MultiHeadAttention(truth.thetas + eps * rng.standard_normal(truth.thetas.shape), truth.ws)
    err = truth.prediction_error(model, X)
    return LearnResult(model=model, method="oracle", train_error=err, converged=err < 1e-12, iterations=1,
                       samples_used=len(X), phases=[PhaseRecord("oracle", figures={"eps": eps}, time=0.001)])


register("oracle", _oracle)

TINY = {
    "name": "tiny", "seeds": 2, "methods": ["oracle"], "test_samples": 200,
    "cells": [
        {"regime": "generic", "d": 3, "k": 2, "m": 1, "N": [20, 40]},
        {"regime": "generic", "d": 3, "k": 2, "m": 2, "N": 30, "method_options": {"oracle": {"eps": 1e-3}}},
    ],
}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------------ grids
def test_builtin_grids_load_and_expand() -> None:
    for name in ("quick", "default"):
        grid = builtin_grid(name)
        runs = grid.runs()
        assert runs, name
        assert len({r.key for r in runs}) == len(runs)
        assert all(r.method != "exact" or r.cell.m == 1 for r in runs)


def test_default_grid_has_the_gradient_descent_failure_regimes() -> None:
    cells = builtin_grid("default").cells
    factors = {c.n_factor for c in cells if c.regime == "small-N"}
    assert factors and min(factors) <= 1.2 and max(factors) >= 3
    assert all(1.2 <= c.N / c.count <= 3.01 for c in cells if c.regime == "small-N")
    assert any(c.weak_head == pytest.approx(0.01) for c in cells)
    assert any(c.separation == pytest.approx(0.03) for c in cells)
    assert any(c.scale == 40 for c in cells)


def test_n_factor_sets_N_from_the_parameter_count() -> None:
    grid = grid_from_dict({"cells": [{"d": 8, "k": 4, "m": 2, "n_factor": [1.2, 3]}], "methods": ["oracle"]})
    assert [c.N for c in grid.cells] == [math.ceil(1.2 * 8), 24]


@pytest.mark.parametrize("bad, match", [
    ({"cells": []}, "non-empty"),
    ({"cells": [{"d": 3, "k": 2, "m": 1}]}, "exactly one of 'N' and 'n_factor'"),
    ({"cells": [{"d": 3, "k": 2, "m": 1, "N": 5, "colour": 1}]}, "unknown field"),
    ({"cells": [{"d": 0, "k": 2, "m": 1, "N": 5}]}, "d must be"),
    ({"cells": [{"d": 3, "k": 2, "m": 1, "N": 5, "methods": ["nope"]}]}, "unknown method"),
    ({"cells": [{"d": 3, "k": 2, "m": 1, "N": 5, "distribution": "cauchy"}]}, "distribution"),
    ({"cells": [{"d": 3, "k": 2, "m": 1, "N": [5, 5]}]}, "twice"),
    ({"cells": [{"d": 3, "k": 2, "m": 1, "N": 5}], "seeds": -1}, "seeds"),
    ({"cellz": []}, "unknown top-level"),
])
def test_bad_grids_are_rejected(bad: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        grid_from_dict(bad)


def test_grid_files_toml_and_json_agree(tmp_path: Path) -> None:
    (tmp_path / "g.json").write_text(json.dumps(TINY))
    toml = ('name = "tiny"\nseeds = 2\nmethods = ["oracle"]\ntest_samples = 200\n'
            '[[cells]]\nregime = "generic"\nd = 3\nk = 2\nm = 1\nN = [20, 40]\n'
            '[[cells]]\nregime = "generic"\nd = 3\nk = 2\nm = 2\nN = 30\n'
            '[cells.method_options.oracle]\neps = 1e-3\n')
    (tmp_path / "g.toml").write_text(toml)
    a, b = load_grid(tmp_path / "g.json").runs(), load_grid(tmp_path / "g.toml").runs()
    assert [r.key for r in a] == [r.key for r in b]
    with pytest.raises(ValueError, match="does not exist"):
        load_grid(tmp_path / "missing.toml")


@settings(max_examples=25, deadline=None)
@given(d=st.integers(1, 9), k=st.integers(1, 9), m=st.integers(1, 4), N=st.integers(1, 10**5),
       seed=st.integers(0, 10**6), scale=st.floats(0.1, 50))
def test_seeds_depend_only_on_the_trial(d: int, k: int, m: int, N: int, seed: int, scale: float) -> None:
    a = RunSpec(Cell("generic", d, k, m, N, scale=scale), seed, "lbfgs")
    b = RunSpec(Cell("other-label", d, k, m, N, scale=scale), seed, "adam", options={"max_iter": 3})
    c = RunSpec(Cell("generic", d, k, m, N + 1, scale=scale), seed, "lbfgs")
    assert a.data_seed == b.data_seed and a.instance_seed == b.instance_seed   # label/method/options free
    assert a.method_seed != b.method_seed and a.key != b.key
    assert c.instance_seed == a.instance_seed and c.data_seed != a.data_seed   # same layer across N
    assert 0 <= a.data_seed < 2**63 and derive_seed("x", 1) == derive_seed("x", 1)


def test_trial_data_are_shared_by_methods_and_reproducible() -> None:
    cell = Cell("generic", 4, 3, 2, 50, noise=0.1)
    p1, p2 = make_problem(RunSpec(cell, 3, "lbfgs")), make_problem(RunSpec(cell, 3, "adam"))
    assert p1.digest == p2.digest and np.array_equal(p1.X_test, p2.X_test)
    assert p1.truth.prediction_error(p2.truth, p1.X) == 0
    rel_noise = np.sum((p1.Y - p1.truth(p1.X)) ** 2) / np.sum(p1.truth(p1.X) ** 2)
    assert 0.005 < rel_noise < 0.02                       # noise 0.1·rms → relative MSE ≈ 0.01
    assert make_problem(RunSpec(cell, 4, "lbfgs")).digest != p1.digest


# ---------------------------------------------------------------------------------------------- records
def test_records_follow_the_schema_and_score_correctly() -> None:
    good = run_trial(RunSpec(Cell("generic", 3, 2, 1, 20), 0, "oracle", test_samples=100))
    bad = run_trial(RunSpec(Cell("generic", 3, 2, 2, 20), 0, "oracle", {"eps": 0.1}, test_samples=100))
    err = run_trial(RunSpec(Cell("generic", 3, 2, 1, 20), 0, "oracle", {"fail": True}, test_samples=100))
    for rec in (good, bad, err):
        validate_record(json.loads(json.dumps(rec, allow_nan=False)))
    assert good["success"] and good["test_error"] == 0 and good["theta_error"] == 0
    assert not bad["success"] and bad["test_error"] > 1e-6 and bad["theta_error"] > 0
    assert bad["permutation"] in ([0, 1], [1, 0])
    assert err["status"] == "error" and "stand-in failure" in err["error"] and not err["success"]
    assert good["data_digest"] and set(good) == set(SCHEMA)


def test_sculpt_records_name_the_lp_backend_they_used() -> None:
    from oracles import solvers

    rec = run_trial(RunSpec(Cell("generic", 6, 3, 1, 1000), 0, "sculpt", test_samples=100))
    validate_record(rec)
    assert rec["status"] == "ok" and rec["solver"] == solvers.default()
    lb = run_trial(RunSpec(Cell("generic", 6, 3, 1, 1000), 0, "lbfgs", {"max_iter": 5}, test_samples=100))
    assert lb["solver"] is None  # the gradient baseline uses no LP backend


def test_validate_record_rejects_departures() -> None:
    rec = run_trial(RunSpec(Cell("generic", 3, 2, 1, 20), 0, "oracle", test_samples=50))
    for mutate, match in [(lambda r: r.pop("seed"), "missing"), (lambda r: r.update(extra=1), "unknown"),
                          (lambda r: r.update(success="yes"), "success"),
                          (lambda r: r.update(status="done"), "status"),
                          (lambda r: r.update(test_error=1.0), "test_error > threshold"),
                          (lambda r: r["cell"].pop("d"), "cell lacks d")]:
        r = json.loads(json.dumps(rec))
        mutate(r)
        with pytest.raises(ValueError, match=match):
            validate_record(r)


# ------------------------------------------------------------------------------------ sweeps & resume
def test_resumed_sweep_does_not_repeat_runs(tmp_path: Path) -> None:
    grid = grid_from_dict(TINY)
    calls: list[str] = []

    def counting(spec: RunSpec) -> dict[str, Any]:
        calls.append(spec.key)
        return run_trial(spec)

    first = run_sweep(grid, tmp_path, scheduler="serial", progress=False, fn=counting)
    assert first.ran == len(grid.runs()) == len(calls) == 6
    calls.clear()
    again = run_sweep(grid, tmp_path, scheduler="serial", progress=False, fn=counting)
    assert calls == [] and again.skipped == 6 and len(again.records) == 6
    # interrupted mid-write: drop two records and tear the last line
    path = tmp_path / "trials.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:4]) + lines[4][:25])
    assert len(RecordStore(path).load()) == 4
    resumed = run_sweep(grid, tmp_path, scheduler="serial", progress=False, fn=counting)
    assert sorted(calls) == sorted({json.loads(x)["key"] for x in lines[4:]}) and resumed.ran == 2
    records = _lines(path)
    assert len(records) == 6 and len({r["key"] for r in records}) == 6
    for r in records:
        validate_record(r)
    # changed method options are new runs, not resumed ones
    changed = json.loads(json.dumps(TINY))
    changed["cells"][1]["method_options"]["oracle"]["eps"] = 2e-3
    calls.clear()
    run_sweep(grid_from_dict(changed), tmp_path, scheduler="serial", progress=False, fn=counting)
    assert len(calls) == 2


def test_errors_are_recorded_and_retried_on_request(tmp_path: Path) -> None:
    spec = {"name": "e", "seeds": 1, "methods": ["oracle"], "test_samples": 50,
            "cells": [{"d": 3, "k": 2, "m": 1, "N": 10, "method_options": {"oracle": {"fail": True}}}]}
    res = run_sweep(grid_from_dict(spec), tmp_path, scheduler="serial", progress=False)
    assert res.errors == 1 and "stand-in failure" in res.error_messages[0]
    assert run_sweep(grid_from_dict(spec), tmp_path, scheduler="serial", progress=False).ran == 0
    assert run_sweep(grid_from_dict(spec), tmp_path, scheduler="serial", progress=False,
                     retry_errors=True).ran == 1


def test_progress_bar_goes_to_the_given_stream(tmp_path: Path) -> None:
    import io

    buf = io.StringIO()
    run_sweep(grid_from_dict(TINY), tmp_path, scheduler="serial", progress=True, stream=buf)
    text = buf.getvalue()
    assert "6 runs to do" in text and "6/6" in text and "[" + "#" * 30 + "]" in text


def test_dask_local_cluster_gives_the_serial_records(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed", reason="dask.distributed not installed (optional extra)")
    grid = grid_from_dict(TINY)
    serial = run_sweep(grid, tmp_path / "serial", scheduler="serial", progress=False).records
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        dask = run_sweep(grid, tmp_path / "dask", scheduler=cluster.scheduler_address, progress=False).records
    assert [r["key"] for r in serial] == [r["key"] for r in dask]
    assert [strip_timings(r) for r in serial] == [strip_timings(r) for r in dask]


def test_unreachable_dask_scheduler_is_a_clear_error() -> None:
    pytest.importorskip("distributed", reason="dask.distributed not installed (optional extra)")
    from sculpt.bench.runner import _execute_dask

    with pytest.raises(RuntimeError, match="cannot reach the dask scheduler"):
        list(_execute_dask(grid_from_dict(TINY).runs(), "tcp://127.0.0.1:1", run_trial, connect_timeout="2s"))


def test_unknown_scheduler_address_without_dask_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_dask(name: str, *a: Any, **kw: Any) -> Any:
        if name.startswith("distributed") or name.startswith("dask"):
            raise ImportError(name)
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(RuntimeError, match="needs dask.distributed"):
        list(execute(grid_from_dict(TINY).runs(), scheduler="tcp://127.0.0.1:1"))
    with pytest.raises(ValueError, match="workers"):
        list(execute(grid_from_dict(TINY).runs(), workers=0))


# ------------------------------------------------------------------------------------ report & plots
def _record(cell_key: str, d: int, m: int, N: int, seed: int, method: str, success: bool, t: float,
            test: float | None) -> dict[str, Any]:
    return {"key": f"{cell_key}:seed{seed}:{method}", "trial_key": f"{cell_key}:seed{seed}", "cell_key": cell_key,
            "cell": {"regime": cell_key.split(":")[0], "d": d, "k": 2, "m": m, "N": N, "scale": 2.5,
                     "distribution": "boolean", "noise": 0.0, "weak_head": None, "separation": None,
                     "n_factor": None},
            "seed": seed, "method": method, "success": success, "status": "ok" if test is not None else "error",
            "test_error": test, "theta_error": None, "w_error": None, "samples_used": N, "time": t,
            "threshold": 1e-12, "phases": [], "error": None if test is not None else "boom"}


def test_summary_has_one_row_per_cell_with_the_right_success_rates() -> None:
    rng = np.random.default_rng(0)
    records, expected = [], {}
    for ci, (d, m, N) in enumerate([(4, 1, 100), (4, 2, 100), (8, 2, 500)]):
        ck = f"generic:c{ci}"
        for method in ("lbfgs", "sculpt", "adam"):
            wins = rng.integers(0, 2, size=4).astype(bool)
            expected[(ck, method)] = f"{wins.sum()}/4"
            for seed, w in enumerate(wins):
                records.append(_record(ck, d, m, N, seed, method, bool(w), 1.0 + seed if method == "lbfgs" else
                                       2.0 * (1.0 + seed), 1e-14 if w else 1e-3))
    text = render_summary(records)
    table = text.split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| regime")]
    assert len(rows) == 3
    header = [h.strip() for h in table.splitlines()[[i for i, l in enumerate(table.splitlines())
                                                      if l.startswith("| regime")][0]].strip("|").split("|")]
    for ci, row in enumerate(rows):
        cells = [c.strip() for c in row.strip("|").split("|")]
        for method in ("lbfgs", "sculpt", "adam"):
            assert cells[header.index(f"{method} succ")] == expected[(f"generic:c{ci}", method)]
        assert cells[header.index("sculpt ×lb")] == "2.00×"   # paired per trial, not a ratio of medians
        assert cells[header.index("lbfgs s")] == "2.50"         # median of 1, 2, 3, 4
    stats = summarize(records)
    assert [round(s.methods["adam"].rate * 4) for s in stats] == [int(expected[(s.key, "adam")][0]) for s in stats]


def test_summary_counts_errors_as_failures_with_infinite_error() -> None:
    recs = [_record("generic:a", 4, 1, 10, s, "lbfgs", False, 1.0, None) for s in range(3)]
    stats = summarize(recs)[0].methods["lbfgs"]
    assert stats.errors == 3 and stats.successes == 0 and math.isinf(stats.median_test)
    assert "0/3 (3 err)" in render_summary(recs) and "## Errors (3 runs)" in render_summary(recs)


def test_plots_are_written(tmp_path: Path) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed (optional extra 'plot'): no plots to check")
    from sculpt.bench.plots import write_plots

    res = run_sweep(grid_from_dict(TINY), tmp_path, scheduler="serial", progress=False)
    records = res.records + [dict(r, method="other", key=r["key"] + "x", success=False,
                                  phases=[{"name": "2-sculpt", "figures": {"rows_seen": 10, "rows_accepted": 4},
                                           "truth": {}, "status": "ok"}]) for r in res.records]
    paths = write_plots(records, tmp_path / "plots")
    assert {p.name for p in paths} == {"success_vs_N.png", "time_vs_size.png", "phases_vs_N.png"}
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 1000


# ------------------------------------------------------------------------------------------------ CLI
def test_cli_writes_records_summary_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "g.json").write_text(json.dumps(TINY))
    top = argparse.ArgumentParser(prog="sculpt")
    add_bench_parser(top.add_subparsers(dest="command"))
    args = top.parse_args(["bench", "--grid", str(tmp_path / "g.json"), "--out", str(tmp_path / "o"),
                           "--scheduler", "serial", "--no-progress", "--seeds", "1"]
                          + (["--plots"] if importlib.util.find_spec("matplotlib") else []))
    assert args.func(args) == 0
    records = _lines(tmp_path / "o" / "trials.jsonl")
    assert len(records) == 3 and {r["seed"] for r in records} == {0}
    summary = (tmp_path / "o" / "summary.md").read_text()
    assert summary in capsys.readouterr().out and summary.count("| generic") == 2 * 3  # main + parameter table
    assert json.loads((tmp_path / "o" / "grid.json").read_text())["grid"]["name"] == "tiny"
    args = top.parse_args(["bench", "--grid", str(tmp_path / "g.json"), "--out", str(tmp_path / "one"),
                           "--scheduler", "serial", "--no-progress", "--only", records[2]["trial_key"]])
    assert args.func(args) == 0
    assert [r["key"] for r in _lines(tmp_path / "one" / "trials.jsonl")] == [records[2]["key"]]
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "o" / "plots" / "success_vs_N.png").exists()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--methods", "sculpt,nope"])
    assert run_bench(build_parser().parse_args(["--grid", str(tmp_path / "none.toml")])) == 2


def test_recovery_script_uses_the_same_code(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "recovery.py"
    spec = importlib.util.spec_from_file_location("recovery_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "g.json").write_text(json.dumps(TINY))
    assert module.main(["--grid", str(tmp_path / "g.json"), "--out", str(tmp_path), "--scheduler", "serial",
                        "--no-progress"]) == 0
    assert len(_lines(tmp_path / "trials.jsonl")) == 6
    assert re.search(r"\| generic \| \(3,2,2\) \| 30 ", (tmp_path / "summary.md").read_text())


def test_local_processes_give_the_serial_records(tmp_path: Path) -> None:
    spec = {"name": "procs", "seeds": 2, "methods": ["lbfgs"], "test_samples": 200,
            "method_options": {"lbfgs": {"max_iter": 40}},
            "cells": [{"d": 3, "k": 2, "m": 1, "N": 30}]}
    grid = grid_from_dict(spec)
    serial = run_sweep(grid, tmp_path / "serial", scheduler="serial", progress=False).records
    procs = run_sweep(grid, tmp_path / "procs", scheduler="local", workers=2, progress=False).records
    assert len(serial) == 2 and all(r["status"] == "ok" for r in serial)
    assert [strip_timings(r) for r in serial] == [strip_timings(r) for r in procs]


def test_a_method_refusing_a_cell_is_recorded_as_a_failure_not_run(tmp_path: Path) -> None:
    calls: list[int] = []

    def picky(X: np.ndarray, Y: np.ndarray, m: int, *, seed: int, truth: Any = None) -> LearnResult:
        calls.append(len(X))
        return _oracle(X, Y, m, seed=seed, truth=truth)

    register("picky", picky, requires=lambda cell: None if cell.N >= 30 else f"needs N >= 30, got {cell.N}")
    spec = {"name": "p", "seeds": 1, "methods": ["picky"], "test_samples": 50,
            "cells": [{"d": 3, "k": 2, "m": 1, "N": [10, 30]}]}
    res = run_sweep(grid_from_dict(spec), tmp_path, scheduler="serial", progress=False)
    small, large = res.records
    assert calls == [30] and res.errors == 0
    assert small["status"] == "refused" and "needs N >= 30, got 10" in small["error"] and not small["success"]
    assert large["success"]
    for r in res.records:
        validate_record(r)
    text = render_summary(res.records)
    assert "0/1 (1 refused)" in text and "## Refused runs" in text


def test_quick_grid_runs_and_its_lines_follow_the_schema(tmp_path: Path) -> None:
    """`sculpt bench --quick` with the cheap methods (the learners' cost is the benchmark's business)."""
    args = build_parser().parse_args(["--quick", "--methods", "exact,lbfgs", "--out", str(tmp_path),
                                      "--scheduler", "serial", "--no-progress", "--seeds", "1"])
    status = run_bench(args)
    records = _lines(tmp_path / "trials.jsonl")
    planned = builtin_grid("quick").with_seeds(1).runs(["exact", "lbfgs"])
    assert status == 0 and sorted(r["key"] for r in records) == sorted(s.key for s in planned)
    for r in records:
        validate_record(r)
        assert r["status"] in ("ok", "refused")
    by_trial: dict[str, set[str]] = {}
    for r in records:
        by_trial.setdefault(r["trial_key"], set()).add(r["data_digest"])
    assert any(len(r) > 1 for r in [[x for x in records if x["trial_key"] == t] for t in by_trial])
    assert all(len(d) == 1 for d in by_trial.values())            # every method saw the same data
    assert all(r["success"] for r in records if r["method"] == "exact")
    assert (tmp_path / "summary.md").read_text().count("| generic |") == 2   # main + parameter table


def test_sculpt_command_line_has_the_bench_subcommand(tmp_path: Path) -> None:
    import sculpt.cli as cli
    (tmp_path / "g.json").write_text(json.dumps(TINY))
    status = cli.main(["bench", "--grid", str(tmp_path / "g.json"), "--out", str(tmp_path / "o"),
                       "--scheduler", "serial", "--no-progress"])
    assert status == 0 and len(_lines(tmp_path / "o" / "trials.jsonl")) == 6


def test_any_trial_can_be_rerun_alone_from_its_record(tmp_path: Path) -> None:
    from sculpt.bench.trials import spec_from_record

    records = run_sweep(grid_from_dict(TINY), tmp_path, scheduler="serial", progress=False).records
    for rec in (records[-1], records[1]):
        again = run_trial(spec_from_record(json.loads(json.dumps(rec))))
        assert strip_timings(again) == strip_timings(rec)
    broken = dict(records[0], seed=records[0]["seed"] + 1)
    with pytest.raises(ValueError, match="does not match"):
        spec_from_record(broken)


def test_adam_falls_back_to_the_numpy_adam_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    import sculpt.bench.methods as methods

    monkeypatch.setattr(methods, "adam_implementation", lambda: "numpy")
    spec = RunSpec(Cell("generic", 3, 2, 1, 30), 0, "adam", {"max_iter": 20, "lr_min": 1e-6, "threads": 1},
                   test_samples=50)
    monkeypatch.setattr("sculpt.bench.trials.adam_implementation", lambda: "numpy")
    rec = run_trial(spec)
    validate_record(rec)
    assert rec["status"] == "ok" and rec["implementation"] == "numpy" and rec["result_method"] == "adam"
    assert rec["iterations"] == 20


def test_jsonable_keeps_records_small_and_strict() -> None:
    from sculpt.bench.trials import jsonable

    out = jsonable({"a": np.arange(3), "big": np.ones((20, 20)), "trace": list(range(1000)), "x": np.float64("nan"),
                    "t": (np.int64(2), np.bool_(True)), "o": object})
    assert out["a"] == [0, 1, 2] and out["big"]["array_shape"] == [20, 20] and out["big"]["norm"] == 20.0
    assert out["trace"]["list_length"] == 1000 and out["trace"]["last"] == 999 and out["x"] is None
    assert out["t"] == [2, True] and isinstance(out["o"], str)
    json.dumps(out, allow_nan=False)


def test_a_method_the_grid_does_not_list_runs_in_every_cell(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`--methods vp-lm` on a grid that lists only other methods runs vp-lm everywhere (it ran nothing before);
    a selection with no run is an error, not an empty table."""
    register("oracle-too", _oracle)
    grid = grid_from_dict(TINY)
    assert {s.method for s in grid.runs(["oracle-too"])} == {"oracle-too"}
    assert len(grid.runs(["oracle-too"])) == len(grid.runs()) == 6
    assert len(grid.runs(["oracle", "oracle-too"])) == 12
    (tmp_path / "g.json").write_text(json.dumps(TINY))
    args = build_parser().parse_args(["--grid", str(tmp_path / "g.json"), "--methods", "oracle-too", "--out",
                                      str(tmp_path / "o"), "--scheduler", "serial", "--no-progress"])
    assert run_bench(args) == 0
    assert {r["method"] for r in _lines(tmp_path / "o" / "trials.jsonl")} == {"oracle-too"}
    args = build_parser().parse_args(["--grid", str(tmp_path / "g.json"), "--only", "no-such-key", "--out",
                                      str(tmp_path / "p"), "--no-progress"])
    assert run_bench(args) == 2 and "nothing to run" in capsys.readouterr().err


def test_plots_show_curves_or_are_not_written(tmp_path: Path) -> None:
    """One N per instance, one d, one m: no figure has a curve, so none is written; a log panel whose values are
    all zero (a span angle of 0 at m = 1) is left out instead of drawn empty."""
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed (optional extra 'plot'): no plots to check")
    from sculpt.bench.plots import write_plots

    single = {"name": "one", "seeds": 2, "methods": ["oracle"], "test_samples": 50,
              "cells": [{"regime": "generic", "d": 3, "k": 2, "m": 1, "N": 20}]}
    records = run_sweep(grid_from_dict(single), tmp_path / "s", scheduler="serial", progress=False).records
    assert write_plots(records, tmp_path / "none") == []
    res = run_sweep(grid_from_dict(TINY), tmp_path / "t", scheduler="serial", progress=False)
    zero_angle = [dict(r, phases=[{"name": "4-span", "figures": {}, "truth": {"span_angle_deg": 0.0},
                                   "status": "ok"}]) for r in res.records]
    assert "phases_vs_N.png" not in {p.name for p in write_plots(zero_angle, tmp_path / "zero")}


def test_the_N_column_is_described_as_what_it_is() -> None:
    res = render_summary([])
    assert "N (×2md/k): the training examples" in res and "2md² parameters" in res
