"""Scaling benchmark (the benchmark of record, issue 24): sculpt, auto, the growing L-BFGS peer and VP-LM on a
ladder of shapes up to d = 64, k = 64, m = 8 and N = 200,000, with the exponent of time in d, k, m and N.

    python benchmarks/scaling.py [--quick] [--cells bool-8.4.2-20k ...] [--methods sculpt auto peer vplm]
                                 [--seeds 3] [--time-limit 600] [--memory-limit 8] [--out results/scaling.json]
                                 [--plots results/scaling] [--merge part1.json part2.json]

The ladder (cell names read inputs-d.k.m-N): Boolean planted layers (``sculpt.plant``; ``max_cond=100`` at
d >= 24, where cond(Σ W_i) <= 10 is rare) along four lines, each varying one size with the other three held,
so that each exponent is a fit along one line:

- k-axis, (d, m, N) = (8, 2, 20k): k = 4, 8, 16, 32, 64;
- N-axis, (d, k, m) = (8, 4, 2): N = 2k, 20k, 200k (the 20k cell is the k-axis's);
- d-axis, (k, m, N) = (8, 2, 80k): d = 8, 16, 32, 64 (80k: what the peer had at d = 64 in the issue);
- m-axis, (d, k, N) = (16, 8, 60k): m = 1, 2, 4, 8 (60k: what (16,8,8) had in the issue);

and off the lines: Gaussian inputs at (8,8,2) 20k and (16,8,4) 60k, and heads from a freshly initialised
``torch.nn.MultiheadAttention`` (``from_torch``: heads of rank d/m; skipped, with the reason printed, when
torch is not installed) at (16,8,4) 60k and at attention's own shape (64,8,8) 80k. 19 cells; ``--quick`` runs
3 tiny cells (N = 2,000: (8,4,2) and (8,8,2) planted, (8,4,2) from torch) with 1 seed.

Each (method, cell, seed) runs in its own process (benchmarks/_isolated.py): the same data for every method
(benchmarks/learner.py's instance, draws and runners), one BLAS thread, an untimed warm-up of the method on a
tiny instance, then the timed call. Peak memory is that process's ``ru_maxrss`` (imports, data and test set
included: about 110 MB at the smallest cells, 290 MB when torch is imported); a run is killed after
1.1 × ``--time-limit`` + 30 s (the set-up and scoring around the call) and its address space is capped at
``--memory-limit`` GB: such runs are recorded as "timeout" / "memory", as is a run that returned after the
limit. The peer and VP-LM get ``--time-limit`` as their own limit (no new start after
it). "exact" is benchmarks/learner.py's: test relative MSE <= 1e-12 on 5,000 fresh inputs and head-matched
parameter errors <= 1e-6.

Prints a Markdown table (per method: exact/seeds · median s · peak MB · the step that did the work: for sculpt
"phases" when phase 6's model already validated, "polish" when the polish got it there, "fail@<phase>" for
the phase where the last attempt stopped; for auto ``info["model_from"]``; for the peer the subset size and
L-BFGS runs; for VP-LM the start and its subset), then the exponent of time along each line per method (least
squares of log median time over the exact runs on log size; cells with no exact run are left out and the
excluded runs counted). Writes every run to ``--out`` and log–log plots to ``--plots``; ``--merge a.json
b.json`` reports on runs already recorded (a ladder run in parts, a cell rerun) and runs nothing. Never
asserts timings.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread, as benchmarks/learner.py
sys.path.insert(0, str(Path(__file__).resolve().parent))

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Iterable, Sequence  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from _isolated import Outcome, peak_rss_mb, run_isolated  # noqa: E402
from _report import write_json  # noqa: E402
from learner import N_TEST, ROWS, Row, _runners, _score, make_instance  # noqa: E402

from sculpt import sample_inputs  # noqa: E402
from sculpt.toolkit import versions  # noqa: E402
from sculpt.toolkit import write_json as write_json_quiet  # noqa: E402
from sculpt.toolkit.jsonio import to_jsonable  # noqa: E402

METHODS = ("sculpt", "auto", "peer", "vplm")
AXES = ("d", "k", "m", "N")
WARM_UP = ROWS["generic-842-2k"]  # benchmarks/learner.py's warm-up row
PREFIX = {("boolean", False): "bool", ("gaussian", False): "gauss", ("boolean", True): "torch"}


def count(n: int) -> str:
    """A count as the tables write it: 64, 1.5k, 20k, 200k."""
    return str(n) if n < 1000 else f"{n / 1000:g}k"


def cell(d: int, k: int, m: int, n: int, dist: str = "boolean", torch: bool = False) -> Row:
    """A ladder cell named ``<inputs>-d.k.m-N`` (planted heads get ``max_cond=100`` at d >= 24)."""
    plant = {"max_cond": 100.0} if d >= 24 and not torch else {}
    return Row(f"{PREFIX[dist, torch]}-{d}.{k}.{m}-{count(n)}", d, k, m, n, dist=dist, plant=plant, torch=torch)


LADDER = [
    # k-axis, (d, m, N) = (8, 2, 20k)
    *(cell(8, k, 2, 20_000) for k in (4, 8, 16, 32, 64)),
    # N-axis, (d, k, m) = (8, 4, 2), with bool-8.4.2-20k
    *(cell(8, 4, 2, n) for n in (2_000, 200_000)),
    # d-axis, (k, m, N) = (8, 2, 80k)
    *(cell(d, 8, 2, 80_000) for d in (8, 16, 32, 64)),
    # m-axis, (d, k, N) = (16, 8, 60k)
    *(cell(16, 8, m, 60_000) for m in (1, 2, 4, 8)),
    # off the lines: Gaussian inputs, torch's initialisation
    *(cell(d, 8, m, n, "gaussian") for d, m, n in ((8, 2, 20_000), (16, 4, 60_000))),
    *(cell(d, 8, m, n, torch=True) for d, m, n in ((16, 4, 60_000), (64, 8, 80_000))),
]
QUICK = [cell(8, 4, 2, 2_000), cell(8, 8, 2, 2_000), cell(8, 4, 2, 2_000, torch=True)]
CELLS = {c.name: c for c in LADDER + QUICK}


# ----------------------------------------------------------------------------------------- the ladder's lines
def size(row: Row, axis: str) -> int:
    """The row's size along ``axis`` ("d", "k", "m" or "N")."""
    return {"d": row.d, "k": row.k, "m": row.m, "N": row.n}[axis]


