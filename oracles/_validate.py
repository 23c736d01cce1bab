"""Argument checks shared by the engine: bad input is a ValueError naming the argument (TypeError for
complex numbers), and a user's oracle that misbehaves is an ``OracleError`` naming the oracle.

The engine's range: every coordinate, offset, radius and objective entry must have magnitude at most
``MAX_MAGNITUDE`` = 1e150 (float64 squares them: ‖x‖² of such a vector stays finite), radii at least
``MIN_RADIUS`` = 1e-150. Rows of constraint matrices may have any finite scale: ``Polytope`` rescales rows
outside [2⁻²⁰, 2²⁰] by a power of two (exact), after which each hyperplane's distance |b_i|/‖a_i‖ must lie
in the range.
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import ArrayLike

from .errors import OracleError

if TYPE_CHECKING:
    from .cuts import Cut

MAX_MAGNITUDE = 1e150
MIN_RADIUS = 1e-150
RANGE_TEXT = "magnitudes up to 1e150 (float64 must square them)"


def check_real(x: object, name: str) -> None:
    """TypeError naming ``name`` when x holds complex numbers: a complex scalar, a complex numpy array, a
    scipy.sparse matrix of complex dtype, or a sequence with a complex entry (float conversion would drop the
    imaginary parts silently). The engine's one complex check: every public entry that takes arrays calls it
    (through ``real_array``, ``as_vector``, ``as_matrix``, ``as_rhs`` or directly)."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and not isinstance(x, np.ndarray):  # scipy.sparse, pandas, ...: their dtype says
        try:
            complex_dtype = bool(np.issubdtype(dtype, np.complexfloating))
        except TypeError:  # a dtype numpy does not know (a torch tensor's): ask numpy about the values
            complex_dtype = bool(np.iscomplexobj(np.asarray(x)))
        if complex_dtype:
            raise TypeError(f"{name} must be real, got complex values")
        return
    if np.iscomplexobj(cast(ArrayLike, x)):  # scalars, arrays and nested sequences
        raise TypeError(f"{name} must be real, got complex values")


def real_array(x: ArrayLike, name: str) -> np.ndarray:
    """x as a float array, complex input refused (``check_real``); shape and range are not checked."""
    check_real(x, name)
    return np.asarray(x, dtype=float)


def _check_range(arr: np.ndarray, name: str, limit: float | None) -> None:
    # a finite sum proves every entry finite (one pass, no temporary); an overflowing sum of finite entries
    # falls through to the entrywise test
    with np.errstate(over="ignore", invalid="ignore"):  # finite entries may overflow the sum: not an error
        total = np.sum(arr)
    if not np.isfinite(total) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    if limit is not None and arr.size:
        top = max(float(np.max(arr)), -float(np.min(arr)))  # the largest magnitude without an |arr| temporary
        if top > limit:
            raise ValueError(f"{name} has an entry of magnitude {top:.3g}; the engine accepts {RANGE_TEXT}")


