"""Every page a file of the repository points to exists: paths under docs/ ending in .md in docs, code, scenarios,
scripts and tests, and the relative links of the Markdown pages. A page moved (the reproductions went to
docs/research/) or renamed without its pointers fails here, naming the file that still points to the old path."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEARCHED = ("README.md", "DESIGN.md", "docs", "wirelessfl", "wirelessfl_papers", "scenarios", "scripts", "tests", "benchmarks", "tools", "examples")
SUFFIXES = {".md", ".py", ".yaml", ".yml", ".txt", ".toml"}
DOC_PATH = re.compile(r"(?<![\w/.-])docs/[\w./-]*?\.md\b")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _files() -> list[Path]:
    out = []
    for name in SEARCHED:
        path = ROOT / name
        out += [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES]
    return [p for p in out if "docs/runs/" not in p.relative_to(ROOT).as_posix()]  # run outputs quote what they were given


def test_every_docs_path_named_in_the_repository_exists():
    missing = []
    for path in _files():
        for match in DOC_PATH.findall(path.read_text(encoding="utf-8", errors="replace")):
            if not (ROOT / match).is_file():
                missing.append(f"{path.relative_to(ROOT)}: {match}")
    assert missing == []


def test_every_relative_link_of_a_page_resolves():
    broken = []
    pages = [ROOT / "README.md", ROOT / "DESIGN.md", *(p for p in (ROOT / "docs").rglob("*.md") if "runs" not in p.parts)]
    for page in pages:
        for target in MD_LINK.findall(page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith(("#", "mailto:")) or not re.search(r"[./]", target):  # (s): math, not a link
                continue
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []
