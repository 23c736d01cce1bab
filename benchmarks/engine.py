"""Engine benchmark: affine hull and LP backends (engine_hull), cutting-plane methods (engine_cuts),
separation-only min-norm points and widths (engine_separation), the flux polytopes of cobra's bundled models
against PolyRound and FVA (engine_metabolic) and implicit equalities against cddlib (engine_cdd).

    python benchmarks/engine.py [--quick] [--models ...] [--cdd-dir DIR] [--out results/engine.json]

Prints each part's tables and writes one JSON file with every measurement and the machine's versions.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_cdd
import engine_cuts
import engine_hull
import engine_metabolic
import engine_separation
from _report import write_json


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version(), "machine": platform.machine()}
    for pkg in ("numpy", "scipy", "cvxpy", "highspy", "clarabel", "scs", "ellalgo", "cobra", "polyround",
                "pycddlib", "sculpt"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "absent"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds instead of minutes")
    parser.add_argument("--out", default="results/engine.json", help="where to write the JSON")
    parser.add_argument("--models", nargs="*", default=None,
                        help=f"metabolic models (default: {engine_metabolic.MODELS}; --quick: textbook)")
    parser.add_argument("--cdd-dir", default=None, help="H-representation .ine files for the cdd table")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    report = {"versions": versions(), "quick": args.quick,
              "hull": engine_hull.run(args.quick), "cuts": engine_cuts.run(args.quick),
              "separation": engine_separation.run(args.quick),
              "metabolic": engine_metabolic.run(args.quick, args.models),
              "cdd": engine_cdd.run(args.quick, args.cdd_dir)}
    report["wall_seconds"] = time.perf_counter() - t0
    write_json(args.out, report, seconds=report["wall_seconds"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
