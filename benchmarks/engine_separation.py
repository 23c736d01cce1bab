"""Separation-only geometry: ``min_norm_point`` and ``width`` of a body known only by its separation oracle.

    python benchmarks/engine_separation.py [--quick] [--out results/engine_separation.json]

Bodies: random polytopes {a_iᵀx <= a_iᵀx0 + U(0.3, 1.5)} (3n unit rows) plus the box |x − x0|_∞ <= 2, wrapped
as ``OracleBody(n, separate=P.separate)`` and started from the ball B(0, ‖x0‖ + 2√n + 1) that contains them.
Answers are compared with the explicit polytope's (KKT-verified min-norm point, two LPs per width).
Methods: the ellipsoid method on the epigraph {‖x‖ <= t} (what ``min_norm_point`` uses), ACCPM on the same
epigraph (the alternative it replaced; full mode only, n <= 20, 3,000-iteration budget), and the
ellipsoid on ±u·x for the width. tol = 1e-8.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import write_json

from oracles import NormEpigraph, OracleBody, Polytope, cutting_plane, min_norm_point, width

TOL = 1e-8


def problem(n: int, seed: int) -> tuple[Polytope, float, np.ndarray]:
    rng = np.random.default_rng(seed)
    x0 = rng.normal(size=n)
    A = rng.normal(size=(3 * n, n))
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    b = A @ x0 + rng.uniform(0.3, 1.5, 3 * n)
    P = Polytope(np.vstack([A, np.eye(n), -np.eye(n)]), np.concatenate([b, x0 + 2.0, 2.0 - x0]))
    return P, float(np.linalg.norm(x0)) + 2.0 * math.sqrt(n) + 1.0, rng.normal(size=n)


class _Counting:
    """The polytope's separation oracle, counting calls."""

    def __init__(self, P: Polytope) -> None:
        self.P, self.calls = P, 0

    def __call__(self, x: np.ndarray):
        self.calls += 1
        return self.P.separate(x)


def _run(method: str, n: int, seed: int) -> dict:
    P, R, u = problem(n, seed)
    oracle = _Counting(P)
    body = OracleBody(n, separate=oracle)
    t0 = time.perf_counter()
    status = "optimal"
    if method == "min-norm (ellipsoid, epigraph)":
        x = min_norm_point(body, radius=R, tol=TOL)
        err = float(np.linalg.norm(x - min_norm_point(P)))
    elif method == "min-norm (ACCPM, epigraph)":
        top = R
        res = cutting_plane(NormEpigraph(body), np.append(np.zeros(n), top), math.hypot(R, top) * 1.01,
                            objective=np.append(np.zeros(n), 1.0), tol=TOL, max_iter=3000)
        status = res.status
        err = float(np.linalg.norm(res.x[:n] - min_norm_point(P))) if res.x is not None else math.inf
    else:
        w = width(body, u, radius=R, tol=TOL)
        err = abs(w - width(P, u))
    return {"method": method, "n": n, "seed": seed, "seconds": time.perf_counter() - t0,
            "oracle_calls": oracle.calls, "error": err, "status": status}


def run(quick: bool) -> list[dict]:
    sizes = (5, 10) if quick else (5, 10, 20, 40)
    seeds = range(2 if quick else 3)
    methods = ["min-norm (ellipsoid, epigraph)", "width (ellipsoid)"]
    rows = []
    for n in sizes:
        for method in methods + ([] if quick or n > 20 else ["min-norm (ACCPM, epigraph)"]):
            runs = [_run(method, n, s) for s in seeds]
            rows.append({"n": n, "method": method, "seeds": len(runs),
                         "median s": statistics.median(r["seconds"] for r in runs),
                         "max s": max(r["seconds"] for r in runs),
                         "median calls": statistics.median(r["oracle_calls"] for r in runs),
                         "max error": max(r["error"] for r in runs),
                         "optimal": sum(r["status"] == "optimal" for r in runs), "runs": runs})
    _print(rows)
    return rows


def _print(rows: list[dict]) -> None:
    print(f"\nSeparation-only min-norm point and width, tol={TOL:g} (error: ‖x − x*‖ or |width − LP width|)")
    print(f"{'n':>3} {'method':>32} {'optimal':>8} {'median s':>9} {'max s':>7} {'median calls':>13} {'max error':>10}")
    for r in rows:
        print(f"{r['n']:>3} {r['method']:>32} {r['optimal']:>5}/{r['seeds']:<2} {r['median s']:>9.3g} "
              f"{r['max s']:>7.3g} {r['median calls']:>13.0f} {r['max error']:>10.2g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 5, 10 and 2 seeds: seconds")
    parser.add_argument("--out", default="results/engine_separation.json", help="where to write the JSON")
    args = parser.parse_args(argv)
    write_json(args.out, run(args.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
