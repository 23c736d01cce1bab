"""Shared output step of the benchmark scripts: write the JSON report and say where it went."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_json(path: str | Path, report: Any, *, seconds: float | None = None) -> Path:
    """Write ``report`` as indented JSON to ``path`` (parents created; NumPy scalars as floats) and print it."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=float))
    print(f"\nwrote {out}" + (f" ({seconds:.1f} s)" if seconds is not None else ""))
    return out
