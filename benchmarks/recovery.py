"""Recovery benchmark: the same sweep as ``sculpt bench`` (same flags, same code).

    python benchmarks/recovery.py [--grid FILE] [--quick] [--out DIR] [--scheduler local|serial|ADDRESS]
                                  [--workers N] [--methods sculpt,exact,lbfgs,adam] [--seeds N] [--plots]

Prints the per-cell summary table; writes <out>/trials.jsonl, <out>/summary.md and, with --plots,
<out>/plots/*.png. The built-in grids are package data: sculpt/bench/grids/ (default.toml, quick.toml).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sculpt.bench.cli import build_parser, run_bench


def main(argv: list[str] | None = None) -> int:
    return run_bench(build_parser(prog="benchmarks/recovery.py").parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
