"""Learner benchmark: ``learn(method="sculpt")`` against L-BFGS from random init on the same data.

    python benchmarks/learner.py [--quick] [--sizes 8,4,1 8,4,2 16,4,2 8,4,3] [--seeds 10]
                                 [--dists boolean gaussian] [--n 20000] [--out results/learner.json]

For every size (d,k,m), input distribution and seed: plant a layer (``sculpt.plant(d,k,m,seed=seed)``,
scale 2.5), draw N inputs, run ``learn(X, Y, m, method="sculpt", truth=model)`` and then, in the same process
right after it, ``gradient_descent(X, Y, m, method="lbfgs", seed=seed)``; for m = 1 also
``learn(method="exact")``. Each model is scored by its relative MSE on 5,000 fresh inputs and by head-matched
parameter errors (``model.distance``). Per-phase times, the K* span angle and the time ratio
sculpt / L-BFGS are recorded; the ratio is robust to the machine's load because both run back-to-back in
one process with one BLAS thread. Prints a Markdown table per (size, distribution) and writes every
measurement to ``--out`` as JSON. Never asserts timings.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # both methods on one BLAS thread (thin products; shared 2-core machine)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from sculpt import learn, plant, sample_inputs  # noqa: E402
from sculpt.baselines import gradient_descent  # noqa: E402
from sculpt.toolkit import versions, write_json  # noqa: E402

EXACT_TEST = 1e-12
EXACT_PARAM = 1e-6
N_TEST = 5000


def _parse_size(text: str) -> tuple[int, int, int]:
    parts = tuple(int(v) for v in text.replace("(", "").replace(")", "").split(","))
    if len(parts) != 3 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"a size is d,k,m with positive integers, got {text!r}")
    return parts  # type: ignore[return-value]


def _score(model: Any, truth: Any, Xt: np.ndarray) -> dict[str, Any]:
    """Test relative MSE on fresh inputs and head-matched parameter errors of ``model`` against ``truth``."""
    if model is None:
        return {"test_rel_mse": float("inf"), "max_theta_error": float("inf"), "max_w_error": float("inf"),
                "exact": False}
    test = truth.prediction_error(model, Xt)
    dist = truth.distance(model)
    return {"test_rel_mse": float(test), "max_theta_error": float(dist.max_theta_error),
            "max_w_error": float(dist.max_w_error),
            "exact": bool(test <= EXACT_TEST and dist.max_theta_error <= EXACT_PARAM
                          and dist.max_w_error <= EXACT_PARAM)}


def _span_angle(res: Any) -> float | None:
    for p in res.phases:
        if p.name == "4-span":
            v = p.truth.get("span_angle_deg", p.truth.get("span_angle"))
            if v is not None:
                return float(v)
    for p in res.phases:
        if p.name == "3-refine":
            v = p.truth.get("kstar", {}).get("span_angle_deg")
            if v is not None:
                return float(v)
    return None


def run_one(d: int, k: int, m: int, dist: str, seed: int, n: int) -> dict[str, Any]:
    """One (size, distribution, seed): sculpt, L-BFGS (and exact for m = 1) on the same N examples."""
    model = plant(d, k, m, seed=seed)
    gen = np.random.default_rng([seed, d, k, m, 0 if dist == "boolean" else 1])
    X = sample_inputs(n, k, d, rng=gen, distribution=dist)
    Y = model(X)
    Xt = sample_inputs(N_TEST, k, d, rng=gen, distribution=dist)
    out: dict[str, Any] = {"d": d, "k": k, "m": m, "dist": dist, "seed": seed, "n": n}

    t = time.perf_counter()
    res = learn(X, Y, m, method="sculpt", seed=seed, truth=model)
    t_sc = time.perf_counter() - t
    sc = _score(res.model, model, Xt)
    err13 = None
    for p in res.phases:
        if p.name == "3-refine":
            err13 = p.truth.get("err_sum_w")
    sc.update(time=t_sc, converged=bool(res.converged), reason=res.reason,
              phase_times={p.name: float(p.time) for p in res.phases},
              phase_status={p.name: p.status for p in res.phases},
              refine_message=next((p.message for p in res.phases if p.name == "3-refine"), ""),
              span_angle_deg=_span_angle(res), err_sum_w_after_p3=err13,
              sculpt_examples=res.info.get("sculpt_examples"))
    out["sculpt"] = sc

    t = time.perf_counter()
    g = gradient_descent(X, Y, m, method="lbfgs", seed=seed)
    t_lb = time.perf_counter() - t
    lb = _score(g.model, model, Xt)
    lb.update(time=t_lb, iterations=int(g.iterations), train_error=float(g.train_error))
    out["lbfgs"] = lb
    out["ratio"] = t_sc / t_lb if t_lb > 0 else float("inf")

    if m == 1 and 2 <= k < d:
        t = time.perf_counter()
        ex = learn(X, Y, 1, method="exact", seed=seed, truth=model)
        t_ex = time.perf_counter() - t
        es = _score(ex.model, model, Xt)
        es.update(time=t_ex, converged=bool(ex.converged))
        out["exact"] = es
        out["exact_ratio"] = t_ex / t_lb if t_lb > 0 else float("inf")
    return out


def _fmt(v: float | None, spec: str = ".1e") -> str:
    return "–" if v is None or not np.isfinite(v) else format(v, spec)


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table: one line per (size, distribution, route)."""
    head = ("| (d,k,m) | inputs | route | seeds | exact | worst test rel MSE | worst max Θ err | worst max W err "
            "| span angle° (median) | median s | median L-BFGS s | median ratio | max ratio | L-BFGS exact |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["d"], r["k"], r["m"], r["dist"]), []).append(r)
    for (d, k, m, dist), rs in groups.items():
        for route, rkey in (("sculpt", "ratio"), ("exact", "exact_ratio")):
            if route not in rs[0]:
                continue
            ex = sum(r[route]["exact"] for r in rs)
            angles = [r["sculpt"].get("span_angle_deg") for r in rs] if route == "sculpt" else []
            angles = [a for a in angles if a is not None]
            ratios = [r[rkey] for r in rs]
            lines.append(
                f"| ({d},{k},{m}) | {dist} | {route} | {len(rs)} | {ex}/{len(rs)} "
                f"| {_fmt(max(r[route]['test_rel_mse'] for r in rs))} "
                f"| {_fmt(max(r[route]['max_theta_error'] for r in rs))} "
                f"| {_fmt(max(r[route]['max_w_error'] for r in rs))} "
                f"| {_fmt(float(np.median(angles)) if angles else None, '.1f')} "
                f"| {np.median([r[route]['time'] for r in rs]):.2f} "
                f"| {np.median([r['lbfgs']['time'] for r in rs]):.2f} "
                f"| {np.median(ratios):.2f} | {max(ratios):.2f} "
                f"| {sum(r['lbfgs']['exact'] for r in rs)}/{len(rs)} |")
    return "\n".join(lines)


def phase_table(rows: list[dict[str, Any]]) -> str:
    """Median per-phase times of the sculpt route."""
    names = ["1-sum-w", "2-sculpt", "3-refine", "4-span", "5-heads", "6-projections", "polish"]
    lines = ["| (d,k,m) | inputs | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["d"], r["k"], r["m"], r["dist"]), []).append(r)
    for (d, k, m, dist), rs in groups.items():
        med = [np.median([r["sculpt"]["phase_times"].get(nm, np.nan) for r in rs]) for nm in names]
        lines.append(f"| ({d},{k},{m}) | {dist} | " + " | ".join(f"{v:.2f}" for v in med) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="JSON file for every measurement")
    ap.add_argument("--quick", action="store_true", help="2 seeds, Boolean inputs only, N = 20,000")
    ap.add_argument("--sizes", nargs="+", type=_parse_size,
                    default=[(8, 4, 1), (8, 4, 2), (16, 4, 2), (8, 4, 3)], help="sizes d,k,m")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..S-1 per size and distribution")
    ap.add_argument("--seed-start", type=int, default=0, help="first seed")
    ap.add_argument("--dists", nargs="+", default=["boolean", "gaussian"], choices=["boolean", "gaussian"])
    ap.add_argument("--n", type=int, default=20_000, help="training examples (validation split included)")
    args = ap.parse_args(argv)
    seeds = 2 if args.quick else args.seeds
    dists = ["boolean"] if args.quick else args.dists
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for d, k, m in args.sizes:
        for dist in dists:
            for seed in range(args.seed_start, args.seed_start + seeds):
                r = run_one(d, k, m, dist, seed, args.n)
                rows.append(r)
                print(f"({d},{k},{m}) {dist:8s} seed {seed}: sculpt {r['sculpt']['time']:.2f} s "
                      f"exact={r['sculpt']['exact']} test {r['sculpt']['test_rel_mse']:.1e}; "
                      f"L-BFGS {r['lbfgs']['time']:.2f} s; ratio {r['ratio']:.2f}", file=sys.stderr, flush=True)
    print(table(rows))
    print()
    print(phase_table(rows))
    if args.out:
        meta = {"versions": versions(), "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"), "n": args.n,
                "load_average": list(os.getloadavg()), "total_time": time.perf_counter() - t0}
        write_json(args.out, {"meta": meta, "runs": rows}, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
