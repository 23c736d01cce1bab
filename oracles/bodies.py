"""Convex bodies with oracles: membership (``contains``), separation (``separate``), optimisation (``maximize``).

Every body has ``dim``, ``contains(x, tol)`` and ``separate(x, tol)``; ``separate`` returns None exactly
when ``contains`` is True. Bodies that can optimise a linear function also have ``maximize(c)``.
Explicit bodies (Polytope, Ball and intersections of them) also expose ``cvxpy_constraints(x)`` so the
engine's convex programs (min-norm point, Chebyshev centre, widths) can be written once for all of them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ._sparse import as_csr
from ._sparse import row_norms as sparse_row_norms
from ._validate import (
    MAX_MAGNITUDE,
    RANGE_TEXT,
    as_count,
    as_matrix,
    as_rhs,
    as_vector,
    call_oracle,
    check_bool,
    check_cut,
    check_maximize,
    check_real,
    norm,
    radius,
    real_array,
    row_norms,
)
from .cuts import Cut
from .errors import MissingOracleError, OracleError
from .solvers._base import Matrix

if TYPE_CHECKING:
    import cvxpy as cp

# the user's oracles of an OracleBody (their answers are checked where they enter the engine)
SeparationOracle = Callable[[np.ndarray], "Cut | tuple[ArrayLike, float] | None"]
MembershipOracle = Callable[[np.ndarray], "bool | np.bool_"]
MaximizeOracle = Callable[[np.ndarray], "tuple[float, ArrayLike]"]

__all__ = ["ConvexBody", "Polytope", "Ball", "OracleBody", "Intersection", "NormEpigraph"]


class ConvexBody(ABC):
    """A closed convex subset of R^dim known through oracles."""

    dim: int

    @abstractmethod
    def separate(self, x: ArrayLike, tol: float = 1e-9) -> Cut | None:
        """None if x lies in the body (within tol), else a Cut valid for the body and violated by x."""

    def contains(self, x: ArrayLike, tol: float = 1e-9) -> bool:
        """Membership: True iff x lies in the body up to tol."""
        return self.separate(x, tol) is None

    @property
    def has_separate(self) -> bool:
        return True

    @property
    def has_maximize(self) -> bool:
        return False

    @property
    def is_explicit(self) -> bool:
        """True when the body can be written as cvxpy constraints (exact convex programs apply)."""
        return False

    def maximize(self, c: ArrayLike, *, solver: str | None = None) -> tuple[float, np.ndarray]:
        """max c @ x over the body: returns (value, maximiser)."""
        raise MissingOracleError(f"{type(self).__name__} has no maximize oracle (a linear-optimisation oracle)")

    def cvxpy_constraints(self, x: cp.Variable) -> list[cp.Constraint]:
        raise MissingOracleError(f"{type(self).__name__} is not an explicit body: it cannot be written as constraints")

    def _check_point(self, x: ArrayLike) -> np.ndarray:
        return as_vector(x, "x", self.dim)

    def __and__(self, other: ConvexBody) -> Intersection:
        if not isinstance(other, ConvexBody):
            return NotImplemented
        return Intersection([self, other])


def _polytope_dim(
    A: Matrix | None,
    A_arr: Matrix | None,
    A_eq: Matrix | None,
    lb: ArrayLike | None,
    ub: ArrayLike | None,
    dim: int | None,
) -> int:
    """The dimension of a polytope from the first of A's columns, A_eq's columns, ``dim`` and a bound vector's
    length that is given; ValueError when none is, when ``dim`` disagrees, or when it is below 1."""
    n, source = None, ""
    if A_arr is not None and A_arr.ndim == 2:
        n, source = A_arr.shape[1], "A has {n} columns"
    if n is None and A_eq is not None and np.ndim(A_eq) == 2:
        n, source = np.shape(A_eq)[1], "A_eq has {n} columns"
    if n is None and dim is not None:
        n = int(dim)
    for v in (lb, ub):
        if n is None and v is not None and np.ndim(v) == 1:
            n = np.shape(v)[0]
    if n is None:
        raise ValueError(f"A must be a 2-D array (rows, dim), got shape {() if A is None else np.shape(A)}")
    if dim is not None and int(dim) != n:
        raise ValueError(f"{source.format(n=n)} but dim={dim}")
    if n < 1:
        raise ValueError("Polytope needs dim >= 1")
    return n


class Polytope(ConvexBody):
    """P = {x : A x <= b, A_eq x = b_eq, lb <= x <= ub}.

    ``A``/``A_eq``: dense arrays or scipy.sparse matrices; a sparse one keeps the polytope sparse end to end
    (``A`` and ``A_eq`` are then CSR matrices, and every algorithm works on them without densifying).
    ``lb``/``ub``: variable bounds (scalars or length-dim arrays, ±inf allowed; default free), kept as bounds,
    as the LP backends take them, not as 2n rows. Dense rows are appended cheaply (amortised O(1) per row).

    Rows of any finite scale are accepted: a row (a_i, b_i) with ‖a_i‖ outside [2⁻²⁰, 2²⁰] is stored rescaled by
    a power of two (exact in floating point, the same half-space), so membership, cuts and LPs never square
    or overflow extreme entries; ``A``/``b`` show the stored rows. A hyperplane farther than 1e150 from the
    origin (|b_i|/‖a_i‖) is outside the engine's range: ValueError.

    Parameters
    ----------
    A, b : array_like or scipy.sparse matrix of shape (m, n), array_like of shape (m,), optional
        Inequality rows A x <= b.
    A_eq, b_eq : array_like or scipy.sparse matrix of shape (k, n), array_like of shape (k,), optional
        Equality rows A_eq x = b_eq.
    lb, ub : float or array_like of shape (n,), optional
        Variable bounds (±inf allowed; default free).
    dim : int, optional
        n, needed only when no other argument fixes it.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Polytope
    >>> square = Polytope(np.vstack([np.eye(2), -np.eye(2)]), np.ones(4))   # [-1, 1]²
    >>> square.contains(np.zeros(2)), square.separate(np.array([2.0, 0.0])).offset
    (True, 1.0)
    """

    def __init__(
        self,
        A: Matrix | None = None,
        b: ArrayLike | None = None,
        A_eq: Matrix | None = None,
        b_eq: ArrayLike | None = None,
        *,
        lb: ArrayLike | None = None,
        ub: ArrayLike | None = None,
        dim: int | None = None,
    ) -> None:
        for value, name in ((A, "A"), (b, "b"), (A_eq, "A_eq"), (b_eq, "b_eq")):
            check_real(value, name)
        sparse = sp.issparse(A) or sp.issparse(A_eq)
        A_arr = None
        if A is not None:
            A_arr = A if sp.issparse(A) else real_array(A, "A")
        elif b is not None:
            raise ValueError("b given without A")
        n = _polytope_dim(A, A_arr, A_eq, lb, ub, dim)
        self.dim = n
        self._sparse = bool(sparse)
        self._A = sp.csr_matrix((0, n)) if sparse else np.empty((0, n))
        self._b = np.empty(0)
        self._m = 0
        self._Aeq = sp.csr_matrix((0, n)) if sparse else np.empty((0, n))
        self._beq = np.empty(0)
        self._meq = 0
        self.lb, self.ub = _bounds(lb, ub, n)
        if A_arr is not None:
            if b is None:
                raise ValueError("A and b must be given together")
            if not sp.issparse(A_arr):
                A_arr = A_arr.reshape(-1, n) if A_arr.size == 0 else A_arr
            self.add_halfspaces(A_arr, b)
        if A_eq is not None or b_eq is not None:
            if A_eq is None or b_eq is None:
                raise ValueError("A_eq and b_eq must be given together")
            self._add_equalities(A_eq, b_eq, "A_eq", "b_eq")

    @classmethod
    def _adopting(cls, A: np.ndarray, b: np.ndarray, *, dim: int) -> Polytope:
        """(Private.) {x : A x <= b} holding the checked A itself, not a copy: for a fresh dense A that no one
        else holds (``add_halfspaces`` copies the rows into its growth buffer)."""
        P = cls(dim=dim)
        A, b = P._checked_rows(A, b, "A", "b")
        P._A, P._b, P._m = A, b, A.shape[0]
        return P

    # -- growth -----------------------------------------------------------------------------------
    @staticmethod
    def _append(
        buf: np.ndarray, rhs: np.ndarray, used: int, rows: np.ndarray, vals: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, int]:
        need = used + rows.shape[0]
        if need > buf.shape[0]:
            cap = max(need, 2 * buf.shape[0], 16)
            nbuf = np.empty((cap, buf.shape[1]))
            nbuf[:used] = buf[:used]
            nrhs = np.empty(cap)
            nrhs[:used] = rhs[:used]
            buf, rhs = nbuf, nrhs
        buf[used:need] = rows
        rhs[used:need] = vals
        return buf, rhs, need

    def _checked_rows(self, A: Matrix, b: ArrayLike, a_name: str, b_name: str) -> tuple[Matrix, np.ndarray]:
        """Validated, range-checked rows in this polytope's storage (dense array or CSR)."""
        check_real(A, a_name)
        if self._sparse:
            M = as_csr(A, a_name, self.dim)
            return _rescale_sparse_rows(M, as_rhs(b, b_name, M.shape[0], limit=None), a_name, b_name)
        if sp.issparse(A):
            A = A.toarray()
        A = as_matrix(
            real_array(A, a_name).reshape(-1, self.dim) if np.size(A) == 0 else A, a_name, self.dim, limit=None
        )
        return _rescale_rows(A, as_rhs(b, b_name, A.shape[0], limit=None), a_name, b_name)

    def add_halfspaces(self, A: Matrix, b: ArrayLike) -> Polytope:
        """Append rows A x <= b."""
        A, b = self._checked_rows(A, b, "A", "b")
        if self._sparse:
            self._A = sp.vstack([self._A, A], format="csr") if self._m else A
            self._b = np.concatenate([self._b[: self._m], b])
            self._m += A.shape[0]
        else:
            self._A, self._b, self._m = self._append(self._A, self._b, self._m, A, b)
        return self

    def add_equalities(self, A: Matrix, b: ArrayLike) -> Polytope:
        """Append rows A x = b."""
        return self._add_equalities(A, b, "A", "b")

    def _add_equalities(self, A: Matrix, b: ArrayLike, a_name: str, b_name: str) -> Polytope:
        """``add_equalities`` with the caller's names for the arrays in its error messages."""
        A, b = self._checked_rows(A, b, a_name, b_name)
        if self._sparse:
            self._Aeq = sp.vstack([self._Aeq, A], format="csr") if self._meq else A
            self._beq = np.concatenate([self._beq[: self._meq], b])
            self._meq += A.shape[0]
        else:
            self._Aeq, self._beq, self._meq = self._append(self._Aeq, self._beq, self._meq, A, b)
        return self

    def add_slabs(self, A: Matrix, c: ArrayLike, eta: ArrayLike) -> Polytope:
        """Append |A x - c| <= eta row-wise, as the two half-spaces A x <= c + eta and -A x <= eta - c."""
        check_real(A, "A")
        if sp.issparse(A) or self._sparse:
            A = as_csr(A, "A", self.dim)
        else:
            A = as_matrix(A, "A", self.dim, limit=None)
        c = as_rhs(c, "c", A.shape[0], limit=None)
        eta = as_rhs(eta, "eta", A.shape[0], limit=None)
        if np.any(eta < 0):
            raise ValueError("eta must be non-negative")
        rhs = np.concatenate([c + eta, eta - c])
        if sp.issparse(A) or self._sparse:
            return self.add_halfspaces(sp.vstack([A, -A], format="csr"), rhs)
        # A is validated above: only the range and scale checks remain for the stacked rows
        both, rhs = _rescale_rows(np.vstack([A, -A]), rhs, "A", "c ± eta")
        self._A, self._b, self._m = self._append(self._A, self._b, self._m, both, rhs)
        return self

    # -- views ------------------------------------------------------------------------------------
    @property
    def A(self) -> Matrix:
        """The inequality rows: a dense array, or a CSR matrix for a sparse polytope."""
        return self._A if self._sparse else self._A[: self._m]

    @property
    def b(self) -> np.ndarray:
        return self._b[: self._m]

    @property
    def A_eq(self) -> Matrix:
        """The equality rows: a dense array, or a CSR matrix for a sparse polytope."""
        return self._Aeq if self._sparse else self._Aeq[: self._meq]

    @property
    def b_eq(self) -> np.ndarray:
        return self._beq[: self._meq]

    @property
    def is_sparse(self) -> bool:
        """True when A and A_eq are kept as scipy.sparse (CSR) matrices."""
        return self._sparse

    @property
    def has_bounds(self) -> bool:
        """True when some variable bound is finite."""
        return bool(np.any(np.isfinite(self.lb)) or np.any(np.isfinite(self.ub)))

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lb, ub), as the LP backends take them."""
        return self.lb, self.ub

    @property
    def n_constraints(self) -> int:
        """Number of inequality rows plus equality rows (finite bounds are counted by ``n_bounds``)."""
        return self._m + self._meq

    @property
    def n_bounds(self) -> int:
        """Number of finite variable bounds."""
        return int(np.count_nonzero(np.isfinite(self.lb)) + np.count_nonzero(np.isfinite(self.ub)))

    @property
    def nnz(self) -> int:
        """Non-zero entries of A and A_eq."""
        if self._sparse:
            return int(self.A.nnz + self.A_eq.nnz)
        return int(np.count_nonzero(self.A) + np.count_nonzero(self.A_eq))

    @property
    def is_explicit(self) -> bool:
        return True

    @property
    def has_maximize(self) -> bool:
        return True

    def copy(self) -> Polytope:
        return Polytope(
            self.A.copy(),
            self.b.copy(),
            self.A_eq.copy() if self._meq else None,
            self.b_eq.copy() if self._meq else None,
            lb=self.lb.copy(),
            ub=self.ub.copy(),
            dim=self.dim,
        )

    def bound_rows(self) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
        """The finite bounds as rows G x <= h (x_j <= ub_j for each finite ub, then -x_j <= -lb_j): returns
        (G as CSR, h, column index, sign: +1 upper, -1 lower)."""
        up = np.flatnonzero(np.isfinite(self.ub))
        lo = np.flatnonzero(np.isfinite(self.lb))
        cols = np.concatenate([up, lo]).astype(int)
        sign = np.concatenate([np.ones(up.size), -np.ones(lo.size)])
        G = sp.csr_matrix((sign, (np.arange(cols.size), cols)), shape=(cols.size, self.dim))
        return G, np.concatenate([self.ub[up], -self.lb[lo]]), cols, sign

    def dense_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """Every inequality as one dense system [A; bound rows] x <= [b; h] (for row-only dense algorithms)."""
        A = self.A.toarray() if self._sparse else self.A
        if not self.has_bounds:
            return A, self.b
        G, h, _, _ = self.bound_rows()
        return np.vstack([A, G.toarray()]), np.concatenate([self.b, h])

    def __repr__(self) -> str:
        extra = f", bounds={self.n_bounds}" if self.has_bounds else ""
        extra += f", sparse (nnz={self.nnz})" if self._sparse else ""
        return f"Polytope(dim={self.dim}, inequalities={self._m}, equalities={self._meq}{extra})"

    # -- oracles ----------------------------------------------------------------------------------
    def violations(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Normalised violations (a_i x - b_i)/‖a_i‖ of inequality rows and |a x - b|/‖a‖ of equalities
        (the bounds' are ``bound_violations``)."""
        x = self._check_point(x)
        return _normalised(self.A, self.b, x), np.abs(_normalised(self.A_eq, self.b_eq, x))

    def bound_violations(self, x: np.ndarray) -> np.ndarray:
        """max(lb_j - x_j, x_j - ub_j) for each variable (<= 0 within the bounds)."""
        x = self._check_point(x)
        return np.maximum(self.lb - x, x - self.ub)

    def separate(self, x: ArrayLike, tol: float = 1e-9) -> Cut | None:
        """The most violated row or bound, normalised to a unit normal; None if every one holds within tol."""
        x = self._check_point(x)
        best, cut = tol, None
        if self._m:
            v = _normalised(self.A, self.b, x)
            i = int(np.argmax(v))
            if v[i] > best:
                best, cut = v[i], _unit_cut(_row(self.A, i), self.b[i])
        if self._meq:
            r = _normalised(self.A_eq, self.b_eq, x)
            i = int(np.argmax(np.abs(r)))
            if abs(r[i]) > best:
                s = 1.0 if r[i] > 0 else -1.0
                best, cut = abs(r[i]), _unit_cut(s * _row(self.A_eq, i), s * self.b_eq[i])
        if self.has_bounds:
            up, lo = x - self.ub, self.lb - x
            j = int(np.argmax(np.maximum(up, lo)))
            if max(up[j], lo[j]) > best:
                e = np.zeros(self.dim)
                e[j] = 1.0 if up[j] >= lo[j] else -1.0
                cut = Cut(e, float(self.ub[j]) if up[j] >= lo[j] else -float(self.lb[j]))
        return cut

    def maximize(self, c: ArrayLike, *, solver: str | None = None) -> tuple[float, np.ndarray]:
        from . import solvers

        c = as_vector(c, "c", self.dim)
        sol = solvers.solve_lp(
            -c, self.A, self.b, self.A_eq, self.b_eq, self.bounds if self.has_bounds else None, solver=solver
        )
        return -sol.value, sol.x

    def cvxpy_constraints(self, x: cp.Variable) -> list[cp.Constraint]:
        cons = []
        if self._m:
            cons.append(self.A @ x <= self.b)
        if self._meq:
            cons.append(self.A_eq @ x == self.b_eq)
        up, lo = np.flatnonzero(np.isfinite(self.ub)), np.flatnonzero(np.isfinite(self.lb))
        if up.size:
            cons.append(x[up] <= self.ub[up])
        if lo.size:
            cons.append(x[lo] >= self.lb[lo])
        return cons


