"""SCS adapter (scs, called directly) with tightened tolerances: for large conic problems.

cvxpy's SCS default eps = 1e-4 is too coarse for zero-width tests at 1e-7, so this adapter uses
eps_abs = eps_rel = 1e-9 (override with options). Same cone form and dual convention as Clarabel.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import EmptyBodyError
from ._base import Backend, LPSolution, Options, OptionValue, ProblemData, QPSolution
from .backend_clarabel import split_duals, stack_conic

SCS_DEFAULTS: dict[str, OptionValue] = {
    "eps_abs": 1e-9,
    "eps_rel": 1e-9,
    "eps_infeas": 1e-9,
    "max_iters": 200_000,
    "verbose": False,
}


class ScsBackend(Backend):
    name = "SCS"
    cvxpy_name = "SCS"
    SUPPORTS_LP = SUPPORTS_QP = SUPPORTS_CONIC = True
    INTERIOR_SOLUTIONS = False  # first-order (ADMM): its optimal points are not central

    def probe(self) -> tuple[bool, str]:
        return self.import_probe("scs")

    def cvxpy_options(self) -> dict[str, OptionValue]:
        return {k: v for k, v in SCS_DEFAULTS.items() if k != "verbose"}

    def solve(self, data: ProblemData, *, interior: bool = False, options: Options | None = None) -> LPSolution:
        import scs

        A, b, m_eq, m_ub, m_b = stack_conic(data)
        payload = {"A": A, "b": b, "c": data.c}
        if data.P is not None:
            payload["P"] = sp.triu(sp.csc_matrix(data.P), format="csc")
        settings = {**SCS_DEFAULTS, **(options or {})}
        sol = scs.SCS(payload, {"z": m_eq, "l": m_ub + m_b}, **settings).solve()
        status = sol["info"]["status"]
        if status.startswith("infeasible"):
            raise EmptyBodyError(f"SCS: the constraints are infeasible ({status})")
        if status.startswith("unbounded"):
            raise self.unbounded(data, f"SCS: the objective is unbounded ({status})")
        if status != "solved":
            raise self.fail(status)
        x = np.array(sol["x"], dtype=float)
        lam, mu = split_duals(np.array(sol["y"], dtype=float), m_eq, m_ub)
        cls = QPSolution if data.P is not None else LPSolution
        return cls(
            x, float(sol["info"]["pobj"]), self.name, "optimal", {"iterations": int(sol["info"]["iter"])}, lam, mu
        )
