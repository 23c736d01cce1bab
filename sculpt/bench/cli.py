"""Command line of the recovery benchmark: ``sculpt bench`` and ``python benchmarks/recovery.py``.

    sculpt bench [--grid FILE] [--quick] [--out DIR] [--scheduler local|serial|ADDRESS] [--workers N]
                 [--methods sculpt,exact,lbfgs,adam] [--seeds N] [--only TEXT] [--plots] [--retry-errors]
                 [--no-progress]

Writes <out>/trials.jsonl (one record per run, schema in ``sculpt.bench``), <out>/summary.md,
<out>/grid.json (the grid as read, with the command-line overrides) and, with --plots, <out>/plots/*.png;
prints the summary table to stdout.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TypeAlias

from .._argtypes import positive_int
from .grid import ALL_METHODS, Grid, builtin_grid, load_grid
from .methods import registered

#: what ``add_subparsers`` returns (``sculpt.cli`` registers ``bench`` on it)
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

__all__ = ["add_bench_arguments", "add_bench_parser", "build_parser", "run_bench", "main"]

DESCRIPTION = (
    "Recovery benchmark: plant layers over a grid of (d,k,m), Θ scale, N, input law, label noise "
    "and seeds; run sculpt / exact / lbfgs / adam on the same data; write trials.jsonl and "
    "summary.md. Re-running into the same --out resumes."
)


def _methods(text: str) -> list[str]:
    """A comma list of registered methods (the learner's routes and the peers, ``sculpt.bench.methods``)."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    known = [*ALL_METHODS, *(n for n in registered() if n not in ALL_METHODS)]
    bad = [n for n in names if n not in known]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"--methods takes a comma list from {','.join(known)}; got {text!r}")
    return names


def add_bench_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The bench flags (shared by ``sculpt bench`` and benchmarks/recovery.py)."""
    p.add_argument(
        "--grid",
        metavar="FILE",
        help="grid file (.toml or .json); default: the built-in grid "
        "sculpt/bench/grids/default.toml, or quick.toml with --quick",
    )
    p.add_argument("--quick", action="store_true", help="the built-in quick grid (well under a minute)")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="output folder (default results/bench or results/bench-quick); re-running into it skips finished runs",
    )
    p.add_argument(
        "--scheduler",
        default="local",
        metavar="local|serial|ADDRESS",
        help="'local' processes on this machine (default), 'serial', or a dask.distributed "
        "scheduler address such as tcp://host:8786",
    )
    p.add_argument(
        "--workers", type=positive_int, default=None, metavar="N", help="local worker processes (default min(2, cores))"
    )
    p.add_argument(
        "--methods",
        type=_methods,
        default=None,
        metavar="LIST",
        help=f"comma list from {','.join(ALL_METHODS)} or any other registered method, e.g. the routes "
        "gradient and vp-lm (default: the grid's; exact only runs at m=1)",
    )
    p.add_argument("--seeds", type=positive_int, default=None, metavar="N", help="override: seeds 0..N-1 per cell")
    p.add_argument("--plots", action="store_true", help="also write plots/*.png (needs matplotlib)")
    p.add_argument(
        "--only",
        metavar="TEXT",
        default=None,
        help="run only the runs whose key contains TEXT (e.g. a trial key from trials.jsonl, "
        "'near-identical', ':seed2:', ':lbfgs@')",
    )
    p.add_argument("--retry-errors", action="store_true", help="redo runs that ended in an error")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def add_bench_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """Register ``bench`` on an argparse sub-parser collection; sets ``func=run_bench``."""
    p = subparsers.add_parser(
        "bench", help="recovery benchmark over a grid of planted instances", description=DESCRIPTION
    )
    add_bench_arguments(p)
    p.set_defaults(func=run_bench)
    return p


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    return add_bench_arguments(argparse.ArgumentParser(prog=prog, description=DESCRIPTION))


def _grid(args: argparse.Namespace) -> Grid:
    if args.grid:
        return load_grid(args.grid)
    return builtin_grid("quick" if args.quick else "default")


def run_bench(args: argparse.Namespace) -> int:
    """Run the sweep described by ``args``; write trials.jsonl, grid.json, summary.md (and plots).
    Returns the process exit status: 0, or 1 when some runs ended in an error."""
    from ..toolkit import versions, write_json
    from . import report
    from .runner import run_sweep

    try:
        grid = _grid(args)
    except (ValueError, TypeError) as exc:
        print(f"sculpt bench: {exc}", file=sys.stderr)
        return 2
    if args.seeds:
        try:
            grid = grid.with_seeds(args.seeds)
        except ValueError as exc:
            print(f"sculpt bench: {exc}", file=sys.stderr)
            return 2
    if not any(args.only is None or args.only in s.key for s in grid.runs(args.methods)):
        chosen = ",".join(args.methods) if args.methods else "(the grid's)"
        only = f" and --only {args.only!r}" if args.only else ""
        source = f" ({args.grid})" if args.grid else ""  # the file to fix, as every other refusal of a grid names it
        print(
            f"sculpt bench: nothing to run: grid {grid.name!r}{source} has no run with --methods {chosen}{only}",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out or ("results/bench-quick" if args.quick and not args.grid else "results/bench"))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"sculpt bench: --out: cannot create directory {str(out)!r}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    write_json(
        out / "grid.json",
        {"grid": grid.source, "overrides": {"seeds": args.seeds, "methods": args.methods, "only": args.only}},
    )
    if args.plots:
        from .plots import available

        if not available():
            print(
                "sculpt bench: --plots needs matplotlib, which is not installed; no plots will be written",
                file=sys.stderr,
            )
    try:
        res = run_sweep(
            grid,
            out,
            methods=args.methods,
            scheduler=args.scheduler,
            workers=args.workers,
            progress=not args.no_progress,
            retry_errors=args.retry_errors,
            only=args.only,
        )
    except RuntimeError as exc:
        print(f"sculpt bench: {exc}", file=sys.stderr)
        return 2
    command = getattr(args, "command_line", None) or shlex.join(["sculpt bench", *sys.argv[1:]])
    context = {
        "grid": grid.name + (f" — {grid.description}" if grid.description else ""),
        "command": f"`{command}`",
        "scheduler": args.scheduler,
        "records": f"{out / 'trials.jsonl'} ({res.ran} run now, {res.skipped} from earlier runs; "
        f"sweep wall time {res.wall:.0f} s)",
        "versions": ", ".join(f"{k} {v}" for k, v in versions().items()),
    }
    text = report.write_summary(
        res.records, out / "summary.md", title=f"Recovery benchmark: {grid.name}", context=context
    )
    print(text)
    if args.plots:
        from .plots import available, write_plots

        if available():
            written = write_plots(res.records, out / "plots")
            for path in written:
                print(f"wrote {path}")
            if not written:
                print(
                    "sculpt bench: no plot written: every curve needs two points (two N values of one instance, or "
                    "two values of d or m), which this sweep does not have",
                    file=sys.stderr,
                )
    print(
        f"{res.ran} runs done, {res.skipped} skipped (already in {out / 'trials.jsonl'}), "
        f"{res.errors} errors, {res.wall:.1f} s",
        file=sys.stderr,
    )
    for msg in res.error_messages[:5]:
        print(f"  error: {msg}", file=sys.stderr)
    return 1 if res.errors else 0


def main(argv: list[str] | None = None) -> int:
    return run_bench(build_parser().parse_args(argv))
