"""Shared by every test directory: puts tests/ on sys.path so that ``from strategies import ...`` (the
hypothesis strategies in tests/strategies.py) works from tests/sculpt and tests/oracles alike."""
from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
