"""MOSEK adapter, used only when its licence checks out.

cvxpy lists MOSEK as installed even without a licence, and solving then raises a raw ``mosek.Error``
(err_missing_license_file). So the licence is probed once (import mosek; Env(); checkoutlicense(pton),
catching everything) and the result cached; problems go through cvxpy's MOSEK interface.
"""

from __future__ import annotations

import functools

import numpy as np

from ._base import Backend, LPSolution, Options, ProblemData, QPSolution


@functools.lru_cache(maxsize=1)
def licence_status() -> tuple[bool, str]:
    """(usable, reason), probed once per process."""
    try:
        import mosek
    except Exception as e:
        return False, f"MOSEK is not installed (import mosek failed: {e})"
    try:
        env = mosek.Env()
        env.checkoutlicense(mosek.feature.pton)
    except Exception as e:
        return False, f"MOSEK is installed but has no usable licence ({type(e).__name__}: {e})"
    return True, "ok"


class MosekBackend(Backend):
    name = "MOSEK"
    cvxpy_name = "MOSEK"
    SUPPORTS_LP = SUPPORTS_QP = SUPPORTS_CONIC = True
    INTERIOR_SOLUTIONS = True  # interior point with the basis identification turned off (interior=True)

    def probe(self) -> tuple[bool, str]:
        return licence_status()

    def solve(self, data: ProblemData, *, interior: bool = False, options: Options | None = None) -> LPSolution:
        import cvxpy as cp

        from . import _cvx

        x = cp.Variable(data.n)
        obj = data.c @ x
        if data.P is not None:
            obj = obj + 0.5 * cp.quad_form(x, cp.psd_wrap(data.P))
        cons = []
        if data.m_ub:
            cons.append(data.A_ub @ x <= data.b_ub)
        if data.m_eq:
            cons.append(data.A_eq @ x == data.b_eq)
        if np.any(np.isfinite(data.lb)):
            i = np.isfinite(data.lb)
            cons.append(x[i] >= data.lb[i])
        if np.any(np.isfinite(data.ub)):
            i = np.isfinite(data.ub)
            cons.append(x[i] <= data.ub[i])
        opts: dict[str, object] = dict(options or {})
        if interior:
            opts.setdefault("mosek_params", {"MSK_IPAR_INTPNT_BASIS": "MSK_BI_NEVER"})
        value = _cvx.solve_problem(cp.Problem(cp.Minimize(obj), cons), self, opts)
        lam = np.maximum(np.asarray(cons[0].dual_value), 0.0) if data.m_ub else np.zeros(0)
        mu = np.asarray(cons[int(data.m_ub > 0)].dual_value) if data.m_eq else np.zeros(0)
        cls = QPSolution if data.P is not None else LPSolution
        return cls(np.asarray(x.value, dtype=float), value, self.name, "optimal", {}, lam, mu)
