"""argparse value types shared by the command lines (``sculpt.cli`` and ``sculpt.bench.cli``)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["int_at_least", "positive_int", "nonneg_int", "real_at_least"]


def int_at_least(lo: int, what: str) -> Callable[[str], int]:
    """An argparse type: text ↦ int(text), rejected unless int(text) ≥ ``lo`` (``what`` names it)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {what} integer, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"expected a {what} integer, got {v}")
        return v

    return parse


positive_int = int_at_least(1, "positive")
nonneg_int = int_at_least(0, "non-negative")


def real_at_least(lo: float, lo_open: bool) -> Callable[[str], float]:
    """An argparse type: text ↦ float(text), rejected unless finite and > lo (``lo_open``) or ≥ lo."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(v) or v < lo or (lo_open and v == lo):
            raise argparse.ArgumentTypeError(f"expected a finite number {'>' if lo_open else '>='} {lo:g}, got {text}")
        return v

    return parse
