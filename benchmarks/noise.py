"""Noise benchmark: every route on noisy labels against least squares by L-BFGS on all N (issue 25).

    python benchmarks/noise.py [--quick] [--seeds 5] [--sizes 8,4,2 16,4,3] [--sigmas 1e-3 1e-2 5e-2]
                               [--n 20000] [--routes auto sculpt vp-lm gradient] [--out results/noise.json]

For every size (d,k,m), noise level σ (a fraction of the labels' rms) and seed: plant a layer
(``sculpt.plant(d,k,m,seed=seed)``), draw N Boolean inputs and labels Y = F(X) + σ·rms(F(X))·ε (ε standard normal),
and run ``learn(X, Y, m, method=route, seed=seed)`` for each route. The reference is least squares on all N by
L-BFGS run to convergence from the true layer (``sculpt.baselines.gradient_descent``, the global minimum's
basin). Per run: status ("exact" | "noise" | "failed"), σ̂ over the true σ, the head-matched Θ error
(``MultiHeadAttention.distance``, relative, mean over heads) over the reference's, the time, and the coverage of
the certificate's nominal 95 % intervals: ``sculpt.certify`` on ``--cert-n`` of the examples, the half-widths
scaled by √(cert-n / N) to a fit on all N (the covariance of a least-squares fit falls as 1/N), counted over every
Θ and W entry of the truth after matching heads. Prints Markdown tables (medians over seeds); ``--out`` writes
every figure as strict JSON.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread: comparable timings on a shared 2-core machine
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from _report import write_json  # noqa: E402

from sculpt import MultiHeadAttention, certify, learn, plant, sample_inputs  # noqa: E402
from sculpt.baselines import gradient_descent  # noqa: E402
from sculpt.toolkit import write_json as write_partial  # noqa: E402

SIGMAS = (1e-3, 1e-2, 5e-2)
SIZES = ((8, 4, 2), (16, 4, 3))
ROUTES = ("auto", "sculpt", "vp-lm", "gradient")


def _size(text: str) -> tuple[int, int, int]:
    parts = tuple(int(v) for v in text.replace("(", "").replace(")", "").split(","))
    if len(parts) != 3 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"a size is d,k,m with positive integers, got {text!r}")
    return (parts[0], parts[1], parts[2])


def _data(
    d: int, k: int, m: int, n: int, sigma: float, seed: int
) -> tuple[MultiHeadAttention, np.ndarray, np.ndarray, float]:
    truth = plant(d, k, m, seed=seed)
    rng = np.random.default_rng(1000 + seed)
    X = sample_inputs(n, k, d, rng=rng)
    F = truth(X)
    s = sigma * float(np.sqrt(np.mean(F * F)))
    return truth, X, F + s * rng.standard_normal(F.shape), s


def _coverage(model: MultiHeadAttention, truth: MultiHeadAttention, X: np.ndarray, Y: np.ndarray, n_cert: int) -> float:
    """Fraction of the truth's Θ and W entries inside the certificate's 95 % intervals, scaled to all N."""
    n = min(n_cert, X.shape[0])
    cert = certify(model, X[:n], Y[:n])
    perm = list(truth.distance(model).permutation)
    scale = math.sqrt(n / X.shape[0])
    hits = []
    for (lo, hi), est, true in (
        (cert.theta_interval, model.thetas, truth.thetas),
        (cert.w_interval, model.ws, truth.ws),
    ):
        mid, half = est, 0.5 * (hi - lo) * scale
        hits.append(np.abs(mid[perm] - true) <= half[perm])
    return float(np.mean(np.concatenate([h.ravel() for h in hits])))


def _reference(truth: MultiHeadAttention, X: np.ndarray, Y: np.ndarray, m: int) -> tuple[MultiHeadAttention, float]:
    t0 = time.perf_counter()
    res = gradient_descent(X, Y, m, method="lbfgs", seed=0, init=truth, tol=0.0, max_iter=20000)
    assert res.model is not None
    return res.model, time.perf_counter() - t0


def _cell(size: tuple[int, int, int], sigma: float, seed: int, args: argparse.Namespace) -> list[dict[str, object]]:
    d, k, m = size
    truth, X, Y, s_abs = _data(d, k, m, args.n, sigma, seed)
    ref, t_ref = _reference(truth, X, Y, m)
    ref_err = truth.distance(ref).theta_error
    rows: list[dict[str, object]] = [
        {
            "size": list(size),
            "sigma": sigma,
            "seed": seed,
            "route": "L-BFGS (all N)",
            "status": "-",
            "theta_error": ref_err,
            "ratio": 1.0,
            "sigma_ratio": None,
            "time": t_ref,
            "coverage": _coverage(ref, truth, X, Y, args.cert_n) if args.cert_n else None,
        }
    ]
    for route in args.routes:
        t0 = time.perf_counter()
        res = learn(X, Y, m, method=route, seed=seed)
        t = time.perf_counter() - t0
        err = truth.distance(res.model).theta_error if res.model is not None else math.inf
        certified = args.cert_n and res.model is not None and route in args.cert_routes
        cov = _coverage(res.model, truth, X, Y, args.cert_n) if certified else None
        rows.append(
            {
                "size": list(size),
                "sigma": sigma,
                "seed": seed,
                "route": route,
                "status": res.status,
                "converged": res.converged,
                "theta_error": err,
                "ratio": err / ref_err,
                "sigma_ratio": None if res.noise_sigma is None else res.noise_sigma / s_abs,
                "time": t,
                "coverage": cov,
                "model_from": res.info.model_from,
                "samples_used": res.samples_used,
            }
        )
        print(
            f"  {size} σ={sigma:g} seed {seed} {route}: {res.status}, ratio {err / ref_err:.3f}, {t:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return rows


def _median(values: list[float]) -> float:
    clean = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.median(clean)) if clean else math.nan


def _table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| (d,k,m) | σ / rms | route | status (seeds) | Θ error / L-BFGS (median, max) | σ̂ / σ (median) | time s (median) | coverage (median) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(tuple(r["size"]), r["sigma"], r["route"]) for r in rows}, key=lambda t: (t[0], t[1]))  # type: ignore[arg-type]
    order = {name: i for i, name in enumerate(("L-BFGS (all N)", *ROUTES))}
    keys.sort(key=lambda t: (t[0], t[1], order.get(str(t[2]), 99)))
    for size, sigma, route in keys:
        sel = [r for r in rows if tuple(r["size"]) == size and r["sigma"] == sigma and r["route"] == route]  # type: ignore[arg-type]
        statuses = [str(r["status"]) for r in sel]
        counts = ", ".join(f"{s} {statuses.count(s)}" for s in ("exact", "noise", "failed", "-") if s in statuses)
        ratios = [float(r["ratio"]) for r in sel]  # type: ignore[arg-type]
        sig = _median([r["sigma_ratio"] for r in sel])  # type: ignore[misc]
        cov = _median([r["coverage"] for r in sel])  # type: ignore[misc]
        lines.append(
            f"| {size} | {sigma:g} | {route} | {counts} | {_median(ratios):.3f}, {max(ratios):.3f} | "
            f"{'-' if math.isnan(sig) else f'{sig:.3f}'} | {_median([r['time'] for r in sel]):.2f} | "  # type: ignore[misc]
            f"{'-' if math.isnan(cov) else f'{cov:.3f}'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="1 seed, (8,4,2) only, σ = 1e-2")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--first-seed", type=int, default=0, help="seeds run from this one")
    p.add_argument("--sizes", type=_size, nargs="+", default=list(SIZES))
    p.add_argument("--sigmas", type=float, nargs="+", default=list(SIGMAS))
    p.add_argument("--n", type=int, default=20000, help="examples per run")
    p.add_argument("--routes", nargs="+", default=list(ROUTES))
    p.add_argument("--cert-n", type=int, default=2000, help="examples certify reads (0: no coverage)")
    p.add_argument("--cert-routes", nargs="+", default=list(ROUTES), help="routes whose coverage is measured")
    p.add_argument("--out", type=str, default=None, help="JSON report (rewritten after every cell)")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.sizes, args.sigmas = 1, [(8, 4, 2)], [1e-2]
    t0 = time.perf_counter()
    rows: list[dict[str, object]] = []
    for size in args.sizes:
        for sigma in args.sigmas:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                rows += _cell(size, sigma, seed, args)
                if args.out:  # partial results survive an interrupted run
                    write_partial(args.out, {"args": vars(args), "rows": rows, "partial": True})
    print(_table(rows))
    if args.out:
        write_json(
            args.out, {"args": {k: v for k, v in vars(args).items()}, "rows": rows}, seconds=time.perf_counter() - t0
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
