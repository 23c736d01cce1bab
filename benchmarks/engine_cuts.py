"""Cutting-plane benchmark: oracles.ellipsoid and oracles.cutting_plane (ACCPM) against ellalgo 0.9.

    python benchmarks/engine_cuts.py [--quick] [--out results/engine_cuts.json]

Problems: random polytope feasibility. x0 at distance U(0.2, 0.6)·R from the start centre 0 (R = 10),
m = 3n unit rows a_i with b_i = a_iᵀx0 + r(1 + U(0, 1)), r = 1e-3·R: a body of size ~r far from the
centre. Every method gets the same separation oracle (the most violated row, tolerance 1e-9) and the same
start ball B(0, R); we count oracle calls and wall time until a point of the body is found.
Methods: ellalgo ``cutting_plane_feas`` on ``Ell(R², 0)``; ``ellipsoid(memory=0)`` (textbook deep cuts);
``ellipsoid`` (default: stored cuts the centre violates are reused without an oracle call);
``cutting_plane`` (ACCPM). Table 2: linear minimisation (objective a random unit vector) to tol 1e-6,
ellalgo ``cutting_plane_optim`` (stop when its tsq < tol²) against ours; error = value - LP optimum.
Table 3: ``affine_hull_by_ellipsoid`` (tol 1e-7) on flat polytopes (3n random rows around x0 plus k hidden
equalities as ± pairs or as triples e, r, -e-r): oracle calls, time, and the accuracy of the result
(|F̂·basis| for the unit true normals F̂, |F̂·(point - x0)|).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import write_json

from oracles import Polytope
from oracles.cutting_plane import cutting_plane
from oracles.ellipsoid import ellipsoid
from oracles.hull_ellipsoid import affine_hull_by_ellipsoid

R = 10.0
ORACLE_TOL = 1e-9


def feasibility_problem(n: int, seed: int, r_frac: float = 1e-3, rows: int = 3) -> tuple[Polytope, np.ndarray]:
    rng = np.random.default_rng(seed)
    x0 = rng.normal(size=n)
    x0 *= rng.uniform(0.2, 0.6) * R / np.linalg.norm(x0)
    A = rng.normal(size=(rows * n, n))
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    b = A @ x0 + r_frac * R * (1.0 + rng.uniform(0.0, 1.0, rows * n))
    return Polytope(A, b), x0


def optimisation_problem(n: int, seed: int) -> tuple[Polytope, np.ndarray]:
    """3n unit rows with slack U(0.5, 2) at x0 plus the box |x - x0|_∞ <= 2 (bounded), inside B(0, R)."""
    rng = np.random.default_rng(seed)
    x0 = rng.normal(size=n)
    x0 *= 0.3 * R / np.linalg.norm(x0) / max(1.0, math.sqrt(n) / 4)
    A = rng.normal(size=(3 * n, n))
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    b = A @ x0 + rng.uniform(0.5, 2.0, 3 * n)
    A = np.vstack([A, np.eye(n), -np.eye(n)])
    b = np.concatenate([b, x0 + 2.0, 2.0 - x0])
    c = rng.normal(size=n)
    return Polytope(A, b), c / np.linalg.norm(c)


class _Counted:
    """The polytope's separation oracle in ellalgo's form (g, β) with β = gᵀx - b, counting calls."""

    def __init__(self, P: Polytope, c: np.ndarray | None = None) -> None:
        self.P, self.c, self.calls = P, c, 0

    def assess_feas(self, x: np.ndarray):
        self.calls += 1
        cut = self.P.separate(x, ORACLE_TOL)
        if cut is None:
            return None
        return cut.normal, float(cut.normal @ x - cut.offset)

    def assess_optim(self, x: np.ndarray, gamma: float):
        """ellalgo maximises gamma: here gamma = -cᵀx (minimise cᵀx)."""
        cut = self.assess_feas(x)
        if cut is not None:
            return cut, None
        value = -float(self.c @ x)
        if value > gamma:
            return (self.c, 0.0), value
        return (self.c, float(self.c @ x) + gamma), None


def _ellalgo_feas(P: Polytope, n: int, max_iter: int) -> dict:
    from ellalgo import Ell, Options, cutting_plane_feas

    orc = _Counted(P)
    t = time.perf_counter()
    x, _ = cutting_plane_feas(orc, Ell(R * R, np.zeros(n)), Options(max_iters=max_iter, tolerance=1e-20))
    dt = time.perf_counter() - t
    ok = x is not None and P.contains(np.asarray(x), ORACLE_TOL)
    return {"calls": orc.calls, "seconds": dt, "status": "feasible" if ok else "failed"}


def _ours_feas(fn, P: Polytope, n: int, max_iter: int, **kw) -> dict:
    t = time.perf_counter()
    res = fn(P, np.zeros(n), R, max_iter=max_iter, oracle_tol=ORACLE_TOL, **kw)
    dt = time.perf_counter() - t
    ok = res.status == "feasible" and P.contains(res.x, ORACLE_TOL)
    return {"calls": res.oracle_calls, "seconds": dt, "status": res.status if ok else f"failed:{res.status}",
            "iterations": res.iterations}


FEAS_METHODS = {
    "ellalgo": lambda P, n, it: _ellalgo_feas(P, n, it),
    "ellipsoid(memory=0)": lambda P, n, it: _ours_feas(ellipsoid, P, n, it, memory=0),
    "ellipsoid": lambda P, n, it: _ours_feas(ellipsoid, P, n, it),
    "cutting_plane": lambda P, n, it: _ours_feas(cutting_plane, P, n, it),
}


def _ellalgo_optim(P: Polytope, c: np.ndarray, n: int, tol: float) -> dict:
    from ellalgo import Ell, Options, cutting_plane_optim

    orc = _Counted(P, c)
    t = time.perf_counter()
    x, gamma, _ = cutting_plane_optim(orc, Ell(R * R, np.zeros(n)), -math.inf,
                                      Options(max_iters=400 * n * n + 2000, tolerance=tol * tol))
    dt = time.perf_counter() - t
    value = None if x is None else float(c @ x)
    return {"calls": orc.calls, "seconds": dt, "value": value}


def _ours_optim(fn, P: Polytope, c: np.ndarray, n: int, tol: float) -> dict:
    t = time.perf_counter()
    res = fn(P, np.zeros(n), R, objective=c, tol=tol, oracle_tol=ORACLE_TOL)
    dt = time.perf_counter() - t
    return {"calls": res.oracle_calls, "seconds": dt, "value": res.value, "status": res.status}


def hull_problem(n: int, k: int, style: str, seed: int) -> tuple[Polytope, np.ndarray, np.ndarray]:
    """3n random rows with slack U(0.5, 2)·‖a‖ at x0 plus k hidden equalities (pairs, or triples: 2k eqs)."""
    rng = np.random.default_rng(seed)
    x0 = rng.normal(size=n)
    A = rng.normal(size=(3 * n, n))
    b = A @ x0 + rng.uniform(0.5, 2.0, 3 * n) * np.linalg.norm(A, axis=1)
    if style == "pairs":
        F = rng.normal(size=(k, n))
        G = np.vstack([F, -F])
    else:
        groups = [rng.normal(size=(2, n)) for _ in range(k)]
        F = np.vstack(groups)
        G = np.vstack([np.vstack([g[0], g[1], -g[0] - g[1]]) for g in groups])
    A = np.vstack([A, G])
    b = np.concatenate([b, G @ x0])
    perm = rng.permutation(A.shape[0])
    return Polytope(A[perm], b[perm]), F, x0


class _CountedBody:
    """Wraps a body's separation oracle with a call counter (for the hull table)."""

    def __init__(self, P: Polytope) -> None:
        self.P, self.calls = P, 0

    def separate(self, x, tol=1e-9):
        self.calls += 1
        return self.P.separate(x, tol)


