"""Figures of a sweep (matplotlib, imported lazily; ``available()`` says whether it is installed).

- ``success_vs_N.png``: success rate against N per method, one panel per instance family (cells that
  differ only in N or in the regime label), families with the most N values first.
- ``time_vs_size.png``: median wall time of each cell (completed runs) against d and against m, per method.
- ``phases_vs_N.png``: the sculpting learner's phase diagnostics against N — acceptance rate of the
  sculpting rows, principal angle between the estimated and the true span, relative ΣW error.

A plot shows a curve or nothing: a panel needs a series with at least two points (two N values; two values of
d or m), a log-scaled panel keeps only positive values, and a figure left without a panel is not written.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, cast

from .grid import ALL_METHODS

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["available", "write_plots", "phase_diagnostics", "DIAGNOSTICS"]

#: a run's record as the sweep writes it (JSON: "cell", "method", "success", "time", "phases", ...)
Record = Mapping[str, object]
#: an instance family: (d, k, m, scale, distribution, noise, weak_head, separation)
Family = tuple[object, ...]


def available() -> bool:
    """Whether matplotlib is installed.

    Returns
    -------
    bool
    """
    return importlib.util.find_spec("matplotlib") is not None


def _find(mapping: object, *needles: str) -> float | None:
    """The first finite number in ``mapping`` whose key contains every needle (case-insensitive)."""
    if not isinstance(mapping, dict):
        return None
    for key, value in mapping.items():
        k = str(key).lower()
        if all(n in k for n in needles) and isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(value):
                return float(value)
    return None


def _phase(record: Record, prefix: str) -> dict[str, object] | None:
    for p in cast("list[object]", record.get("phases") or []):
        if isinstance(p, dict) and str(p.get("name", "")).startswith(prefix):
            return p
    return None


def _acceptance(record: Record) -> float | None:
    p = _phase(record, "2-sculpt") or _phase(record, "3-refine")
    if p is None:
        return None
    f = p.get("figures", {})
    rate = _find(f, "accept", "rate")
    if rate is not None:
        return rate
    seen, acc = _find(f, "rows_seen"), _find(f, "rows_accepted")
    return acc / seen if seen and acc is not None else None


def _span_angle(record: Record) -> float | None:
    p = _phase(record, "4-span")
    if p is None:
        return None
    v = _find(p.get("truth", {}), "angle", "deg")
    return v if v is not None else _find(p.get("figures", {}), "angle", "deg")


def _sum_w_error(record: Record) -> float | None:
    for prefix in ("3-refine", "1-sum-w"):
        p = _phase(record, prefix)
        if p is not None:
            v = _find(p.get("truth", {}), "sum_w", "err")
            v = v if v is not None else _find(p.get("truth", {}), "err")
            if v is not None:
                return v
    return None


#: diagnostic name -> extractor from a record (None when the record lacks it)
DIAGNOSTICS: dict[str, Callable[[Record], float | None]] = {
    "acceptance rate": _acceptance,
    "span angle (degrees)": _span_angle,
    "ΣW relative error": _sum_w_error,
}


def phase_diagnostics(record: Record) -> dict[str, float | None]:
    """Every diagnostic of ``DIAGNOSTICS`` for one record.

    Parameters
    ----------
    record
        A run's record.

    Returns
    -------
    dict of str to float or None
        Each diagnostic, None where the record lacks it.
    """
    return {name: fn(record) for name, fn in DIAGNOSTICS.items()}


_STYLE = {
    "sculpt": ("tab:blue", "o"),
    "exact": ("tab:green", "s"),
    "lbfgs": ("tab:orange", "^"),
    "adam": ("tab:red", "v"),
}


def _style(method: str, i: int) -> dict[str, str]:
    colour, marker = _STYLE.get(method, (f"C{4 + i % 6}", "D"))
    return {"color": colour, "marker": marker}


def _cell(record: Record) -> dict[str, object]:
    return cast("dict[str, object]", record["cell"])


def _n(record: Record) -> int:
    return cast(int, _cell(record)["N"])


def _family(cell: Mapping[str, object]) -> Family:
    """The instance family of a cell: everything but N and the regime label (so that e.g. the small-N
    cells and the generic cell of the same (d, k, m) form one success-vs-N curve)."""
    return (
        cell["d"],
        cell["k"],
        cell["m"],
        cell["scale"],
        cell["distribution"],
        cell["noise"],
        cell.get("weak_head"),
        cell.get("separation"),
    )


def _family_label(fam: Family) -> str:
    d, k, m, scale, law, noise, weak, sep = fam
    extra = "".join(
        [
            f" weak {weak:g}" if weak else "",
            f" sep {sep:g}" if sep else "",
            f" noise {noise:g}" if noise else "",
            "" if law == "boolean" else f" {law}",
        ]
    )
    return f"({d},{k},{m}) ‖Θ‖={scale:g}{extra}"


def _methods(records: Sequence[Record]) -> list[str]:
    seen = {str(r["method"]) for r in records}
    return [m for m in ALL_METHODS if m in seen] + sorted(seen - set(ALL_METHODS))


def _grid_axes(plt: ModuleType, n: int, size: float = 3.6) -> tuple[Figure, list[Axes]]:
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * 0.8 * rows), squeeze=False)
    flat = [a for row in axes for a in row]
    for a in flat[n:]:
        a.set_visible(False)
    return fig, flat[:n]


def _log_x(ax: Axes, ns: Sequence[float]) -> None:
    """Log N axis with at least a decade of room and no minor-tick labels (single-N panels stay readable)."""
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    if ns:
        lo, hi = min(ns), max(ns)
        pad = max(1.5, math.sqrt(10 * lo / hi))
        ax.set_xlim(lo / pad, hi * pad)
    ax.xaxis.set_minor_formatter(NullFormatter())


def _save(plt: ModuleType, fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _success_plot(plt: ModuleType, records: Sequence[Record], methods: list[str], out: Path) -> Path | None:
    """success_vs_N.png: one panel per instance family, families with the most N values first."""
    families: dict[Family, dict[str, dict[int, list[bool]]]] = {}
    regimes: dict[Family, list[str]] = {}
    for r in records:
        cell = _cell(r)
        regs = regimes.setdefault(_family(cell), [])
        if cell["regime"] not in regs:
            regs.append(str(cell["regime"]))
        runs = families.setdefault(_family(cell), {})
        runs.setdefault(str(r["method"]), {}).setdefault(_n(r), []).append(bool(r.get("success")))
    curves = {fam: per for fam, per in families.items() if any(len(ns) >= 2 for ns in per.values())}
    shown = dict(sorted(curves.items(), key=lambda kv: -len({n for per in kv[1].values() for n in per})))
    if not shown:
        return None
    fig, axes = _grid_axes(plt, len(shown))
    for ax, (fam, per_method) in zip(axes, shown.items()):
        for i, m in enumerate(methods):
            if m in per_method:
                ns = sorted(per_method[m])
                shift = 1 + 0.03 * (i - (len(methods) - 1) / 2)  # side by side, not on top of each other
                rates = [sum(per_method[m][n]) / len(per_method[m][n]) for n in ns]
                st = _style(m, i)
                ax.plot([n * shift for n in ns], rates, "-", label=m, color=st["color"], marker=st["marker"])
        _log_x(ax, [n for per in per_method.values() for n in per])
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("N (examples)")
        ax.set_ylabel("success rate")
        ax.set_title(f"{'/'.join(regimes[fam])} {_family_label(fam)}", fontsize=8)
        ax.legend(fontsize=7)
    return _save(plt, fig, out / "success_vs_N.png")


def _time_plot(plt: ModuleType, records: Sequence[Record], methods: list[str], out: Path) -> Path | None:
    """time_vs_size.png: median wall time of each cell (completed runs) against d and against m."""
    cell_times: dict[tuple[str, str], list[float]] = {}
    cell_of: dict[str, dict[str, object]] = {}
    for r in records:
        if r.get("time") is not None and r.get("status") == "ok":
            cell_times.setdefault((str(r["cell_key"]), str(r["method"])), []).append(cast(float, r["time"]))
            cell_of[str(r["cell_key"])] = _cell(r)
    sizes = [size for size in ("d", "m") if len({cast(int, c[size]) for c in cell_of.values()}) >= 2]
    if not cell_times or not sizes:
        return None
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.5 * len(sizes), 3.6), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        for i, m in enumerate(methods):
            pts = [
                (cast(int, cell_of[ck][size]), statistics.median(ts)) for (ck, mm), ts in cell_times.items() if mm == m
            ]
            if pts:
                jitter = 1 + 0.015 * (i - (len(methods) - 1) / 2)
                st = _style(m, i)
                xs, ys = [p[0] * jitter for p in pts], [max(p[1], 1e-4) for p in pts]
                ax.scatter(xs, ys, label=m, s=18, color=st["color"], marker=st["marker"])
        ax.set_yscale("log")
        ax.set_xlabel(size)
        ax.set_ylabel("median wall time per cell (s)")
        ax.legend(fontsize=7)
    return _save(plt, fig, out / "time_vs_size.png")


def _phases_plot(plt: ModuleType, records: Sequence[Record], out: Path) -> Path | None:
    """phases_vs_N.png: each phase diagnostic's median against N, one line per family and method."""
    diag: dict[str, dict[Family, list[tuple[int, float]]]] = {name: {} for name in DIAGNOSTICS}
    for r in records:
        for name, value in phase_diagnostics(r).items():
            if value is not None and (name == "acceptance rate" or value > 0):  # the others are log-scaled
                diag[name].setdefault(_family(_cell(r)) + (r["method"],), []).append((_n(r), value))
    diag = {
        name: curves
        for name, series in diag.items()
        if (curves := {fam: pts for fam, pts in series.items() if len({n for n, _ in pts}) >= 2})
    }
    if not diag:
        return None
    fig, axes = _grid_axes(plt, len(diag), size=4.2)
    for ax, (name, series) in zip(axes, diag.items()):
        for fam, pts in series.items():
            ns = sorted({n for n, _ in pts})
            med = [statistics.median(v for n2, v in pts if n2 == n) for n in ns]
            ax.plot(ns, med, "o-", label=_family_label(fam[:-1]) + ("" if fam[-1] == "sculpt" else f" [{fam[-1]}]"))
        _log_x(ax, [n for pts in series.values() for n, _ in pts])
        if name == "acceptance rate":
            ax.set_ylim(0, 1.05)
        else:
            ax.set_yscale("log")
        ax.set_xlabel("N (examples)")
        ax.set_ylabel(name)
        ax.legend(fontsize=6)
    return _save(plt, fig, out / "phases_vs_N.png")


def write_plots(records: Sequence[Record], out_dir: str | Path) -> list[Path]:
    """Write the figures for ``records`` into ``out_dir``.

    Parameters
    ----------
    records
        The sweep's run records.
    out_dir
        Folder for the PNG files (created).

    Returns
    -------
    list of Path
        The figures written (a figure without data is skipped). RuntimeError when matplotlib is not installed.
    """
    if not available():
        raise RuntimeError("plots need matplotlib (pip install 'sculpt-attention[plot]')")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    methods = _methods(records)
    written = [
        _success_plot(plt, records, methods, out),
        _time_plot(plt, records, methods, out),
        _phases_plot(plt, records, out),
    ]
    return [p for p in written if p is not None]
