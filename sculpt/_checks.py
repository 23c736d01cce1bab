"""Input validation shared by the model, the data tools, the gradients and the learner.

Every helper returns a clean float64 array (or int) and raises ValueError naming the argument and what is
wrong (TypeError when the argument is not array-like / not an integer at all).
"""

from __future__ import annotations

import math
import numbers
from typing import IO, TypeAlias

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "check_inputs",
    "check_outputs",
    "check_data",
    "check_m",
    "check_positive_int",
    "check_params",
    "check_positive",
    "as_generator",
    "SeedLike",
    "MAX_INPUT",
    "MAX_VALUE",
]

#: Ranges float64 can carry through the layer: the logits x_aᵀ Θ x_b are quadratic in the tokens, the
#: relative MSE squares labels and outputs. Larger entries are a ValueError naming the range.
MAX_INPUT = 1e100  # |X| (token entries)
MAX_VALUE = 1e150  # |Y|, |Θ|, |W|

#: what every ``seed`` / ``rng`` argument accepts (``as_generator``): None (fresh entropy), an int seed, a
#: SeedSequence, or a Generator (used as is, so a caller's stream continues)
SeedLike: TypeAlias = int | np.integer | np.random.SeedSequence | np.random.Generator | None


#: elements per block of the one-pass checks (1 MiB of float64): min and max of a block read it once from memory
#: and once from cache, where two whole-array reductions read it twice from memory
_CHECK_BLOCK = 1 << 17


def _range(arr: np.ndarray, boolean: bool = False) -> tuple[float, float, bool]:
    """(min, max) of ``arr`` (NaN or inf when it holds any) and, when ``boolean``, whether every entry is ±1: one
    pass over memory, block by block of rows (views, whatever the strides), 9 ms against 29 ms for min then
    max of 10 million entries."""
    rows = max(1, _CHECK_BLOCK // max(1, arr.size // max(1, arr.shape[0]))) if arr.ndim else 1
    blocks = [arr] if arr.ndim == 0 or arr.shape[0] <= rows else [arr[i : i + rows] for i in range(0, len(arr), rows)]
    lo, hi, signs = math.inf, -math.inf, True
    for block in blocks:
        b_lo, b_hi = float(np.min(block)), float(np.max(block))
        if math.isnan(b_lo) or math.isnan(b_hi):  # (Python's min and max would drop a NaN)
            return math.nan, math.nan, False
        lo, hi = min(lo, b_lo), max(hi, b_hi)
        if boolean and signs:
            signs = bool(np.all(np.abs(block) == 1.0))
    return lo, hi, signs


def _check_range(arr: np.ndarray, name: str, limit: float, boolean: bool = False) -> tuple[float, float]:
    """NaN or inf, or an entry beyond ±``limit`` (with ``boolean``: an entry other than ±1), is a ValueError
    naming ``name``; returns (min, max). One pass (``_range``); min and max carry NaN and inf."""
    if not arr.size:
        return 0.0, 0.0
    lo, hi, signs = _range(arr, boolean)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"{name} contains NaN or inf")
    if max(-lo, hi) > limit:
        raise ValueError(
            f"{name} has an entry of magnitude {max(-lo, hi):.3g}; entries must lie "
            f"within ±{limit:.0e} (float64 squares them)"
        )
    if boolean and not signs:
        raise ValueError(f"{name} must have entries in {{-1, +1}}")
    return lo, hi


def _as_float_array(value: ArrayLike | None, name: str) -> np.ndarray:
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name} must be an array of numbers, got {type(value).__name__}")
    if np.iscomplexobj(value):
        raise TypeError(f"{name} must be real, got complex values")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers ({exc})") from None
    return arr


def check_inputs(
    X: ArrayLike, name: str = "X", *, d: int | None = None, k: int | None = None, boolean: bool = False
) -> tuple[np.ndarray, bool]:
    """Validate token sequences: shape (k, d) or (N, k, d), finite, optionally ±1 entries.

    Returns ``(X3, single)`` with ``X3`` float64 of shape (N, k, d) (a (k, d) input becomes N = 1) and
    ``single`` telling whether the input was 2-D (so callers can return the matching shape).
    """
    arr = _as_float_array(X, name)
    if arr.ndim == 2:
        arr, single = arr[None], True
    elif arr.ndim == 3:
        single = False
    else:
        raise ValueError(f"{name} must have shape (k, d) or (N, k, d), got shape {arr.shape}")
    if arr.shape[1] < 1 or arr.shape[2] < 1:
        raise ValueError(f"{name} must have k >= 1 tokens of dimension d >= 1, got shape {arr.shape}")
    if d is not None and arr.shape[2] != d:
        raise ValueError(f"{name} has token dimension {arr.shape[2]}, expected d = {d}")
    if k is not None and arr.shape[1] != k:
        raise ValueError(f"{name} has {arr.shape[1]} tokens per sequence, expected k = {k}")
    _check_range(arr, name, MAX_INPUT, boolean)
    return arr, single


