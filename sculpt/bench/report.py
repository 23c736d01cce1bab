"""Markdown summary of a sweep: one row per cell, four columns per method.

Per (cell, method): success = #runs with test relative MSE ≤ threshold over #runs; median test relative
MSE (a run without a model — error, refusal — counts as +inf); median wall time; and the time ratio to
the gradient peer = median over the cell's trials of time(method) / time(peer) on the same trial, the peer
being ``lbfgs-growing`` (L-BFGS on growing subsets until exact on held-out data) when the cell ran it, else
``lbfgs`` (times of runs
that ended with status "ok" only).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import Json, TrialRecord
from .grid import ALL_METHODS

__all__ = ["MethodStats", "CellSummary", "summarize", "markdown_table", "render_summary", "write_summary"]

REGIME_NOTES: dict[str, str] = {
    "generic": "planted instances of the default generator",
    "small-N": (
        "N at 1.2-3x 2md/k (the examples whose label entries, k·d each, are as many as the 2md² parameters) "
        "(docs/method.md#gd-failure-regimes, item 1: random-init L-BFGS failing here)"
    ),
    "weak-head": "one head's W 100x smaller (docs/method.md#gd-failure-regimes, item 2: a derivative-head valley for GD)",
    "near-identical": (
        "heads at relative Θ separation 0.03 (docs/method.md#gd-failure-regimes, item 3: a merged-head valley for GD)"
    ),
    "peaked": (
        "very peaked attention, ‖Θ_i‖_F = 40 (docs/method.md#gd-failure-regimes, item 4: GD ill-conditioning; that "
        "study used independent heads, plant() shares a component Θ_0)"
    ),
    "noisy": "label noise; success threshold raised to the noise floor",
    "gaussian": "Gaussian instead of ±1 inputs",
}


@dataclass
class MethodStats:
    """Figures of one method on one cell."""

    runs: int = 0
    successes: int = 0
    errors: int = 0
    refused: int = 0
    median_test: float | None = None
    median_theta: float | None = None
    median_w: float | None = None
    median_time: float | None = None
    ratio_lbfgs: float | None = None
    median_samples: float | None = None

    @property
    def rate(self) -> float:
        return self.successes / self.runs if self.runs else math.nan


@dataclass
class CellSummary:
    """One cell: its key, the cell fields, seeds seen and the per-method statistics."""

    key: str
    cell: dict[str, Json]
    seeds: list[int]
    methods: dict[str, MethodStats] = field(default_factory=dict)


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def summarize(records: Sequence[TrialRecord]) -> list[CellSummary]:
    """Group records by cell (in order of first appearance) and method."""
    cells: dict[str, CellSummary] = {}
    by: dict[tuple[str, str], list[TrialRecord]] = {}
    for r in records:
        cs = cells.setdefault(r["cell_key"], CellSummary(r["cell_key"], dict(r["cell"]), []))
        if r["seed"] not in cs.seeds:
            cs.seeds.append(r["seed"])
        by.setdefault((r["cell_key"], r["method"]), []).append(r)
    for (ck, method), rs in by.items():
        peer = "lbfgs-growing" if (ck, "lbfgs-growing") in by else "lbfgs"
        lbfgs_time = {r["trial_key"]: r.get("time") for r in by.get((ck, peer), []) if r.get("status") == "ok"}
        ratios = [
            r["time"] / lbfgs_time[r["trial_key"]]
            for r in rs
            if r.get("status") == "ok" and r.get("time") is not None and lbfgs_time.get(r["trial_key"])
        ]
        cells[ck].methods[method] = MethodStats(
            runs=len(rs),
            successes=sum(bool(r.get("success")) for r in rs),
            errors=sum(r.get("status") == "error" for r in rs),
            refused=sum(r.get("status") == "refused" for r in rs),
            median_test=_median(r["test_error"] if r.get("test_error") is not None else math.inf for r in rs),
            median_theta=_median(r.get("theta_error") for r in rs),
            median_w=_median(r.get("w_error") for r in rs),
            median_time=_median(r.get("time") for r in rs if r.get("status") == "ok"),
            ratio_lbfgs=_median(ratios),
            median_samples=_median(r.get("samples_used") for r in rs),
        )
    return list(cells.values())


def _e(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return "inf" if math.isinf(x) else f"{x:.1e}"


def _t(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.2f}" if x < 10 else f"{x:.0f}"


def _r(x: float | None) -> str:
    return "—" if x is None else (f"{x:.2f}×" if x < 10 else f"{x:.0f}×")


def _regime(cell: dict[str, Json]) -> str:
    extra = []
    if cell.get("weak_head") is not None:
        extra.append(f"weak {cell['weak_head']:g}")
    if cell.get("separation") is not None:
        extra.append(f"sep {cell['separation']:g}")
    return cell["regime"] + (f" ({', '.join(extra)})" if extra else "")


def _n(cell: dict[str, Json]) -> str:
    count = 2 * cell["m"] * cell["d"] / cell["k"]
    return f"{cell['N']} ({cell['N'] / count:.3g}×)"


def markdown_table(cells: Sequence[CellSummary], methods: Sequence[str] | None = None) -> str:
    """The per-cell table: descriptors, then per method ``succ`` (k/n), ``err`` (median test rel MSE),
    ``s`` (median seconds) and ``×lb`` (median time ratio to the gradient peer on the same trials)."""
    if methods is None:
        seen = {m for c in cells for m in c.methods}
        methods = [m for m in ALL_METHODS if m in seen] + sorted(seen - set(ALL_METHODS))
    head = ["regime", "(d,k,m)", "N (×2md/k)", "‖Θ‖", "inputs", "noise", "seeds"]
    for m in methods:
        head += [f"{m} succ", f"{m} err", f"{m} s", f"{m} ×lb"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells:
        row = [
            _regime(c.cell),
            f"({c.cell['d']},{c.cell['k']},{c.cell['m']})",
            _n(c.cell),
            f"{c.cell['scale']:g}",
            c.cell["distribution"],
            f"{c.cell['noise']:g}",
            str(len(c.seeds)),
        ]
        for m in methods:
            s = c.methods.get(m)
            if s is None:
                row += ["—"] * 4
            else:
                notes = [f"{s.errors} err"] * bool(s.errors) + [f"{s.refused} refused"] * bool(s.refused)
                err = f" ({', '.join(notes)})" if notes else ""
                row += [f"{s.successes}/{s.runs}{err}", _e(s.median_test), _t(s.median_time), _r(s.ratio_lbfgs)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def parameter_table(cells: Sequence[CellSummary], methods: Sequence[str]) -> str:
    """Median head-matched parameter errors (Θ / W) and samples used, per cell and method."""
    head = ["regime", "(d,k,m)", "N"] + [f"{m} θ err / W err / samples" for m in methods]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells:
        row = [_regime(c.cell), f"({c.cell['d']},{c.cell['k']},{c.cell['m']})", str(c.cell["N"])]
        for m in methods:
            s = c.methods.get(m)
            row.append(
                "—"
                if s is None
                else f"{_e(s.median_theta)} / {_e(s.median_w)} / "
                f"{'—' if s.median_samples is None else f'{s.median_samples:.0f}'}"
            )
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def render_summary(
    records: Sequence[TrialRecord], *, title: str = "Recovery benchmark", context: dict[str, Json] | None = None
) -> str:
    """The whole summary.md text: context, the main table, parameter errors, regime notes, errors."""
    cells = summarize(records)
    seen = {m for c in cells for m in c.methods}
    methods = [m for m in ALL_METHODS if m in seen] + sorted(seen - set(ALL_METHODS))
    thresholds = sorted({r["threshold"] for r in records})
    parts = [f"# {title}", ""]
    for k, v in (context or {}).items():
        parts.append(f"- {k}: {v}")
    parts += [
        f"- runs: {len(records)}, cells: {len(cells)}, methods: {', '.join(methods)}",
        f"- success: test relative MSE on fresh noise-free inputs ≤ {', '.join(f'{t:g}' for t in thresholds)}",
        "- N (×2md/k): the training examples, and N as a multiple of 2md/k: 2md/k examples give k·d label entries "
        "each, as many as the layer's 2md² parameters (so ×1 is the fewest any method can need)",
        "- columns per method: succ = successes/runs; err = median test relative MSE (no model = inf); "
        "s = median wall seconds of completed runs; ×lb = median per-trial time ratio to the gradient peer "
        "(lbfgs-growing when run, else lbfgs)",
        "",
        markdown_table(cells, methods),
        "",
        "## Head-matched parameter errors (medians)",
        "",
        parameter_table(cells, methods),
        "",
    ]
    regimes = sorted({c.cell["regime"] for c in cells})
    notes = [f"- **{r}**: {REGIME_NOTES[r]}" for r in regimes if r in REGIME_NOTES]
    if notes:
        parts += ["## Regimes", ""] + notes + [""]
    refused: dict[str, set[str]] = {}
    for r in records:
        if r.get("status") == "refused":
            refused.setdefault(r["method"], set()).add(str(r.get("error")))
    if refused:
        parts += ["## Refused runs (not run; counted as failures)", ""]
        parts += [f"- {m}: {msg}" for m, msgs in refused.items() for msg in sorted(msgs)]
        parts.append("")
    errs = [r for r in records if r.get("status") == "error"]
    if errs:
        parts += [f"## Errors ({len(errs)} runs)", ""]
        parts += [f"- `{r['key']}`: {r.get('error')}" for r in errs[:20]]
        parts.append("")
    return "\n".join(parts)


def write_summary(
    records: Sequence[TrialRecord],
    path: str | Path,
    *,
    title: str = "Recovery benchmark",
    context: dict[str, Json] | None = None,
) -> str:
    """Write :func:`render_summary` to ``path`` and return the text."""
    text = render_summary(records, title=title, context=context)
    Path(path).write_text(text, encoding="utf-8")
    return text