def as_vector(x: ArrayLike, name: str, dim: int | None = None, *, limit: float | None = MAX_MAGNITUDE) -> np.ndarray:
    arr = real_array(x, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {arr.shape}")
    if dim is not None and arr.shape[0] != dim:
        raise ValueError(f"{name} must have length {dim}, got {arr.shape[0]}")
    _check_range(arr, name, limit)
    return arr


def as_matrix(A: ArrayLike, name: str, cols: int | None = None, *, limit: float | None = MAX_MAGNITUDE) -> np.ndarray:
    arr = real_array(A, name)
    if arr.ndim == 1 and cols is not None and arr.shape[0] == cols:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {arr.shape}")
    if cols is not None and arr.shape[1] != cols:
        raise ValueError(f"{name} must have {cols} columns, got {arr.shape[1]}")
    _check_range(arr, name, limit)
    return arr


def as_rhs(b: ArrayLike, name: str, rows: int, *, limit: float | None = MAX_MAGNITUDE) -> np.ndarray:
    arr = real_array(b, name)
    if arr.ndim == 0:
        arr = np.full(rows, float(arr))
    if arr.ndim != 1 or arr.shape[0] != rows:
        raise ValueError(f"{name} must have shape ({rows},), got {arr.shape}")
    _check_range(arr, name, limit)
    return arr


def as_box(lo: float, hi: float) -> tuple[float, float]:
    """The scalar box lo <= x_j <= hi of a system: finite with lo < hi (ValueError naming both otherwise)."""
    check_real(lo, "lo")
    check_real(hi, "hi")
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo >= hi:
        raise ValueError(f"the box must be finite with lo < hi, got lo={lo}, hi={hi}")
    return lo, hi


def as_count(value: Any, name: str, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (integral floats such as 100.0 accepted): TypeError for non-numbers and bools,
    ValueError for NaN, inf, fractions and values below ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v != math.floor(v) or v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return operator.index(value) if isinstance(value, (numbers.Integral, np.integer)) else int(v)


def positive(value: float, name: str, *, strict: bool = True) -> float:
    check_real(value, name)
    v = float(value)
    if not np.isfinite(v) or (v <= 0 if strict else v < 0):
        raise ValueError(f"{name} must be {'positive' if strict else 'non-negative'} and finite, got {value}")
    return v


def radius(value: float, name: str = "radius", *, strict: bool = True) -> float:
    """A radius in [MIN_RADIUS, MAX_MAGNITUDE] (0 allowed when not ``strict``)."""
    r = positive(value, name, strict=strict)
    if r > MAX_MAGNITUDE or 0 < r < MIN_RADIUS:
        raise ValueError(f"{name} = {r:.3g} is outside the engine's range [1e-150, 1e150] (float64 must square it)")
    return r


# ------------------------------------------------------------------------------- scale-safe norms
def row_norms(A: np.ndarray) -> np.ndarray:
    """‖a_i‖ of each row without overflow or underflow.

    √(Σ a²) directly where the sum of squares is a normal float (one pass: 4× faster than scaling every row
    on 3,000 × 64), rows scaled by their largest entry first where it overflowed or fell below 1e-280."""
    if A.shape[0] == 0:
        return np.zeros(0)
    with np.errstate(over="ignore", under="ignore"):
        sq = np.einsum("ij,ij->i", A, A)
    out = np.sqrt(sq)
    redo = np.flatnonzero(~(sq >= 1e-280) | ~np.isfinite(sq))
    if redo.size:
        B = A[redo]
        top = np.max(np.abs(B), axis=1)
        safe = np.where(top > 0, top, 1.0)
        out[redo] = top * np.linalg.norm(B / safe[:, None], axis=1)
    return out


def norm(v: np.ndarray) -> float:
    """‖v‖ without overflow or underflow."""
    return float(row_norms(np.asarray(v, dtype=float).reshape(1, -1))[0])


# ------------------------------------------------------------------- a user's oracle, at the boundary
def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def call_oracle(fn: Any, who: str, *args: Any) -> Any:
    """fn(*args); an exception inside the user's oracle becomes an OracleError naming it (engine errors,
    which already are OracleErrors, pass through)."""
    try:
        return fn(*args)
    except OracleError:
        raise
    except Exception as exc:
        raise OracleError(f"{who} raised {type(exc).__name__}: {exc}") from exc


def _oracle_vector(value: Any, who: str, what: str, dim: int) -> np.ndarray:
    try:
        arr = real_array(value, what)
    except (TypeError, ValueError) as exc:
        raise OracleError(f"{who} returned {what} {_show(value)}: not an array of real numbers ({exc})") from None
    if arr.shape != (dim,):
        raise OracleError(f"{who} returned {what} of shape {arr.shape}, expected ({dim},)")
    if not np.all(np.isfinite(arr)):
        raise OracleError(f"{who} returned {what} with NaN or inf: {_show(value)}")
    if float(np.max(np.abs(arr), initial=0.0)) > MAX_MAGNITUDE:
        raise OracleError(f"{who} returned {what} with an entry beyond the engine's range ({RANGE_TEXT})")
    return arr


def _oracle_scalar(value: Any, who: str, what: str) -> float:
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (numbers.Real, np.ndarray))
        or (isinstance(value, np.ndarray) and (value.ndim != 0 or value.dtype.kind not in "iuf"))
    ):
        raise OracleError(f"{who} returned {what} {_show(value)}: expected a real number")
    v = float(value)
    if not math.isfinite(v):
        raise OracleError(f"{who} returned {what} {v}: expected a finite number")
    return v


def check_cut(out: Any, dim: int, who: str) -> Cut | None:
    """A separation oracle's answer: None, a ``Cut`` or a (normal, offset) pair, returned as None or as a
    ``Cut`` with a unit normal (a zero normal is kept as is: with offset < 0 it proves the body empty)."""
    from .cuts import Cut

    if out is None:
        return None
    if isinstance(out, Cut):
        normal, offset = out.normal, out.offset
    elif isinstance(out, (tuple, list)) and len(out) == 2:
        normal, offset = out
    else:
        raise OracleError(
            f"{who} returned {_show(out)} ({type(out).__name__}); expected None, a Cut or a (normal, offset) pair"
        )
    a = _oracle_vector(normal, who, "a cut normal", dim)
    b = _oracle_scalar(offset, who, "a cut offset")
    nrm = norm(a)
    if nrm == 0.0:
        return Cut(a, b)
    a, b = a / nrm, b / nrm
    if not abs(b) <= MAX_MAGNITUDE:
        raise OracleError(
            f"{who} returned a cut whose hyperplane lies {abs(b):.3g} from the origin, outside "
            f"the engine's range ({RANGE_TEXT})"
        )
    return Cut(a, b)


def check_bool(out: Any, who: str) -> bool:
    """A membership oracle's answer: a bool (numpy bools and the ints 0/1 accepted)."""
    if isinstance(out, (bool, np.bool_)):
        return bool(out)
    if isinstance(out, (int, np.integer)) and int(out) in (0, 1):
        return bool(out)
    raise OracleError(f"{who} returned {_show(out)} ({type(out).__name__}); expected True or False")


def check_maximize(out: Any, c: np.ndarray, who: str) -> tuple[float, np.ndarray]:
    """A linear-optimisation oracle's answer (value, x): value finite, x finite of shape (dim,), and
    value = c·x to 1e-6 relative (a maximiser whose value disagrees with its point is refused)."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise OracleError(f"{who} returned {_show(out)} ({type(out).__name__}); expected a (value, x) pair")
    value = _oracle_scalar(out[0], who, "the value")
    x = _oracle_vector(out[1], who, "the maximiser x", c.shape[0])
    cx = float(c @ x)
    if abs(value - cx) > 1e-6 * (abs(value) + norm(c) * norm(x) + 1e-300) + 1e-12:
        raise OracleError(f"{who} returned value {value!r} but c·x = {cx!r} for the x it returned")
    return value, x
