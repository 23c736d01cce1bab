"""Benchmark of the shapes where the agreement test is blind (m(k − 1) > d): phase 1's Σ̂W error against k, and
``method="sculpt"`` (the linear route) on the shapes of issue 24.

``--part sum_w``: ``estimate_sum_w`` alone at d = 8, m = 2 on planted layers (scale 2.5, Boolean inputs) for each
k, with the crude, trimmed, refit and returned errors, the refit's verdict, cond(Σ̂W), its lower bound and the
error model's uncertainty. ``--part route``: ``learn(method="sculpt")`` per shape and seed (planted layers, or
torch.nn.MultiheadAttention's own initialisation for ``torch``), exact or not, wall seconds and the phases'
statuses. Prints Markdown tables and writes every run to JSON (``--out``); nothing is asserted.

    python benchmarks/blind_shapes.py --part sum_w --ks 4 8 16 32 64 --seeds 2 --n 18000
    python benchmarks/blind_shapes.py --part route --shapes 16,8,4,torch,60000 16,8,8,planted,60000 \\
        8,32,2,planted,20000 16,32,2,planted,40000 32,8,4,planted,80000 --seeds 3
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from sculpt import learn
from sculpt.data import plant, sample_inputs
from sculpt.model import MultiHeadAttention
from sculpt.phases.sum_w import estimate_sum_w
from sculpt.settings import Settings
from sculpt.toolkit import write_json


def sum_w_run(k: int, seed: int, n: int) -> dict[str, object]:
    """Phase 1 alone at (8, k, 2)."""
    d, m = 8, 2
    model = plant(d, k, m, seed=seed)
    X = sample_inputs(n, k, d, rng=100 + seed)
    Y = model(X)
    s = Settings().resolve(d, k, m, n).sum_w.merged(max_cond=1e12)  # figures, not the verdict
    t = time.perf_counter()
    _, rec = estimate_sum_w(X, Y, s, truth=model)
    out: dict[str, object] = {"k": k, "seed": seed, "n": n, "time": time.perf_counter() - t}
    out.update({key: rec.truth.get(key) for key in ("err_crude", "err_trimmed", "err_refit", "err_sum_w")})
    out.update({key: rec.figures.get(key) for key in ("refit_accepted", "cond", "cond_lower", "rel_uncertainty")})
    out["true_cond"] = float(np.linalg.cond(model.ws.sum(0)))
    return out


def _layer(d: int, k: int, m: int, kind: str, seed: int) -> MultiHeadAttention:
    if kind == "torch":
        import torch

        from sculpt.torch_interop import from_torch

        torch.manual_seed(seed)
        return from_torch(torch.nn.MultiheadAttention(d, m, bias=False, batch_first=True).double())
    return plant(d, k, m, seed=seed, **({"max_cond": 100.0} if d >= 24 else {}))


def route_run(d: int, k: int, m: int, kind: str, n: int, seed: int) -> dict[str, object]:
    """``learn(method="sculpt")`` on one layer."""
    model = _layer(d, k, m, kind, seed)
    X = sample_inputs(n, k, d, rng=seed + 1000)
    t = time.perf_counter()
    try:
        res = learn(X, model(X), m, method="sculpt", seed=seed)
    except ValueError as exc:  # too few examples for the route
        return {
            "shape": [d, k, m],
            "kind": kind,
            "n": n,
            "seed": seed,
            "converged": False,
            "attempts": 0,
            "time": time.perf_counter() - t,
            "phases": [],
            "reason": str(exc),
        }
    return {
        "shape": [d, k, m],
        "kind": kind,
        "n": n,
        "seed": seed,
        "converged": bool(res.converged),
        "time": time.perf_counter() - t,
        "phases": [[r.name, r.status, r.time] for r in res.phases],
        "attempts": len(res.info.attempts or []),
        "reason": res.reason,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["sum_w", "route"], required=True)
    ap.add_argument("--ks", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    ap.add_argument("--n", type=int, default=18_000)
    ap.add_argument("--shapes", nargs="+", default=["8,32,2,planted,20000"])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    runs: list[dict[str, object]] = []
    if a.part == "sum_w":
        print("| k | seed | crude | trimmed | refit | returned | refit kept | cond | cond_lower | u | s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for k in a.ks:
            for seed in range(a.seeds):
                r = sum_w_run(k, seed, a.n)
                runs.append(r)
                print(
                    f"| {k} | {seed} | {r['err_crude']:.3f} | {r['err_trimmed']:.3f} | {r['err_refit']:.3f} | "
                    f"{r['err_sum_w']:.3f} | {r['refit_accepted']} | {r['cond']:.3g} | {r['cond_lower']:.3g} | "
                    f"{r['rel_uncertainty']:.2f} | {r['time']:.1f} |",
                    flush=True,
                )
    else:
        print("| shape | layer | N | exact | median s | attempts |")
        print("|---|---|---|---|---|---|")
        for spec in a.shapes:
            d, k, m, kind, n = spec.split(",")
            rs = [route_run(int(d), int(k), int(m), kind, int(n), seed) for seed in range(a.seeds)]
            runs.extend(rs)
            exact = sum(bool(r["converged"]) for r in rs)
            med = float(np.median([float(r["time"]) for r in rs]))  # type: ignore[arg-type]
            print(
                f"| ({d},{k},{m}) | {kind} | {n} | {exact}/{len(rs)} | {med:.1f} | {[r['attempts'] for r in rs]} |",
                flush=True,
            )
    if a.out:
        write_json(a.out, runs)


if __name__ == "__main__":
    main()