def _bounds(lb: ArrayLike | None, ub: ArrayLike | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-variable bounds from None, scalars or length-n arrays: no NaN, lb < +inf, ub > -inf, lb <= ub,
    finite ones within the engine's range."""
    out = []
    for v, name, default in ((lb, "lb", -np.inf), (ub, "ub", np.inf)):
        if v is None:
            out.append(np.full(n, default))
            continue
        arr = real_array(v, name)
        if arr.ndim == 0:
            arr = np.full(n, float(arr))
        if arr.shape != (n,):
            raise ValueError(f"{name} must be a scalar or have shape ({n},), got {arr.shape}")
        if np.any(np.isnan(arr)):
            raise ValueError(f"{name} contains NaN")
        fin = arr[np.isfinite(arr)]
        if fin.size and float(np.max(np.abs(fin))) > MAX_MAGNITUDE:
            raise ValueError(f"{name} has a finite entry beyond the engine's range ({RANGE_TEXT}); use ±inf")
        out.append(arr.copy())
    lo, hi = out
    if np.any(lo == np.inf) or np.any(hi == -np.inf):
        raise ValueError("lb contains +inf or ub contains -inf")
    bad = np.flatnonzero(lo > hi)
    if bad.size:
        raise ValueError(f"lb > ub for {bad.size} variable(s), e.g. x[{bad[0]}]: {lo[bad[0]]} > {hi[bad[0]]}")
    return lo, hi


def _row(A: Matrix, i: int) -> np.ndarray:
    """Row i of a dense array or a sparse matrix, as a dense vector."""
    return A[i].toarray().ravel() if sp.issparse(A) else A[i]


def _rescale_sparse_rows(A: sp.csr_matrix, b: np.ndarray, a_name: str, b_name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    """``_rescale_rows`` for a CSR matrix (only the out-of-band rows are touched)."""
    if A.shape[0] == 0:
        return A, b
    norms = sparse_row_norms(A)
    out = (norms > _ROW_BAND[1]) | ((norms > 0) & (norms < _ROW_BAND[0]))
    if np.any(out):
        _, e = np.frexp(norms[out])
        f = np.ones(A.shape[0])
        f[out] = np.ldexp(1.0, -e)
        A = sp.csr_matrix(sp.diags(f) @ A)
        b = b * f
        norms = norms * f
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        dist = np.abs(b) / np.where(norms > 0, norms, 1.0)
    bad = np.flatnonzero(~(dist <= MAX_MAGNITUDE))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"row {i} of ({a_name}, {b_name}): its hyperplane lies {float(dist[i]):.3g} from the "
            f"origin (|{b_name}_i|/‖{a_name}_i‖); the engine accepts {RANGE_TEXT}"
        )
    return A, b


_ROW_BAND = (2.0**-20, 2.0**20)


def _rescale_rows(A: np.ndarray, b: np.ndarray, a_name: str, b_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows with ‖a_i‖ outside ``_ROW_BAND`` scaled by a power of two (exact) to norm in [1/2, 1); every
    hyperplane's distance |b_i|/‖a_i‖ (and |b_i| of a zero row) must be at most MAX_MAGNITUDE."""
    if A.shape[0] == 0:
        return A, b
    norms = row_norms(A)
    out = (norms > _ROW_BAND[1]) | ((norms > 0) & (norms < _ROW_BAND[0]))
    if np.any(out):
        A, b = A.copy(), b.copy()
        _, e = np.frexp(norms[out])
        A[out] = np.ldexp(A[out], -e[:, None])
        b[out] = np.ldexp(b[out], -e)
        norms = norms.copy()
        norms[out] = np.ldexp(norms[out], -e)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        dist = np.abs(b) / np.where(norms > 0, norms, 1.0)
    bad = np.flatnonzero(~(dist <= MAX_MAGNITUDE))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"row {i} of ({a_name}, {b_name}): its hyperplane lies {float(dist[i]):.3g} from the "
            f"origin (|{b_name}_i|/‖{a_name}_i‖); the engine accepts {RANGE_TEXT}"
        )
    return A, b


def _normalised(A: Matrix, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    if A.shape[0] == 0:
        return np.empty(0)
    norms = sparse_row_norms(A) if sp.issparse(A) else row_norms(A)
    raw = A @ x - b
    safe = np.where(norms > 0, norms, 1.0)
    return raw / safe


def _unit_cut(a: np.ndarray, b: float) -> Cut:
    nrm = norm(a)
    if nrm == 0.0:
        # 0 @ x <= b with b < 0: the body is empty; any cut is valid. Use a unit vector and offset -inf-like.
        e = np.zeros_like(a)
        e[0] = 1.0
        return Cut(e, -1e300)
    return Cut(a / nrm, b / nrm)


class Ball(ConvexBody):
    """B = {x : ‖x - center‖ <= radius}.

    Parameters
    ----------
    center : array_like of shape (n,)
        The centre.
    radius : float
        The radius (>= 0).
    """

    def __init__(self, center: ArrayLike, radius: float) -> None:
        self.center = as_vector(center, "center")
        self.radius = _ball_radius(radius)
        self.dim = self.center.shape[0]

    def __repr__(self) -> str:
        return f"Ball(dim={self.dim}, radius={self.radius})"

    @property
    def is_explicit(self) -> bool:
        return True

    @property
    def has_maximize(self) -> bool:
        return True

    def separate(self, x: ArrayLike, tol: float = 1e-9) -> Cut | None:
        x = self._check_point(x)
        d = x - self.center
        nrm = norm(d)
        if nrm <= self.radius + tol:
            return None
        u = d / nrm
        return Cut(u, float(u @ self.center) + self.radius)

    def maximize(self, c: ArrayLike, *, solver: str | None = None) -> tuple[float, np.ndarray]:
        c = as_vector(c, "c", self.dim)
        nrm = norm(c)
        x = self.center + (self.radius * (c / nrm) if nrm > 0 else 0.0)
        return float(c @ x), x

    def cvxpy_constraints(self, x: cp.Variable) -> list[cp.Constraint]:
        import cvxpy as cp

        return [cp.norm(x - self.center, 2) <= self.radius]


class OracleBody(ConvexBody):
    """A body given by the user's own callables.

    ``separate(x) -> Cut | (normal, offset) | None``; ``contains(x) -> bool``; ``maximize(c) -> (value, x)``.
    Any of them may be missing; algorithms that need a missing one raise MissingOracleError. Answers are
    checked where they enter the engine: a wrong type or shape, NaN/inf, a value that disagrees with c·x,
    or an exception raised inside the callable is an ``OracleError`` naming the oracle and what it
    returned. Cuts come back with unit normals.

    Parameters
    ----------
    dim : int
        The dimension n.
    separate, contains, maximize : callable, optional
        The oracles, each called with one vector of length n; at least one is required.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Ball, OracleBody
    >>> ball = Ball(np.zeros(2), 1.0)
    >>> body = OracleBody(2, separate=lambda x: ball.separate(x))
    >>> body.contains(np.array([0.5, 0.5])), body.has_maximize
    (True, False)
    """

    def __init__(
        self,
        dim: int,
        separate: SeparationOracle | None = None,
        contains: MembershipOracle | None = None,
        maximize: MaximizeOracle | None = None,
    ) -> None:
        dim = as_count(dim, "dim")
        if separate is None and contains is None and maximize is None:
            raise ValueError("OracleBody needs at least one oracle: separate, contains or maximize")
        for name, f in (("separate", separate), ("contains", contains), ("maximize", maximize)):
            if f is not None and not callable(f):
                raise TypeError(f"{name} must be callable, got {type(f).__name__}")
        self.dim = int(dim)
        self._separate, self._contains, self._maximize = separate, contains, maximize

    def __repr__(self) -> str:
        have = [
            n
            for n, f in (("separate", self._separate), ("contains", self._contains), ("maximize", self._maximize))
            if f is not None
        ]
        return f"OracleBody(dim={self.dim}, oracles={have})"

    @property
    def has_separate(self) -> bool:
        return self._separate is not None

    @property
    def has_maximize(self) -> bool:
        return self._maximize is not None

    def separate(self, x: ArrayLike, tol: float = 1e-9) -> Cut | None:
        if self._separate is None:
            raise MissingOracleError("this OracleBody has no separation oracle (pass separate=...)")
        x = self._check_point(x)
        who = "OracleBody separate oracle"
        cut = check_cut(call_oracle(self._separate, who, x.copy()), self.dim, who)
        if cut is None or cut.violation(x) <= tol:
            return None
        return cut

    def contains(self, x: ArrayLike, tol: float = 1e-9) -> bool:
        if self._contains is not None:
            who = "OracleBody contains oracle"
            return check_bool(call_oracle(self._contains, who, self._check_point(x).copy()), who)
        if self._separate is None:
            raise MissingOracleError("this OracleBody has neither a membership nor a separation oracle")
        return self.separate(x, tol) is None

    def maximize(self, c: ArrayLike, *, solver: str | None = None) -> tuple[float, np.ndarray]:
        if self._maximize is None:
            raise MissingOracleError("this OracleBody has no maximize oracle (pass maximize=...)")
        c = as_vector(c, "c", self.dim)
        who = "OracleBody maximize oracle"
        return check_maximize(call_oracle(self._maximize, who, c.copy()), c, who)


class Intersection(ConvexBody):
    """The intersection of bodies of one dimension (``a & b`` builds one): separate returns the deepest cut
    among the parts; maximize needs every part explicit.

    Parameters
    ----------
    parts : sequence of ConvexBody
        The bodies (nested intersections are flattened).
    """

    def __init__(self, parts: Sequence[ConvexBody]) -> None:
        flat: list[ConvexBody] = []
        for p in parts:
            if not isinstance(p, ConvexBody):
                raise TypeError(f"can only intersect ConvexBody objects, got {type(p).__name__}")
            flat.extend(p.parts if isinstance(p, Intersection) else [p])
        dims = {p.dim for p in flat}
        if len(dims) != 1:
            raise ValueError(f"cannot intersect bodies of different dimensions {sorted(dims)}")
        self.parts: list[ConvexBody] = flat
        self.dim = flat[0].dim

    def __repr__(self) -> str:
        return " & ".join(repr(p) for p in self.parts)

    @property
    def has_separate(self) -> bool:
        return all(p.has_separate for p in self.parts)

    @property
    def is_explicit(self) -> bool:
        return all(p.is_explicit for p in self.parts)

    @property
    def has_maximize(self) -> bool:
        return self.is_explicit

    def separate(self, x: ArrayLike, tol: float = 1e-9) -> Cut | None:
        x = self._check_point(x)
        best: Cut | None = None
        for p in self.parts:
            cut = checked_separate(p, x, tol)
            if cut is not None and (best is None or cut.depth(x) > best.depth(x)):
                best = cut
        return best

    def contains(self, x: ArrayLike, tol: float = 1e-9) -> bool:
        return all(p.contains(x, tol) for p in self.parts)

    def maximize(self, c: ArrayLike, *, solver: str | None = None) -> tuple[float, np.ndarray]:
        if not self.is_explicit:
            raise MissingOracleError("maximize over an intersection needs every part to be explicit (Polytope or Ball)")
        c = as_vector(c, "c", self.dim)
        polys = [p for p in self.parts if isinstance(p, Polytope)]
        if len(polys) == len(self.parts):
            return _merge_polytopes(polys).maximize(c, solver=solver)
        from . import solvers

        return solvers.maximize_explicit(self, c, solver=solver)

    def cvxpy_constraints(self, x: cp.Variable) -> list[cp.Constraint]:
        return [con for p in self.parts for con in p.cvxpy_constraints(x)]


class NormEpigraph(ConvexBody):
    """{(x, t) in R^(dim+1) : x in K, ‖x‖₂ <= t}: minimising t over it gives K's min-norm point from K's
    separation oracle alone (``min_norm_point(K, method="ellipsoid")`` does this with the ellipsoid method).

    ``separate((x, t), tol)``: K's cut lifted with a 0 in t, or, for x in K with ‖x‖ > t, the cut
    (x/‖x‖)·y − s <= 0 (valid since (x/‖x‖)·y <= ‖y‖ <= s). Both are read within ``tol`` (a point within
    tol of a half-space is not cut, as for every body), so for a flat K the epigraph is a thin but
    full-dimensional body that cutting-plane methods can enter.

    Parameters
    ----------
    body : ConvexBody
        K; it needs a separation oracle.
    """

    def __init__(self, body: ConvexBody) -> None:
        if not isinstance(body, ConvexBody):
            raise TypeError(f"body must be a ConvexBody, got {type(body).__name__}")
        if not body.has_separate:
            raise MissingOracleError(f"NormEpigraph needs a separation oracle; this {type(body).__name__} has none")
        self.body, self.dim = body, body.dim + 1

    def __repr__(self) -> str:
        return f"NormEpigraph({self.body!r})"

    def separate(self, x: ArrayLike, tol: float = 1e-9) -> Cut | None:
        z = self._check_point(x)
        y = z[:-1]
        cut = checked_separate(self.body, y, tol)
        if cut is not None:
            return Cut(np.append(cut.normal, 0.0), cut.offset)
        ny = norm(y)
        if ny > 0:
            norm_cut = Cut(np.append(y / ny, -1.0), 0.0)
            if norm_cut.depth(z) > tol:  # the same distance test as K's cuts (the normal has length √2)
                return norm_cut
        return None


def _merge_polytopes(polys: Sequence[Polytope]) -> Polytope:
    """One Polytope for an intersection of polytopes (sparse if any part is; bounds intersected). Bounds that
    cross (lb > ub) make the intersection empty: EmptyBodyError."""
    from .errors import EmptyBodyError

    n = polys[0].dim
    lb = np.max([p.lb for p in polys], axis=0)
    ub = np.min([p.ub for p in polys], axis=0)
    if np.any(lb > ub):
        raise EmptyBodyError("the parts' variable bounds cross (lb > ub): the intersection is empty")
    b = np.concatenate([p.b for p in polys])
    b_eq = np.concatenate([p.b_eq for p in polys])
    if any(p.is_sparse for p in polys):
        A = sp.vstack([sp.csr_matrix(p.A) for p in polys], format="csr")
        A_eq = sp.vstack([sp.csr_matrix(p.A_eq) for p in polys], format="csr")
    else:
        A = np.vstack([p.A for p in polys]).reshape(-1, n)
        A_eq = np.vstack([p.A_eq for p in polys])
    return Polytope(A, b, A_eq if len(b_eq) else None, b_eq if len(b_eq) else None, lb=lb, ub=ub, dim=n)


def _ball_radius(value: float) -> float:
    return radius(value, "radius", strict=False)


_ENGINE_MODULES = ("oracles.bodies", "oracles.ellipsoid")  # trusted: answers not re-checked


def checked_separate(body: ConvexBody, x: np.ndarray, tol: float) -> Cut | None:
    """``body.separate(x, tol)``; for a ConvexBody subclass written outside the engine its answer is checked at
    the boundary (``_validate.check_cut``: OracleError naming the class on a wrong type, shape or NaN, or on
    an exception inside it). The engine's own bodies are trusted (no per-call cost)."""
    sep = type(body).separate
    if getattr(sep, "__module__", None) in _ENGINE_MODULES:
        return body.separate(x, tol)
    who = f"{type(body).__name__}.separate oracle"
    return check_cut(call_oracle(body.separate, who, x.copy(), tol), body.dim, who)


def says_empty(body: ConvexBody, cut: Cut | None, accepted: bool) -> bool:
    """Whether ``cut``, the body's answer to a separation query, is 0·x <= b (b < 0): the oracle's way of saying
    the body is empty. Said after the run ``accepted`` a point of the body, it is an OracleError naming the
    body's class (an oracle that contradicts itself)."""
    if cut is None or np.any(cut.normal):
        return False
    if accepted:
        raise OracleError(
            f"{type(body).__name__}.separate returned 0·x <= {cut.offset:g} (the body is empty) after it accepted "
            "a point"
        )
    return True
