"""HiGHS adapter (highspy, called directly): the default LP backend.

Default algorithm: interior point with crossover (fastest measured on dense 3000x200 LPs, and exact:
crossover ends on a vertex). ``interior=True`` turns crossover off, so the answer is a central point
of the optimal face (a relative-interior point of the body when the objective is zero).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from ..errors import EmptyBodyError, UnboundedError
from ._base import Backend, LPSolution, Matrix, Options, OptionValue, ProblemData, QPSolution

if TYPE_CHECKING:
    import types

    from highspy import Highs

_INF = 1e30  # highspy's kHighsInf is inf; HiGHS accepts np.inf as well


_BANNER_DONE = False


def _highspy() -> types.ModuleType:
    """The highspy module; the first call swallows HiGHS's one-time copyright banner (printed on fd 1 by
    the first Highs() of a process, before output_flag can be set)."""
    global _BANNER_DONE
    import highspy

    if not _BANNER_DONE:
        _BANNER_DONE = True
        try:
            sys.stdout.flush()
            saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
        except (OSError, ValueError):  # no real fd 1 (embedded interpreters): leave the banner
            return highspy
        try:
            os.dup2(devnull, 1)
            highspy.Highs()
            try:
                ctypes.CDLL(None).fflush(None)
            except (OSError, AttributeError):
                pass
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(devnull)
    return highspy


_SCHEDULER = threading.local()  # per OS thread (HiGHS keeps one task scheduler per thread): its size, once probed


def scheduler_threads() -> int:
    """The size of this thread's HiGHS task scheduler, for the ``threads`` option of every model the engine makes.

    With ``threads`` = 0 (HiGHS's default) every ``run()`` re-reads the machine's core topology (five sysfs files
    on Linux: about 50 µs, a fifth of a warm LP on e_coli_core); an explicit value skips that, but HiGHS refuses
    to run (an error, no solve) a model whose ``threads`` differs from the size of the scheduler already running
    in the thread. So the size is probed once per thread: a default run makes sure the scheduler exists (of the
    size HiGHS would give it anyway: no effect on other code), then each candidate size is tried on a 1-variable
    LP until one runs (0, HiGHS's default, when none does)."""
    k = getattr(_SCHEDULER, "threads", None)
    if k is None:
        hp = _highspy()
        h = hp.Highs()
        h.setOptionValue("output_flag", False)
        h.addVar(0.0, 1.0)
        h.run()
        n = os.cpu_count() or 1
        first = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else n
        k = 0
        for c in dict.fromkeys([first, *range(1, n + 1)]):
            h.setOptionValue("threads", c)
            if h.run() == hp.HighsStatus.kOk:
                k = c
                break
        _SCHEDULER.threads = k
    return int(k)


def run(h: Highs) -> None:
    """``h.run()``; a run HiGHS refuses (an error) while ``threads`` is set (the engine's probed size after this
    thread's scheduler was reset to another, or a caller's own option that differs from the running scheduler's)
    is run again with ``threads`` = 0; a refused probed size is probed again for the next models. (HiGHS keeps
    the previous model status on a refused run of an unchanged model, so only the run's own status is read.)"""
    hp = _highspy()
    if h.run() != hp.HighsStatus.kError:
        return
    threads = h.getOptions().threads
    if threads != 0:
        if threads == getattr(_SCHEDULER, "threads", None):
            _SCHEDULER.threads = None
        h.setOptionValue("threads", 0)
        h.run()


# IPX takes tens to a few hundred iterations; on some small LPs with free variables it never stops (3 free
# variables, 4 rows: 938,000 iterations in 20 s, where the simplex takes 1 ms): past this, the simplex solves
IPM_ITERATION_LIMIT = 2_000


class HighsBackend(Backend):
    name = "HIGHS"
    cvxpy_name = "HIGHS"
    SUPPORTS_LP = SUPPORTS_QP = True
    SUPPORTS_CONIC = False
    INTERIOR_SOLUTIONS = True  # IPM with crossover off
    WARM_START = True  # HighsModel: costs changed and rows added in place, simplex warm-started
    FIRST_ORDER_LP = True  # PDLP
    SMALL_LP_OPTIONS = {"presolve": "off"}  # presolve costs more than it saves on small dense LPs (7 vs 11 ms)
    # new costs keep the basis primal feasible: primal simplex warm-starts (iJO1366 FVA: 7.8 ms per LP
    # against 31 ms with the dual simplex)
    COST_CHANGE_OPTIONS = {"simplex_strategy": 4}
    # an L1 fit over 2,564 rows x 64 columns (+ one slack per row): dual simplex 0.17 s against IPM 1.02 s
    VERTEX_LP_OPTIONS = {"solver": "simplex"}
    SPARSE_LP_OPTIONS = {"solver": "simplex"}  # iJO1366's FRT LP: 2.5 s (dual simplex) against 4.5 s (IPM)

    def probe(self) -> tuple[bool, str]:
        try:
            _highspy()
        except Exception as e:  # pragma: no cover - depends on the environment
            return False, f"highspy cannot be imported: {e}"
        return True, "ok"

    # -- model building ---------------------------------------------------------------------------
    @staticmethod
    def new_model(options: Options | None = None, *, interior: bool = False, algorithm: str = "ipm") -> Highs:
        hp = _highspy()
        h = hp.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", scheduler_threads())
        h.setOptionValue("solver", algorithm)
        h.setOptionValue("ipm_iteration_limit", IPM_ITERATION_LIMIT)
        if interior:
            h.setOptionValue("run_crossover", "off")
        for k, v in (options or {}).items():
            h.setOptionValue(k, v)
        return h

    @staticmethod
    def pass_data(h: Highs, data: ProblemData) -> None:
        hp = _highspy()
        A = data.stacked_csc()
        lp = hp.HighsLp()
        lp.num_col_ = data.n
        lp.num_row_ = A.shape[0]
        lp.col_cost_ = data.c
        lp.col_lower_ = data.lb
        lp.col_upper_ = data.ub
        lp.row_lower_ = np.concatenate([np.full(data.m_ub, -np.inf), data.b_eq])
        lp.row_upper_ = np.concatenate([data.b_ub, data.b_eq])
        lp.a_matrix_.format_ = hp.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr
        lp.a_matrix_.index_ = A.indices
        lp.a_matrix_.value_ = A.data
        lp.a_matrix_.num_col_ = data.n
        lp.a_matrix_.num_row_ = A.shape[0]
        h.passModel(lp)
        if data.P is not None:
            H = sp.triu(sp.csc_matrix(data.P), format="csc")
            h.passHessian(data.n, H.nnz, hp.HessianFormat.kTriangular, H.indptr, H.indices, H.data)

    def read(self, h: Highs, data: ProblemData, *, quadratic: bool = False) -> LPSolution:
        hp = _highspy()
        st = h.getModelStatus()
        MS = hp.HighsModelStatus
        if st == MS.kInfeasible:
            raise EmptyBodyError("HiGHS: the constraints are infeasible (the body is empty)")
        if st == MS.kUnbounded:
            raise UnboundedError("HiGHS: the objective is unbounded over the feasible set")
        if st == MS.kUnboundedOrInfeasible:
            self._split_unbounded_or_infeasible(data)
        if st != MS.kOptimal:
            raise self.fail(h.modelStatusToString(st))
        sol = h.getSolution()
        x = np.array(sol.col_value, dtype=float)
        rd = np.array(sol.row_dual, dtype=float)
        # HiGHS: c - Aᵀ row_dual - col_dual = 0; our convention c + A_ubᵀλ + A_eqᵀμ + ... = 0.
        lam = np.maximum(-rd[: data.m_ub], 0.0)
        mu = -rd[data.m_ub :]
        value = float(h.getInfo().objective_function_value)
        cls = QPSolution if quadratic else LPSolution
        info: dict[str, object] = {
            "ipm_iterations": int(h.getInfo().ipm_iteration_count),
            "simplex_iterations": int(h.getInfo().simplex_iteration_count),
        }
        return cls(x, value, self.name, "optimal", info, lam, mu)

    def _split_unbounded_or_infeasible(self, data: ProblemData) -> None:
        """HiGHS sometimes cannot tell infeasible from unbounded: decide by a zero-objective solve."""
        h = self.new_model(algorithm="simplex")
        h.setOptionValue("presolve", "off")
        self.pass_data(h, ProblemData(np.zeros(data.n), data.A_ub, data.b_ub, data.A_eq, data.b_eq, data.lb, data.ub))
        run(h)
        if h.getModelStatus() == _highspy().HighsModelStatus.kOptimal:
            raise UnboundedError("HiGHS: the objective is unbounded over the feasible set")
        raise EmptyBodyError("HiGHS: the constraints are infeasible (the body is empty)")

    def kept_model(self, data: ProblemData, *, algorithm: str = "ipm", options: Options | None = None) -> HighsModel:
        return HighsModel(data, algorithm=algorithm, options=options)

    def first_order_options(self, max_iter: int) -> dict[str, OptionValue]:
        return {"solver": "pdlp", "pdlp_iteration_limit": int(max_iter)}

    def solve(self, data: ProblemData, *, interior: bool = False, options: Options | None = None) -> LPSolution:
        quadratic = data.P is not None
        h = self.new_model(options, interior=interior, algorithm="choose" if quadratic else "ipm")
        self.pass_data(h, data)
        run_ipm_guarded(h)
        confirm_infeasible(h)
        return self.read(h, data, quadratic=quadratic)


def run_ipm_guarded(h: Highs) -> None:
    """``h.run()``; a run that stops at IPX's iteration limit (IPM_ITERATION_LIMIT, set by ``new_model``) is run
    again with the simplex (and the model's solver option restored afterwards)."""
    hp = _highspy()
    run(h)
    if h.getModelStatus() != hp.HighsModelStatus.kIterationLimit or h.getInfo().ipm_iteration_count == 0:
        return
    solver = h.getOptions().solver
    h.setOptionValue("solver", "simplex")
    h.clearSolver()
    try:
        run(h)
    finally:
        h.setOptionValue("solver", solver)


def confirm_infeasible(h: Highs) -> None:
    """Re-run a model that HiGHS found infeasible with presolve off: its presolve calls some feasible
    flux-like LPs infeasible (S = [−2 … −2], bounds ±1/±1000/0, the FRT LP of ``affine_hull``, which solves to
    optimality without presolve). An empty body stays infeasible, at the price of a second solve."""
    hp = _highspy()
    if h.getModelStatus() != hp.HighsModelStatus.kInfeasible:
        return
    presolve = h.getOptionValue("presolve")  # (status, value) in highspy >= 1.8, the value before
    if (presolve[-1] if isinstance(presolve, tuple) else presolve) == "off":
        return
    h.setOptionValue("presolve", "off")
    h.clearSolver()
    run_ipm_guarded(h)


class HighsModel:
    """A kept HiGHS model: re-solve LPs that differ in the costs (or in added rows) without rebuilding.

    ``algorithm="ipm"`` (measured fastest for unrelated objectives) or ``"simplex"`` (warm-started from
    the previous basis: pays off when successive objectives are close).
    """

    def __init__(self, data: ProblemData, *, algorithm: str = "ipm", options: Options | None = None):
        self.backend = HighsBackend()
        self.data = data
        self.h = self.backend.new_model(options, algorithm=algorithm)
        self.backend.pass_data(self.h, data)
        self._idx = np.arange(data.n, dtype=np.int32)

    def minimize(self, c: np.ndarray) -> LPSolution:
        self.h.changeColsCost(self.data.n, self._idx, np.asarray(c, dtype=float))
        self.data = self.data.with_cost(np.asarray(c, dtype=float))
        run_ipm_guarded(self.h)
        if self.h.getModelStatus() == _highspy().HighsModelStatus.kUnknown:
            # a warm-started re-solve can end in status "Unknown" (a 15-flux network with bounds from 1 to 1000
            # does this) where the same LP from a cold start solves: drop the basis and run once more
            self.h.clearSolver()
            run_ipm_guarded(self.h)
        confirm_infeasible(self.h)
        return self.backend.read(self.h, self.data)

    def add_rows(self, A: Matrix, b: np.ndarray) -> None:
        """Append rows A x <= b (kept model when there are no equality rows, else a rebuild)."""
        A = sp.csr_matrix(A)
        b = np.asarray(b, dtype=float)
        A_ub = sp.vstack([sp.csr_matrix(self.data.A_ub), A], format="csr")
        self.data = ProblemData(
            self.data.c,
            A_ub,
            np.concatenate([self.data.b_ub, b]),
            self.data.A_eq,
            self.data.b_eq,
            self.data.lb,
            self.data.ub,
        )
        if self.data.m_eq == 0:
            self.h.addRows(A.shape[0], np.full(A.shape[0], -np.inf), b, A.nnz, A.indptr, A.indices, A.data)
        else:  # HiGHS keeps rows in order; our dual reading needs inequality rows first
            self.backend.pass_data(self.h, self.data)
