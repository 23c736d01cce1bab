"""Figures of a sweep (matplotlib, imported lazily; ``available()`` says whether it is installed).

- ``success_vs_N.png``: success rate against N per method, one panel per instance family (cells that
  differ only in N or in the regime label), families with the most N values first.
- ``time_vs_size.png``: median wall time of each cell (completed runs) against d and against m, per method.
- ``phases_vs_N.png``: the sculpting learner's phase diagnostics against N — acceptance rate of the
  sculpting rows, principal angle between the estimated and the true span, relative ΣW error.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .grid import ALL_METHODS

__all__ = ["available", "write_plots", "phase_diagnostics", "DIAGNOSTICS"]


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def _find(mapping: Any, *needles: str) -> float | None:
    """The first finite number in ``mapping`` whose key contains every needle (case-insensitive)."""
    if not isinstance(mapping, dict):
        return None
    for key, value in mapping.items():
        k = str(key).lower()
        if all(n in k for n in needles) and isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(value):
                return float(value)
    return None


def _phase(record: dict[str, Any], prefix: str) -> dict[str, Any] | None:
    for p in record.get("phases") or []:
        if isinstance(p, dict) and str(p.get("name", "")).startswith(prefix):
            return p
    return None


def _acceptance(record: dict[str, Any]) -> float | None:
    p = _phase(record, "2-sculpt") or _phase(record, "3-refine")
    if p is None:
        return None
    f = p.get("figures", {})
    rate = _find(f, "accept", "rate")
    if rate is not None:
        return rate
    seen, acc = _find(f, "rows_seen"), _find(f, "rows_accepted")
    return acc / seen if seen and acc is not None else None


def _span_angle(record: dict[str, Any]) -> float | None:
    p = _phase(record, "4-span")
    if p is None:
        return None
    v = _find(p.get("truth", {}), "angle", "deg")
    return v if v is not None else _find(p.get("figures", {}), "angle", "deg")


def _sum_w_error(record: dict[str, Any]) -> float | None:
    for prefix in ("3-refine", "1-sum-w"):
        p = _phase(record, prefix)
        if p is not None:
            v = _find(p.get("truth", {}), "sum_w", "err")
            v = v if v is not None else _find(p.get("truth", {}), "err")
            if v is not None:
                return v
    return None


#: diagnostic name -> extractor from a record (None when the record lacks it)
DIAGNOSTICS: dict[str, Callable[[dict[str, Any]], float | None]] = {
    "acceptance rate": _acceptance,
    "span angle (degrees)": _span_angle,
    "ΣW relative error": _sum_w_error,
}


def phase_diagnostics(record: dict[str, Any]) -> dict[str, float | None]:
    return {name: fn(record) for name, fn in DIAGNOSTICS.items()}


_STYLE = {
    "sculpt": ("tab:blue", "o"),
    "exact": ("tab:green", "s"),
    "lbfgs": ("tab:orange", "^"),
    "adam": ("tab:red", "v"),
}


def _style(method: str, i: int) -> dict[str, Any]:
    colour, marker = _STYLE.get(method, (f"C{4 + i % 6}", "D"))
    return {"color": colour, "marker": marker}


def _family(cell: dict[str, Any]) -> tuple[Any, ...]:
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


def _family_label(fam: tuple[Any, ...]) -> str:
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


def _methods(records: Sequence[dict[str, Any]]) -> list[str]:
    seen = {r["method"] for r in records}
    return [m for m in ALL_METHODS if m in seen] + sorted(seen - set(ALL_METHODS))


def _grid_axes(plt: Any, n: int, size: float = 3.6) -> tuple[Any, list[Any]]:
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * 0.8 * rows), squeeze=False)
    flat = [a for row in axes for a in row]
    for a in flat[n:]:
        a.set_visible(False)
    return fig, flat[:n]


def _log_x(ax: Any, ns: Sequence[float]) -> None:
    """Log N axis with at least a decade of room and no minor-tick labels (single-N panels stay readable)."""
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    if ns:
        lo, hi = min(ns), max(ns)
        pad = max(1.5, math.sqrt(10 * lo / hi))
        ax.set_xlim(lo / pad, hi * pad)
    ax.xaxis.set_minor_formatter(NullFormatter())


def write_plots(records: Sequence[dict[str, Any]], out_dir: str | Path) -> list[Path]:
    """Write the figures for ``records`` into ``out_dir`` and return their paths. Raises RuntimeError
    when matplotlib is not installed."""
    if not available():
        raise RuntimeError("plots need matplotlib (pip install 'sculpt[plot]')")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    methods = _methods(records)
    written: list[Path] = []

    families: dict[tuple[Any, ...], dict[str, dict[int, list[bool]]]] = {}
    regimes: dict[tuple[Any, ...], list[str]] = {}
    for r in records:
        regs = regimes.setdefault(_family(r["cell"]), [])
        if r["cell"]["regime"] not in regs:
            regs.append(r["cell"]["regime"])
        runs = families.setdefault(_family(r["cell"]), {})
        runs.setdefault(r["method"], {}).setdefault(r["cell"]["N"], []).append(bool(r.get("success")))
    shown = dict(sorted(families.items(), key=lambda kv: -len({n for per in kv[1].values() for n in per})))
    if shown:
        fig, axes = _grid_axes(plt, len(shown))
        for ax, (fam, per_method) in zip(axes, shown.items()):
            for i, m in enumerate(methods):
                if m in per_method:
                    ns = sorted(per_method[m])
                    shift = 1 + 0.03 * (i - (len(methods) - 1) / 2)  # side by side, not on top of each other
                    ax.plot(
                        [n * shift for n in ns],
                        [sum(per_method[m][n]) / len(per_method[m][n]) for n in ns],
                        "-",
                        label=m,
                        **_style(m, i),
                    )
            _log_x(ax, [n for per in per_method.values() for n in per])
            ax.set_ylim(-0.05, 1.05)
            ax.set_xlabel("N (examples)")
            ax.set_ylabel("success rate")
            ax.set_title(f"{'/'.join(regimes[fam])} {_family_label(fam)}", fontsize=8)
            ax.legend(fontsize=7)
        fig.tight_layout()
        written.append(out / "success_vs_N.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)

    cell_times: dict[tuple[str, str], list[float]] = {}
    cell_of: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.get("time") is not None and r.get("status") == "ok":
            cell_times.setdefault((r["cell_key"], r["method"]), []).append(r["time"])
            cell_of[r["cell_key"]] = r["cell"]
    if cell_times:
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
        for ax, size in zip(axes, ("d", "m")):
            for i, m in enumerate(methods):
                pts = [(cell_of[ck][size], statistics.median(ts)) for (ck, mm), ts in cell_times.items() if mm == m]
                if pts:
                    jitter = 1 + 0.015 * (i - (len(methods) - 1) / 2)
                    st = _style(m, i)
                    ax.scatter(
                        [p[0] * jitter for p in pts],
                        [max(p[1], 1e-4) for p in pts],
                        label=m,
                        s=18,
                        color=st["color"],
                        marker=st["marker"],
                    )
            ax.set_yscale("log")
            ax.set_xlabel(size)
            ax.set_ylabel("median wall time per cell (s)")
            ax.legend(fontsize=7)
        fig.tight_layout()
        written.append(out / "time_vs_size.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)

    diag: dict[str, dict[tuple[Any, ...], list[tuple[int, float]]]] = {name: {} for name in DIAGNOSTICS}
    for r in records:
        for name, value in phase_diagnostics(r).items():
            if value is not None:
                diag[name].setdefault(_family(r["cell"]) + (r["method"],), []).append((r["cell"]["N"], value))
    diag = {k: v for k, v in diag.items() if v}
    if diag:
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
        fig.tight_layout()
        written.append(out / "phases_vs_N.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    return written
