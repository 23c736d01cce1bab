"""docs/ is self-contained: nothing cites the research notes that live outside the repository, and every
path or anchor the docs (and the code's docstrings) cite exists in the repository."""
from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("sculpt", "oracles", "docs", "benchmarks", "tests", "README.md")

# Notes outside the repository that docs and docstrings used to cite. Built by concatenation so that this
# file does not itself mention them.
OUTSIDE = ("algorithm" + ".md", "baselines" + ".md", "shared" + "/research", "../" + "shared")

DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]


@lru_cache(maxsize=1)
def tracked_files() -> tuple[Path, ...]:
    """Tracked files under SCANNED (git ls-files); outside a git checkout, every file there but caches."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *SCANNED], cwd=ROOT, capture_output=True,
                             check=True, timeout=60).stdout.decode()
        files = [ROOT / p for p in out.split("\0") if p]
    except (OSError, subprocess.SubprocessError):
        files = []
    if not files:
        files = [ROOT / "README.md"] + [p for d in SCANNED[:-1] for p in (ROOT / d).rglob("*") if p.is_file()]
    skip = ("__pycache__", ".egg-info", ".hypothesis", ".pytest_cache")
    return tuple(p for p in files if p.is_file() and not any(s in str(p) for s in skip))


def text_of(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data[:4096]:
        return None  # binary
    return data.decode("utf-8", errors="replace")


def test_nothing_cites_notes_outside_the_repository() -> None:
    hits = []
    for path in tracked_files():
        text = text_of(path)
        if text is None:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for bad in OUTSIDE:
                if bad in line:
                    hits.append(f"{path.relative_to(ROOT)}:{lineno}: {bad}")
    assert hits == [], "cites notes outside the repository (cite docs/method.md instead):\n" + "\n".join(hits)


def test_docs_do_not_point_outside_the_checkout() -> None:
    hits = []
    for doc in DOCS:
        for lineno, line in enumerate(doc.read_text().splitlines(), 1):
            for bad in ("/work/", "/home/", "/tmp/", "file://"):
                if bad in line:
                    hits.append(f"{doc.relative_to(ROOT)}:{lineno}: {bad}")
    assert hits == [], "absolute paths outside the checkout:\n" + "\n".join(hits)


# ------------------------------------------------------------------------------------ paths and links
REPO_PATH = re.compile(r"(?<![\w./-])((?:docs/(?:examples/)?|benchmarks/)[\w.-]+\.(?:md|py))")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_repository_paths_in_docs_exist(doc: Path) -> None:
    """`docs/xxx.md`, `docs/examples/xxx.py`, `benchmarks/xxx.py` mentioned in a doc exist (from the root)."""
    missing = sorted({p for p in REPO_PATH.findall(doc.read_text()) if not (ROOT / p).exists()})
    assert missing == [], f"{doc.name} mentions paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_markdown_links_resolve(doc: Path) -> None:
    """[text](target): a relative target exists next to the doc; a #fragment names an anchor of its file."""
    bad = []
    for target in MD_LINK.findall(doc.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        path, _, fragment = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            bad.append(f"{target} (no file {path})")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            bad.append(f"{target} (no anchor #{fragment} in {dest.name})")
    assert bad == [], f"{doc.name} has broken links: {bad}"


# ------------------------------------------------------------------------------------ anchors
def slug(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    """Explicit <a id="..."> anchors and heading slugs of a markdown file."""
    text = doc.read_text()
    ids = set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    return ids | {slug(h) for h in re.findall(r"^#+\s+(.*)$", text, flags=re.MULTILINE)}


CITATION = re.compile(r"(docs/[\w/.-]+\.md)((?:#[\w-]+)(?:\s*(?:,|and)\s*#[\w-]+)*)")


def test_anchor_citations_resolve() -> None:
    """Every `docs/<file>.md#anchor` (and `..., #other` right after it) cited anywhere names a real anchor."""
    bad = []
    for path in tracked_files():
        text = text_of(path)
        if text is None:
            continue
        for doc_path, frags in CITATION.findall(text):
            doc = ROOT / doc_path
            if not doc.exists():
                bad.append(f"{path.relative_to(ROOT)}: {doc_path} does not exist")
                continue
            for frag in re.findall(r"#([\w-]+)", frags):
                if frag not in anchors(doc):
                    bad.append(f"{path.relative_to(ROOT)}: {doc_path}#{frag} is not an anchor")
    assert bad == [], "\n".join(bad)


def test_the_reconstruction_section_has_its_anchors() -> None:
    """The anchors code and tests cite: one per phase, plus the shared pieces."""
    have = anchors(ROOT / "docs" / "method.md")
    want = {"reconstruction", "recon-model", "recon-assumptions", "recon-body", "recon-certifying-design",
            "recon-plant", "recon-exact", "recon-prototype", "recon-exponential", "gd-baselines",
            "gd-failure-regimes"} | {f"recon-phase-{i}" for i in range(1, 7)}
    assert want <= have, f"docs/method.md lacks anchors {sorted(want - have)}"
