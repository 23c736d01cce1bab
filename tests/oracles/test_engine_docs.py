"""docs/engine.md: every code block runs (in order, one namespace), every public name is documented, and
the page cites nothing outside the repository."""
from __future__ import annotations

import re
from pathlib import Path

import oracles

DOC = Path(__file__).resolve().parents[2] / "docs" / "engine.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_every_code_block_runs(capsys):
    blocks = _blocks()
    assert len(blocks) >= 8
    namespace: dict = {"__name__": "engine_md"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/engine.md block {i + 1}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "Traceback" not in out


def test_every_public_name_is_documented():
    text = DOC.read_text()
    missing = [n for n in oracles.__all__ if f"`{n}" not in text and f" {n}(" not in text
               and not re.search(rf"\b{n}\b", "\n".join(_blocks()))]
    assert missing == [], f"oracles exports {missing} but docs/engine.md does not show them"


def test_the_page_is_self_contained():
    text = DOC.read_text()
    for bad in ("algorithm" + ".md", "../", "/work/", "shared/"):  # split: no file may name the outside notes
        assert bad not in text, f"docs/engine.md cites {bad!r}, outside the repository"
    root = DOC.parents[1]
    for path in re.findall(r"`((?:docs|benchmarks|oracles|sculpt|tests)/[\w/.]+\.(?:py|md))`", text):
        assert (root / path).exists(), f"docs/engine.md cites {path}, which does not exist"