def _family(row: Row) -> tuple[object, ...]:
    """Inputs and heads, ``max_cond`` aside (it follows d along the d-axis)."""
    return row.dist, row.torch, tuple(sorted((k, v) for k, v in row.plant.items() if k != "max_cond"))


def axis_lines(cells: Sequence[Row]) -> dict[str, list[Row]]:
    """For each axis, the longest line of ``cells`` varying that size with the family and the three other
    sizes held (ties: the first in ``cells``), sorted by size; an empty list when no two cells form one."""
    out: dict[str, list[Row]] = {}
    for axis in AXES:
        groups: dict[tuple[object, ...], list[Row]] = {}
        for c in cells:
            held = tuple(size(c, a) for a in AXES if a != axis)
            groups.setdefault((_family(c), held), []).append(c)
        best: list[Row] = []
        for group in groups.values():
            distinct = {size(c, axis): c for c in reversed(group)}  # the first cell of each size
            if len(distinct) >= 2 and len(distinct) > len(best):
                best = [distinct[s] for s in sorted(distinct)]
        out[axis] = best
    return out


def held_text(line: Sequence[Row], axis: str) -> str:
    """``(k,m,N) = (8,2,80k)``: the sizes a line holds."""
    if not line:
        return "–"
    others = [a for a in AXES if a != axis]
    vals = [count(size(line[0], a)) if a == "N" else str(size(line[0], a)) for a in others]
    return f"({','.join(others)}) = ({','.join(vals)})"


