"""Benchmark of the learner's phases 1-3 (ΣW estimate, sculpted body, certified refinement) on planted layers.

For every (d, k, m, distribution, seed): N examples, phase 1 → phase 2 (half-spaces) → phase 3 (rounds of
certification + K* slabs), all on the same examples. Prints a table of medians per size and writes every
run's figures to JSON (``--out``). Timings are wall and CPU seconds; nothing is asserted.

    python benchmarks/phases_1_3.py --sizes 8,4,2 16,4,2 --dists boolean gaussian --seeds 10 --out r.json
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from sculpt.data import plant, sample_inputs
from sculpt.phases.refine import refine_sum_w
from sculpt.phases.sculpting import sculpt
from sculpt.phases.sum_w import estimate_sum_w
from sculpt.settings import RefineSettings
from sculpt.toolkit import write_json


def run_one(d: int, k: int, m: int, dist: str, seed: int, n: int) -> dict:
    model = plant(d, k, m, seed=seed)
    X = sample_inputs(n, k, d, rng=10_000 + seed, distribution=dist)
    Y = model(X)
    out: dict = {"d": d, "k": k, "m": m, "dist": dist, "seed": seed, "n": n}
    t, c = time.perf_counter(), time.process_time()
    W1, r1 = estimate_sum_w(X, Y, truth=model)
    out["p1"] = {"err_crude": r1.truth["err_crude"], "err": r1.truth["err_sum_w"],
                 "wall": time.perf_counter() - t, "cpu": time.process_time() - c}
    t, c = time.perf_counter(), time.process_time()
    body, r2 = sculpt(X, Y, W1, truth=model)
    out["p2"] = {**{k_: r2.figures[k_] for k_ in ("rows_accepted", "acceptance", "halfspaces_kept",
                                                   "halfspaces_trimmed", "n_constraints", "eta", "q_floor")},
                 "heads_max_violation": r2.truth["max_violation"], "heads_inside": r2.truth["heads_inside"],
                 "wall": time.perf_counter() - t, "cpu": time.process_time() - c}
    t, c = time.perf_counter(), time.process_time()
    W3, kstar, r3 = refine_sum_w(X, Y, W1, body, m, RefineSettings().merged(certify=True), truth=model)
    rounds = r3.figures["rounds"]
    out["p3"] = {"err_per_round": r3.truth["err_per_round"], "err": r3.truth["err_sum_w"],
                 "certified": [h["certified"] for h in rounds] or [0], "candidates": [h["candidates"] for h in rounds] or [0],
                 "lps": [h["lps"] for h in rounds], "false": [h.get("false_certificates", 0) for h in rounds],
                 "margin_violations": [h.get("margin_violations", 0) for h in rounds],
                 "methods": [h["method"] for h in rounds], "fallback": r3.figures["fallback_used"],
                 "certify_wall": sum(h["certify_time"] for h in rounds),
                 "proxy_wall": sum(h["proxy_time"] for h in rounds),
                 "kstar_wall": r3.figures["kstar_time"],
                 "wall": time.perf_counter() - t, "cpu": time.process_time() - c}
    kt = r3.truth["kstar"]
    out["kstar"] = {"equalities": r3.figures["kstar"]["equalities_kept"],
                    "rows": r3.figures["kstar"]["rows_accepted"], "tau": r3.figures["kstar"]["tau_effective"],
                    "n_constraints": r3.figures["kstar"]["n_constraints"],
                    "span_angle_deg": kt.get("span_angle_deg"), "slab_rms": kt.get("slab_rms_residual"),
                    "heads_max_violation": kt.get("max_violation")}
    out["total_wall"] = out["p1"]["wall"] + out["p2"]["wall"] + out["p3"]["wall"]
    out["total_cpu"] = out["p1"]["cpu"] + out["p2"]["cpu"] + out["p3"]["cpu"]
    return out


def _med(xs):
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else float("nan")


def summarise(runs: list[dict]) -> None:
    keys = sorted({(r["d"], r["k"], r["m"], r["dist"]) for r in runs})
    hdr = ("(d,k,m) dist seeds | P1 crude→impr | P3 err (max) | cert/cand r0 | false | fallback | "
           "P2 cons  inside | K* eq  angle° | wall P1/P2/P3 (cpu tot)")
    print(hdr)
    for key in keys:
        rs = [r for r in runs if (r["d"], r["k"], r["m"], r["dist"]) == key]
        print(f"{key[:3]} {key[3][:4]} {len(rs):2d} | {_med([r['p1']['err_crude'] for r in rs]):.3f}→"
              f"{_med([r['p1']['err'] for r in rs]):.4f} | {_med([r['p3']['err'] for r in rs]):.4f} "
              f"({max(r['p3']['err'] for r in rs):.4f}) | "
              f"{_med([r['p3']['certified'][0] for r in rs]):.0f}/{_med([r['p3']['candidates'][0] for r in rs]):.0f} | "
              f"{sum(sum(r['p3']['false']) for r in rs)} | {sum(r['p3']['fallback'] for r in rs)} | "
              f"{_med([r['p2']['n_constraints'] for r in rs]):.0f} {sum(r['p2']['heads_inside'] for r in rs)}/{len(rs)} | "
              f"{_med([r['kstar']['equalities'] for r in rs]):.0f} {_med([r['kstar']['span_angle_deg'] for r in rs]):.1f} | "
              f"{_med([r['p1']['wall'] for r in rs]):.1f}/{_med([r['p2']['wall'] for r in rs]):.1f}/"
              f"{_med([r['p3']['wall'] for r in rs]):.1f} ({_med([r['total_cpu'] for r in rs]):.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["8,4,2"], help="d,k,m triples")
    ap.add_argument("--dists", nargs="+", default=["boolean"], choices=["boolean", "gaussian"])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--n", type=int, default=20_000, help="examples per run (reused by every phase)")
    ap.add_argument("--out", default=None, help="JSON file for every run's figures")
    args = ap.parse_args()
    runs = []
    for size in args.sizes:
        d, k, m = (int(v) for v in size.split(","))
        for dist in args.dists:
            for seed in range(args.seeds):
                r = run_one(d, k, m, dist, seed, args.n)
                runs.append(r)
                print(f"({d},{k},{m}) {dist} seed {seed}: P1 {r['p1']['err']:.4f} P3 {r['p3']['err']:.4f} "
                      f"cert {r['p3']['certified']} false {r['p3']['false']} wall {r['total_wall']:.1f}s "
                      f"cpu {r['total_cpu']:.1f}s", flush=True)
                if args.out:
                    write_json(args.out, runs, indent=1)
    summarise(runs)


if __name__ == "__main__":
    main()
