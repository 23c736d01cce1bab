"""The training split of a ``learn`` call as rows of the checked arrays, gathered only where a step reads them."""

from __future__ import annotations

from typing import cast

import numpy as np

__all__ = ["TrainRows"]


class TrainRows:
    """Rows ``index`` of ``base`` (an (N, ...) array), gathered only when read: the training split of a ``learn``
    call without its copy. ``rows[i]`` is ``base[index[i]]`` for an integer, a slice or an integer array ``i``
    (it reads only those rows; an integer or a slice may give a view of ``base``, read-only by contract), ``shape``, ``ndim``, ``dtype`` and ``len`` are the split's, and
    ``whole()`` (or ``np.asarray(rows)``, or any other ndarray attribute) gathers the whole split once and keeps
    it. A step that reads only random subsets of the training split (VP-LM: 64 to a few thousand examples) then
    never copies it: at (16,8,2) with N = 80,000 the copy of X and Y is 144 MB of fresh memory, 0.06 s warm and
    up to 0.5 s on a process's first call, two to three times VP-LM's own fit.

    Parameters
    ----------
    base : np.ndarray
        The checked examples (or labels), (N, k, d).
    index : np.ndarray or None
        The split's rows of ``base``, in order; None: all of them (``whole()`` is ``base`` itself).
    """

    __slots__ = ("base", "index", "_whole")

    def __init__(self, base: np.ndarray, index: np.ndarray | None = None) -> None:
        self.base = base
        self.index = index
        self._whole: np.ndarray | None = base if index is None else None

    @property
    def shape(self) -> tuple[int, ...]:
        n = self.base.shape[0] if self.index is None else int(self.index.shape[0])
        return (n, *self.base.shape[1:])

    @property
    def ndim(self) -> int:
        return int(self.base.ndim)

    @property
    def dtype(self) -> np.dtype:
        return self.base.dtype

    def __len__(self) -> int:
        return self.shape[0]

    def whole(self) -> np.ndarray:
        """The split as one array (gathered on the first call, then kept)."""
        if self._whole is None:
            assert self.index is not None
            self._whole = _gather(self.base, self.index)
        return self._whole

    def __getitem__(self, key: int | slice | np.ndarray) -> np.ndarray:
        if self._whole is not None or isinstance(key, tuple):
            return self.whole()[key]
        assert self.index is not None
        rows = self.index[key]
        return _gather(self.base, rows) if isinstance(rows, np.ndarray) else self.base[rows]

    def __array__(self, dtype: object = None, copy: bool | None = None) -> np.ndarray:
        arr = self.whole()
        if dtype is not None:
            arr = arr.astype(dtype, copy=bool(copy))  # type: ignore[call-overload]
        return arr.copy() if copy and arr is self._whole else arr

    def __getattr__(self, name: str) -> object:
        if name.startswith("_"):  # (its own slots before they are set; copy and pickle probing for dunders)
            raise AttributeError(name)
        return getattr(self.whole(), name)

    def view(self) -> np.ndarray:
        """This object typed as the array it stands for, for functions that take the training split as an array
        and only index it by rows and read its shape (``sculpt.vplm.vp_lm_starts``, ``sculpt.phases.polish``,
        ``sculpt.baselines.lbfgs_growing``):
        their results are those on ``whole()``, bit for bit (tests/sculpt/test_learner.py checks it)."""
        return cast(np.ndarray, self)


def _gather(base: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """base[rows] along the first axis: ``numpy.take`` copies whole rows (80,000 × 8 × 64: 0.09 against 0.54 s for
    fancy indexing, which walks the trailing axes element by element)."""
    return np.take(base, rows, axis=0)
