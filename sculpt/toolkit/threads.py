"""One BLAS thread: the context manager every fit, the certificate and the benchmark's worker pool use.

The products of these fits are thin (a few d-wide columns, d <= 32), where BLAS threads only add
synchronisation: one thread runs 2–5× faster than two on a loaded 2-core machine, and LAPACK's ``syevd`` in
``certify`` gains little from threads. Results do not depend on the thread count.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["single_blas_thread", "THREAD_VARIABLES"]

#: environment variables that set the thread count of a process's BLAS / OpenMP runtimes when it starts
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def single_blas_thread(enabled: bool = True, *, children: bool = False) -> Iterator[None]:
    """BLAS (and LAPACK) on one thread inside the block, restored afterwards (through threadpoolctl).

    Parameters
    ----------
    enabled
        False makes the block a no-op (callers pass their ``single_thread`` setting).
    children
        Also start processes spawned inside the block with one thread: ``THREAD_VARIABLES`` are set to "1"
        unless the caller set them, and restored on exit (a worker pool's processes read them at start).

    Yields
    ------
    None
    """
    if not enabled:
        yield
        return
    from threadpoolctl import threadpool_limits

    saved = {v: os.environ.get(v) for v in THREAD_VARIABLES} if children else {}
    for v in saved:
        os.environ.setdefault(v, "1")
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        for v, old in saved.items():
            if old is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = old