# ------------------------------------------------------------------------------------------------ one run
def make_data(row: Row, seed: int, truth: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training inputs, labels and the test inputs: the draws of benchmarks/learner.py's ``run_one``."""
    gen = np.random.default_rng([seed, row.d, row.k, row.m, 0 if row.dist == "boolean" else 1])
    X = sample_inputs(row.n, row.k, row.d, rng=gen, distribution=row.dist)
    Xt = sample_inputs(N_TEST, row.k, row.d, rng=gen, distribution=row.dist)
    return X, truth(X), Xt


def sculpt_step(phases: Sequence[Any], converged: bool, tol: float) -> str:
    """What did the work in a sculpt run: "phases" (phase 6's model already validated at ``tol``), "polish"
    (the polish got it there), "fail@<phase>" (the last attempt's failed phase) or "polish > tol"; with the
    number of attempts (phases 1–3 on more examples) when more than one."""
    starts = [i for i, p in enumerate(phases) if p.name == "1-sum-w"]
    last = list(phases[starts[-1] :]) if starts else list(phases)
    failed = next((p for p in last if p.status == "failed"), None)
    if not phases:
        step = "no phases"
    elif failed is not None:
        step = f"fail@{failed.name}"
    elif converged:
        proj = next((p for p in last if p.name == "6-projections"), None)
        val = proj.figures.get("validation_error") if proj is not None else None
        step = "phases" if val is not None and val <= tol else "polish"
    else:
        step = "polish > tol"
    return step + (f", {len(starts)} attempts" if len(starts) > 1 else "")


def work_step(method: str, res: Any) -> str:
    """Which step of the method's route did the work (see the module's docstring)."""
    info = res.info
    if method == "sculpt":
        return sculpt_step(res.phases, bool(res.converged), float(info.get("tol") or 1e-12))
    if method == "auto":
        return str(info.get("model_from") or "none")
    if method == "peer":
        stages = info.get("stages") or []
        return f"{count(int(info.get('examples') or 0))} ex, {len(stages)} run{'s' * (len(stages) != 1)}"
    starts = info.get("starts") or []
    return f"start {len(starts)}, {count(int(starts[-1]['examples']))} ex" if starts else "no start"


def _details(res: Any) -> dict[str, Any]:
    info = {k: v for k, v in res.info.to_dict().items() if k != "settings"}
    phases = [{"name": p.name, "status": p.status, "time": p.time, "message": p.message[:300]} for p in res.phases]
    return {"info": info, "phases": phases}


def run_one(payload: dict[str, Any]) -> dict[str, Any]:
    """One (cell, seed, method) run, in the calling process: warm-up, data, the timed call, the score.
    ``payload``: ``cell`` (a Row's fields), ``seed``, ``method``, ``time_limit``, ``warm_up``."""
    row, seed, method = Row(**payload["cell"]), int(payload["seed"]), str(payload["method"])
    limits = {"peer": float(payload["time_limit"]), "lbfgs": float(payload["time_limit"])}
    if payload.get("warm_up", True):  # lazy imports and first calls, untimed (as benchmarks/learner.py)
        warm = make_instance(WARM_UP, 99)
        _runners(WARM_UP, 99, warm, limits)[method](*make_data(WARM_UP, 99, warm)[:2])
    truth = make_instance(row, seed)
    X, Y, Xt = make_data(row, seed, truth)
    rec: dict[str, Any] = {"rss_before_mb": peak_rss_mb()}
    t = time.perf_counter()
    try:
        res = _runners(row, seed, truth, limits)[method](X, Y)
    except ValueError as exc:  # the route refuses the shape or the data: recorded, as in benchmarks/learner.py
        rec.update(status="refused", exact=False, time=time.perf_counter() - t, step="refused", reason=str(exc))
        return rec
    rec["time"] = time.perf_counter() - t
    rec.update(_score(res.model, truth, Xt))
    rec.update(
        status="ok",
        converged=bool(res.converged),
        reason=res.reason,
        samples_used=int(res.samples_used),
        step=work_step(method, res),
        details=_details(res),
    )
    return dict(to_jsonable(rec))  # type: ignore[arg-type]


def record(row: Row, seed: int, method: str, outcome: Outcome, time_limit: float) -> dict[str, Any]:
    """The JSON record of one isolated run: the cell, seed and method, what the child returned (or why it did
    not), its peak memory and wall time; a run that returned after ``time_limit`` is a "timeout"."""
    rec: dict[str, Any] = {
        "cell": row.name,
        "d": row.d,
        "k": row.k,
        "m": row.m,
        "n": row.n,
        "dist": row.dist,
        "heads": "torch" if row.torch else "planted",
        "seed": seed,
        "method": method,
    }
    if outcome.status == "ok" and outcome.result is not None:
        rec.update(outcome.result)
        if rec.get("time") is not None and rec["time"] > time_limit:
            rec.update(
                status="timeout",
                exact=False,
                exact_after_limit=rec.get("exact"),
                message=f"returned after the {time_limit:.0f} s limit",
            )
    else:
        rec.update(status=outcome.status, exact=False, time=None, step=outcome.status, message=outcome.message)
    rec.update(peak_mb=outcome.peak_mb, wall=outcome.wall)
    return rec


# --------------------------------------------------------------------------------------------- the exponents
def fit_exponent(sizes: Sequence[float], times: Sequence[float]) -> tuple[float, float | None]:
    """Least-squares slope of log time on log size, and its standard error (None with two points)."""
    x, y = np.log(np.asarray(sizes, float)), np.log(np.asarray(times, float))
    if x.size < 2 or np.ptp(x) == 0:
        raise ValueError("an exponent needs two sizes or more")
    slope, icpt = np.polyfit(x, y, 1)
    if x.size == 2:
        return float(slope), None
    resid = y - (slope * x + icpt)
    return float(slope), float(np.sqrt(resid @ resid / (x.size - 2) / np.sum((x - x.mean()) ** 2)))


def _runs_of(runs: Iterable[dict[str, Any]], name: str, method: str) -> list[dict[str, Any]]:
    return [r for r in runs if r["cell"] == name and r["method"] == method]


def exponents(
    runs: Sequence[dict[str, Any]], lines: dict[str, list[Row]], methods: Sequence[str]
) -> list[dict[str, Any]]:
    """Per method and axis: the exponent of median time over the exact runs along the axis's line, the cells
    it uses, the cells with no exact run (left out) and how many runs were excluded as not exact."""
    out = []
    for method in methods:
        for axis in AXES:
            used, dropped, sizes, times, excluded = [], [], [], [], 0
            for c in lines.get(axis, []):
                rs = _runs_of(runs, c.name, method)
                ok = [r["time"] for r in rs if r.get("exact") and r.get("time") is not None]
                excluded += len(rs) - len(ok)
                if ok:
                    used.append(c.name)
                    sizes.append(size(c, axis))
                    times.append(float(np.median(ok)))
                elif rs:
                    dropped.append(c.name)
            slope, err = fit_exponent(sizes, times) if len(set(sizes)) >= 2 else (None, None)
            out.append(
                {
                    "method": method,
                    "axis": axis,
                    "exponent": slope,
                    "stderr": err,
                    "cells": used,
                    "cells_without_exact_run": dropped,
                    "runs_excluded": excluded,
                }
            )
    return out


# ------------------------------------------------------------------------------------------------ the tables
def _seconds(t: float) -> str:
    return f"{t:.2f} s" if t < 10 else f"{t:.1f} s" if t < 100 else f"{t:.0f} s"


def _step(run: dict[str, Any]) -> str:
    """A run's step, or its status when it did not return; "timeout (step)" when it returned late."""
    status, step = str(run.get("status")), run.get("step")
    if status in ("ok", "refused"):
        return str(step)
    return f"{status} ({step})" if step and step != status else status


def step_summary(runs: Sequence[dict[str, Any]]) -> str:
    """The runs' steps: one name when they agree, else each with its count, commonest first."""
    steps = Counter(_step(r) for r in runs)
    if len(steps) == 1:
        return next(iter(steps))
    return ", ".join(f"{s} ×{n}" for s, n in steps.most_common())


def summary_cell(runs: Sequence[dict[str, Any]], time_limit: float | None = None) -> str:
    """``x/seeds · median s · peak MB · step`` for one method on one cell (median over the runs that
    returned; peak = the largest over the seeds)."""
    if not runs:
        return "–"
    exact = sum(bool(r.get("exact")) for r in runs)
    times = [r["time"] for r in runs if r.get("time") is not None]
    if times:
        t = _seconds(float(np.median(times)))
    else:
        t = f"> {time_limit:.0f} s" if time_limit and any(r["status"] == "timeout" for r in runs) else "–"
    peaks = [r["peak_mb"] for r in runs if r.get("peak_mb") is not None]
    mem = f"{max(peaks):,.0f} MB" if peaks else "– MB"
    return f"{exact}/{len(runs)} · {t} · {mem} · {step_summary(runs)}"


def inputs_text(row: Row) -> str:
    return f"{row.dist.capitalize()}, {'torch' if row.torch else 'planted'}"


def ladder_table(
    runs: Sequence[dict[str, Any]], cells: Sequence[Row], methods: Sequence[str], time_limit: float | None = None
) -> str:
    """One row per cell that has runs: cell, (d,k,m), N, inputs, then ``summary_cell`` per method."""
    lines = [
        "| cell | (d,k,m) | N | inputs | " + " | ".join(methods) + " |",
        "|---|---|---|---|" + "---|" * len(methods),
    ]
    for c in cells:
        if not any(r["cell"] == c.name for r in runs):
            continue
        per = [summary_cell(_runs_of(runs, c.name, mth), time_limit) for mth in methods]
        lines.append(f"| {c.name} | ({c.d},{c.k},{c.m}) | {c.n:,} | {inputs_text(c)} | " + " | ".join(per) + " |")
    return "\n".join(lines)


def exponent_table(fits: Sequence[dict[str, Any]], lines: dict[str, list[Row]], methods: Sequence[str]) -> str:
    """Exponent (± standard error) per method and axis, with the cells used and runs excluded; then, per
    axis, the line's cells (one sentence when the cells form no line)."""
    if not any(len(line) >= 2 for line in lines.values()):
        return "No exponent: no two of these cells differ in one size only."
    head = [f"{a}: {held_text(lines.get(a, []), a)}" for a in AXES]
    out = ["| method | " + " | ".join(head) + " |", "|---|" + "---|" * len(AXES)]
    by = {(f["method"], f["axis"]): f for f in fits}
    for method in methods:
        cols = []
        for axis in AXES:
            f = by.get((method, axis))
            if f is None or f["exponent"] is None:
                txt = "–" + (f" ({len(f['cells'])} cell{'s' * (len(f['cells']) != 1)})" if f else "")
            else:
                err = f" ± {f['stderr']:.2f}" if f["stderr"] is not None else ""
                txt = f"{f['exponent']:.2f}{err} ({len(f['cells'])} cells)"
            if f is not None and f["runs_excluded"]:
                txt += f"; {f['runs_excluded']} excluded"
            cols.append(txt)
        out.append(f"| {method} | " + " | ".join(cols) + " |")
    out.append("")
    for axis in AXES:
        names = ", ".join(c.name for c in lines.get(axis, [])) or "no line in these cells"
        out.append(f"- {axis}-axis: {names}")
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------------- plots
def _medians(
    runs: Sequence[dict[str, Any]], line: Sequence[Row], method: str, axis: str, exact: bool
) -> list[tuple[int, float]]:
    """(size, median time) along a line: over the exact runs (``exact``), or over the runs that returned on
    the cells with no exact run."""
    out = []
    for c in line:
        rs = _runs_of(runs, c.name, method)
        has_exact = any(r.get("exact") for r in rs)
        ts = [r["time"] for r in rs if r.get("time") is not None and (r.get("exact") or not exact)]
        if ts and has_exact == exact:
            out.append((size(c, axis), float(np.median(ts))))
    return out


def write_plots(
    runs: Sequence[dict[str, Any]],
    lines: dict[str, list[Row]],
    fits: Sequence[dict[str, Any]],
    methods: Sequence[str],
    out_dir: str | Path,
) -> list[Path]:
    """``scaling_<axis>.png``: median time against the axis's size, log–log, one colour per method (exact
    runs: circles joined, the fitted exponent in the legend; cells with no exact run: the median time to
    fail, ×)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    by = {(f["method"], f["axis"]): f for f in fits}
    paths = []
    for axis, line in lines.items():
        if len(line) < 2:
            continue
        fig, ax = plt.subplots(figsize=(5.5, 4.0))
        for i, method in enumerate(methods):
            f = by.get((method, axis))
            slope = f" (slope {f['exponent']:.2f})" if f and f["exponent"] is not None else ""
            if ok := _medians(runs, line, method, axis, exact=True):
                ax.loglog(*zip(*ok), "o-", color=f"C{i}", label=method + slope)
            if bad := _medians(runs, line, method, axis, exact=False):
                ax.loglog(*zip(*bad), "x", color=f"C{i}", ms=9, label=None if ok else f"{method}: no exact run")
        ax.plot([], [], "kx", label="×: no exact run (time to fail)")
        sizes = [size(c, axis) for c in line]
        ax.set_xticks(sizes, [count(x) if axis == "N" else str(x) for x in sizes])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel(f"{axis} at {held_text(line, axis)}")
        ax.set_ylabel("median time (s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        paths.append(out / f"scaling_{axis}.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    return paths


# ------------------------------------------------------------------------------------------------------- CLI
def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--cells", nargs="+", default=None, choices=list(CELLS), help="cells (default: the ladder)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--seeds", type=int, default=None, help="seeds per cell (default 3; 1 with --quick)")
    ap.add_argument("--seed-start", type=int, default=0, help="first seed")
    ap.add_argument("--quick", action="store_true", help="smoke run: " + ", ".join(c.name for c in QUICK))
    ap.add_argument("--time-limit", type=float, default=600.0, help="seconds per run (default 600)")
    ap.add_argument("--memory-limit", type=float, default=8.0, help="GB of address space per run (default 8)")
    ap.add_argument("--out", default=None, help="JSON file for every run (rewritten after each run)")
    ap.add_argument("--plots", default=None, metavar="DIR", help="write scaling_<axis>.png there (matplotlib)")
    ap.add_argument(
        "--merge",
        nargs="+",
        default=None,
        metavar="JSON",
        help="run nothing: report the runs of these --out files (a later file's run of the same cell, "
        "seed and method replaces an earlier one)",
    )
    return ap.parse_args(argv)


def runnable(cells: Sequence[Row]) -> tuple[list[Row], list[str]]:
    """The cells this environment can run, and why the others are skipped (torch cells without torch)."""
    if importlib.util.find_spec("torch") is not None:
        return list(cells), []
    skipped = [f"{c.name}: skipped, torch is not installed (pip install -e '.[torch]')" for c in cells if c.torch]
    return [c for c in cells if not c.torch], skipped


def merged(paths: Sequence[str | Path]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The runs of several ``--out`` files, the last of each (cell, seed, method) kept, and the last meta."""
    runs: dict[tuple[str, int, str], dict[str, Any]] = {}
    meta: dict[str, Any] = {}
    for path in paths:
        report = json.loads(Path(path).read_text())
        meta = report.get("meta", {})
        runs.update({(r["cell"], r["seed"], r["method"]): r for r in report["runs"]})
    return list(runs.values()), meta


def measure(
    cells: Sequence[Row], seeds: Iterable[int], args: argparse.Namespace, meta: dict[str, Any]
) -> list[dict[str, Any]]:
    """Every (cell, seed, method) in its own process, in that order; progress on stderr; ``--out`` rewritten
    after each run, so a long sweep can be read while it goes."""
    kill_after, memory = 1.1 * args.time_limit + 30.0, args.memory_limit * 2**30
    runs: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for c in cells:
        for seed in seeds:
            for method in args.methods:
                payload = {
                    "cell": dataclasses.asdict(c),
                    "seed": seed,
                    "method": method,
                    "time_limit": args.time_limit,
                    "warm_up": True,
                }
                outcome = run_isolated(__file__, "run_one", payload, kill_after=kill_after, memory_limit=memory)
                runs.append(record(c, seed, method, outcome, args.time_limit))
                r = runs[-1]
                took = _seconds(r["time"]) if r.get("time") is not None else "–"
                print(
                    f"{c.name} seed {seed} {method}: {r['status']} exact={r.get('exact')} time={took} "
                    f"peak={r['peak_mb'] or 0:,.0f} MB step={r.get('step')}",
                    file=sys.stderr,
                    flush=True,
                )
                if args.out:
                    meta.update(load_average=list(os.getloadavg()), total_time=time.perf_counter() - t0)
                    write_json_quiet(args.out, {"meta": meta, "runs": runs}, indent=1)
    return runs


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    t0 = time.perf_counter()
    if args.merge:
        runs, meta = merged(args.merge)
        names = set(args.cells or (r["cell"] for r in runs))
        cells = [c for c in CELLS.values() if c.name in names and any(r["cell"] == c.name for r in runs)]
        methods = [m for m in args.methods if any(r["method"] == m for r in runs)]
        skipped, time_limit = list(meta.get("skipped", [])), float(meta.get("time_limit", args.time_limit))
        meta.update(merged_from=[str(p) for p in args.merge], cells=[dataclasses.asdict(c) for c in cells])
    else:
        cells, skipped = runnable([CELLS[n] for n in args.cells] if args.cells else QUICK if args.quick else LADDER)
        for s in skipped:
            print(s, file=sys.stderr)
        seeds = range(args.seed_start, args.seed_start + (args.seeds or (1 if args.quick else 3)))
        meta = {
            "versions": versions(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
            "time_limit": args.time_limit,
            "memory_limit_gb": args.memory_limit,
            "cells": [dataclasses.asdict(c) for c in cells],
            "skipped": skipped,
        }
        runs, methods, time_limit = measure(cells, seeds, args, meta), list(args.methods), args.time_limit
    lines = axis_lines(cells)
    fits = exponents(runs, lines, methods)
    print(ladder_table(runs, cells, methods, time_limit))
    print()
    print(exponent_table(fits, lines, methods))
    for s in skipped:
        print(f"- {s}")
    if args.out:
        meta.update(
            load_average=list(os.getloadavg()),
            total_time=time.perf_counter() - t0,
            lines={a: [c.name for c in line] for a, line in lines.items()},
        )
        write_json(args.out, {"meta": meta, "runs": runs, "exponents": fits}, seconds=time.perf_counter() - t0)
    if args.plots:
        for p in write_plots(runs, lines, fits, methods, args.plots):
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
