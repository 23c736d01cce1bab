"""The shared toolkit of ``sculpt``: one of each thing several modules need.

- ``forward`` (chunked F(X)), ``attention_patterns`` / ``attention`` / ``features`` (the same kernel's
  intermediates) and ``relative_mse`` ‖Y − Ŷ‖²/‖Y‖² (:mod:`sculpt.toolkit.forward_pass`);
- ``versions()`` of Python, the machine and the packages a run touches (:mod:`sculpt.toolkit.environment`);
- ``to_jsonable`` / ``dumps`` / ``write_json``: strict JSON, non-finite numbers as null (``JSON``: the type)
  (:mod:`sculpt.toolkit.jsonio`);
- ``single_blas_thread``: BLAS on one thread inside a block (and, optionally, in the processes it starts)
  (:mod:`sculpt.toolkit.threads`);
- ``Progress`` (learner phases) and ``ProgressBar`` (counted steps): tqdm on a terminal when installed,
  plain stderr lines otherwise (:mod:`sculpt.toolkit.progress`);
- ``logger``: the package's ``logging.getLogger("sculpt")`` (a NullHandler is attached; configure logging
  in your application to see its DEBUG/INFO diagnostics).
"""

from __future__ import annotations

import logging

from .environment import package_version, versions
from .forward_pass import attention, attention_patterns, features, forward, layer_relative_mse, relative_mse
from .jsonio import JSON, dumps, to_jsonable, write_json
from .progress import Progress, ProgressBar
from .threads import single_blas_thread

logger = logging.getLogger("sculpt")
if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
    logger.addHandler(logging.NullHandler())

__all__ = [
    "forward",
    "attention_patterns",
    "attention",
    "features",
    "relative_mse",
    "layer_relative_mse",
    "versions",
    "package_version",
    "to_jsonable",
    "dumps",
    "write_json",
    "JSON",
    "Progress",
    "ProgressBar",
    "single_blas_thread",
    "logger",
]
