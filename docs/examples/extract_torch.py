"""Extract a ``torch.nn.MultiheadAttention`` (biases off) through its forward calls alone.

    .venv/bin/python docs/examples/extract_torch.py [--d 16] [--heads 4] [--seed 0] [--method auto]

The module is a black box: ``learn_from_queries`` only calls ``module(X, X, X)`` on inputs it chooses (a token
alone, a token followed by copies of another, random sequences) and never reads a weight. The weights are read
afterwards, only to score the copy: head-matched parameter errors against ``sculpt.from_torch(module)`` and
the relative MSE on fresh inputs. A run that does not converge (or an oracle error) is reported, not hidden.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> dict[str, object]:
    """Run the extraction; returns the figures printed (queries, tokens, errors, converged)."""
    import numpy as np
    import torch

    from sculpt import from_torch, learn_from_queries
    from sculpt.errors import SculptError
    from sculpt.queries import kkg_bound

    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--d", type=int, default=16, help="embedding dimension")
    p.add_argument("--heads", type=int, default=4, help="heads (must divide d, as torch requires)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--method", default="auto", help="query route: auto, rational, kkg, one-head")
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    module = torch.nn.MultiheadAttention(args.d, args.heads, bias=False, batch_first=True, dtype=torch.float64)
    module.eval()
    calls = {"forward": 0}
    module.register_forward_hook(lambda *_: calls.__setitem__("forward", calls["forward"] + 1))

    out: dict[str, object] = {"d": args.d, "heads": args.heads, "bound": kkg_bound(args.d, args.heads)}
    try:
        res = learn_from_queries(module, args.d, args.heads, method=args.method, seed=args.seed)
    except SculptError as exc:  # a bad oracle or a budget too small: say so and stop
        print(f"extraction failed: {exc}", file=sys.stderr)
        return {**out, "converged": False, "error": str(exc)}
    out |= {
        "route": res.info.route,
        "queries": res.samples_used,
        "tokens": res.info.details["tokens"],
        "forward_calls": calls["forward"],
        "converged": res.converged,
        "reason": res.reason,
        "time": res.time,
    }
    if res.model is None:
        print(f"no model: {res.reason}", file=sys.stderr)
        return out
    truth = from_torch(module)  # read only now, to score the copy
    X_test = np.random.default_rng(args.seed + 1).standard_normal((2000, 6, args.d))
    dist = truth.distance(res.model)
    out |= {
        "test_error": truth.prediction_error(res.model, X_test),
        "theta_error": dist.max_theta_error,
        "w_error": dist.max_w_error,
    }
    print(
        f"torch.nn.MultiheadAttention(d={args.d}, heads={args.heads}) via route {out['route']}: "
        f"{out['queries']} queries ({out['tokens']} tokens, {out['forward_calls']} forward calls; "
        f"Kim–Kim–Guo count {out['bound']}), converged={res.converged}\n"
        f"  test relative MSE {out['test_error']:.2e}, max head errors Θ {dist.max_theta_error:.1e}, "
        f"W {dist.max_w_error:.1e}, {res.time:.2f} s"
    )
    return out


if __name__ == "__main__":
    result = main()
    sys.exit(0 if result.get("converged") else 1)
