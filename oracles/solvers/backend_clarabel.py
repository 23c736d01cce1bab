"""Clarabel adapter (clarabel, called directly): the default QP backend (min-norm point), accurate IPM.

Problem form: min ½ xᵀP x + qᵀx s.t. A x + s = b, s in (zero cone) x (non-negative cone); its dual z
satisfies P x + q + Aᵀz = 0, which is already our multiplier convention.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import EmptyBodyError
from ._base import Backend, LPSolution, Options, ProblemData, QPSolution


def stack_conic(data: ProblemData) -> tuple[sp.csc_matrix, np.ndarray, int, int, int]:
    """[A_eq; A_ub; bound rows] and its right-hand side: returns (A, b, m_eq, m_ub, n_bound_rows)."""
    G, h, _, _ = data.bound_rows()
    A = sp.vstack([data.csc("eq"), data.csc("ub"), G], format="csc")
    b = np.concatenate([data.b_eq, data.b_ub, h])
    return A, b, data.m_eq, data.m_ub, G.shape[0]


def split_duals(z: np.ndarray, m_eq: int, m_ub: int) -> tuple[np.ndarray, np.ndarray]:
    return np.maximum(z[m_eq : m_eq + m_ub], 0.0), z[:m_eq].copy()


class ClarabelBackend(Backend):
    name = "CLARABEL"
    cvxpy_name = "CLARABEL"
    SUPPORTS_LP = SUPPORTS_QP = SUPPORTS_CONIC = True
    INTERIOR_SOLUTIONS = True  # an interior-point method without crossover

    def probe(self) -> tuple[bool, str]:
        return self.import_probe("clarabel")

    def solve(self, data: ProblemData, *, interior: bool = False, options: Options | None = None) -> LPSolution:
        import clarabel

        A, b, m_eq, m_ub, m_b = stack_conic(data)
        P = sp.triu(sp.csc_matrix(data.P), format="csc") if data.P is not None else sp.csc_matrix((data.n, data.n))
        cones = []
        if m_eq:
            cones.append(clarabel.ZeroConeT(m_eq))
        if m_ub + m_b:
            cones.append(clarabel.NonnegativeConeT(m_ub + m_b))
        st = clarabel.DefaultSettings()
        st.verbose = False
        for k, v in (options or {}).items():
            setattr(st, k, v)
        sol = clarabel.DefaultSolver(P, data.c, A, b, cones, st).solve()
        status = str(sol.status).split(".")[-1]
        if status in ("PrimalInfeasible", "AlmostPrimalInfeasible"):
            raise EmptyBodyError(f"Clarabel: the constraints are infeasible ({status})")
        if status in ("DualInfeasible", "AlmostDualInfeasible"):
            raise self.unbounded(data, f"Clarabel: the objective is unbounded ({status})")
        x = np.array(sol.x, dtype=float)
        if status == "AlmostSolved":
            # reduced accuracy: keep it only if the point is feasible to 1e-7 (relative to the data)
            scale = 1.0 + float(np.max(np.abs(b), initial=0.0))
            if data.max_violation(x) > 1e-7 * scale:
                raise self.fail(status, "reduced-accuracy solution violates the constraints")
        elif status != "Solved":
            raise self.fail(status)
        lam, mu = split_duals(np.array(sol.z, dtype=float), m_eq, m_ub)
        cls = QPSolution if data.P is not None else LPSolution
        return cls(
            x,
            float(sol.obj_val),
            self.name,
            "optimal" if status == "Solved" else "almost_optimal",
            {"iterations": int(sol.iterations), "solve_time": float(sol.solve_time)},
            lam,
            mu,
        )
