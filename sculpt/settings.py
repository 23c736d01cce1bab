"""Typed settings for ``learn``: one frozen dataclass per phase, gathered in ``Settings``.

Every field has its default and a one-line reason (``describe()`` prints them; the measurements behind
them are in docs/method.md). Values are validated on construction. A field whose default depends on the
problem size is ``None`` ("auto") until ``Settings.resolve(d, k, m, N)`` fills it: that method is the one
place where size-dependent defaults are computed. ``Settings.merged(...)`` applies overrides deeply
(``{"refine": {"slabs": {"tau": 0.02}}}`` changes that one field and keeps every other); an unknown name at
any depth is a ``TypeError`` naming it and the closest valid name.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "Settings",
    "ProblemSize",
    "ArgmaxSettings",
    "LinearSettings",
    "SumWSettings",
    "BodySettings",
    "RefineSettings",
    "SpanSettings",
    "HeadsSettings",
    "PolishSettings",
    "ExactSettings",
    "GradientSettings",
    "AutoSettings",
    "CostSettings",
    "settings_from_options",
    "one_head_examples",
    "DEPRECATED_OPTIONS",
]

G = TypeVar("G", bound="_Group")

#: phase 4 reads at most max(this, 40d²) training examples by default (``span.scan_examples``), except where the
#: agreement test is blind (m(k−1) > d: max(20,000, 40d²)): (16,4,3) needs 40,000–80,000 for a span within 10°
#: (6.2–7.0° from 78,000, 14–15° from 18,000)
SCAN_EXAMPLES_AUTO = 200_000
#: floats per chunk of the forward kernel's intermediates (``sculpt.toolkit.forward_pass.chunk_size``): 256 KB stay
#: in cache (2^14–2^16 run fastest); no N × m × k × k array is ever held
FORWARD_CHUNK_ELEMENTS = 1 << 15
#: floats (of an N × k × d array) per chunk of the error sums (``layer_relative_mse``, ``prediction_error``): 8 MB,
#: so an error over N examples never holds a prediction or a residual the size of the data
ERROR_CHUNK_ELEMENTS = 1 << 20
Check = Callable[[str, Any], Any]


@dataclass(frozen=True)
class ProblemSize:
    """The sizes settings resolve against: d (token dimension), k (tokens), m (heads), N (examples; 0 when
    unknown). ``blind`` is the dimension of the head disagreements the agreement test cannot see
    (docs/method.md#agreement-blind)."""

    d: int
    k: int
    m: int
    N: int = 0

    @classmethod
    def of(cls, X: ArrayLike, m: int) -> ProblemSize:
        """The size of a batch X of shape (N, k, d) with m heads.

        Parameters
        ----------
        X : array_like, shape (N, k, d)
            The examples (only the shape is read).
        m : int
            Heads.

        Returns
        -------
        ProblemSize
            ProblemSize(d, k, m, N).

        Raises
        ------
        ValueError
            X is not of shape (N, k, d).
        """
        shape = np.shape(X)
        if len(shape) != 3:
            raise ValueError(f"X must have shape (N, k, d), got shape {shape}")
        N, k, d = shape
        return cls(int(d), int(k), int(m), int(N))

    @property
    def blind(self) -> int:
        """min(max(0, m(k−1) − d), (m−1)(k−1)): the dimension of the head disagreements an output row cannot
        reveal (0: the agreement test sees them all). A row's pattern deviations δ_i (Σ_j δ_ij = 0, k − 1 each)
        reach the output only through Σ_i δ_iᵀ X W_i; the common part is absorbed by the shared pattern q̂
        (k − 1 directions of X Σ W), leaving d − (k − 1) directions for (m − 1)(k − 1) unknowns; with k − 1 > d
        every disagreement is invisible, and one head has none."""
        m, k, d = self.m, self.k, self.d
        return min(max(0, m * (k - 1) - d), (m - 1) * (k - 1))


def default_dist_min(d: int) -> float:
    """Token-pair distance filter: ±1 tokens differing in >= round(d/3) coordinates (8 → 3, 16 → 5), written as
    the Euclidean ‖x_r − x_j‖ >= 2·sqrt(h_min) so it applies to Gaussian tokens too."""
    return 2.0 * math.sqrt(max(1, round(d / 3)))


def default_rows(d: int, mode: str) -> int:
    """Agreeing rows a body keeps: 2000 for slabs (phase 4 needs more than d² equality rows); for half-spaces
    1000 up to d = 8 and 600 above (every LP over the body costs about rows · d², and 1000 rows give no better
    Σ̂W than 600 at d = 16)."""
    if mode == "slabs":
        return 2000
    return 1000 if d <= 8 else 600


#: phase 5's net: grid points per axis by head count (other m: 5)
DEFAULT_GRID = {2: 17, 3: 5}


# --- validators: (name, value) -> normalised value, or ValueError naming the field ---------------------------


def _num(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    return float(v)


def positive(name: str, v: Any) -> float:
    x = _num(name, v)
    if x <= 0:
        raise ValueError(f"{name} must be > 0, got {v!r}")
    return x


def nonneg(name: str, v: Any) -> float:
    x = _num(name, v)
    if x < 0:
        raise ValueError(f"{name} must be >= 0, got {v!r}")
    return x


def fraction(name: str, v: Any) -> float:
    x = _num(name, v)
    if not 0 < x <= 1:
        raise ValueError(f"{name} must lie in (0, 1], got {v!r}")
    return x


def _int(name: str, v: Any, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def pos_int(name: str, v: Any) -> int:
    return _int(name, v, 1)


def nonneg_int(name: str, v: Any) -> int:
    return _int(name, v, 0)


def at_least_two(name: str, v: Any) -> int:
    return _int(name, v, 2)


def boolean(name: str, v: Any) -> bool:
    if not isinstance(v, (bool,)) and not (isinstance(v, numbers.Integral) and v in (0, 1)):
        raise ValueError(f"{name} must be True or False, got {v!r}")
    return bool(v)


def optional(check: Check) -> Check:
    def run(name: str, v: Any) -> Any:
        return None if v is None else check(name, v)

    return run


def choice(*options: Any) -> Check:
    def run(name: str, v: Any) -> Any:
        if v not in options:
            raise ValueError(f"{name} must be one of {options}, got {v!r}")
        return v

    return run


def fractions_tuple(name: str, v: Any) -> tuple[float, ...]:
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise ValueError(f"{name} must be a sequence of numbers in (0, 1], got {v!r}")
    out = tuple(fraction(f"{name}[{i}]", x) for i, x in enumerate(v))
    if not out:
        raise ValueError(f"{name} must not be empty")
    return out


def floats(count: int) -> Check:
    def run(name: str, v: Any) -> tuple[float, ...]:
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            raise ValueError(f"{name} must be a sequence of {count} numbers, got {v!r}")
        out = tuple(_num(f"{name}[{i}]", x) for i, x in enumerate(v))
        if len(out) != count:
            raise ValueError(f"{name} must have {count} numbers, got {len(out)}")
        return out

    return run


def clip_pair(name: str, v: Any) -> tuple[float, float]:
    try:
        lo, hi = v
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high), got {v!r}") from None
    lo, hi = positive(f"{name}[0]", lo), positive(f"{name}[1]", hi)
    if lo > hi:
        raise ValueError(f"{name} must have low <= high, got {v!r}")
    return lo, hi


T = TypeVar("T")


def _or(value: T | None, default: T) -> T:
    """``value``, or ``default`` where it is None ("auto")."""
    return default if value is None else value


def opt(default: Any, why: str, check: Check) -> Any:
    """A settings field: its default, the one-line reason for it, and its validator."""
    return field(default=default, metadata={"why": why, "check": check})


def group(cls: type, why: str) -> Any:
    return field(default_factory=cls, metadata={"why": why, "group": cls})


# --- the machinery shared by every group ---------------------------------------------------------------------


def _closest(name: str, valid: list[str], path: str) -> str:
    near = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
    prefix = path + "." if path else ""
    return f"; did you mean {prefix + near[0]!r}?" if near else f"; valid names here: {', '.join(valid)}"


class _Group:
    """Frozen, validated on construction, deep-mergeable."""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if "group" in f.metadata:
                if isinstance(v, Mapping):
                    v = f.metadata["group"]().merged(v, path=f.name)
                elif not isinstance(v, f.metadata["group"]):
                    raise TypeError(
                        f"{f.name} must be a {f.metadata['group'].__name__} or a dict, got {type(v).__name__}"
                    )
            elif "check" in f.metadata:
                v = f.metadata["check"](f.name, v)
            object.__setattr__(self, f.name, v)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]  # type: ignore[arg-type]

    def merged(self: G, overrides: Mapping[str, Any] | _Group | None = None, *, path: str = "", **kw: Any) -> G:
        """A copy with ``overrides`` (a mapping, nested mappings for sub-groups, or a group of this type)
        applied field by field. Unknown names raise TypeError naming them and the closest valid name."""
        if isinstance(overrides, _Group):
            if not isinstance(overrides, type(self)):
                raise TypeError(f"{path or 'settings'} must be a {type(self).__name__}, got {type(overrides).__name__}")
            overrides = {f.name: getattr(overrides, f.name) for f in fields(overrides)}  # type: ignore[arg-type]
        items = {**dict(overrides or {}), **kw}
        valid = self.field_names()
        changes: dict[str, Any] = {}
        by_name = {f.name: f for f in fields(self)}  # type: ignore[arg-type]
        for name, value in items.items():
            qual = f"{path}.{name}" if path else name
            if not isinstance(name, str) or name not in by_name:
                raise TypeError(f"unknown setting {qual!r}{_closest(str(name), valid, path)}")
            f = by_name[name]
            if "group" in f.metadata and isinstance(value, Mapping):
                value = getattr(self, name).merged(value, path=qual)
            changes[name] = value
        try:
            return dataclasses.replace(self, **changes)  # type: ignore[type-var]
        except ValueError as exc:
            if not path or str(exc).startswith(path):
                raise
            raise ValueError(f"{path}.{exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON-ready: tuples become lists)."""
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            out[f.name] = v.to_dict() if isinstance(v, _Group) else (list(v) if isinstance(v, tuple) else v)
        return out

    @classmethod
    def describe(cls, prefix: str = "") -> str:
        """Every field by its dotted name, with its default ("auto": chosen from the problem size or the data when
        the run starts; None where None is itself the value, e.g. no time limit) and reason."""
        lines = []
        for f in fields(cls):  # type: ignore[arg-type]
            if "group" in f.metadata:
                lines.append(f"# {prefix}{f.name}: {f.metadata['why']}")
                lines.append(f.metadata["group"].describe(f"{prefix}{f.name}."))
            else:
                auto = f.default is None and "auto" in f.metadata.get("why", "")
                default = "auto" if auto else repr(f.default)
                lines.append(f"{prefix}{f.name} = {default}  # {f.metadata.get('why', '')}")
        return "\n".join(lines)


# --- the phases ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SumWSettings(_Group):
    """Phase 1, ``estimate_sum_w``: Σ̂W = Σ_i W_i from single-token rows."""

    improve: bool = opt(True, "refine the crude moment estimate (it is 30 % off at (8,4,2))", boolean)
    fractions: tuple[float, ...] = opt(
        (0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.005, 0.005),
        "trimmed least-squares rounds keep these fractions of rows",
        fractions_tuple,
    )
    min_rows: int | None = opt(None, "rows a trimmed round needs (auto: 3d)", optional(pos_int))
    vp_rounds: int = opt(
        1,
        "agreement variable-projection refits (one on 1,000 rows: 0.04 s, 15/15 exact at (8,4,2) generic, "
        "weak-head, near-identical)",
        nonneg_int,
    )
    vp_rows: int = opt(1000, "agreeing rows per refit", pos_int)
    vp_q_tol: float = opt(0.01, "a refit's rows have q̂ >= −vp_q_tol: a pattern every head shares", nonneg)
    vp_max_iter: int = opt(
        6, "Gauss–Newton steps per refit at most (one head gains orders of magnitude per step)", pos_int
    )
    vp_stall: float = opt(
        0.05,
        "a refit stops when a step lowers the residual RMS by less than this fraction (m >= 2: the first step "
        "gains 2–4 %, a second no accuracy: Σ̂W 7.9e-3 against 8.0e-3 off at (16,4,2))",
        nonneg,
    )
    exact_agreement: float = opt(
        1e-9,
        "agreement residual RMS / RMS(Y) below which one pattern fits every row (one head: 7e-13; two heads "
        ">= 0.17): the refits stop and phase 3 has nothing to refine",
        nonneg,
    )
    holdout_every: int = opt(
        10, "every this-th example is held out of the refit: it judges the refit and sizes the error", pos_int
    )
    holdout_rows: int = opt(50, "the held-out criterion averages at least this many rows", pos_int)
    holdout_fraction: float = opt(
        0.005,
        "the held-out criterion: the mean relative single-token residual of this fraction of the held-out rows "
        "best fitted by one token (a fraction, not a count, so that it does not shrink as N grows)",
        fraction,
    )
    refit_fraction: float = opt(
        0.2,
        "the refit is kept when it lowers the mean agreement residual of this fraction of the held-out rows best "
        "fitted by one shared pattern (its verdict was right in 30/30 runs, (8,4,2) to (16,8,2))",
        fraction,
    )
    error_scale: float = opt(
        1.5,
        "Σ̂W's relative error is at most about this × max(1, k/4) × the held-out single-token criterion "
        "(measured 0.3–1.4 × at k = 4–64, d = 8, m = 2; docs/method.md#phase-1)",
        positive,
    )
    target_error: float = opt(0.05, "the relative error of Σ̂W a failure's 'needs about N examples' aims at", positive)
    bias_limited_k: int = opt(
        4,
        "beyond this k the single-token estimate's bias, not N, limits it (k = 8: 3.5–10 % off from 4,500 or "
        "54,000 examples alike)",
        pos_int,
    )
    warn_cond: float = opt(100.0, "cond(Σ̂W) above this: the record warns that Σ W_i may be singular", positive)
    max_cond: float = opt(1e3, "cond(Σ̂W) above this is a degenerate instance (planted layers <= 10)", positive)
    max_single_residual: float | None = opt(
        0.3,
        "with cond(Σ̂W) > max_cond: best 0.5 % of rows fitted by one "
        "token worse than this: the failure names nearly uniform heads next "
        "to a singular Σ W (torch init 0.7–2.9; planted <= 0.09)",
        optional(positive),
    )

    def resolve(self, size: ProblemSize) -> SumWSettings:
        """min_rows: 3d."""
        return self.merged(min_rows=_or(self.min_rows, 3 * size.d))


@dataclass(frozen=True)
class BodySettings(_Group):
    """Phase 2 and phase 3's re-sculpts, ``sculpt``: the body of agreeing-row constraints over vec Θ."""

    n_rows: int | None = opt(
        None, "agreeing rows kept (auto: 1000 for d <= 8, 600 above; 2000 for slabs)", optional(pos_int)
    )
    half_rows: int | None = opt(
        None,
        "slab mode: the best rows that also give K*'s half-spaces (auto: the half-space body's n_rows; every LP "
        "over K* costs about rows · d²)",
        optional(pos_int),
    )
    q_tol: float | None = opt(None, "rows need q̂ >= −q_tol (auto: 0.02 half-spaces, 1e-3 slabs)", optional(nonneg))
    tau: float = opt(0.01, "relative residual bound of a slab row", positive)
    tau_max: float = opt(0.05, "tau widens up to this until min_equalities rows exist", positive)
    min_equalities: int | None = opt(
        None, "equality rows wanted (auto: 3d²; 10d² for K* with m >= 3 heads)", optional(pos_int)
    )
    q_min: float = opt(0.02, "q̂_j needed for an equality row", positive)
    c_floor: float = opt(6.0, "additive floor q_f = c_floor · q90(|negative q̂|)", positive)
    floor_clip: tuple[float, float] = opt((1e-3, 0.2), "clip of the floor q_f", clip_pair)
    dist_min: float | None = opt(None, "token-pair distance filter (auto: 2·sqrt(round(d/3)))", optional(positive))
    eta0: float = opt(0.1, "slack added to 2η* (0.7 contains every head but certifies nothing)", nonneg)
    box: float | None = opt(None, "|Θ_pq| <= box (auto: 4.0; re-sculpts inherit phase 2's box)", optional(positive))
    trim: bool = opt(True, "L1 outlier trim of rows no head satisfies", boolean)
    span_tau: float = opt(
        0.1,
        "slab mode: phase 4 fits the flat to every equality of the rows up to this residual (m = 2: the span "
        "is 8° off, 25° from K*'s own rows alone, 11° at 0.2)",
        positive,
    )
    span_rel_floor: float = opt(0.01, "phase 4's row weight is (q̂_j⁻² + q̂_r⁻²)^(−1/2)/(residual + this)", positive)
    hinge_infeasible: float = opt(
        0.1,
        "a squared-violation descent ending with a row violated by more than this (nats) counts as proof of "
        "infeasibility: the near-flat LP and PDLP are skipped for the exact LPs (they cost 0.3–0.5 s for "
        "nothing at (8,4,3), where η* = 0.54)",
        positive,
    )
    lp_max_entries: int = opt(
        3_000_000,
        "rows × variables above which η* is bounded at the hinge point instead of by LPs (d = 16, up to 9e5: "
        "LPs 1–2 s; d = 32, 5.7e6: 193 s)",
        pos_int,
    )
    lp_max_variables: int = opt(
        100,
        "variables (d²) above which η* is bounded at the hinge point too (d = 16, m = 3: the L1 trim and η* LPs "
        "take 60–70 % of a run for a slack no later phase reads; at d = 8 they take 0.01–0.2 s)",
        pos_int,
    )
    near_flat_directions: int = opt(
        8,
        "weakest equality directions the near-flat LP searches along the slab fit (9 variables: 0.07 s at "
        "d = 16 against 1–2 s for the exact LP)",
        pos_int,
    )
    first_order_max_iter: int = opt(
        1000,
        "PDLP iterations of the first-order feasibility try (successes take < 500; on an infeasible K* at "
        "(8,4,3) the cap stops it after 0.46 s)",
        pos_int,
    )

    def resolve(self, size: ProblemSize, mode: str = "halfspaces", box: float | None = None) -> BodySettings:
        """The "auto" fields for a body of ``mode`` ("halfspaces" or "slabs"): n_rows ``default_rows(d, mode)``,
        half_rows ``default_rows(d, "halfspaces")``, q_tol (0.02 half-spaces, 1e-3 slabs), min_equalities (3d²;
        slabs with m >= 3: 10d²), dist_min ``default_dist_min``, box (``box`` when given: re-sculpts inherit
        phase 2's, else 4.0)."""
        d = size.d
        min_eq = 10 * d * d if mode == "slabs" and size.m >= 3 else 3 * d * d
        return self.merged(
            n_rows=_or(self.n_rows, default_rows(d, mode)),
            half_rows=_or(self.half_rows, default_rows(d, "halfspaces")),
            q_tol=_or(self.q_tol, 1e-3 if mode == "slabs" else 0.02),
            min_equalities=_or(self.min_equalities, min_eq),
            dist_min=_or(self.dist_min, default_dist_min(d)),
            box=_or(self.box, 4.0 if box is None else box),
        )


@dataclass(frozen=True)
class RefineSettings(_Group):
    """Phase 3, ``refine_sum_w``: LP-certified large-margin rows refine Σ̂W, then K* is re-sculpted."""

    rounds: int = opt(1, "certification rounds (3 rounds × 200 take 80 s for no better Σ̂W at (8,4,2))", pos_int)
    n_candidates: int = opt(60, "rows examined per round, by proxy margin", pos_int)
    need: int | None = opt(None, "certified rows for the least-squares fit (auto: 3d)", optional(pos_int))
    gamma_min: float = opt(1.0, "certified margin a row needs to be kept", positive)
    gamma_accept: float = opt(3.5, "margin a row needs to be used (leakage <= (k−1)e^−γ)", positive)
    max_cond: float = opt(30.0, "condition number of the certified token design", positive)
    change_tol: float = opt(5e-3, "stop rounds when Σ̂W moves less than this (relative)", positive)
    working: int = opt(64, "working-set size of the certification LPs", pos_int)
    lp_rounds: int = opt(1, "constraint-generation rounds per certification LP (one: a sound, cheap bound)", pos_int)
    max_per_token: int = opt(
        2, "candidates examined per winning token x_j* (the proxy favours a few; repeats add no design)", pos_int
    )
    stop_after: int | None = opt(
        None,
        "a round stops after this many certified rows once their tokens' design has cond <= max_cond, after "
        "twice as many in any case (auto: need + max(4, d/2))",
        optional(pos_int),
    )
    exact_fit_residual: float = opt(
        1e-9, "median agreement residual under Σ̂W at or below which no round runs (one pattern fits every row)", nonneg
    )
    proxy_working_set_max_dim: int = opt(
        100,
        "the min-norm proxy by constraint generation up to this many variables (d² <= 100: 5–7× faster than the "
        "dense IPM), by the dense IPM above (0.7 against 1.2 s at d = 16)",
        pos_int,
    )
    refit_rows: int = opt(
        2000, "agreeing rows of the refit on the directions a poorly conditioned certified design leaves", pos_int
    )
    refit_q_tol: float = opt(0.01, "that refit's rows have q̂ >= −refit_q_tol (as phase 1's vp_q_tol)", nonneg)
    refit_max_iter: int = opt(6, "that refit's Gauss–Newton steps at most (as phase 1's vp_max_iter)", pos_int)
    refit_stall: float = opt(0.05, "that refit's stall fraction (as phase 1's vp_stall)", nonneg)
    certify: bool | None = opt(
        None,
        "run certification (auto: off when d² > 100, else on from certify_min_examples examples in phases 1–3; "
        "at d = 16, or on 1,500 examples, it costs 0.4–2.4 s for nothing)",
        optional(boolean),
    )
    certify_min_examples: int = opt(
        5000,
        "with certify unset, certify from this many examples in phases 1–3 on (at (8,4,2) on 1,500–2,500 "
        "examples it costs 0.4 s and leaves the head error before the polish unchanged)",
        pos_int,
    )
    resculpt: BodySettings = group(BodySettings, "half-space re-sculpts between rounds")
    slabs: BodySettings = group(BodySettings, "the final body K* (slab mode)")

    def resolve(self, size: ProblemSize, box: float | None = None) -> RefineSettings:
        """need: 3d; stop_after: need + max(4, d/2); certify: off when d² > 100 (else left to ``certifies``); the two bodies as in
        ``BodySettings.resolve`` (half-space re-sculpts, slab K*), with phase 2's ``box``."""
        d = size.d
        need = _or(self.need, 3 * d)
        return self.merged(
            need=need,
            stop_after=_or(self.stop_after, need + max(4, d // 2)),
            certify=self.certify if self.certify is not None else (False if d * d > 100 else None),
            resculpt=self.resculpt.resolve(size, "halfspaces", box),
            slabs=self.slabs.resolve(size, "slabs", box),
        )

    def certifies(self, n_examples: int) -> bool:
        """Whether phase 3 runs certification rounds on ``n_examples`` examples: ``certify``, or when unset,
        from ``certify_min_examples`` examples on."""
        return bool(n_examples >= self.certify_min_examples if self.certify is None else self.certify)


@dataclass(frozen=True)
class SpanSettings(_Group):
    """Phase 4, ``extract_span``: aff{Θ_i} and span{Θ_i} from K*'s equality rows."""

    width_probes: int = opt(0, "random widths normal to the span (LPs over the body cost seconds)", nonneg_int)
    radius: float | None = opt(
        None,
        "phase 5's search radius (auto: 2·max(‖flat point‖, 1), at most 1.25 × the body's extent along the flat "
        "when width_probes > 0 measured it)",
        optional(positive),
    )
    max_m: int | None = opt(
        None,
        "largest head count the m-estimate considers (auto: m + 3, or m from d² >= iterative_eigen_from, where each "
        "further eigenpair of the clustered bulk costs Lanczos solves and the estimate is a diagnostic)",
        optional(pos_int),
    )
    hull_reweight: int | None = opt(
        None,
        "refits that down-weight rows along the flat's own directions (m = 2: head error 0.10 against 0.16 without; "
        "auto: 2, or 0 from d² >= iterative_eigen_from, where a refit moves the span < 5° for a d⁴-column Gram pass)",
        optional(nonneg_int),
    )
    hull_c: float = opt(1.0, "those refits weight a row by w/(‖F_i U‖ + hull_c · median)", positive)
    iterative_eigen_from: int = opt(
        2048,
        "Gram columns from which the fits' few smallest eigenpairs come from shift-invert Lanczos on one Cholesky "
        "factor, residual-checked (d = 64: 3.0 against 4.8 s per fit); below it, d <= 32, the exact subset eigh",
        pos_int,
    )
    in_flat_extent: bool = opt(
        False, "measure K*'s extent inside the flat (a diagnostic: 2 LPs, 25 ms at (16,4,2))", boolean
    )
    scan_gap: float = opt(
        0.45,
        "while the fit's σ_m/σ_{m+1} is above this, read more training examples for rows (m = 2, d <= 16: "
        "0.33–0.41 at 7–10°; m = 3: 0.67–0.77 at 48–89°)",
        positive,
    )
    scan_growth: int = opt(4, "each scan reads this many times the examples read so far (>= 2)", at_least_two)
    scan_settle_deg: float = opt(
        8.0,
        "stop scanning once a growth moved the span by less than this (degrees; with ×4 growth the error is then "
        "about half of it; 0: off)",
        nonneg,
    )
    scan_min_gain: float = opt(
        0.03,
        "from the second growth on, stop scanning once a growth lowered σ_m/σ_{m+1} by less than this fraction "
        "per doubling of the examples read ((16,4,3): 9–12 %; agreement-blind (8,4,3): 0.4–7 %, its span "
        "15.6–19.7° off from 18,000 examples and 15.8–17.6° from 78,000; 0: off)",
        nonneg,
    )
    scan_first: bool | None = opt(
        None,
        "read the scan's first growth of examples before the first fit (auto: from d² >= iterative_eigen_from, "
        "where K*'s own rows, 2–3·d² of them, leave σ_m/σ_{m+1} near 1 and that fit costs a Gram pass for nothing)",
        optional(boolean),
    )
    scan_examples: int | None = opt(
        None,
        f"most training examples phase 4 reads (auto: max({SCAN_EXAMPLES_AUTO:,}, 40d²), or max(20,000, 40d²) "
        "where the agreement test is blind, m(k−1) > d; 0: the phases' subset only)",
        optional(nonneg_int),
    )
    scan_block: int = opt(4096, "examples per block of the scan (its memory: one block plus the rows kept)", pos_int)
    scan_max_entries: float = opt(
        4e7,
        "rows × d² kept at most (the highest-weight rows: 9,765 at d = 64; the rows are kept as factors, 2d floats each)",
        positive,
    )

    def resolve(self, size: ProblemSize) -> SpanSettings:
        """scan_examples: max(SCAN_EXAMPLES_AUTO, 40d²), or max(20,000, 40d²) where the agreement test is blind
        (more examples do not remove the span's bias there)."""
        budget = max(20_000 if size.blind else SCAN_EXAMPLES_AUTO, 40 * size.d * size.d)
        large = size.d * size.d >= self.iterative_eigen_from
        return self.merged(
            scan_examples=_or(self.scan_examples, budget),
            hull_reweight=self.reweights(size.d),
            max_m=_or(self.max_m, size.m if large else size.m + 3),
            scan_first=_or(self.scan_first, large),
        )

    def reweights(self, d: int) -> int:
        """hull_reweight, or when auto: 2, and 0 from d² >= iterative_eigen_from on."""
        return _or(self.hull_reweight, 0 if d * d >= self.iterative_eigen_from else 2)


@dataclass(frozen=True)
class LinearSettings(_Group):
    """The linear-attention route (``sculpt.phases.linear_start``): replaces phases 2–5 where the agreement
    test cannot give phase 4 its rows (the shapes ``method='sculpt'`` refused) and the lifted regression is
    affordable."""

    enabled: bool = opt(
        True,
        "take the route where the body route is refused (docs/method.md#linear-lead: (16,8,4) torch, (16,8,8), "
        "(8,32,2), (16,32,2))",
        boolean,
    )
    max_features: int = opt(
        3000,
        "lifted features d + d²(d + 1)/2 at most (normal equations: features² · 8 bytes and N·k·features² "
        "flops; d = 16 2,192 features 38 MB, d = 32 16,928 features 2.3 GB)",
        pos_int,
    )
    rows_per_feature: int = opt(12, "output rows the lifted regression reads per feature, at most", pos_int)
    starts: int = opt(4, "random starts of the split's alternating least squares", pos_int)
    iters: int = opt(200, "alternating least-squares sweeps per start at most", pos_int)

    def resolve(self, size: ProblemSize) -> LinearSettings:
        """Nothing depends on the size."""
        return self


@dataclass(frozen=True)
class ArgmaxSettings(_Group):
    """The argmax route for peaked heads (``sculpt.phases.argmax``): replaces phases 2–5 when most rows are
    one-hot in every head (log-ratio equalities are then almost absent)."""

    enabled: bool = opt(
        True,
        "take the route when phase 1 finds many one-hot rows (peaked ‖Θ‖_F = 40: 32–42 % of "
        "rows; every generic/weak/near-identical/m = 3 row measured: 0 %)",
        boolean,
    )
    onehot_tol: float = opt(1e-4, "relative single-token residual of a one-hot row (Σ̂W is 1e-6 off there)", positive)
    detect_fraction: float = opt(
        0.02,
        "one-hot rows under phase 1's Σ̂W that trigger the robust Σ̂W refit (peaked: "
        "0.11–0.42 even with Σ̂W 32 % off; generic: 0)",
        fraction,
    )
    min_fraction: float = opt(0.1, "one-hot rows under the robust Σ̂W needed to take the route", fraction)
    restarts: int = opt(12, "random starts of the mixed regression (40 % of starts converge at (8,4,2))", pos_int)
    max_iter: int = opt(25, "alternations per start (converging starts take 10–17)", pos_int)
    keep_fraction: float = opt(0.3, "rows each alternation refits on (the best-explained)", fraction)
    stop_fraction: float = opt(
        0.1, "a start explaining this fraction to onehot_tol is kept (right: 0.34–0.37, wrong: <= 0.002)", fraction
    )
    max_rows: int = opt(2000, "rows the mixed regression uses", pos_int)
    p_min: float = opt(1e-12, "attention entries below this give no log-ratio equation", positive)
    fixed_point_rounds: int = opt(
        3, "W_i on all rows under Θ_i, then Θ_i again (Θ error 1e-8 → 4e-9 → 1e-10 → 3e-11 at (8,4,2))", nonneg_int
    )
    robust_perturbed: int = opt(
        2,
        "the robust Σ̂W also starts from this many perturbations (30 % of ‖Σ̂W‖) of phase 1's (with them 15/15 "
        "peaked (8,4,2) subsets end below 4e-7, from phase 1's estimate alone 12/15 below 1e-10)",
        nonneg_int,
    )
    robust_h_fraction: float = opt(
        0.1, "share of the token rows each concentration step of the robust Σ̂W refits on (at least 3d)", fraction
    )
    robust_max_cond: float = opt(
        30.0,
        "those rows grow until their token design's condition number is below this (the best-fitted rows alone "
        "crowd onto a few tokens and are singular in every peaked seed tried)",
        positive,
    )
    robust_iters: int = opt(40, "concentration steps per start of the robust Σ̂W", pos_int)
    robust_exact_tol: float = opt(
        1e-9, "relative residual of a row the robust Σ̂W explains exactly (the start explaining most wins)", positive
    )
    refine_rounds: int = opt(5, "relabel-and-refit rounds of the joint W refit (the route's phase 3)", nonneg_int)
    refine_max_rows: int = opt(20000, "token rows the joint W refit uses (subsampled above)", pos_int)
    attention_factor: float = opt(
        1e3,
        "examples whose output rows the recovered attention rows fit to this × onehot_tol give Θ's log-ratio equations",
        positive,
    )

    def resolve(self, size: ProblemSize) -> ArgmaxSettings:
        """No size-dependent fields."""
        return self


@dataclass(frozen=True)
class HeadsSettings(_Group):
    """Phase 5, ``candidate_heads``: a net on the flat, VP least squares, LM on the best subsets."""

    grid: int | None = opt(None, "grid points per axis of the net (auto: 17 for m = 2, else 5)", optional(pos_int))
    radius: float | None = opt(None, "net radius (auto: phase 4's)", optional(positive))
    n_refine: int | None = opt(
        None,
        "best subsets refined by Levenberg–Marquardt, 0: none (auto: 0 for m = 2, where the refine costs 10–15 % "
        "of a run at (16,4,2) and the polish does its work in the same 5–8 iterations; else 1: at (8,4,3) it "
        "brings the Θ error before the polish from 0.50 to 0.20–0.30; 4 refined subsets cost 1.2 s of 2.1 s)",
        optional(nonneg_int),
    )
    max_nfev: int = opt(10, "LM evaluations per refined subset (the polish finishes the fit)", pos_int)
    max_tuples: int = opt(20000, "m-subsets of grid points evaluated (subsampled above)", pos_int)
    max_examples: int = opt(
        200,
        "examples the net and the refine are scored on (twice as many give the same Θ error before the polish "
        "at m = 2, 3, 4 and take 60 % longer)",
        pos_int,
    )

    def resolve(self, size: ProblemSize) -> HeadsSettings:
        """grid: ``DEFAULT_GRID`` by m (5 otherwise); n_refine: 0 for m = 2, else 1."""
        return self.merged(
            grid=_or(self.grid, DEFAULT_GRID.get(size.m, 5)),
            n_refine=_or(self.n_refine, 0 if size.m == 2 else 1),
        )


@dataclass(frozen=True)
class PolishSettings(_Group):
    """The final polish, ``polish``: variable-projection Levenberg–Marquardt on a growing subset."""

    first_examples: int | None = opt(None, "first subset (auto: max(64, 4·2md²/(kd)))", optional(pos_int))
    max_examples: int = opt(4096, "largest subset", pos_int)
    growth: int = opt(4, "subset growth factor between stages", pos_int)
    max_iter: int = opt(60, "LM iterations per stage", pos_int)
    stuck: float = opt(
        1e-2,
        "a stage ending above this training relative MSE is a local minimum: stop instead of growing the "
        "subset (stuck stages end at 0.06–0.53; label noise below ~10 % of the signal stays under it and "
        "still grows the subset)",
        positive,
    )
    stuck_after: int = opt(
        25,
        "LM iterations after which a stage still above ``stuck`` is given up (starts in the right basin fit "
        "their subset to ~1e-30 in 6–24)",
        pos_int,
    )
    fit_tol: float = opt(1e-30, "LM stops once the subset's relative MSE is below this (float64 rounding)", nonneg)
    chunk: int = opt(256, "examples per chunk of the normal equations (their memory is one chunk's)", pos_int)
    damping_down: float = opt(
        30.0, "LM's damping λ is divided by this after an accepted step (÷5 takes one more iteration)", positive
    )
    chord_start: float = opt(
        1e-6,
        "a full step leaving at most this fraction of the cost starts chord steps, which reuse its factorised "
        "JᵀJ (Gauss–Newton is then converging quadratically; a chord step costs 1/4–1/20 of a full one; 0: none)",
        nonneg,
    )
    chord_ratio: float = opt(
        1e-2, "a chord step is kept while it leaves at most this fraction of the cost, else a full step", positive
    )
    rounding_level: float = opt(
        1e-26,
        "a chord trial failing at or below this relative MSE ends LM (float64 fits bottom out at 5e-31–1e-30, so a "
        "full step would gain a factor of 1–2)",
        positive,
    )
    f32_above: float = opt(
        1e-10,
        "JᵀJ and its factor are float32 while the relative MSE is above this (2× BLAS throughput; JᵀJ agrees to "
        "3e-7; Jᵀr stays float64; 0: every step starts in float32)",
        nonneg,
    )
    screen_examples: int = opt(
        128, "validation examples a start is screened on before its full validation error is computed", pos_int
    )
    matrix_free_above: int = opt(
        768,
        "past this many parameters (m·d²) LM solves its steps by conjugate gradients with matrix-free Jacobian "
        "products instead of factorising JᵀJ ((m·d²)² entries: 512 MB at d = 64, m = 2); CG is the faster from "
        "m·d² = 512 on (3–25× at 1,024–4,096)",
        nonneg_int,
    )
    cg_forcing: float = opt(
        0.1,
        "CG stops at a relative residual of min(this, √cost) (inexact Gauss–Newton: far steps need little, and "
        "√cost keeps the quadratic rate near the fit)",
        fraction,
    )
    cg_tol_min: float = opt(1e-10, "the smallest relative residual CG is asked for (float64 products)", fraction)
    cg_stop_margin: float = opt(
        0.3,
        "nor below this × √(stop/cost), stop = max(fit_tol, cg_fit_tol): a step's cost falls by about the square "
        "of its relative residual, so a finer solve than reaching the stop needs buys nothing",
        fraction,
    )
    cg_max_iter: int = opt(1000, "CG products per LM step at most (a truncated solve still descends)", pos_int)
    cg_fit_tol: float = opt(
        1e-20,
        "LM with CG steps stops at this relative MSE (Θ then errs by ~1e-10 relative, as the L-BFGS peer's fits do): "
        "a step from here to the float64 floor (5e-31–1e-30) costs the most precise CG solve of the fit for a gain "
        "the validation (tol 1e-12) cannot see",
        nonneg,
    )
    cg_chunk_elements: int = opt(
        1 << 17, "floats a chunk of the matrix-free products holds in its largest intermediate (1 MB)", pos_int
    )
    cg_first_ratio: float = opt(
        8.0,
        "with CG steps the first subset has at least this × d²/(k(k−1)) examples: each token's attention "
        "constrains k − 1 directions of a head's d², and fewer examples leave CG ill-conditioned",
        positive,
    )

    accept_noise: bool = opt(
        True, "a fit at the noise floor (sculpt.noise) converges, status 'noise'; False: only tol converges", boolean
    )
    noise_level: float = opt(
        0.01, "the noise-floor F-test's level: how often a fit truly at the floor is called failed", fraction
    )
    noise_min_improvement: float = opt(
        0.1,
        "a last stage (×growth examples) lowering the validation error by more than this is still improving, not "
        "at the noise floor (noise alone gives 0.2–5 %)",
        fraction,
    )
    noise_max_level: float = opt(
        1e-2,
        "relative MSE above which a fit is failed, not noisy: noise up to 10 % of the labels' rms (local minima "
        "end at 0.06–0.53, as ``stuck``)",
        positive,
    )
    noise_max_examples: int = opt(
        20_000,
        "at the noise floor the polish refits on up to this many training examples (the least-squares fit: "
        "4,096 doubles the head error against L-BFGS on 20,000)",
        pos_int,
    )
    noise_max_bytes: int = opt(
        1 << 29, "memory that refit's forward quantities may take (caps its examples at large k, m, d)", pos_int
    )
    noise_max_iter: int = opt(
        2,
        "LM iterations of that refit: warm from the fit on fewer examples, the second leaves the head error within "
        "1e-8 of the converged fit's ((8,4,2), 18,000 examples; the first within 0.4 %, the converged fit takes 4)",
        pos_int,
    )

    def resolve(self, size: ProblemSize) -> PolishSettings:
        """first_examples: max(64, ⌈4 · 2md²/(kd)⌉), four examples per parameter-equivalent output entry; with
        matrix-free steps (m·d² > matrix_free_above) at least ⌈cg_first_ratio · d²/(k(k − 1))⌉."""
        d, k, m = size.d, size.k, size.m
        first = max(64, int(math.ceil(4 * 2 * m * d * d / (k * d))))
        if m * d * d > self.matrix_free_above and k >= 2:
            first = max(first, int(math.ceil(self.cg_first_ratio * d * d / (k * (k - 1)))))
        return self.merged(first_examples=_or(self.first_examples, first))


@dataclass(frozen=True)
class ExactSettings(_Group):
    """The exact m = 1 route, ``exact_single_head``."""

    rank_tol: float = opt(1e-9, "relative rank tolerance of the two linear systems", fraction)
    token_tol: float = opt(1e-8, "examples with rank(X) < k (to this tolerance) are dropped", fraction)
    weighting: str = opt(
        "inverse-variance",
        "log-ratio weights (Θ error 2e-10 vs 7e-5 unweighted at ‖Θ‖=5)",
        choice("inverse-variance", "none"),
    )
    attention_floor: float = opt(1e-12, "attention entries below this give no log-ratio equation", positive)
    max_examples: int | None = opt(
        None,
        "examples in the systems (auto: 10 × the exact budget ``exact_sample_size(d, k)``; the systems cost "
        "O(examples · k · d⁵) and noise-free data determine the layer from the budget alone)",
        optional(pos_int),
    )
    train_examples: int | None = opt(
        None,
        "training examples the route reads (auto: 20 × the exact budget: at N = 20,000 reading all takes 0.25 s "
        "against 0.1 s for L-BFGS); the polish uses the rest if validation is not yet at tol",
        optional(pos_int),
    )
    train_tol: float = opt(
        1e-12, "training relative MSE at which the route reports converged (learn decides on validation)", fraction
    )

    def resolve(self, size: ProblemSize) -> ExactSettings:
        """max_examples 10 and train_examples 20 × ``sculpt.exact.exact_sample_size(d, k)``; unset where the
        route does not apply (k < 2 or k >= d)."""
        if not 2 <= size.k < size.d:
            return self
        from .exact import exact_sample_size  # the budget lives with the derivation of the two systems

        budget = exact_sample_size(size.d, size.k)
        return self.merged(
            max_examples=_or(self.max_examples, 10 * budget), train_examples=_or(self.train_examples, 20 * budget)
        )


@dataclass(frozen=True)
class GradientSettings(_Group):
    """The gradient route and auto's fallback (``sculpt.baselines``: ``gradient_descent``, ``lbfgs_growing``)."""

    restarts: int = opt(1, "random initialisations", pos_int)
    max_iter: int | None = opt(None, "L-BFGS iterations per restart (auto: 5000)", optional(pos_int))
    tol: float = opt(1e-20, "training loss at which a restart stops", nonneg)
    time_limit: float | None = opt(None, "seconds for the whole call (None: no limit)", optional(positive))
    history: int = opt(50, "L-BFGS memory", pos_int)
    single_thread: bool = opt(True, "one BLAS thread during the fit (faster for these thin products)", boolean)
    growth: int = opt(
        2, "growing subsets (lbfgs_growing, auto's steps): each size this many times the last", at_least_two
    )
    growing_first: int = opt(1000, "lbfgs_growing's first subset (auto's steps start at auto.peer_examples)", pos_int)
    growing_restarts: int = opt(
        3, "lbfgs_growing's starts per subset size, the first warm (auto's fallback: auto.restarts)", pos_int
    )
    adam_max_iter: int = opt(3000, "Adam steps per restart (gradient_descent(method='adam'), torch_adam)", pos_int)
    adam_lr: float = opt(0.03, "Adam's learning rate, cosine-decayed to a thousandth of it", positive)
    adam_batch_size: int = opt(2000, "Adam's minibatch (full batch when N is at most this)", pos_int)

    def resolve(self, size: ProblemSize) -> GradientSettings:
        """max_iter: 5000."""
        return self.merged(max_iter=_or(self.max_iter, 5000))


@dataclass(frozen=True)
class VpLmSettings(_Group):
    """``method="vp-lm"``: the polish's variable-projection LM from random starts (``sculpt.vplm``)."""

    restarts: int = opt(5, "random starts at most (the run stops at the first that validates)", pos_int)
    init_scale: float | None = opt(None, "Θ entries of a start are N(0, init_scale²) (auto: 1/d)", optional(positive))
    max_examples: int = opt(4096, "largest subset a start fits (64 first, ×4 while not validating)", pos_int)

    def resolve(self, size: ProblemSize) -> VpLmSettings:
        """init_scale: 1/d."""
        return self.merged(init_scale=_or(self.init_scale, 1.0 / size.d))


@dataclass(frozen=True)
class CostSettings(_Group):
    """``sculpt.costs``: the cost model ``method="auto"`` orders its steps by, and its memory bound. The seconds
    per flop were fitted once on this machine class (one BLAS thread) by ``benchmarks/calibrate_costs.py``."""

    dense_flop_seconds: float = opt(
        4.4e-11, "seconds per flop of large float64 products and factorisations (GEMM, Cholesky, QR)", positive
    )
    lm_flop_seconds: float = opt(
        1.75e-11,
        "seconds per flop of an LM step's normal equations and factorisation (float32 far from the fit)",
        positive,
    )
    lm_iteration_seconds: float = opt(8.4e-4, "fixed seconds per LM iteration (chunk loops, trials)", nonneg)
    lbfgs_unit_seconds: float = opt(
        4.7e-10, "seconds per L-BFGS work unit (one example-iteration is m·k·d·(k + d) units)", positive
    )
    lbfgs_iteration_seconds: float = opt(3.4e-4, "fixed seconds per L-BFGS iteration (scipy, chunk loops)", nonneg)
    exact_flop_seconds: float = opt(
        1.3e-10,
        "seconds per flop of the exact route's streaming QR and what builds its rows (geometric mean of 6e-11 "
        "to 3.4e-10 over (8,4,1)–(32,8,1): tall QR blocks of d² + 1 columns run below the GEMM rate)",
        positive,
    )
    peer_finish_iterations: int = opt(
        20,
        "L-BFGS iterations of the capped try's run-on to auto.finish_margin·tol (12–22 at (32,8,2) where the "
        "try stops at its cap; priced on every try, so the model errs towards VP-LM where the try ends far "
        "below the margin)",
        nonneg_int,
    )
    sculpt_attempt_seconds: float = opt(
        0.09, "fixed seconds of one sculpting attempt beyond its modelled products (LPs, phase bookkeeping)", nonneg
    )
    vp_lm_iterations: int = opt(
        11,
        "LM iterations a VP-LM start that validates takes (median at (8,4,2), (8,4,3), (16,4,2): 7–12; torch's "
        "initialisation: 12–15)",
        pos_int,
    )
    sculpt_polish_iterations: int = opt(8, "LM iterations of the polish from phase 6's heads (5–8 at m = 2)", pos_int)
    cg_iterations: int = opt(
        15, "conjugate-gradient products per LM step of the matrix-free polish (polish.matrix_free_above)", pos_int
    )
    cg_flop_seconds: float = opt(1.0e-10, "seconds per flop of those products (batched small products)", positive)
    peer_success: float = opt(
        1.0,
        "chance that the capped L-BFGS try validates with m <= 2 heads (generic layers do; weak or near-identical "
        "heads do not)",
        fraction,
    )
    peer_success_many_heads: float = opt(
        0.2,
        "the same with m >= 3 heads, where the capped try fails more often than it validates (VP-LM first, 5 "
        "seeds: torch (16,8,4) 1.12 against 2.22 s with the try first; (16,4,3) 0.55 against 0.65 s)",
        fraction,
    )
    memory_fraction: float = opt(0.25, "max_bytes's default share of the machine's physical memory", fraction)
    max_bytes: float | None = opt(
        None,
        "auto never starts a step predicted to need more working memory than this (auto: memory_fraction × "
        "physical memory)",
        optional(positive),
    )
    span_row_fit: tuple[float, ...] = opt(
        (0.212, 0.168, 0.267, 0.021, 0.225),
        "(c₀, c_v, c_b, c_k, c_d): phase 4's span rows per example ≈ exp(c₀ − c_v·v − c_b·b − c_k·k² + c_d·ln d), "
        "v and b the seen and blind head disagreements (least squares on 30 planted shapes, true Σ W; within "
        "a factor 1.6 rms)",
        floats(5),
    )

    def peer_odds(self, m: int) -> float:
        """The chance that the capped L-BFGS try validates with m heads."""
        return self.peer_success if m <= 2 else self.peer_success_many_heads

    def resolve(self, size: ProblemSize) -> CostSettings:
        """max_bytes: memory_fraction × ``sculpt.costs.physical_memory()`` (unbounded where it is unknown)."""
        from .costs import physical_memory  # the model reads settings; settings read the machine through it

        phys = physical_memory()
        return self.merged(max_bytes=_or(self.max_bytes, self.memory_fraction * phys if phys > 0 else math.inf))


#: auto's fallback work budget (``sculpt.baselines.work_unit`` units, see AutoSettings.fallback_work):
#: the growing peer's successes on the hard rows (weak head, near-identical heads at (8,4,2), 10 seeds) use
#: at most 2.3e10; one core does 2.8–4.8e8 units a second at (8,4,2) and 8e8 at (16,8,4), where the unbounded
#: fallback runs for more than 25 minutes on torch's own initialisation and this budget stops it after 37 s
FALLBACK_WORK = 3e10


@dataclass(frozen=True)
class AutoSettings(_Group):
    """``method="auto"``: exact when it applies; else its steps (a capped L-BFGS try, VP-LM from random starts,
    sculpt, L-BFGS on growing subsets) cheapest first by the cost model (``Settings.cost``, ``sculpt.costs``),
    never a step predicted to need more memory than ``cost.max_bytes``."""

    peer_first: bool | None = opt(
        None,
        "try L-BFGS on a small subset before VP-LM (False: no L-BFGS try; auto: when the try's predicted cost is "
        "below cost.peer_odds(m) × VP-LM's: on the benchmark grid VP-LM first for m·d² <= 256, and up to 1,024 "
        "with m >= 3). VP-LM first, 5 seeds: (8,4,2)–(8,4,4) 0.19–0.30× the growing peer against 0.60–0.77× "
        "with the L-BFGS try first; at (16,4,2) 0.72× / 1.23× against 0.75–0.86× (a random start fitting 64 "
        "examples that do not validate costs a 256-example stage); at d = 32 VP-LM with dense normal equations "
        "is 5× slower than L-BFGS",
        optional(boolean),
    )
    peer_examples: int = opt(
        500,
        "examples of that first try (with 50·m iterations every generic layer tried "
        "validates <= 1e-17 from 500, at half the cost of 1,000)",
        pos_int,
    )
    peer_iterations: int | None = opt(
        None,
        "iteration cap of that first try (auto: 50·m: after 40·m iterations generic layers "
        "validate <= 1e-14, weak or near-identical heads stay >= 7e-6)",
        optional(pos_int),
    )
    peer_give_up: int | None = opt(
        None,
        "the first try stops after this many iterations if its training loss is still above "
        "auto.peer_give_up_loss (auto: 30·m; at 30·m generic layers are at <= 4e-9, weak or "
        "near-identical heads at >= 2e-5, 40 seeds)",
        optional(pos_int),
    )
    peer_give_up_loss: float = opt(
        1e-5,
        "training relative MSE the first try must be below by then (hard layers are at >= 2e-5; generic layers "
        "at d = 32 reach 1.8e-6, which a 1e-6 level would give up at a cost of 60 s against 1 s)",
        positive,
    )
    vp_lm_starts: int = opt(
        3,
        "then variable-projection LM from this many random starts (sculpt.vplm; 0: none): 85/85 planted runs "
        "and torch's own initialisation validate, most from the first start",
        nonneg_int,
    )
    finish_margin: float = opt(
        1e-3,
        "a first try validating above finish_margin·tol stopped at its cap: it runs on, on its examples, to "
        "training relative MSE finish_margin·tol (at (32,8,2) such tries have W errors up to 1.2e-6; running on "
        "costs 0.9 s)",
        fraction,
    )
    fallback: bool = opt(True, "when nothing validated: L-BFGS on growing subsets with restarts", boolean)
    restarts: int = opt(3, "fallback starts per subset size (the first warm, the rest random)", pos_int)
    warm_start: bool = opt(True, "the fallback's first start is the best model so far on validation", boolean)
    fallback_work: float | None = opt(
        FALLBACK_WORK,
        "the fallback stops once Σ examples × iterations × m·k·d·(k+d) over its runs reaches this "
        "(deterministic, unlike gradient.time_limit; None: no bound)",
        optional(positive),
    )

    def resolve(self, size: ProblemSize) -> AutoSettings:
        """peer_iterations 50·m; peer_give_up 30·m. peer_first needs the cost model and every other group, so
        ``Settings.resolve`` sets it last (``sculpt.costs.peer_try_first``)."""
        return self.merged(
            peer_iterations=_or(self.peer_iterations, 50 * size.m),
            peer_give_up=_or(self.peer_give_up, 30 * size.m),
        )


@dataclass(frozen=True)
class Settings(_Group):
    """Everything ``learn`` can be told, with defaults. ``Settings().merged(refine={"rounds": 2})``."""

    tol: float = opt(1e-12, "validation relative MSE counted as converged", nonneg)
    validation_size: int | None = opt(None, "held-out examples (auto: min(2000, N/10))", optional(pos_int))
    inputs: str | None = opt(
        None,
        "'boolean' requires ±1 entries; None/'gaussian'/'real' accept any",
        optional(choice("boolean", "gaussian", "real")),
    )
    sculpt_examples: int | None = opt(
        None,
        "first subset phases 1–3 use (auto: max(64, ⌈2d²/(k(k−1))⌉) for m = 1, max(1500, 6d²) for m = 2, "
        "max(1500, 10d²) otherwise; one head at (8,4,1) from 64 in 0.04 s against 0.09 s from 320, (32,8,1) 1.6 s "
        "against 16 s from 5,120; generic (8,4,2) layers from 1,500; (16,4,2) from 1,536 in 0.47 s against 0.52 s "
        "from 2,560)",
        optional(pos_int),
    )
    sculpt_growth: int = opt(
        2,
        "an attempt that does not validate reruns phases 1–6 on this many times more examples (1: one attempt)",
        pos_int,
    )
    max_sculpt_examples: int | None = opt(
        None,
        "largest subset for phases 1–3 (auto: max(20,000, sculpt_examples); cost is linear in it)",
        optional(pos_int),
    )
    sculpt_row_budget: float = opt(
        1.0,
        "method='sculpt' refuses (d, k, m) at once where max_sculpt_examples examples are predicted "
        "(cost.span_row_fit) to give fewer than this × (d² − (m − 1)) of the span rows phase 4 needs, or where "
        "k − 1 > d leaves the attention pattern undetermined (docs/method.md#agreement-blind; 0: never refuse)",
        nonneg,
    )
    search_examples: int = opt(1000, "training examples phase 6 compares candidates on", pos_int)
    misfit_residual: float = opt(
        0.5,
        "validation relative MSE above which the result names likely causes (axis order, m, labels): the model "
        "explains less than half the labels' energy (sculpt.diagnose)",
        positive,
    )
    idle_head: float = opt(
        1e-6,
        "‖W_i‖_F / max_j ‖W_j‖_F below which a fitted head adds nothing: a UserWarning names the supported m̂ "
        "(exact fits leave such heads at 1e-15; sculpt.diagnose)",
        fraction,
    )
    idle_head_rise: float = opt(
        0.05,
        "a head whose removal raises the validation relative MSE by at most this fraction of it (plus tol) adds "
        "nothing the labels can tell: under noise an unneeded head fits noise, 0.3 % at 1 % noise (sculpt.diagnose)",
        nonneg,
    )
    sum_w: SumWSettings = group(SumWSettings, "phase 1")
    sculpt: BodySettings = group(BodySettings, "phase 2 (half-space body)")
    refine: RefineSettings = group(RefineSettings, "phase 3")
    span: SpanSettings = group(SpanSettings, "phase 4")
    heads: HeadsSettings = group(HeadsSettings, "phase 5")
    argmax: ArgmaxSettings = group(ArgmaxSettings, "the argmax route for peaked heads (phases 2–5)")
    linear: LinearSettings = group(LinearSettings, "the linear-attention route where the body route is refused")
    polish: PolishSettings = group(PolishSettings, "the polish")
    exact: ExactSettings = group(ExactSettings, "the exact m = 1 route")
    gradient: GradientSettings = group(GradientSettings, "the gradient route and auto's fallback")
    auto: AutoSettings = group(AutoSettings, "method='auto'")
    vp_lm: VpLmSettings = group(VpLmSettings, "method='vp-lm' (VP-LM from random starts)")
    cost: CostSettings = group(CostSettings, "auto's cost model and memory bound (sculpt.costs)")

    def resolve(self, d: int, k: int, m: int, N: int) -> Settings:
        """Fill every "auto" field that depends on the problem size: each group resolves its own fields
        (``<Group>.resolve``); the learner's own are sculpt_examples (``sculpt_examples_default``) and
        max_sculpt_examples (max(20,000, sculpt_examples when given)); ``auto.peer_first`` is set last, by the
        cost model (``sculpt.costs.peer_try_first``), which reads the other groups' resolved bounds. Resolving
        twice changes nothing.

        Three "auto" fields stay None here and are chosen where they are used: phase 5's search radius
        (``span.radius``, ``heads.radius``: from the flat phase 4 fits), the m-estimate's range (``span.max_m``:
        m + 3, in ``extract_span``) and ``validation_size`` (by ``learn``, with the split). A None that is itself
        the value (no ``gradient.time_limit``, any ``inputs``) stays None.

        Parameters
        ----------
        d, k, m, N : int
            Token dimension, tokens per example, heads, examples.

        Returns
        -------
        Settings
            A copy with those fields set; user values are never replaced.
        """
        size = ProblemSize(int(d), int(k), int(m), int(N))
        box = self.sculpt.box if self.sculpt.box is not None else 4.0
        out = self.merged(
            sculpt_examples=_or(self.sculpt_examples, sculpt_examples_default(size)),
            max_sculpt_examples=_or(self.max_sculpt_examples, max(20_000, self.sculpt_examples or 0)),
            sum_w=self.sum_w.resolve(size),
            sculpt=self.sculpt.resolve(size, "halfspaces", box),
            refine=self.refine.resolve(size, box),
            span=self.span.resolve(size),
            heads=self.heads.resolve(size),
            argmax=self.argmax.resolve(size),
            linear=self.linear.resolve(size),
            polish=self.polish.resolve(size),
            exact=self.exact.resolve(size),
            gradient=self.gradient.resolve(size),
            vp_lm=self.vp_lm.resolve(size),
            auto=self.auto.resolve(size),
            cost=self.cost.resolve(size),
        )
        if out.auto.peer_first is not None:
            return out
        from .costs import peer_try_first  # the cost model reads the other groups' resolved bounds

        return out.merged(auto={"peer_first": peer_try_first(out, size)})


def sculpt_examples_default(size: ProblemSize) -> int:
    """Phases 1–3's first subset: ``one_head_examples`` for one head (K* needs d² equality rows, at most
    k(k−1) per example); max(1500, 6d²) for two heads; max(1500, 10d²) for more (m >= 3 needs 10d² equality
    rows in K*)."""
    d, k, m = size.d, size.k, size.m
    return one_head_examples(d, k) if m == 1 else max(1500, (6 if m == 2 else 10) * d * d)


def one_head_examples(d: int, k: int) -> int:
    """Phases 1–3's first subset for one head: max(64, ⌈2d²/(k(k−1))⌉). K* needs d² equality rows and an
    example gives at most k(k−1) (about half survive its filters: (24,4,1) has 474 of 768 from 64 examples).
    Measured (4 seeds each; the first attempt validates unless said): (8,4,1) 42 ms against 89 ms from 320;
    (16,4,1) 60 against 337 ms; (16,8,1) 149 against 882 ms; (24,4,1) 96: 0.4 against 2.1 s; (32,8,1) 64:
    1.2–1.8 s against 15–17 s; (8,6,1) 56 against 112 ms after two doublings; the subset doubles when an
    attempt does not validate. (k = 1 gives no equality rows at all; sculpting refuses it, and the value, 2d², is
    only a size.)"""
    return max(64, -(-2 * d * d // max(1, k * (k - 1))))


#: examples per d² the sculpting route needs for m = 2 and m >= 3 heads (``min_examples("sculpt")``): below
#: them phase 4 has too few equality rows (d = 8, 4 seeds: m = 2 4/4 from 800 = 12.5d², m = 3 4/4 from 1,500)
SCULPT_NEED_PER_D2 = {2: 13, 3: 24}


# --- the old dict options --------------------------------------------------------------------------------------

DEPRECATED_OPTIONS = {
    "sum_w_options": "sum_w",
    "sculpt_options": "sculpt",
    "refine_options": "refine",
    "span_options": "span",
    "heads_options": "heads",
    "polish_options": "polish",
    "gradient_options": "gradient",
}
_REFINE_RENAMES = {"sculpt_opts": "resculpt", "slab_opts": "slabs"}


def settings_from_options(settings: Settings | Mapping[str, Any] | None, options: Mapping[str, Any]) -> Settings:
    """``settings`` (a Settings, a nested dict or None) with keyword ``options`` merged in deeply.

    The old per-phase dicts (``refine_options={"slab_opts": {...}}`` and the like) are mapped onto their
    settings group with a DeprecationWarning; unknown names at any depth are a TypeError."""
    if settings is None:
        base = Settings()
    elif isinstance(settings, Settings):
        base = settings
    elif isinstance(settings, Mapping):
        base = Settings().merged(settings)
    else:
        raise TypeError(f"settings must be a sculpt.Settings, a dict or None, got {type(settings).__name__}")
    new: dict[str, Any] = {}
    for key, value in options.items():
        if key in DEPRECATED_OPTIONS:
            name = DEPRECATED_OPTIONS[key]
            warnings.warn(
                f"learn({key}=...) is deprecated; pass {name}={{...}} or settings=Settings(...)",
                DeprecationWarning,
                stacklevel=3,
            )
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise TypeError(f"{key} must be a dict, got {type(value).__name__}")
            value = dict(value)
            if name == "refine":
                value = {_REFINE_RENAMES.get(k, k): v for k, v in value.items()}
            key = name
        if key in new and isinstance(new[key], Mapping) and isinstance(value, Mapping):
            value = {**new[key], **value}
        new[key] = value
    return base.merged(new)
