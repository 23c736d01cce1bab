"""Learning from queries against learning from random examples: queries, tokens and time to exact recovery.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/queries.py [--seeds 1] [--ds 4 8 16 32] [--ms 1 2 3 4]
        [--compare 4x1 4x2 8x1 8x2] [--compare-routes auto sculpt] [--max-n 32000] [--noise 8x2 8x4]
        [--sigmas 1e-6 1e-4 1e-2] [--no-paper] [--out results/queries.json]

Item 2 (the grid): for every (d, m), ``learn_from_queries`` (method "auto") on a planted layer (``sculpt.plant``,
max_cond 1e3 from d = 24 on, where cond <= 10 is too rare to draw) and on a torch-initialised
``torch.nn.MultiheadAttention(d, m, bias=False)`` in float64 when m divides d (torch requires it); exact means
test relative MSE <= 1e-12 on 2000 fresh Gaussian sequences and head-matched max errors <= 1e-6. The queries are
compared with Kim, Kim & Guo's count 4md² − 2m + 1 and, for m = 1, with d² + d (Bhattamishra et al.'s O(d²)
one-head route as reconstructed here, "one-head"). The paper-route columns run "kkg" (m >= 2) or "one-head".

Item 3 (side by side): on the same planted layers, the random-example routes (``learn`` with method "auto",
"sculpt") read N random ±1 examples of k = 4 tokens; N doubles from the route's minimum until the run is exact
(or ``--max-n``): one example is one query of k tokens, so "queries" is that N.
Noise (``--noise``): the planted layer's answers plus N(0, σ²) per entry, ``learn_from_queries(noise=σ)``.
Timings are wall seconds on a loaded 2-core machine: compare within one run only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _report import write_json

from sculpt import MultiHeadAttention, learn, learn_from_queries, plant, sample_inputs
from sculpt.learner import min_examples
from sculpt.queries import kkg_bound

K_EXAMPLES = 4


def _score(truth: MultiHeadAttention, model: MultiHeadAttention | None, seed: int) -> dict[str, object]:
    if model is None:
        return {"test_error": None, "theta_error": None, "w_error": None, "exact": False}
    X = np.random.default_rng(seed).standard_normal((2000, 6, truth.d))
    err = truth.prediction_error(model, X)
    dist = truth.distance(model)
    exact = err <= 1e-12 and dist.max_theta_error <= 1e-6 and dist.max_w_error <= 1e-6
    return {"test_error": err, "theta_error": dist.max_theta_error, "w_error": dist.max_w_error, "exact": exact}


def _layers(d: int, m: int, seed: int) -> list[tuple[str, MultiHeadAttention, object]]:
    """(kind, truth, oracle): the planted layer, and the torch-initialised module when m divides d."""
    planted = plant(d, K_EXAMPLES, m, seed=seed, max_cond=10.0 if d < 24 else 1e3)
    out: list[tuple[str, MultiHeadAttention, object]] = [("planted", planted, planted)]
    if d % m == 0:
        try:
            import torch

            from sculpt import from_torch
        except ImportError:  # torch is optional
            return out
        torch.manual_seed(seed)
        mod = torch.nn.MultiheadAttention(d, m, bias=False, batch_first=True, dtype=torch.float64).eval()
        out.append(("torch", from_torch(mod), mod))
    return out


def _query_run(truth: MultiHeadAttention, oracle: object, d: int, m: int, method: str, seed: int) -> dict[str, object]:
    t0 = time.perf_counter()
    try:
        res = learn_from_queries(oracle, d, m, method=method, seed=seed)
    except Exception as exc:  # a route that cannot run here is a row of the table, not a crash
        return {"method": method, "error": f"{type(exc).__name__}: {exc}", "exact": False}
    return {
        "method": method,
        "route": res.info.route,
        "queries": res.samples_used,
        "tokens": res.info.details["tokens"],
        "converged": res.converged,
        "time": time.perf_counter() - t0,
        **_score(truth, res.model, seed + 100),
    }


def grid(ds: list[int], ms: list[int], seeds: int, paper: bool = True) -> list[dict[str, object]]:
    rows = []
    for d in ds:
        for m in ms:
            for seed in range(seeds):
                for kind, truth, oracle in _layers(d, m, seed + 1):
                    row: dict[str, object] = {"d": d, "m": m, "seed": seed, "layer": kind, "kkg_bound": kkg_bound(d, m)}
                    row["bhattamishra_count"] = d * d + d if m == 1 else None
                    row["default"] = _query_run(truth, oracle, d, m, "auto", seed)
                    name = "one-head" if m == 1 else "kkg"
                    row["paper"] = _query_run(truth, oracle, d, m, name, seed) if paper else {"exact": None}
                    rows.append(row)
                    _print_grid_row(row)
    return rows


def _fmt(v: object, spec: str = ".1e") -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def _print_grid_row(r: dict[str, object]) -> None:
    a, p = r["default"], r["paper"]
    assert isinstance(a, dict) and isinstance(p, dict)
    print(
        f"| {r['d']} | {r['m']} | {r['layer']} | {a.get('route', '—')} | {_fmt(a.get('queries'))} | "
        f"{_fmt(a.get('tokens'))} | {r['kkg_bound']} | {_fmt(r['bhattamishra_count'])} | {a['exact']} | "
        f"{_fmt(a.get('test_error'))} | {_fmt(a.get('theta_error'))} | {_fmt(a.get('time'), '.2f')} | "
        f"{p.get('route', p.get('error', '—'))} | {_fmt(p.get('queries'))} | {p['exact']} | {_fmt(p.get('time'), '.2f')} |",
        flush=True,
    )


def _examples_run(truth: MultiHeadAttention, d: int, m: int, method: str, seed: int, max_n: int) -> dict[str, object]:
    """Double N from the route's minimum until the run is exact; the last run's figures."""
    n = max(min_examples(method, d, K_EXAMPLES, m), 64)
    total = 0.0
    last: dict[str, object] = {"method": method, "exact": False}
    while n <= max_n:
        X = sample_inputs(n, K_EXAMPLES, d, rng=seed + 7)
        t0 = time.perf_counter()
        try:
            res = learn(X, truth(X), m, method=method, seed=seed)
            model = res.model
        except Exception as exc:  # too few examples for the route, or a route failure: double N
            model, last["error"] = None, f"{type(exc).__name__}: {exc}"
        total += time.perf_counter() - t0
        last = {
            "method": method,
            "queries": n,
            "tokens": n * K_EXAMPLES,
            "time_last": time.perf_counter() - t0,
            "time_total": total,
            **_score(truth, model, seed + 100),
        }
        if last["exact"]:
            break
        n *= 2
    return last


def compare(sizes: list[tuple[int, int]], routes: list[str], seeds: int, max_n: int) -> list[dict[str, object]]:
    rows = []
    for d, m in sizes:
        for seed in range(seeds):
            truth = plant(d, K_EXAMPLES, m, seed=seed + 1, max_cond=10.0 if d < 24 else 1e3)
            row: dict[str, object] = {"d": d, "m": m, "seed": seed}
            row["queries:auto"] = _query_run(truth, truth, d, m, "auto", seed)
            row["queries:paper"] = _query_run(truth, truth, d, m, "one-head" if m == 1 else "kkg", seed)
            for route in routes:
                row[f"examples:{route}"] = _examples_run(truth, d, m, route, seed, max_n)
            rows.append(row)
            for key, v in row.items():
                if isinstance(v, dict):
                    t = v.get("time", v.get("time_total"))
                    print(
                        f"| {d} | {m} | {key} | {_fmt(v.get('queries'))} | {_fmt(v.get('tokens'))} | {v['exact']} | "
                        f"{_fmt(v.get('test_error'))} | {_fmt(t, '.2f')} |",
                        flush=True,
                    )
    return rows


def _within(row: dict[str, object]) -> bool:
    """The default route's queries are within Kim, Kim & Guo's count."""
    run, bound = row["default"], row["kkg_bound"]
    queries = run.get("queries") if isinstance(run, dict) else None
    return isinstance(queries, int) and isinstance(bound, int) and queries <= bound


def noise_rows(sizes: list[tuple[int, int]], sigmas: list[float], seeds: int) -> list[dict[str, object]]:
    """``learn_from_queries(noise=σ)`` on planted layers answering with N(0, σ²) added to every entry."""
    rows = []
    for d, m in sizes:
        for sigma in sigmas:
            for seed in range(seeds):
                truth = plant(d, K_EXAMPLES, m, seed=seed + 1, max_cond=10.0 if d < 24 else 1e3)
                rng = np.random.default_rng(seed + 50)

                def oracle(
                    X: np.ndarray, truth: MultiHeadAttention = truth, rng: np.random.Generator = rng
                ) -> np.ndarray:
                    return truth(X) + sigma * rng.standard_normal(X.shape)

                t0 = time.perf_counter()
                res = learn_from_queries(oracle, d, m, seed=seed, noise=sigma)
                row = {
                    "d": d,
                    "m": m,
                    "sigma": sigma,
                    "seed": seed,
                    "queries": res.samples_used,
                    "converged": res.converged,
                    "validation_error": res.validation_error,
                    "noise_floor": res.info.details["noise_floor"],
                    "time": time.perf_counter() - t0,
                    **_score(truth, res.model, seed + 100),
                }
                rows.append(row)
                print(
                    f"| {d} | {m} | {sigma:.0e} | {row['queries']} | {row['converged']} | "
                    f"{_fmt(row['validation_error'])} | {_fmt(row['noise_floor'])} | {_fmt(row['theta_error'])} | "
                    f"{_fmt(row['w_error'])} | {_fmt(row['time'], '.1f')} |",
                    flush=True,
                )
    return rows


def _size(text: str) -> tuple[int, int]:
    d, m = text.lower().split("x")
    return int(d), int(m)


def main(argv: list[str] | None = None) -> dict[str, object]:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--ds", type=int, nargs="+", default=[4, 8, 16, 32])
    p.add_argument("--ms", type=int, nargs="+", default=[1, 2, 3, 4])
    p.add_argument("--compare", type=_size, nargs="*", default=[(4, 1), (4, 2), (8, 1), (8, 2)])
    p.add_argument("--compare-routes", nargs="+", default=["auto", "sculpt"])
    p.add_argument("--max-n", type=int, default=32000)
    p.add_argument("--noise", type=_size, nargs="*", default=[], help="sizes for the noise table (none: skipped)")
    p.add_argument("--sigmas", type=float, nargs="+", default=[1e-6, 1e-4, 1e-2])
    p.add_argument("--no-paper", action="store_true", help="skip the paper routes' columns of the grid")
    p.add_argument("--out", default="results/queries.json")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    print(
        "| d | m | layer | route | queries | tokens | 4md²−2m+1 | d²+d (m=1) | exact | test rel. MSE | max Θ err | "
        "s | paper route | queries | exact | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = grid(args.ds, args.ms, args.seeds, paper=not args.no_paper)
    comp: list[dict[str, object]] = []
    if args.compare:
        print("\n| d | m | learner | queries (examples) | tokens | exact | test rel. MSE | s |")
        print("|---|---|---|---|---|---|---|---|")
        comp = compare(args.compare, args.compare_routes, args.seeds, args.max_n)
    noisy: list[dict[str, object]] = []
    if args.noise:
        print("\n| d | m | σ | queries | converged | validation rel. MSE | noise floor | max Θ err | max W err | s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        noisy = noise_rows(args.noise, args.sigmas, args.seeds)
    exact = sum(1 for r in rows if isinstance(r["default"], dict) and r["default"]["exact"] is True)
    within = sum(1 for r in rows if _within(r))
    print(f"\ndefault route: exact on {exact}/{len(rows)} layers, within 4md² − 2m + 1 on {within}/{len(rows)}")
    report = {
        "grid": rows,
        "compare": comp,
        "noise": noisy,
        "exact": exact,
        "within_bound": within,
        "layers": len(rows),
    }
    write_json(args.out, report, seconds=time.perf_counter() - t0)
    return report


if __name__ == "__main__":
    main()