def check_outputs(Y: ArrayLike, X: np.ndarray, name: str = "Y", *, nonzero: bool = False) -> np.ndarray:
    """Validate labels against already-checked inputs ``X`` (N, k, d): same shape, finite (with ``nonzero``: not
    identically zero, from the same pass); float64 (N, k, d)."""
    arr = _as_float_array(Y, name)
    if arr.ndim == 2 and X.shape[0] == 1:
        arr = arr[None]
    if arr.shape != X.shape:
        raise ValueError(f"{name} must have the shape of X {X.shape}, got {arr.shape}")
    lo, hi = _check_range(arr, name, MAX_VALUE)
    if nonzero and lo == 0.0 and hi == 0.0:
        raise ValueError(f"{name} is identically zero: there is nothing to learn (the relative MSE is undefined)")
    return arr


def check_data(
    X: ArrayLike, Y: ArrayLike, *, boolean: bool = False, nonzero: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a labelled data set: X (N, k, d) (or (k, d)) and Y of the same shape, both finite (``boolean``: X
    has ±1 entries; ``nonzero``: Y is not identically zero). Each array is read once; a float64 array is
    returned as is (no copy)."""
    X3, _ = check_inputs(X, "X", boolean=boolean)
    return X3, check_outputs(Y, X3, "Y", nonzero=nonzero)


def check_positive_int(value: object, name: str) -> int:
    """An integer >= 1 (bools rejected); TypeError for non-integers, ValueError for < 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if int(value) < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def check_m(m: object) -> int:
    """Number of heads: an integer >= 1."""
    return check_positive_int(m, "m")


def check_positive(value: object, name: str) -> float:
    """A finite real number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be positive and finite, got {value}")
    return v


def check_params(thetas: ArrayLike, ws: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Head parameters: ``thetas`` and ``ws`` of equal shape (m, d, d) (a (d, d) pair means m = 1), finite."""
    out = []
    for value, name in ((thetas, "thetas"), (ws, "ws")):
        arr = _as_float_array(value, name)
        if arr.ndim == 2:
            arr = arr[None]
        if arr.ndim != 3 or arr.shape[1] != arr.shape[2] or arr.shape[0] < 1 or arr.shape[1] < 1:
            raise ValueError(f"{name} must have shape (m, d, d) with m, d >= 1, got {np.shape(value)}")
        _check_range(arr, name, MAX_VALUE)  # (NaN or inf: "contains NaN or inf")
        out.append(np.array(arr, dtype=np.float64, copy=True))
    if out[0].shape != out[1].shape:
        raise ValueError(f"thetas and ws must have the same shape, got {out[0].shape} and {out[1].shape}")
    return out[0], out[1]


def as_generator(rng: object, name: str = "rng") -> np.random.Generator:
    """A numpy Generator from None, an int seed, a SeedSequence or a Generator (never global state)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, bool) or not isinstance(rng, numbers.Integral):
        raise TypeError(f"{name} must be None, an int seed or a numpy Generator, got {type(rng).__name__}")
    if int(rng) < 0:
        raise ValueError(f"{name} seed must be non-negative, got {rng}")
    return np.random.default_rng(int(rng))


def check_sum_w(W_sum: ArrayLike, d: int) -> np.ndarray:
    """A finite (d, d) estimate of Σ_i W_i, as float64; ValueError naming the problem otherwise."""
    W = np.asarray(W_sum, dtype=float)
    if W.shape != (d, d) or not np.all(np.isfinite(W)):
        raise ValueError(f"W_sum must be a finite ({d}, {d}) array, got shape {W.shape}")
    return W


# --------------------------------------------------------------------------------------- npz files
#: Limits of the file readers (``MultiHeadAttention.load``, ``sculpt learn --data``): checked from the zip
#: directory and each array's .npy header before anything is allocated or parsed.
MAX_MODEL_BYTES = 2**30  # a model file's arrays: 1 GiB (m·d² = 67 million float64 per array)
MAX_DATA_BYTES = 2**34  # a data file's arrays: 16 GiB
MAX_METADATA_CHARS = 65_536  # the JSON metadata of a model file
MAX_JSON_DEPTH = 32  # nesting of that JSON


def _npy_header(fh: IO[bytes], member: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh, max_header_size=10_000)
    elif version in ((2, 0), (3, 0)):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh, max_header_size=10_000)
    else:
        raise ValueError(f"array {member} has an unsupported .npy format version {version}")
    return tuple(int(s) for s in shape), bool(fortran), np.dtype(dtype)


def read_npz(
    path: str, names: tuple[str, ...], *, max_bytes: int, max_member_bytes: dict[str, int] | None = None
) -> dict[str, np.ndarray]:
    """The arrays ``names`` of an npz file, read without pickles and only after checking, from the zip
    directory and each array's header, that every array's declared size is at most ``max_bytes`` in total and
    matches the bytes stored. ValueError naming the file and the problem (missing, not a zip, a single .npy,
    object arrays, an absurd or inconsistent shape); KeyError-free: a missing array is reported by name.
    ``max_member_bytes`` caps single arrays (e.g. a model's metadata string)."""
    import zipfile

    try:
        with open(path, "rb") as fh:
            magic = fh.read(6)
    except OSError as exc:
        raise ValueError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    if magic == b"\x93NUMPY":
        raise ValueError(f"{path!r} is a single .npy array, expected an .npz archive of arrays {', '.join(names)}")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError) as exc:
        # (a flipped byte in the zip directory can claim an unsupported zip version: NotImplementedError)
        raise ValueError(f"{path!r} is not an npz archive ({type(exc).__name__}: {exc})") from None
    out: dict[str, np.ndarray] = {}
    with zf:
        try:
            members = {
                info.filename[:-4] if info.filename.endswith(".npy") else info.filename: info for info in zf.infolist()
            }
            missing = [n for n in names if n not in members]
            if missing:
                held = ", ".join(sorted(members)[:10]) or "nothing"
                raise ValueError(
                    f"{path!r} has no array{'s' if len(missing) > 1 else ''} {' and '.join(missing)} (it holds {held})"
                )
            total = sum(members[n].file_size for n in names)
            if total > max_bytes:
                raise ValueError(
                    f"{path!r}: arrays {', '.join(names)} take {total} bytes, above the limit of {max_bytes} bytes"
                )
            for n, cap in (max_member_bytes or {}).items():
                if n in members and members[n].file_size > cap:
                    raise ValueError(f"array {n} takes {members[n].file_size} bytes, above its limit of {cap}")
            for n in names:
                info = members[n]
                with zf.open(info) as fh:
                    shape, fortran, dtype = _npy_header(fh, n)
                    if dtype.hasobject:
                        raise ValueError(f"array {n} holds Python objects (pickled data), which are never loaded")
                    header_len = fh.tell()
                    count = int(np.prod(shape, dtype=object))
                    nbytes = count * dtype.itemsize
                    if nbytes != info.file_size - header_len:
                        raise ValueError(
                            f"array {n} claims shape {shape} of {dtype} ({nbytes} bytes) but stores "
                            f"{info.file_size - header_len} bytes"
                        )
                    data = fh.read(nbytes)
                    if len(data) != nbytes:
                        raise ValueError(f"array {n} is truncated ({len(data)} of {nbytes} bytes)")
                    arr = np.frombuffer(data, dtype=dtype, count=count)
                    out[n] = arr.reshape(shape, order="F" if fortran else "C").copy()
        except ValueError as exc:
            text = str(exc)
            raise ValueError(text if path in text else f"{path!r}: {text}") from None
        except (OSError, EOFError, KeyError, zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
            raise ValueError(f"{path!r}: corrupted npz archive ({type(exc).__name__}: {exc})") from None
    return out


def json_depth(text: str) -> int:
    """Deepest nesting of [ and { in a JSON text (strings skipped), computed without parsing."""
    depth = best = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth -= 1
    return best


def check_tol(tol: object) -> float:
    """A tolerance: a finite real number >= 0 (ValueError otherwise, bools included)."""
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not (0 <= float(tol) < math.inf):
        raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")
    return float(tol)


def held_out_split(
    X: np.ndarray, Y: np.ndarray, validation_size: int | None, gen: np.random.Generator, who: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X_train, Y_train, X_val, Y_val): ``validation_size`` examples (default min(2000, N/10), at least 1)
    held out at random, the rest for training (``who`` names the caller in errors)."""
    N = X.shape[0]
    if N < 2:
        raise ValueError(f"{who} needs at least 2 examples (one held out), got N = {N}")
    n_val = (
        max(1, min(2000, N // 10))
        if validation_size is None
        else check_positive_int(validation_size, "validation_size")
    )
    if n_val >= N:
        raise ValueError(f"validation_size must be < N = {N}, got {n_val}")
    perm = gen.permutation(N)
    return X[perm[n_val:]], Y[perm[n_val:]], X[perm[:n_val]], Y[perm[:n_val]]
