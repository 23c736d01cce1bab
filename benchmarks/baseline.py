"""Gradient-baseline benchmark: forward/gradient throughput and L-BFGS (and Adam) time to exact recovery.

    python benchmarks/baseline.py [--quick] [--hard] [--out results/baseline.json] [--threads 1]

- forward throughput: examples/s of MultiHeadAttention.__call__ at (d, k, m) = (16, 8, 2) (and (8, 4, 2)),
  plus loss_and_grad throughput at N = 2,000;
- recovery: planted layers (sculpt.plant, scale 2.5) at (8, 4, 2) and (16, 4, 2) with N = 2,000 examples,
  ``gradient_descent(method="lbfgs", restarts=3)``; success = test rel MSE <= 1e-12 on 5,000 fresh inputs;
  Adam (3,000 steps, lr 0.03) at (8, 4, 2) for comparison (skipped with --quick);
- ``--hard``: the regimes where gradient descent was measured to fail (docs/method.md#gd-failure-regimes), at (8, 4, 2), L-BFGS with 3
  restarts of at most 2,000 iterations (an iteration cap, so results do not depend on machine speed):
  a weak head (plant(weak_head=0.01)), nearly identical heads (plant(separation=0.03)) and few examples
  (N = 1.5 × 2md/k = 12).
Prints tables and writes one JSON file with every measurement. Never asserts timings.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _early_threads() -> str:
    # BLAS threads must be fixed before numpy loads: the GEMMs here are thin, and with 2 threads on a
    # shared machine OpenBLAS spin-waiting made them up to 4x slower than one thread.
    threads = "1"
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            threads = sys.argv[i + 1]
        elif arg.startswith("--threads="):
            threads = arg.split("=", 1)[1]
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, threads)
    return os.environ["OPENBLAS_NUM_THREADS"]


BLAS_THREADS = _early_threads()
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project root, whatever the install

import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from sculpt import plant, sample_inputs  # noqa: E402
from sculpt.baselines import gradient_descent  # noqa: E402
from sculpt.gradients import loss_and_grad  # noqa: E402
from sculpt.toolkit import versions as toolkit_versions  # noqa: E402
from sculpt.toolkit import write_json  # noqa: E402

SUCCESS = 1e-12


def versions() -> dict[str, str]:
    """sculpt.toolkit.versions() plus the BLAS threads and the load average of this run."""
    out = {**toolkit_versions(), "blas_threads": BLAS_THREADS}
    try:
        out["load_average"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        pass
    return out


def best_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def throughput(quick: bool) -> list[dict[str, Any]]:
    rows = []
    n_fwd = 20_000 if quick else 100_000
    for d, k, m in ((16, 8, 2), (8, 4, 2)):
        model = plant(d, k, m, seed=0)
        X = sample_inputs(n_fwd, k, d, rng=1)
        t_fwd = best_time(lambda: model(X), 3)
        Xg = X[:2000]
        Yg = model(Xg) + 0.01
        t_grad = best_time(lambda: loss_and_grad(model.thetas, model.ws, Xg, Yg, checked=True), 5)
        rows.append({"d": d, "k": k, "m": m, "n_forward": n_fwd, "forward_examples_per_s": n_fwd / t_fwd,
                     "forward_s": t_fwd, "grad_n": 2000, "grad_ms": 1e3 * t_grad,
                     "grad_examples_per_s": 2000 / t_grad})
    return rows


def recovery(quick: bool) -> list[dict[str, Any]]:
    rows = []
    seeds = range(2) if quick else range(5)
    configs = [("lbfgs", (8, 4, 2)), ("lbfgs", (16, 4, 2))] + ([] if quick else [("adam", (8, 4, 2))])
    for method, (d, k, m) in configs:
        for seed in seeds:
            truth = plant(d, k, m, seed=seed)
            X = sample_inputs(2000, k, d, rng=1000 + seed)
            res = gradient_descent(X, truth(X), m, method=method, seed=seed, restarts=3, time_limit=120.0)
            test = truth.prediction_error(res.model, sample_inputs(5000, k, d, rng=2000 + seed))
            dist = truth.distance(res.model)
            rows.append({"method": method, "d": d, "k": k, "m": m, "N": 2000, "seed": seed,
                         "time_s": res.time, "iterations": res.iterations,
                         "restarts_used": len(res.info["restarts"]), "train_rel_mse": res.train_error,
                         "test_rel_mse": test, "theta_error": dist.theta_error, "w_error": dist.w_error,
                         "success": bool(test <= SUCCESS), "reason": res.reason})
    return rows


def hard_regimes(quick: bool) -> list[dict[str, Any]]:
    rows = []
    d, k, m = 8, 4, 2
    regimes = [("weak head 0.01", {"weak_head": 0.01}, 2000), ("separation 0.03", {"separation": 0.03}, 2000),
               ("N = 1.5x count", {}, int(1.5 * 2 * m * d / k))]
    for name, knobs, n in regimes:
        for seed in range(2 if quick else 3):
            truth = plant(d, k, m, seed=seed, **knobs)
            X = sample_inputs(n, k, d, rng=3000 + seed)
            res = gradient_descent(X, truth(X), m, seed=seed, restarts=3, max_iter=2000, time_limit=180.0)
            test = truth.prediction_error(res.model, sample_inputs(5000, k, d, rng=4000 + seed))
            rows.append({"regime": name, "d": d, "k": k, "m": m, "N": n, "seed": seed, "time_s": res.time,
                         "iterations": res.iterations, "train_rel_mse": res.train_error, "test_rel_mse": test,
                         "success": bool(test <= SUCCESS), "stops": [r["stop"] for r in res.info["restarts"]]})
    return rows


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    keys = sorted({(r["method"], r["d"], r["k"], r["m"]) for r in rows}, key=lambda t: (t[0] != "lbfgs", t))
    for method, d, k, m in keys:
        sel = [r for r in rows if (r["method"], r["d"], r["k"], r["m"]) == (method, d, k, m)]
        times = np.array([r["time_s"] for r in sel])
        tests = np.array([r["test_rel_mse"] for r in sel])
        out.append({"method": method, "d": d, "k": k, "m": m, "N": 2000, "seeds": len(sel),
                    "success_rate": float(np.mean([r["success"] for r in sel])),
                    "median_time_s": float(np.median(times)), "max_time_s": float(times.max()),
                    "median_iterations": float(np.median([r["iterations"] for r in sel])),
                    "median_test_rel_mse": float(np.median(tests)), "worst_test_rel_mse": float(tests.max())})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer examples and seeds, no Adam")
    parser.add_argument("--out", default="results/baseline.json", help="JSON output path")
    parser.add_argument("--hard", action="store_true", help="also run the hard regimes (docs/method.md#gd-failure-regimes)")
    parser.add_argument("--threads", default=BLAS_THREADS, help="BLAS threads (read before numpy loads)")
    args = parser.parse_args(argv)

    thr = throughput(args.quick)
    print(f"forward / gradient throughput (BLAS threads = {BLAS_THREADS})")
    print(f"{'(d,k,m)':>10} {'fwd ex/s':>12} {'grad ms @2000':>14} {'grad ex/s':>12}")
    for r in thr:
        print(f"{str((r['d'], r['k'], r['m'])):>10} {r['forward_examples_per_s']:>12,.0f} {r['grad_ms']:>14.2f}"
              f" {r['grad_examples_per_s']:>12,.0f}")

    rows = recovery(args.quick)
    print(f"\nrecovery from N = 2000 examples, restarts = 3, success = test rel MSE <= {SUCCESS:g}")
    print(f"{'method':>6} {'(d,k,m)':>10} {'seed':>4} {'time s':>7} {'iters':>6} {'train':>9} {'test':>9}"
          f" {'Θ err':>9} {'ok':>3}")
    for r in rows:
        print(f"{r['method']:>6} {str((r['d'], r['k'], r['m'])):>10} {r['seed']:>4} {r['time_s']:>7.2f}"
              f" {r['iterations']:>6} {r['train_rel_mse']:>9.1e} {r['test_rel_mse']:>9.1e}"
              f" {r['theta_error']:>9.1e} {'yes' if r['success'] else 'no':>3}")
    summary = summarise(rows)
    print(f"\n{'method':>6} {'(d,k,m)':>10} {'seeds':>5} {'success':>7} {'median s':>8} {'max s':>6}"
          f" {'median test':>11} {'worst test':>10}")
    for s in summary:
        print(f"{s['method']:>6} {str((s['d'], s['k'], s['m'])):>10} {s['seeds']:>5} {s['success_rate']:>7.0%}"
              f" {s['median_time_s']:>8.2f} {s['max_time_s']:>6.2f} {s['median_test_rel_mse']:>11.1e}"
              f" {s['worst_test_rel_mse']:>10.1e}")

    hard = hard_regimes(args.quick) if args.hard else []
    if hard:
        print("\nhard regimes at (8, 4, 2), L-BFGS, restarts = 3, <= 2000 iterations each")
        print(f"{'regime':>16} {'N':>5} {'seed':>4} {'time s':>7} {'train':>9} {'test':>9} {'ok':>3}  stops")
        for r in hard:
            print(f"{r['regime']:>16} {r['N']:>5} {r['seed']:>4} {r['time_s']:>7.2f} {r['train_rel_mse']:>9.1e}"
                  f" {r['test_rel_mse']:>9.1e} {'yes' if r['success'] else 'no':>3}  {', '.join(r['stops'])}")

    out = write_json(args.out, {"versions": versions(), "quick": args.quick, "throughput": thr,
                                "recovery": rows, "summary": summary, "hard": hard})
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
