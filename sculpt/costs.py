"""The cost model ``method="auto"`` orders its steps by: predicted floating-point operations, seconds and peak
working memory of each step from the sizes (d, k, m, N) and the settings that bound the step.

Every formula counts the dominant terms of the code it models; a step's seconds are its flops times the
seconds per flop of the kind of kernel that runs them, plus a fixed cost per iteration. Those constants
(``CostSettings``) were fitted once on this machine class by ``benchmarks/calibrate_costs.py``; nothing here
measures anything at run time, so auto's decisions depend only on (d, k, m, N) and the settings.

Notation: p = m·d² (the Θ parameters VP-LM fits), n the examples a step reads, b = 8 bytes per float64.

- Forward pass (``sculpt.toolkit.forward_pass``): per example and head the logits X Θ_i Xᵀ (k·d² + k²·d
  multiply-adds) and the output A_i X W_i (k²·d + k·d²): 2·n·m·k·d·(k + d) flops.
- L-BFGS (``sculpt.baselines``): one iteration is about one loss-and-gradient evaluation, the forward pass and
  a backward pass of twice its cost: n·``work_unit``·6 flops (``work_unit`` = m·k·d·(k + d), the unit of
  ``auto.fallback_work``); seconds n·iterations·work_unit·``lbfgs_unit_seconds`` + iterations ·
  ``lbfgs_iteration_seconds``. Memory: the L-BFGS history (2·history vectors of 2p) and one chunk of the
  forward pass.
- VP-LM and the polish (``sculpt.phases.polish``), dense normal equations (m·d² <= ``polish.matrix_free_above``):
  a full step accumulates JᵀJ = Σ_a (x_a x_aᵀ) ⊗ H_a and the projection term, two products of 2·n·k·p² flops
  each, subtracts Tcᵀ Tc (2p³) and factorises (p³/3): 4·n·k·p² + (7/3)·p³ flops, plus the state (attention,
  QR of the n·k × m·d features: 4·n·k·(m·d)²) and the G blocks (2·m·n·k²·d² + 2·n·k·d·(m·d)²). Peak memory:
  five p × p arrays alive while JᵀJ is assembled (40·p² bytes in float64), one chunk's G blocks and H_a
  (8·c·k·m·d²·(2 + m)) and the state. Above the threshold each step is solved matrix-free by conjugate
  gradients (``sculpt.phases.polish_cg``): the diagonal of JᵀJ and ``cost.cg_iterations`` products, each about
  three forward passes (``cost.cg_flop_seconds``); memory linear in p.
- Sculpt (``sculpt.routes.sculpting``): one attempt reads ``sculpt_examples`` for phases 1–3 (the simplex fit of
  every output row, about the forward pass's work), fits K*'s equality rows (about ``min_equalities`` rows × d²
  unknowns) and phase 4's span rows (up to ``span.scan_max_entries`` / d² rows, 1 + ``span.hull_reweight`` fits,
  together in one when ``span.scan_first``; each fit's Gram matrix 2·rows·d⁴ flops, or from d² >= 1,024 by groups
  of rows sharing a query token, about 2·(rows/3)·(d²/2)²), scores phase 5's net, and polishes from phase 6's heads
  (``cost.sculpt_polish_iterations`` LM iterations on the polish's first subset); plus a fixed
  ``cost.sculpt_attempt_seconds`` for its LPs and bookkeeping.
- The exact route (``sculpt.exact``): its two streaming least-squares systems have d² unknowns and
  k·(d − k + 1) + k·(k − 1) rows per example: 2·rows·d⁴ flops (at ``cost.exact_flop_seconds``: tall QR blocks
  run below the GEMM rate), 8·(2d⁴ + block·d²) bytes.
- The capped L-BFGS try (``auto.peer_examples`` examples, ``auto.peer_iterations``) is priced with its run-on
  to ``auto.finish_margin``·tol (``cost.peer_finish_iterations`` more iterations on the same examples).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import cache

from oracles.rank_one import GROUPED_GRAM_FROM

from .settings import CostSettings, PolishSettings, ProblemSize, Settings

__all__ = [
    "StepCost",
    "physical_memory",
    "forward_flops",
    "lbfgs_cost",
    "lbfgs_budget_cost",
    "vp_lm_cost",
    "vp_lm_bytes",
    "vp_lm_flops",
    "polish_cost",
    "exact_cost",
    "sculpt_cost",
    "auto_step_costs",
    "peer_try_first",
    "span_rows_per_example",
    "predicted_span_rows",
]

#: bytes per float64
_B = 8
#: floats per chunk of the forward pass (``sculpt.toolkit.forward_pass.chunk_size``) and the arrays it holds
_FORWARD_CHUNK_FLOATS = 1 << 15
_FORWARD_ARRAYS = 10
#: floats in the largest intermediate of a chunk of the matrix-free products (``polish.cg_chunk_elements``)
_CG_CHUNK_FLOATS = 1 << 17


@dataclass(frozen=True)
class StepCost:
    """A step's predicted cost.

    Attributes
    ----------
    step : str
        The step ("exact", "auto-peer", "auto-vp-lm", "sculpt", "fallback-gradient", ...).
    flops : float
        Dominant floating-point operations.
    seconds : float
        Predicted seconds on one core (flops times the kernel's seconds per flop, plus fixed costs).
    bytes : float
        Predicted peak working memory beyond the data.
    bound : str
        What bounds the step's work (examples, iterations).
    """

    step: str
    flops: float
    seconds: float
    bytes: float
    bound: str

    def describe(self) -> str:
        """The prediction and its bound, e.g. 'predicted 1.2 s, 35 MB (500 examples × 100 L-BFGS iterations)'."""
        return f"{self.short()} ({self.bound})"

    def short(self) -> str:
        """The prediction, e.g. 'predicted 1.2 s, 35 MB'."""
        return f"predicted {_seconds(self.seconds)}, {self.short_bytes()}"

    def short_bytes(self) -> str:
        """The predicted peak memory, e.g. '35 MB'."""
        return self.format_bytes(self.bytes)

    @staticmethod
    def format_bytes(b: float) -> str:
        """Bytes as kB, MB or GB (10³ multiples)."""
        if not math.isfinite(b):
            return "unbounded"
        return f"{b / 1e9:.1f} GB" if b >= 1e9 else f"{b / 1e6:.0f} MB" if b >= 1e6 else f"{b / 1e3:.0f} kB"


def _seconds(s: float) -> str:
    return "unbounded" if not math.isfinite(s) else f"{s:.2g} s" if s < 100 else f"{s:,.0f} s"


@cache
def physical_memory() -> int:
    """The machine's physical memory in bytes (``os.sysconf``), read once; 0 where the system does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def forward_flops(size: ProblemSize, examples: int) -> float:
    """Flops of the layer's forward pass on ``examples`` examples: 2·n·m·k·d·(k + d).

    Parameters
    ----------
    size : ProblemSize
        (d, k, m); N is not read.
    examples : int
        Examples n.

    Returns
    -------
    float
        The flops.
    """
    d, k, m = size.d, size.k, size.m
    return 2.0 * examples * m * k * d * (k + d)


def _work_unit(size: ProblemSize) -> float:
    """``sculpt.baselines.work_unit``: m·k·d·(k + d)."""
    return float(size.m * size.k * size.d * (size.k + size.d))


def _lbfgs_bytes(size: ProblemSize, history: int) -> float:
    """The L-BFGS history (2·history vectors of the 2p parameters, plus a few more) and one forward chunk."""
    return _B * ((2 * history + 8) * 2.0 * size.m * size.d**2 + _FORWARD_ARRAYS * _FORWARD_CHUNK_FLOATS)


def lbfgs_cost(size: ProblemSize, examples: int, iterations: int, c: CostSettings, history: int = 50) -> StepCost:
    """L-BFGS on ``examples`` examples for ``iterations`` iterations.

    Parameters
    ----------
    size : ProblemSize
        (d, k, m).
    examples, iterations : int
        The subset and the iteration cap.
    c : CostSettings
        Seconds per work unit and per iteration.
    history : int
        L-BFGS memory (``gradient.history``).

    Returns
    -------
    StepCost
        n·iterations·work_unit·6 flops; seconds n·iterations·work_unit·``lbfgs_unit_seconds`` +
        iterations·``lbfgs_iteration_seconds``.
    """
    work = float(examples) * iterations * _work_unit(size)
    return StepCost(
        "lbfgs",
        6.0 * work,
        work * c.lbfgs_unit_seconds + iterations * c.lbfgs_iteration_seconds,
        _lbfgs_bytes(size, history),
        f"{examples:,} examples × {iterations:,} L-BFGS iterations",
    )


def lbfgs_budget_cost(size: ProblemSize, work: float | None, c: CostSettings, history: int = 50) -> StepCost:
    """L-BFGS runs whose Σ examples × iterations × work_unit is at most ``work`` (``auto.fallback_work``).

    Parameters
    ----------
    size : ProblemSize
        (d, k, m).
    work : float or None
        The budget in work units; None: unbounded (infinite seconds).
    c : CostSettings
        Seconds per work unit.
    history : int
        L-BFGS memory.

    Returns
    -------
    StepCost
        6·work flops, work·``lbfgs_unit_seconds`` seconds (per-iteration costs are not known in advance).
    """
    w = math.inf if work is None else float(work)
    return StepCost("lbfgs", 6.0 * w, w * c.lbfgs_unit_seconds, _lbfgs_bytes(size, history), f"work {w:.3g}")


def vp_lm_flops(size: ProblemSize, examples: int, *, matrix_free: bool = False, cg_iterations: int = 0) -> float:
    """Flops of one full LM step on ``examples`` examples (module docstring).

    Parameters
    ----------
    size : ProblemSize
        (d, k, m).
    examples : int
        The subset n.
    matrix_free : bool
        The conjugate-gradient path (``polish.matrix_free_above``): the diagonal of JᵀJ (2·m·n·k²·d²) and
        ``cg_iterations`` products with the projected JᵀJ, each a J·v, a projection and a Jᵀ·u (about three
        forward passes and 4·n·k·m·d²), instead of forming and factorising JᵀJ.
    cg_iterations : int
        Conjugate-gradient products per LM step (matrix-free path only).

    Returns
    -------
    float
        The flops.
    """
    d, k, m, n = size.d, size.k, size.m, float(examples)
    p = float(m * d * d)
    state = forward_flops(size, examples) + 4.0 * n * k * (m * d) ** 2
    if matrix_free:
        product = 3.0 * forward_flops(size, examples) + 4.0 * n * k * m * d * d
        return state + 2.0 * m * n * k * k * d * d + cg_iterations * product
    g_blocks = 2.0 * m * n * k * k * d * d + 2.0 * n * k * d * (m * d) ** 2
    return state + g_blocks + 4.0 * n * k * p * p + (7.0 / 3.0) * p**3


def vp_lm_bytes(size: ProblemSize, examples: int, chunk: int = 256, *, matrix_free: bool = False) -> float:
    """Peak working memory of an LM step on ``examples`` examples, chunks of ``chunk`` examples (module docstring).

    Parameters
    ----------
    size : ProblemSize
        (d, k, m).
    examples : int
        The subset n.
    chunk : int
        Examples per chunk of the normal equations (``polish.chunk``).
    matrix_free : bool
        The conjugate-gradient path: the products' per-example quantities (V, Ȳ) and a dozen vectors of p
        instead of the p × p arrays.

    Returns
    -------
    float
        Bytes: the subset's copy and the state (attention, features, their basis, the residual), plus five
        p × p arrays and one chunk's G blocks and H_a (dense), or V, Ȳ and the vectors (matrix-free).
    """
    d, k, m, n = size.d, size.k, size.m, float(examples)
    p = float(m * d * d)
    state = _B * n * k * (m * k + 3.0 * m * d + 3.0 * d)
    if matrix_free:
        return state + _B * (2.0 * n * k * m * d + 12.0 * p) + _B * _CG_CHUNK_FLOATS * 4.0
    c = min(float(chunk), n)
    return state + 5.0 * _B * p * p + _B * c * k * m * d * d * (2.0 + m)


def vp_lm_cost(
    size: ProblemSize,
    examples: int,
    iterations: int,
    c: CostSettings,
    *,
    matrix_free: bool = False,
    max_examples: int | None = None,
    chunk: int = 256,
) -> StepCost:
    """VP-LM (the polish's LM) for ``iterations`` full steps on ``examples`` examples.

    Parameters
    ----------
    size : ProblemSize
        (d, k, m).
    examples, iterations : int
        The subset and the LM steps predicted.
    c : CostSettings
        Seconds per flop of the LM kernels and per LM iteration; ``cg_iterations``.
    matrix_free : bool
        The conjugate-gradient path (``vp_lm_flops``, priced at ``cg_flop_seconds``); False: the dense normal
        equations (``lm_flop_seconds``).
    max_examples : int, optional
        The largest subset the step may reach (its memory bound; default ``examples``).
    chunk : int
        Examples per chunk of the normal equations.

    Returns
    -------
    StepCost
        Flops and seconds of the steps; bytes at ``max_examples``.
    """
    flops = iterations * vp_lm_flops(size, examples, matrix_free=matrix_free, cg_iterations=c.cg_iterations)
    rate = c.cg_flop_seconds if matrix_free else c.lm_flop_seconds
    top = examples if max_examples is None else max(examples, max_examples)
    how = "matrix-free" if matrix_free else "dense"
    return StepCost(
        "vp-lm",
        flops,
        flops * rate + iterations * c.lm_iteration_seconds,
        vp_lm_bytes(size, top, chunk, matrix_free=matrix_free),
        f"{iterations} {how} LM iterations on {examples:,} examples, p = m·d² = {size.m * size.d * size.d:,}",
    )


def polish_cost(size: ProblemSize, polish: PolishSettings, iterations: int, c: CostSettings) -> StepCost:
    """The polish's LM as ``polish`` runs it: ``iterations`` steps on its first subset, dense or matrix-free by
    ``polish.matrix_free_above``, memory at ``polish.max_examples``.

    Parameters
    ----------
    size : ProblemSize
        (d, k, m, N).
    polish : PolishSettings
        The polish's settings (resolved here for ``size``).
    iterations : int
        LM steps predicted.
    c : CostSettings
        The cost constants.

    Returns
    -------
    StepCost
        ``vp_lm_cost`` of those steps.
    """
    s = polish.resolve(size)
    n = int(min(size.N or math.inf, s.first_examples or 64))
    top = int(min(size.N or math.inf, s.max_examples))
    free = size.m * size.d * size.d > s.matrix_free_above
    return vp_lm_cost(size, n, iterations, c, matrix_free=free, max_examples=top, chunk=s.chunk)


def exact_cost(size: ProblemSize, settings: Settings) -> StepCost:
    """The exact route's two least-squares systems on ``exact.max_examples`` examples (at most N).

    Parameters
    ----------
    size : ProblemSize
        (d, k, m, N), 2 <= k < d.
    settings : Settings
        Resolved settings (``exact.max_examples``).

    Returns
    -------
    StepCost
        2·rows·d⁴ flops at ``cost.exact_flop_seconds``, 8·(2d⁴ + block·d²) bytes.
    """
    d, k = size.d, size.k
    n = min(size.N or math.inf, settings.exact.max_examples or 0)
    rows = n * (k * (d - k + 1) + k * (k - 1))
    flops = 2.0 * rows * d**4
    block = min(rows, 4.0 * d * d)
    return StepCost(
        "exact",
        flops,
        flops * settings.cost.exact_flop_seconds,
        _B * (2.0 * d**4 + block * d * d),
        f"{int(n):,} examples",
    )


def span_rows_per_example(size: ProblemSize, settings: Settings) -> float:
    """Phase 4's equality rows one example gives, predicted: exp(c₀ − c_v·v − c_b·b − c_k·k² + c_d·ln d), v the
    head disagreements the agreement test sees ((m − 1)(k − 1) − b), b the blind ones (``ProblemSize.blind``);
    one head: every row agrees (v = b = 0, no k² term). Fitted on planted layers with the true Σ W
    (``cost.span_row_fit``).

    Parameters
    ----------
    size : ProblemSize
        (d, k, m).
    settings : Settings
        ``cost.span_row_fit`` (c₀, c_v, c_b, c_k, c_d).

    Returns
    -------
    float
        Rows per example.
    """
    c0, cv, cb, ck, cd = settings.cost.span_row_fit
    b = size.blind
    v = (size.m - 1) * (size.k - 1) - b
    k2 = size.k**2 if size.m > 1 else 0
    return math.exp(c0 - cv * v - cb * b - ck * k2 + cd * math.log(size.d))


def predicted_span_rows(size: ProblemSize, settings: Settings) -> float:
    """The span rows phases 1–3's largest subset (``max_sculpt_examples``) is predicted to give K*: the budget
    ``method="sculpt"`` checks against the d² − (m − 1) rows phase 4 needs.

    Parameters
    ----------
    size : ProblemSize
        (d, k, m).
    settings : Settings
        Resolved settings (``max_sculpt_examples``, ``cost.span_row_fit``).

    Returns
    -------
    float
        Rows.
    """
    return float(settings.max_sculpt_examples or 20_000) * span_rows_per_example(size, settings)


def _gram_flops(rows: float, d: int) -> float:
    """One flat fit's Gram matrix over ``rows`` equality rows: from d² >= ``oracles.rank_one.GROUPED_GRAM_FROM``
    by groups of rows sharing a query token (about 3 rows a group at d = 32–64), 2·(rows/3)·(d(d+1)/2)² flops
    plus spreading the d⁴ entries, else the dense rows' product, 2·rows·d⁴."""
    if d * d >= GROUPED_GRAM_FROM:
        return 2.0 * (rows / 3.0) * (d * (d + 1) / 2.0) ** 2 + 4.0 * d**4
    return 2.0 * rows * d**4


def _span_rows(size: ProblemSize, settings: Settings, examples: int) -> float:
    """The span rows phase 4 fits: what ``examples`` examples give, at most ``span.scan_max_entries`` / d²."""
    return min(examples * span_rows_per_example(size, settings), settings.span.scan_max_entries / size.d**2)


def _net_cost(size: ProblemSize, settings: Settings) -> tuple[float, float]:
    """Phase 5's net (flops, bytes): G grid points on the (m − 1)-flat (``heads.grid`` per axis, cut to the ball:
    grid^(m−1) times the ball's share of the cube), their Gram blocks on ``heads.max_examples`` examples
    (2·G²·n·k·d² flops, 8·G²·d² bytes) and one (m·d)³/3 solve per scored tuple (at most ``heads.max_tuples``)."""
    d, k, m = size.d, size.k, size.m
    if m == 1:
        return 0.0, 0.0
    r = m - 1
    ball = math.pi ** (r / 2) / math.gamma(r / 2 + 1) / 2**r
    points = max(1.0, float(settings.heads.grid or 5) ** r * ball)
    tuples = min(float(settings.heads.max_tuples), math.comb(int(points), m) if points < 1e6 else math.inf)
    n = settings.heads.max_examples
    flops = 2.0 * points**2 * n * k * d * d + tuples * ((m * d) ** 3 / 3.0 + 2.0 * (m * d) ** 2 * d)
    return flops, _B * points * (points + n * k) * d * d


def sculpt_cost(size: ProblemSize, settings: Settings) -> StepCost:
    """One attempt of the sculpting route on its first subset (module docstring).

    Parameters
    ----------
    size : ProblemSize
        (d, k, m, N).
    settings : Settings
        Resolved settings (subset sizes, K*'s equality rows, the span's row cap, the polish).

    Returns
    -------
    StepCost
        Flops, seconds and peak bytes of one attempt.
    """
    c, d, k, m = settings.cost, size.d, size.k, size.m
    n1 = min(size.N or math.inf, settings.sculpt_examples or 0)
    scanned = min(size.N or math.inf, max(n1 * settings.span.scan_growth, n1))
    simplex = forward_flops(size, int(n1 + scanned)) / max(m, 1)  # one pattern per row, not one per head
    kstar_rows = float(settings.refine.slabs.min_equalities or 3 * d * d)
    span_rows = _span_rows(size, settings, int(scanned))
    refits = 1 + settings.span.reweights(d)
    if settings.span.scan_first:  # one fit (and its refits) on K*'s rows and the scanned ones together
        fits = refits * _gram_flops(kstar_rows + span_rows, d)
    else:
        fits = _gram_flops(kstar_rows, d) * refits + refits * _gram_flops(span_rows, d)
    polish = polish_cost(size, settings.polish, c.sculpt_polish_iterations, c)
    net_flops, net_bytes = _net_cost(size, settings)
    dense = fits + net_flops
    seconds = (
        simplex * c.lbfgs_unit_seconds / 6.0  # the batched small products of L-BFGS's kind
        + dense * c.dense_flop_seconds
        + polish.seconds
        + c.sculpt_attempt_seconds
    )
    rows_bytes = _B * d * d * (2.0 * span_rows + 2.0 * kstar_rows)
    simplex_bytes = _B * (n1 + min(scanned, settings.span.scan_block)) * k * (3 * k + 2 * d)
    return StepCost(
        "sculpt",
        simplex + dense + polish.flops,
        seconds,
        max(rows_bytes + simplex_bytes, net_bytes, polish.bytes),
        f"phases 1–3 on {int(n1):,} examples, phase 4 on about {int(span_rows):,} span rows",
    )


def auto_step_costs(settings: Settings, size: ProblemSize) -> dict[str, StepCost]:
    """The predicted cost of every step ``method="auto"`` can take at ``size``, by step name.

    Parameters
    ----------
    settings : Settings
        Resolved settings (``Settings.resolve``): each step's bounds and ``cost``'s constants.
    size : ProblemSize
        (d, k, m, N).

    Returns
    -------
    dict of str to StepCost
        "exact" (when 2 <= k < d and m = 1), "auto-peer" (the capped L-BFGS try and its run-on), "auto-vp-lm" (one start of
        ``cost.vp_lm_iterations`` LM steps on the polish's first subset; memory at ``vp_lm.max_examples``),
        "sculpt" (one attempt) and "fallback-gradient" (the whole ``auto.fallback_work``).
    """
    c, a = settings.cost, settings.auto
    history = settings.gradient.history
    out: dict[str, StepCost] = {}
    if size.m == 1 and 2 <= size.k < size.d:
        out["exact"] = exact_cost(size, settings)
    peer_n = min(size.N or math.inf, a.peer_examples)
    peer_its = int(a.peer_iterations or 50 * size.m) + c.peer_finish_iterations  # the try and its run-on
    peer = lbfgs_cost(size, int(peer_n), peer_its, c, history)
    out["auto-peer"] = _named(peer, "auto-peer")
    vp_polish = settings.polish.merged(max_examples=settings.vp_lm.max_examples)  # as ``vp_lm_starts`` runs it
    vp = polish_cost(size, vp_polish, c.vp_lm_iterations, c)
    out["auto-vp-lm"] = _named(vp, "auto-vp-lm")
    out["sculpt"] = sculpt_cost(size, settings)
    out["fallback-gradient"] = _named(lbfgs_budget_cost(size, a.fallback_work, c, history), "fallback-gradient")
    return out


def _named(cost: StepCost, step: str) -> StepCost:
    return StepCost(step, cost.flops, cost.seconds, cost.bytes, cost.bound)


def peer_try_first(settings: Settings, size: ProblemSize) -> bool:
    """``auto.peer_first``'s default: the capped L-BFGS try goes before VP-LM when its predicted cost is below
    ``cost.peer_odds(m)`` × VP-LM's (trying it first saves VP-LM with that chance; the order that minimises the
    expected cost sorts steps by cost over chance of success).

    Parameters
    ----------
    settings : Settings
        Resolved settings but for ``auto.peer_first``.
    size : ProblemSize
        (d, k, m, N).

    Returns
    -------
    bool
        Whether auto tries L-BFGS before VP-LM.
    """
    costs = auto_step_costs(settings, size)
    return costs["auto-peer"].seconds < settings.cost.peer_odds(size.m) * costs["auto-vp-lm"].seconds
