"""Black-box access to a layer: ``as_oracle`` turns a callable, a ``MultiHeadAttention`` or a torch module into a
function of (n, k, d) float64 arrays, and ``QueryOracle`` asks it, checks every answer and counts queries and
tokens.

A query is one sequence X of k tokens (a row of the batch); its answer is F(X), (k, d). Every answer is checked
for its shape and for NaN/inf, and the first query is asked twice (and one more later): an oracle that answers
it differently is randomised and raises ``OracleNotDeterministic`` unless a ``noise`` level was declared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..model import MultiHeadAttention
from .errors import OracleNonFinite, OracleNotDeterministic, OracleShapeError, QueryBudgetExceeded
from .settings import QuerySettings

if TYPE_CHECKING:
    import torch

__all__ = ["OracleFn", "as_oracle", "torch_oracle", "QueryOracle", "QueryCount"]

#: an oracle: (n, k, d) float64 in, (n, k, d) out
OracleFn = Callable[[np.ndarray], object]


def _is_torch_module(obj: object) -> bool:
    """Whether ``obj`` is a torch.nn.Module, without importing torch unless it is already imported."""
    import sys

    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def torch_oracle(module: torch.nn.Module) -> Callable[[np.ndarray], np.ndarray]:
    """An oracle calling ``module`` forward only (no weight is read).

    A ``torch.nn.MultiheadAttention`` is called as self-attention ``module(X, X, X, need_weights=False)[0]``
    (transposed to (k, n, d) when it is not batch_first); any other module as ``module(X)`` (the first element
    of a tuple answer). Inputs are cast to the module's parameter dtype and device, answers back to float64
    numpy; the calls run under ``torch.no_grad()``.

    Parameters
    ----------
    module : torch.nn.Module
        The black box.

    Returns
    -------
    callable
        (n, k, d) numpy in, (n, k, d) numpy out.
    """
    import torch

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    param = next(iter(module.parameters()), None)
    dtype = param.dtype if param is not None else torch.float64
    device = param.device if param is not None else torch.device("cpu")
    is_mha = isinstance(module, torch.nn.MultiheadAttention)
    batch_first = bool(getattr(module, "batch_first", True))

    def call(X: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(np.ascontiguousarray(X)).to(dtype=dtype, device=device)
        with torch.no_grad():
            if is_mha:
                q = t if batch_first else t.transpose(0, 1)
                out = module(q, q, q, need_weights=False)[0]
                out = out if batch_first else out.transpose(0, 1)
            else:
                out = module(t)
                out = out[0] if isinstance(out, (tuple, list)) else out
        return np.asarray(out.detach().cpu().double().numpy())

    return call


def as_oracle(oracle: object) -> Callable[[np.ndarray], object]:
    """The function ``learn_from_queries`` calls: a ``MultiHeadAttention`` is called on the batch, a torch module
    through ``torch_oracle``, any other callable as it is.

    Parameters
    ----------
    oracle : callable, MultiHeadAttention or torch.nn.Module
        The black box.

    Returns
    -------
    callable
        X (n, k, d) -> F(X).
    """
    if isinstance(oracle, MultiHeadAttention):
        return oracle.__call__
    if _is_torch_module(oracle):
        return torch_oracle(oracle)  # type: ignore[arg-type]
    if not callable(oracle):
        raise TypeError(
            f"oracle must be a callable, a MultiHeadAttention or a torch.nn.Module, got {type(oracle).__name__}"
        )
    return oracle


@dataclass
class QueryCount:
    """Queries (sequences) and tokens asked by one phase."""

    queries: int = 0
    tokens: int = 0


@dataclass
class QueryOracle:
    """Asks the oracle, checks its answers and counts what each phase asked.

    ``max_queries`` caps the total (``QueryBudgetExceeded`` before a batch would pass it); ``noise`` (None: the
    oracle must be exact) relaxes the repeat test (``settings.repeat_rtol``, ``settings.repeat_sigmas``); ``phase`` names the step whose queries are being asked.
    """

    fn: Callable[[np.ndarray], object]
    d: int
    max_queries: int | None = None
    noise: float | None = None
    settings: QuerySettings = field(default_factory=QuerySettings)
    phase: str = "start"
    queries: int = 0
    tokens: int = 0
    by_phase: dict[str, QueryCount] = field(default_factory=dict)
    _repeat: tuple[np.ndarray, np.ndarray, int, str] | None = None

    def ask(self, X: np.ndarray) -> np.ndarray:
        """F(X) for X (n, k, d): the answers, float64 (n, k, d), each checked.

        Parameters
        ----------
        X : numpy.ndarray
            The queries, (n, k, d).

        Returns
        -------
        numpy.ndarray
            The answers.
        """
        X = np.ascontiguousarray(X, dtype=np.float64)
        n, k = X.shape[0], X.shape[1]
        if self.max_queries is not None and self.queries + n > self.max_queries:
            raise QueryBudgetExceeded(
                f"phase {self.phase!r} needs {n} more queries after {self.queries}: max_queries = {self.max_queries}",
                needed=self.queries + n,
                budget=self.max_queries,
            )
        first = self.queries
        Y = self._call(X, first)
        self.queries += n
        self.tokens += n * k
        count = self.by_phase.setdefault(self.phase, QueryCount())
        count.queries += n
        count.tokens += n * k
        if self._repeat is None and n:
            self._repeat = (X[:1].copy(), Y[:1].copy(), first, self.phase)
            self.check_repeat()
        return Y

    def _call(self, X: np.ndarray, first: int) -> np.ndarray:
        """The oracle's answer to the batch X, checked for its shape and finiteness."""
        raw = self.fn(X.copy())  # a copy: an oracle that writes into its input cannot corrupt the record
        try:
            Y = np.asarray(raw, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise OracleShapeError(
                f"the answer is not an array of reals ({type(raw).__name__}: {exc})",
                index=first,
                phase=self.phase,
                query=X[0],
            ) from None
        if Y.shape != X.shape:
            raise OracleShapeError(
                f"expected an answer of shape {X.shape} (n, k, d) for a batch of {X.shape[0]} queries starting here, "
                f"got {Y.shape}",
                index=first,
                phase=self.phase,
                query=X[0],
            )
        bad = ~np.isfinite(Y).all(axis=(1, 2))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise OracleNonFinite("the answer contains NaN or inf", index=first + i, phase=self.phase, query=X[i])
        return Y

    def check_repeat(self) -> None:
        """Ask the recorded query again (counted) and compare: ``OracleNotDeterministic`` when the two answers
        differ beyond ``repeat_rtol`` × the answer's largest entry (with a declared noise level σ, by ``repeat_sigmas``·σ
        more)."""
        if self._repeat is None:
            return
        X0, Y0, index, phase = self._repeat
        Y1 = self._call(X0, self.queries)
        self.queries += 1
        self.tokens += X0.shape[1]
        count = self.by_phase.setdefault("repeat check", QueryCount())
        count.queries += 1
        count.tokens += X0.shape[1]
        gap = float(np.max(np.abs(Y1 - Y0)))
        scale = max(float(np.max(np.abs(Y0))), np.finfo(float).tiny)
        rtol = self.settings.repeat_rtol * scale
        allowed = rtol if self.noise is None else self.settings.repeat_sigmas * self.noise + rtol
        if gap > allowed:
            raise OracleNotDeterministic(
                f"asked twice, the answers differ by {gap:.3g} (allowed {allowed:.3g}): the oracle is not a function "
                "of its input (declare noise=σ if its answers are noisy)",
                index=index,
                phase=phase,
                query=X0[0],
            )

    def remember(self, X: np.ndarray, Y: np.ndarray, index: int) -> None:
        """Make (X[0], Y[0]), query number ``index``, the one ``check_repeat`` asks again."""
        self._repeat = (X[:1].copy(), Y[:1].copy(), index, self.phase)

    def counts(self) -> dict[str, dict[str, int]]:
        """Queries and tokens by phase (JSON)."""
        return {p: {"queries": c.queries, "tokens": c.tokens} for p, c in self.by_phase.items()}
