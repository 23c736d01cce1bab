"""Inputs, planted instances and non-degeneracy diagnostics.

- ``sample_inputs``: X uniform on {±1}^{k×d} (or standard Gaussian), n sequences.
- ``plant``: the planted-instance generator of docs/method.md#recon-plant: Θ_i = Θ_0 + Δ_i with ‖Θ_0‖_F = s0,
  ‖Δ_i‖_F = s1, s0 : s1 = 2 : 1.5 and √(s0² + s1²) = scale; W_i ~ N(0, 1/d); draws are rejected until
  cond(Σ W_i) ≤ 10, min_{i≠j} ‖Θ_i − Θ_j‖_F ≥ 0.5 s1 and ``nondegeneracy`` finds no structural problem.
- ``nondegeneracy``: the figures behind assumptions A1–A6 of docs/method.md#recon-assumptions and a pass/fail verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ._checks import SeedLike, as_generator, check_positive, check_positive_int
from .model import MultiHeadAttention, attention_patterns

__all__ = ["sample_inputs", "plant", "nondegeneracy", "NondegeneracyReport", "Thresholds", "DEFAULT_THRESHOLDS"]

_DISTRIBUTIONS = ("boolean", "gaussian")
_MAX_TRIES = 1000
_W_BATCH = 256
_MAX_W_BATCHES = 1024


def sample_inputs(n: int, k: int, d: int, *, rng: SeedLike = None, distribution: str = "boolean") -> np.ndarray:
    """n i.i.d. sequences X ∈ R^{k×d} with independent entries: Rademacher ±1 ("boolean") or N(0, 1) ("gaussian").

    Parameters
    ----------
    n, k, d
        Sequences, tokens per sequence, token dimension (integers >= 1).
    rng
        Seed or Generator.
    distribution
        "boolean" or "gaussian".

    Returns
    -------
    numpy.ndarray
        float64 of shape (n, k, d).
    """
    n, k, d = (check_positive_int(v, name) for v, name in ((n, "n"), (k, "k"), (d, "d")))
    gen = as_generator(rng)
    if distribution == "boolean":
        bits = gen.integers(0, 2, size=(n, k, d), dtype=np.int8)
        return (2.0 * bits - 1.0).astype(np.float64)
    if distribution == "gaussian":
        return gen.standard_normal((n, k, d))
    raise ValueError(f"distribution must be one of {_DISTRIBUTIONS}, got {distribution!r}")


# ---------------------------------------------------------------------------------------------- report
@dataclass(frozen=True)
class Thresholds:
    """Limits used by ``nondegeneracy`` (norms are relative to the mean head norm ‖Θ̄_F‖ = mean_i ‖Θ_i‖_F).

    - ``max_cond_sum_w``: cond(Σ W_i) ≤ 10 (A2; plant rejects above 10).
    - ``min_head_separation``: min_{i≠j} ‖Θ_i − Θ_j‖_F ≥ 0.15 mean‖Θ_i‖ (A6; plant's default heads are
      ≈ 0.85 mean‖Θ_i‖ apart and rejected below 0.3 scale).
    - ``min_affine_offset``: ‖min-norm point of aff{Θ_i}‖_F ≥ 0.2 mean‖Θ_i‖ (A3; plant's is ≈ 0.8).
    - ``min_centred_sv``: (m−1)-th singular value of the centred heads ≥ 0.05 mean‖Θ_i‖ (A4).
    - ``min_w_ratio``: min_i ‖W_i‖_F / max_i ‖W_i‖_F ≥ 0.1 (A5: no head with negligible output).
    - ``min_entropy`` / ``max_entropy``: mean row entropy H / log k within [0.05, 0.995] (A1: attention
      neither one-hot nor uniform; plant's default scale 2.5 gives ≈ 0.49), and ``max_top_weight``: mean
      largest weight ≤ 0.98 (≈ 0.72 at scale 2.5; exact ties between repeated ±1 tokens keep it below 1
      even for saturated heads).
    """

    max_cond_sum_w: float = 10.0
    min_head_separation: float = 0.15
    min_affine_offset: float = 0.2
    min_centred_sv: float = 0.05
    min_w_ratio: float = 0.1
    min_entropy: float = 0.05
    max_entropy: float = 0.995
    max_top_weight: float = 0.98


DEFAULT_THRESHOLDS = Thresholds()

# Checks that depend on the random draw (plant rejects on these) vs on the chosen scale (reported only).
STRUCTURAL_CHECKS = ("sum_w", "head_separation", "affine_offset", "centred_sv", "w_ratio")
ATTENTION_CHECKS = ("entropy", "top_weight")


@dataclass(frozen=True)
class NondegeneracyReport:
    """Figures behind the non-degeneracy assumptions (docs/method.md#recon-assumptions) and the verdict.

    ``sigma_min_sum_w`` and ``cond_sum_w``: of Σ_i W_i. ``min_head_distance``: min_{i≠j} ‖Θ_i − Θ_j‖_F (inf
    for m = 1). ``affine_offset``: ‖Θ̄‖_F for Θ̄ the min-norm point of aff{Θ_i}. ``centred_sv``: the
    (m−1)-th singular value of the m×d² matrix of vec(Θ_i − mean_j Θ_j) (its smallest possibly non-zero one;
    nan for m = 1). ``mean_theta_norm``: mean_i ‖Θ_i‖_F; ``w_ratio``: min_i ‖W_i‖_F / max_i ‖W_i‖_F.
    ``entropy``: mean over rows, heads and inputs of H(p_a·)/log k; ``top_weight``: mean of max_b p_ab (both
    nan when k is None or 1). ``checks`` maps each check name to pass/fail; ``problems`` explains failures.
    """

    m: int
    d: int
    k: int | None
    sigma_min_sum_w: float
    cond_sum_w: float
    min_head_distance: float
    affine_offset: float
    centred_sv: float
    mean_theta_norm: float
    w_ratio: float
    entropy: float
    top_weight: float
    ok: bool
    problems: list[str] = field(default_factory=list)
    checks: dict[str, bool] = field(default_factory=dict)


def _min_norm_point(thetas: np.ndarray) -> np.ndarray:
    """Min-norm point of aff{Θ_i}: μ − proj_{span(Θ_i − μ)} μ (least squares on the centred heads)."""
    m = thetas.shape[0]
    V = thetas.reshape(m, -1)
    mu = V.mean(axis=0)
    C = V - mu
    if m == 1 or not np.any(C):
        return mu
    coef, *_ = np.linalg.lstsq(C.T, mu, rcond=None)
    return mu - C.T @ coef


def _structure(model: MultiHeadAttention) -> dict[str, float]:
    """The figures of A2–A6: σ_min and cond of Σ W_i, head distances, the affine offset, the centred heads'
    (m−1)-th singular value, the mean head norm and the W norm ratio."""
    m = model.m
    thetas, ws = model.thetas, model.ws
    sv = np.linalg.svd(ws.sum(axis=0), compute_uv=False)
    norms = np.linalg.norm(thetas.reshape(m, -1), axis=1)
    if m > 1:
        diff = np.linalg.norm((thetas[:, None] - thetas[None]).reshape(m, m, -1), axis=2)
        min_dist = float(np.min(diff[~np.eye(m, dtype=bool)]))
        centred = thetas.reshape(m, -1) - thetas.reshape(m, -1).mean(axis=0)
        csv = np.linalg.svd(centred, compute_uv=False)
        centred_sv = float(csv[m - 2]) if len(csv) >= m - 1 else 0.0
    else:
        min_dist, centred_sv = float("inf"), float("nan")
    wn = np.linalg.norm(ws.reshape(m, -1), axis=1)
    return {
        "sigma_min_sum_w": float(sv[-1]),
        "cond_sum_w": float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf"),
        "min_head_distance": min_dist,
        "affine_offset": float(np.linalg.norm(_min_norm_point(thetas))),
        "centred_sv": centred_sv,
        "mean_theta_norm": float(norms.mean()),
        "w_ratio": float(wn.min() / wn.max()) if wn.max() > 0 else 0.0,
    }


def _attention_statistics(thetas: np.ndarray, k: int | None, n_inputs: int, seed: SeedLike) -> tuple[float, float]:
    """(mean row entropy H/log k, mean largest weight) over ``n_inputs`` uniform ±1 inputs of k tokens (nan for
    k None or 1)."""
    if k is None or k < 2:
        return float("nan"), float("nan")
    X = sample_inputs(n_inputs, k, thetas.shape[1], rng=seed)
    P = attention_patterns(thetas, X)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(P > 0, P * np.log(P), 0.0)
    return float(-plogp.sum(axis=-1).mean() / math.log(k)), float(P.max(axis=-1).mean())


def _verdicts(f: dict[str, float], m: int, t: Thresholds) -> tuple[dict[str, bool], list[str]]:
    """Each check's pass/fail and a message for every failure."""
    checks: dict[str, bool] = {}
    problems: list[str] = []
    mean_norm = f["mean_theta_norm"]
    scale = max(mean_norm, np.finfo(float).tiny)

    def check(name: str, passed: bool, message: str) -> None:
        checks[name] = bool(passed)
        if not passed:
            problems.append(f"{name}: {message}")

    cond = f["cond_sum_w"]
    check(
        "sum_w",
        cond <= t.max_cond_sum_w,
        f"cond(Σ W_i) = {cond:.3g} > {t.max_cond_sum_w:g} (σ_min = {f['sigma_min_sum_w']:.3g})",
    )
    if m > 1:
        check(
            "head_separation",
            f["min_head_distance"] >= t.min_head_separation * scale,
            f"min ‖Θ_i − Θ_j‖_F = {f['min_head_distance']:.3g} < {t.min_head_separation:g} × mean‖Θ_i‖ = "
            f"{mean_norm:.3g}",
        )
        check(
            "centred_sv",
            f["centred_sv"] >= t.min_centred_sv * scale,
            f"centred heads' σ_(m−1) = {f['centred_sv']:.3g} < {t.min_centred_sv:g} × mean‖Θ_i‖ ({mean_norm:.3g}):"
            " heads nearly affinely dependent",
        )
        check(
            "w_ratio",
            f["w_ratio"] >= t.min_w_ratio,
            f"min ‖W_i‖ / max ‖W_i‖ = {f['w_ratio']:.3g} < {t.min_w_ratio:g}: a head is nearly silent",
        )
    check(
        "affine_offset",
        f["affine_offset"] >= t.min_affine_offset * scale,
        f"min-norm point of aff{{Θ_i}} has norm {f['affine_offset']:.3g} < {t.min_affine_offset:g} × mean‖Θ_i‖ "
        f"({mean_norm:.3g})",
    )
    entropy, top = f["entropy"], f["top_weight"]
    if not math.isnan(entropy):
        check(
            "entropy",
            t.min_entropy <= entropy <= t.max_entropy,
            f"attention entropy H/log k = {entropy:.3g} outside [{t.min_entropy:g}, {t.max_entropy:g}]"
            " (attention nearly uniform or one-hot)",
        )
        check(
            "top_weight",
            top <= t.max_top_weight,
            f"mean top attention weight {top:.4g} > {t.max_top_weight:g} (attention nearly one-hot)",
        )
    return checks, problems


def nondegeneracy(
    model: MultiHeadAttention,
    *,
    k: int | None = 4,
    n_inputs: int = 2000,
    seed: SeedLike = 0,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> NondegeneracyReport:
    """Check a layer against the non-degeneracy conditions A1–A6 (docs/method.md#recon-assumptions).

    Parameters
    ----------
    model
        The layer (TypeError otherwise).
    k
        Tokens of the inputs the attention statistics (entropy, top weight) are averaged over (the layer
        itself does not fix k); None or 1: those statistics are skipped (nan, not checked).
    n_inputs
        Uniform ±1 inputs drawn for those statistics.
    seed
        Seed or Generator of the inputs.
    thresholds
        The limits of each check.

    Returns
    -------
    NondegeneracyReport
        The figures, each check's verdict and the problems found.
    """
    if not isinstance(model, MultiHeadAttention):
        raise TypeError(f"model must be a MultiHeadAttention, got {type(model).__name__}")
    if k is not None:
        k = check_positive_int(k, "k")
    n_inputs = check_positive_int(n_inputs, "n_inputs")
    figures = _structure(model)
    figures["entropy"], figures["top_weight"] = _attention_statistics(model.thetas, k, n_inputs, seed)
    checks, problems = _verdicts(figures, model.m, thresholds)
    return NondegeneracyReport(m=model.m, d=model.d, k=k, **figures, ok=not problems, problems=problems, checks=checks)


# ----------------------------------------------------------------------------------------------- plant
def _rescaled(gen: np.random.Generator, d: int, norm: float) -> np.ndarray:
    g = gen.standard_normal((d, d))
    return g * (norm / np.linalg.norm(g))


def _draw_ws(
    gen: np.random.Generator, m: int, d: int, weak_head: float | None, max_cond: float, min_w_ratio: float | None
) -> np.ndarray:
    """W_i ~ N(0, 1/d) (W_m scaled by ``weak_head``), redrawn until cond(Σ W_i) ≤ max_cond and
    min‖W_i‖/max‖W_i‖ ≥ min_w_ratio; candidates are drawn and tested in vectorised batches (the
    acceptance rate of cond ≤ 10 is ~11 % at d = 8 and ~0.1 % at d = 16)."""
    for _ in range(_MAX_W_BATCHES):
        W = gen.standard_normal((_W_BATCH, m, d, d)) / math.sqrt(d)
        if weak_head is not None:
            W[:, -1] *= weak_head
        sv = np.linalg.svd(W.sum(axis=1), compute_uv=False)
        ok = sv[:, 0] <= max_cond * sv[:, -1]
        if min_w_ratio is not None and m > 1:
            wn = np.linalg.norm(W.reshape(_W_BATCH, m, -1), axis=2)
            ok &= wn.min(axis=1) >= min_w_ratio * wn.max(axis=1)
        hits = np.flatnonzero(ok)
        if hits.size:
            return W[hits[0]]
    raise ValueError(
        f"no W_1..W_{m} with cond(Σ W_i) <= {max_cond:g} in {_MAX_W_BATCHES * _W_BATCH} draws at "
        f"d={d} (such draws are very rare for d >= 24): pass a larger max_cond"
    )


def _draw_thetas(
    gen: np.random.Generator,
    d: int,
    m: int,
    scale: float,
    s0: float,
    s1: float,
    thresholds: Thresholds,
    waived: set[str],
) -> np.ndarray:
    """Θ_i = Θ_0 + Δ_i (‖Θ_0‖ = s0, ‖Δ_i‖ = s1; m = 1: ‖Θ‖ = scale), redrawn until the heads are ≥ 0.5 s1
    apart and the Θ-only checks of ``nondegeneracy`` (separation, affine offset, centred σ) pass."""
    for _ in range(_MAX_TRIES):
        if m == 1:
            return _rescaled(gen, d, scale)[None]
        theta0 = _rescaled(gen, d, s0)
        thetas = np.stack([theta0 + _rescaled(gen, d, s1) for _ in range(m)])
        dist = np.linalg.norm((thetas[:, None] - thetas[None]).reshape(m, m, -1), axis=2)
        if np.min(dist[~np.eye(m, dtype=bool)]) < 0.5 * s1:
            continue
        rep = nondegeneracy(MultiHeadAttention(thetas, np.ones((m, d, d))), k=None, thresholds=thresholds)
        if all(rep.checks[c] for c in ("head_separation", "centred_sv", "affine_offset") if c not in waived):
            return thetas
    raise ValueError(
        f"no {m} distinct, affinely independent heads found at d={d} in {_MAX_TRIES} draws (d too small for m heads?)"
    )


def plant(
    d: int,
    k: int,
    m: int,
    *,
    scale: float = 2.5,
    seed: SeedLike = None,
    weak_head: float | None = None,
    separation: float | None = None,
    max_cond: float = 10.0,
) -> MultiHeadAttention:
    """A planted layer (docs/method.md#recon-plant): Θ_i = Θ_0 + Δ_i, ‖Θ_0‖_F = s0, ‖Δ_i‖_F = s1, s0 : s1 = 2 : 1.5,
    √(s0² + s1²) = ``scale``; W_i ~ N(0, 1/d) entrywise.

    For m = 1, ‖Θ‖_F = scale exactly; for m >= 2, Θ_0 and Δ_i are not orthogonal, so each ‖Θ_i‖_F is within
    0.85–1.12 × scale over 30 seeds at d = 8 (0.59–1.34 at (d, m) = (3, 3)). Draws are rejected until
    cond(Σ W_i) <= ``max_cond``, min_{i≠j} ‖Θ_i − Θ_j‖_F >= 0.5 s1 and ``nondegeneracy`` finds no structural
    problem (Θ and W are redrawn independently). The instance does not depend on k, which is only validated;
    attention statistics depend on the scale and are reported by ``nondegeneracy(model, k=k)``, not enforced.

    Parameters
    ----------
    d, k, m
        Token dimension, tokens, heads.
    scale
        The heads' norm scale.
    seed
        Seed or Generator.
    weak_head
        r: W_m is multiplied by r (e.g. 0.01), a hard regime; the "w_ratio" check is waived.
    separation
        ε < √2: s1 = ε·scale/√2, so ‖Θ_i − Θ_j‖_F ≈ ε ‖Θ_i‖_F, and s0 = √(scale² − s1²), a hard regime; the
        "head_separation" and "centred_sv" checks are waived (the 0.5 s1 rule still applies).
    max_cond
        Largest cond(Σ W_i) accepted (>= 1).

    Returns
    -------
    MultiHeadAttention
        The layer. ValueError on bad arguments, or when no acceptable draw exists in the try budget (d too small
        for m distinct heads; cond <= 10 is very rare for d >= 24).
    """
    d, k, m = (check_positive_int(v, name) for v, name in ((d, "d"), (k, "k"), (m, "m")))
    scale = check_positive(scale, "scale")
    max_cond = check_positive(max_cond, "max_cond")
    if max_cond < 1:
        raise ValueError(f"max_cond must be >= 1 (a condition number), got {max_cond}")
    thresholds = Thresholds(max_cond_sum_w=max(max_cond, DEFAULT_THRESHOLDS.max_cond_sum_w))
    waived: set[str] = set()
    if weak_head is not None:
        weak_head = check_positive(weak_head, "weak_head")
        if m < 2:
            raise ValueError("weak_head needs m >= 2 heads")
        waived.add("w_ratio")
    if separation is not None:
        separation = check_positive(separation, "separation")
        if m < 2:
            raise ValueError("separation needs m >= 2 heads")
        if separation >= math.sqrt(2):
            raise ValueError(f"separation must be < √2 (heads of norm ≈ scale), got {separation}")
        s1 = separation * scale / math.sqrt(2)
        s0 = math.sqrt(scale * scale - s1 * s1)
        waived |= {"head_separation", "centred_sv"}
    else:
        s0, s1 = scale * 2.0 / 2.5, scale * 1.5 / 2.5
    gen = as_generator(seed, "seed")
    thetas = _draw_thetas(gen, d, m, scale, s0, s1, thresholds, waived)
    ws = _draw_ws(gen, m, d, weak_head, max_cond, None if "w_ratio" in waived else thresholds.min_w_ratio)
    model = MultiHeadAttention(thetas, ws)
    report = nondegeneracy(model, k=None, thresholds=thresholds)
    failed = [p for p in report.problems if p.split(":")[0] not in waived]
    if failed:  # cannot happen: every structural check was enforced above
        raise AssertionError(f"plant produced a degenerate instance: {failed}")
    return model
