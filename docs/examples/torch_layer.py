"""Learn a real ``torch.nn.MultiheadAttention`` back from its input/output pairs, and compare with L-BFGS.

    .venv/bin/python docs/examples/torch_layer.py [--n 20000] [--sharpen 4.0] [--seed 0] [--method auto]

A bias-free, batch-first torch layer with h heads is the model F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i with
Θ_i = Q_i K_iᵀ/√d_h and W_i = V_i O_i (rank d_h each). We label ±1 inputs with torch's own forward pass,
learn the layer with ``learn`` (``--method``, auto by default; sculpt for the sculpting learner) and with
gradient descent from random init on the same data, and report the function error on fresh inputs and the
head-matched parameter errors. A method that returns no model is reported as such.
"""
from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> dict:
    import torch

    from sculpt import from_torch, learn, sample_inputs
    from sculpt.baselines import gradient_descent

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=8, help="embedding dimension")
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--k", type=int, default=4, help="sequence length")
    p.add_argument("--n", type=int, default=20000, help="examples")
    p.add_argument("--sharpen", type=float, default=4.0,
                   help="multiply the in-projection by this (torch's init gives nearly uniform attention)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--method", default="auto", help="the learn() route (auto, sculpt, vp-lm, ...)")
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    mha = torch.nn.MultiheadAttention(args.d, args.heads, bias=False, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.mul_(args.sharpen)
    truth = from_torch(mha)
    X = sample_inputs(args.n, args.k, args.d, rng=args.seed)
    with torch.no_grad():
        T = torch.from_numpy(X)
        Y = mha(T, T, T, need_weights=False)[0].numpy()
    X_test = sample_inputs(5000, args.k, args.d, rng=args.seed + 1)

    out = {}
    print(f"torch layer: d={args.d}, heads={args.heads}, k={args.k}; ‖Θ_i‖_F = "
          + ", ".join(f"{v:.2f}" for v in (truth.thetas ** 2).sum(axis=(1, 2)) ** 0.5))
    print(f"{'method':<10} {'converged':>9} {'test rel MSE':>13} {'Θ error':>9} {'W error':>9} {'time s':>7}")
    for name, run in ((args.method, lambda: learn(X, Y, args.heads, method=args.method, seed=args.seed, truth=truth)),
                      ("lbfgs", lambda: gradient_descent(X, Y, args.heads, method="lbfgs", seed=args.seed))):
        t0 = time.perf_counter()
        try:
            res = run()
        except ValueError as exc:  # a route that refuses the shape (sculpt at m(k - 1) >> d) says so up front
            res = None
            reason = f"refused: {exc}"
        wall = time.perf_counter() - t0
        if res is None or res.model is None:  # no model: say why instead of scoring nothing
            reason = reason if res is None else res.reason
            out[name] = {"converged": False, "test_error": float("inf"), "theta_error": float("inf"),
                         "w_error": float("inf"), "time": wall, "reason": reason}
            print(f"{name:<10} {'False':>9} {'no model':>13} {'-':>9} {'-':>9} {wall:7.2f}  {reason[:100]}")
            continue
        test = truth.prediction_error(res.model, X_test)
        dist = truth.distance(res.model)
        out[name] = {"converged": bool(res.converged), "test_error": test, "theta_error": dist.theta_error,
                     "w_error": dist.w_error, "time": wall}
        print(f"{name:<10} {str(res.converged):>9} {test:13.2e} {dist.theta_error:9.1e} {dist.w_error:9.1e} {wall:7.2f}")
    return out


if __name__ == "__main__":
    main()
