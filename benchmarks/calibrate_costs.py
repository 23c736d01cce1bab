"""Calibrate the constants of auto's cost model (``sculpt.costs``, ``CostSettings``) on this machine, once.

    OPENBLAS_NUM_THREADS=1 python benchmarks/calibrate_costs.py [--quick]

Times the kernels the model prices, one BLAS thread, short runs only (about a minute in all):
- dense: a float64 GEMM, a Cholesky factorisation and a tall least-squares solve: ``dense_flop_seconds``;
- L-BFGS (``gradient_descent``) for a fixed number of iterations at three sizes: a least-squares fit of
  seconds = units·``lbfgs_unit_seconds`` + iterations·``lbfgs_iteration_seconds`` (relative errors);
- the polish's LM with dense normal equations (``lm_vp``, a few iterations from random starts) at four sizes:
  seconds = flops·``lm_flop_seconds`` + iterations·``lm_iteration_seconds``;
- the matrix-free LM (``polish.matrix_free_above = 0``) at two sizes: its conjugate-gradient products per LM
  step (``cg_iterations``) and seconds per flop (``cg_flop_seconds``);
- VP-LM from random starts (``learn(method="vp-lm")``) at three sizes: the LM iterations of a validating start
  (``vp_lm_iterations``), and the model's prediction against the measured time;
- one sculpting attempt (``learn(method="sculpt")``) at three sizes: what the modelled products leave
  (``sculpt_attempt_seconds``, the median).
Prints the fitted constants as ``CostSettings`` fields and the model's predictions against the measurements.
Nothing is asserted; the constants in ``sculpt/settings.py`` are copied from one run of this script.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import cast  # noqa: E402

import numpy as np  # noqa: E402
from scipy.linalg import cho_factor, lstsq  # noqa: E402
from scipy.optimize import nnls  # noqa: E402

from sculpt import LearnResult, learn, plant, sample_inputs  # noqa: E402
from sculpt.baselines import gradient_descent, work_unit  # noqa: E402
from sculpt.costs import sculpt_cost, vp_lm_cost, vp_lm_flops  # noqa: E402
from sculpt.phases import polish as polish_module  # noqa: E402
from sculpt.phases.polish import lm_vp  # noqa: E402
from sculpt.settings import CostSettings, PolishSettings, ProblemSize, Settings  # noqa: E402

Shape = tuple[int, int, int]


def _best_of(fn: Callable[[], object], repeats: int = 3) -> float:
    """The fastest of ``repeats`` timed calls (seconds)."""
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return float(best)


def _relative_fit(rows: list[list[float]], times: list[float]) -> np.ndarray:
    """Non-negative coefficients c minimising Σ ((rows·c − t)/t)²: every size counts, not the slowest."""
    A = np.array(rows, float) / np.array(times)[:, None]
    return nnls(A, np.ones(len(times)))[0]


def _data(shape: Shape, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    d, k, m = shape
    layer = plant(d, k, m, seed=seed, max_cond=100.0)
    X = sample_inputs(n, k, d, rng=seed + 1)
    return X, layer(X)


def dense_flop_seconds() -> float:
    """Median seconds per flop of a GEMM (2n³), a Cholesky (n³/3) and a tall QR-based solve (2·rows·cols²)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((1024, 1024))
    S = A @ A.T + 1024 * np.eye(1024)
    S2 = np.kron(np.eye(2), S)
    T = rng.standard_normal((8192, 512))
    b = rng.standard_normal(8192)
    rates = [
        _best_of(lambda: A @ A) / (2 * 1024.0**3),
        _best_of(lambda: cho_factor(S2)) / (2048.0**3 / 3),
        _best_of(lambda: lstsq(T, b, lapack_driver="gelsy"), 2) / (2 * 8192.0 * 512**2),
    ]
    print("dense s/flop (GEMM, Cholesky, gelsy):", ", ".join(f"{r:.3g}" for r in rates))
    return float(np.median(rates))


def lbfgs_constants(quick: bool) -> tuple[float, float]:
    """L-BFGS for 40 iterations at three sizes: (seconds per work unit, seconds per iteration)."""
    cases: list[tuple[Shape, int]] = [((8, 4, 2), 500), ((16, 8, 2), 1000), ((32, 8, 2), 500)]
    if not quick:
        cases.append(((64, 8, 2), 250))
    rows, times = [], []
    for shape, n in cases:
        X, Y = _data(shape, n)
        d, k, m = shape

        def fit(X: np.ndarray = X, Y: np.ndarray = Y, m: int = m) -> LearnResult:
            return gradient_descent(X, Y, m, method="lbfgs", seed=1, max_iter=40, tol=0.0)

        res = fit()
        t = _best_of(fit)
        it = int(res.iterations)
        rows.append([n * it * work_unit(k, d, m), it])
        times.append(t)
        print(f"L-BFGS {shape} n={n}: {it} iterations, {t:.3f} s")
    coef = _relative_fit(rows, times)
    return float(coef[0]), float(coef[1])


def lm_constants(quick: bool) -> tuple[float, float]:
    """The dense LM for 4 iterations at four sizes: (seconds per flop, seconds per iteration)."""
    cases: list[tuple[Shape, int]] = [((8, 4, 2), 64), ((16, 4, 2), 64), ((16, 4, 4), 128)]
    if not quick:
        cases.append(((32, 8, 2), 64))
    dense = PolishSettings(max_iter=4, fit_tol=0.0, matrix_free_above=10**9)
    rows, times = [], []
    for shape, n in cases:
        X, Y = _data(shape, n)
        d, k, m = shape
        th0 = np.random.default_rng(2).standard_normal((m, d, d)) / d

        def fit_lm(X: np.ndarray = X, Y: np.ndarray = Y, th0: np.ndarray = th0) -> int:
            return lm_vp(th0, X, Y, dense)[3]

        its = fit_lm()
        t = _best_of(fit_lm)
        rows.append([its * vp_lm_flops(ProblemSize(d, k, m), n), its])
        times.append(t)
        print(f"dense LM {shape} n={n}: {its} iterations, {t:.3f} s")
    coef = _relative_fit(rows, times)
    return float(coef[0]), float(coef[1])


