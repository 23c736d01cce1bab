"""Engine benchmark: affine hull and LP backends (engine_hull), cutting-plane methods (engine_cuts) and
separation-only min-norm points and widths (engine_separation).

    python benchmarks/engine.py [--quick] [--out results/engine.json]

Prints each part's tables and writes one JSON file with every measurement and the machine's versions.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_cuts  # noqa: E402
import engine_hull  # noqa: E402
import engine_separation  # noqa: E402
from _report import write_json  # noqa: E402  (benchmarks/ is on sys.path when run as a script)


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version(), "machine": platform.machine()}
    for pkg in ("numpy", "scipy", "cvxpy", "highspy", "clarabel", "scs", "ellalgo", "sculpt"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "absent"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds instead of minutes")
    parser.add_argument("--out", default="results/engine.json", help="where to write the JSON")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    report = {"versions": versions(), "quick": args.quick,
              "hull": engine_hull.run(args.quick), "cuts": engine_cuts.run(args.quick),
              "separation": engine_separation.run(args.quick)}
    report["wall_seconds"] = time.perf_counter() - t0
    write_json(args.out, report, seconds=report["wall_seconds"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
