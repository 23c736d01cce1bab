"""Shared output step of the benchmark scripts: write the JSON report and say where it went."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the project root, whatever the install

from sculpt.toolkit.jsonio import write_json as _write_json


def write_json(path: str | Path, report: Any, *, seconds: float | None = None) -> Path:
    """Write ``report`` as strict indented JSON to ``path`` (sculpt.toolkit.write_json: parents created, NumPy
    values converted, non-finite numbers as null) and print where it went."""
    out = _write_json(path, report)
    print(f"\nwrote {out}" + (f" ({seconds:.1f} s)" if seconds is not None else ""))
    return out