def cg_products(shape: Shape, n: int) -> tuple[int, float]:
    """The matrix-free LM from a random start: (conjugate-gradient products per LM step, seconds per flop)."""
    from sculpt.phases import polish_cg

    X, Y = _data(shape, n)
    d, k, m = shape
    calls = {"n": 0}
    normal = polish_cg.VPProducts.normal

    def counted(self: polish_cg.VPProducts, dirs: np.ndarray) -> np.ndarray:
        calls["n"] += 1
        return normal(self, dirs)

    polish_cg.VPProducts.normal = counted  # type: ignore[method-assign]
    try:
        th0 = np.random.default_rng(2).standard_normal((m, d, d)) / d
        t = time.perf_counter()
        its = lm_vp(th0, X, Y, PolishSettings(max_iter=8, matrix_free_above=0))[3]
        t = time.perf_counter() - t
    finally:
        polish_cg.VPProducts.normal = normal  # type: ignore[method-assign]
    per_step = max(1, round(calls["n"] / max(its, 1)))
    size = ProblemSize(d, k, m)
    flops = its * vp_lm_flops(size, n, matrix_free=True, cg_iterations=per_step)
    print(
        f"matrix-free LM {shape} n={n}: {its} iterations, {calls['n']} CG products ({per_step} a step), {t:.2f} s, "
        f"{t / flops:.3g} s/flop"
    )
    return per_step, t / flops


def vp_lm_iterations(c: CostSettings) -> int:
    """LM iterations of VP-LM's validating start at three sizes (median); prints predicted against measured."""
    its = []
    for shape, N in (((8, 4, 2), 2000), ((8, 4, 3), 3000), ((16, 4, 2), 3000)):
        X, Y = _data(shape, N, seed=1)
        d, k, m = shape
        t = time.perf_counter()
        res = learn(X, Y, m, method="vp-lm", seed=3)
        t = time.perf_counter() - t
        starts = cast("list[dict[str, object]]", res.phases[-1].figures["starts"])
        its.append(int(cast(int, starts[-1]["iterations"])))
        s = Settings().merged(cost=c).resolve(d, k, m, N)
        pred = vp_lm_cost(ProblemSize(d, k, m, N), s.polish.first_examples or 64, c.vp_lm_iterations, c)
        print(
            f"VP-LM {shape} N={N}: {len(starts)} start(s), {res.iterations} LM iterations, {t:.3f} s "
            f"(predicted {pred.seconds:.3f} s with {c.vp_lm_iterations} iterations)"
        )
    return int(np.median(its))


def sculpt_attempt_seconds(c: CostSettings) -> float:
    """What one sculpting attempt costs beyond the modelled products (median over three sizes)."""
    left = []
    for shape, N in (((8, 4, 2), 2000), ((8, 4, 3), 3000), ((16, 4, 2), 4000)):
        X, Y = _data(shape, N, seed=1)
        d, k, m = shape
        t = time.perf_counter()
        res = learn(X, Y, m, method="sculpt", seed=3)
        t = time.perf_counter() - t
        s = Settings().merged(cost=c.merged(sculpt_attempt_seconds=0.0)).resolve(d, k, m, N)
        pred = sculpt_cost(ProblemSize(d, k, m, N), s).seconds
        attempts = len(cast("list[object]", res.info["attempts"]))
        print(f"sculpt {shape} N={N}: {t:.3f} s, {attempts} attempt(s), modelled products {pred:.3f} s")
        if attempts == 1:
            left.append(max(0.0, t - pred))
    return float(np.median(left)) if left else c.sculpt_attempt_seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip the largest L-BFGS and LM sizes")
    args = ap.parse_args()
    dense = dense_flop_seconds()
    unit, lbfgs_it = lbfgs_constants(args.quick)
    lm_flop, lm_it = lm_constants(args.quick)
    cg = [cg_products((16, 8, 2), 256), *([] if args.quick else [cg_products((32, 8, 2), 512)])]
    c = CostSettings(
        dense_flop_seconds=dense,
        lbfgs_unit_seconds=unit,
        lbfgs_iteration_seconds=lbfgs_it,
        lm_flop_seconds=lm_flop,
        lm_iteration_seconds=lm_it,
        cg_iterations=int(np.median([c[0] for c in cg])),
        cg_flop_seconds=float(np.median([c[1] for c in cg])),
    )
    c = c.merged(vp_lm_iterations=vp_lm_iterations(c))
    c = c.merged(sculpt_attempt_seconds=sculpt_attempt_seconds(c))
    print("\nCostSettings fields (sculpt/settings.py):")
    for name in (
        "dense_flop_seconds",
        "lm_flop_seconds",
        "lm_iteration_seconds",
        "lbfgs_unit_seconds",
        "lbfgs_iteration_seconds",
        "sculpt_attempt_seconds",
        "vp_lm_iterations",
        "cg_iterations",
        "cg_flop_seconds",
    ):
        v = getattr(c, name)
        print(f"  {name} = {v:.3g}" if isinstance(v, float) else f"  {name} = {v}")
    _ = polish_module  # the module whose kernels the LM figures time


if __name__ == "__main__":
    main()