def _hull_table(quick: bool) -> list[dict]:
    from oracles import OracleBody

    rows = []
    for n in ([5, 10] if quick else [5, 10, 20]):
        for style in ("pairs", "triples"):
            k = max(1, n // 4)
            for seed in (range(2) if quick else range(3)):
                P, F, x0 = hull_problem(n, k, style, seed)
                counted = _CountedBody(P)
                body = OracleBody(n, separate=counted.separate)
                t = time.perf_counter()
                hull = affine_hull_by_ellipsoid(body, np.zeros(n), float(np.linalg.norm(x0)) + 10.0, tol=1e-7)
                dt = time.perf_counter() - t
                Fn = F / np.linalg.norm(F, axis=1, keepdims=True)
                rows.append({"n": n, "style": style, "hidden eqs": F.shape[0], "seed": seed,
                             "dim ok": hull.dim == n - np.linalg.matrix_rank(F), "calls": counted.calls,
                             "seconds": dt, "max |F̂ basis|": float(np.abs(Fn @ hull.basis).max()),
                             "max |F̂ (point - x0)|": float(np.abs(Fn @ (hull.point - x0)).max())})
    return rows


def _median(xs: list[float]) -> float:
    return float(np.median(xs)) if xs else float("nan")


def run(quick: bool) -> dict:
    """Both tables as a dict (per-run records plus per-n summaries); prints them."""
    from scipy.optimize import linprog

    dims = [5, 10, 20] if quick else [5, 10, 20, 40]
    seeds = range(2) if quick else range(5)
    families = [3] if quick else [3, 30]
    feas_runs = []
    for rows in families:
        for n in dims:
            for seed in seeds:
                P, _ = feasibility_problem(n, seed, rows=rows)
                max_iter = 400 * n * n + 2000
                for name, method in FEAS_METHODS.items():
                    rec = method(P, n, max_iter)
                    feas_runs.append({"m": rows * n, "n": n, "seed": seed, "method": name, **rec})
    feas_summary = []
    for rows, n in ((rows, n) for rows in families for n in dims):
        base = {r["seed"]: r for r in feas_runs if r["m"] == rows * n and r["method"] == "ellalgo"}
        for name in FEAS_METHODS:
            rs = [r for r in feas_runs if r["m"] == rows * n and r["method"] == name]
            feas_summary.append({
                "m": f"{rows}n", "n": n, "method": name, "solved": f"{sum(r['status'] == 'feasible' for r in rs)}/{len(rs)}",
                "calls": _median([r["calls"] for r in rs]), "seconds": _median([r["seconds"] for r in rs]),
                "calls / ellalgo": _median([r["calls"] / base[r["seed"]]["calls"] for r in rs]),
                "max calls / ellalgo": max(r["calls"] / base[r["seed"]]["calls"] for r in rs)})

    opt_dims = [5, 10] if quick else [5, 10, 20]
    opt_seeds = range(2) if quick else range(3)
    tol = 1e-6
    opt_runs = []
    for n in opt_dims:
        for seed in opt_seeds:
            P, c = optimisation_problem(n, seed)
            lp = linprog(c, A_ub=P.A, b_ub=P.b, bounds=[(None, None)] * n, method="highs")
            for name, rec in (("ellalgo", _ellalgo_optim(P, c, n, tol)),
                              ("ellipsoid", _ours_optim(ellipsoid, P, c, n, tol)),
                              ("cutting_plane", _ours_optim(cutting_plane, P, c, n, tol))):
                err = None if rec["value"] is None else rec["value"] - float(lp.fun)
                opt_runs.append({"n": n, "seed": seed, "method": name, "error": err, **rec})
    opt_summary = []
    for n in opt_dims:
        base = {r["seed"]: r for r in opt_runs if r["n"] == n and r["method"] == "ellalgo"}
        for name in ("ellalgo", "ellipsoid", "cutting_plane"):
            rs = [r for r in opt_runs if r["n"] == n and r["method"] == name]
            errs = [abs(r["error"]) for r in rs if r["error"] is not None]
            opt_summary.append({
                "n": n, "method": name, "calls": _median([r["calls"] for r in rs]),
                "seconds": _median([r["seconds"] for r in rs]),
                "calls / ellalgo": _median([r["calls"] / base[r["seed"]]["calls"] for r in rs]),
                "max |value - LP opt|": max(errs) if len(errs) == len(rs) else float("nan")})

    hull_rows = _hull_table(quick)
    _print_table("Feasibility (medians over seeds; calls / ellalgo = median of per-seed ratios)", feas_summary)
    _print_table(f"Linear minimisation to tol={tol:g} (err = value - LP optimum)", opt_summary)
    _print_table("affine_hull_by_ellipsoid, tol=1e-7 (separation oracle only)", hull_rows)
    return {"feasibility": {"runs": feas_runs, "summary": feas_summary}, "hull": hull_rows,
            "minimisation": {"runs": opt_runs, "summary": opt_summary, "tol": tol},
            "setup": {"R": R, "oracle_tol": ORACLE_TOL, "feas_r_frac": 1e-3, "dims": dims,
                      "seeds": list(seeds)}}


def _print_table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    keys = list(rows[0].keys())
    fmt = {k: ("{:.3g}" if isinstance(rows[0][k], float) else "{}") for k in keys}
    cells = [[fmt[k].format(r[k]) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    print("  ".join(k.rjust(w) for k, w in zip(keys, widths)))
    for c in cells:
        print("  ".join(v.rjust(w) for v, w in zip(c, widths)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds instead of minutes")
    parser.add_argument("--out", default="results/engine_cuts.json", help="where to write the JSON")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    report = {"quick": args.quick, "cuts": run(args.quick)}
    report["wall_seconds"] = time.perf_counter() - t0
    write_json(args.out, report, seconds=report["wall_seconds"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
