"""Every relative link in README.md and docs/*.md points at a file the project holds (issue 26, item 4): no link to a
file outside the repository, none to a file that is not there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
# a file named in backticks the way the docs name one another: `docs/serve.md`, `docs/plan.md`
NAMED = re.compile(r"`(docs/[\w.-]+\.md)`")


def _links(text: str) -> list[str]:
    return [m.group(1) for m in LINK.finditer(FENCE.sub("", text))]


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) and not target.startswith("#")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    for target in filter(_relative, _links(text)):
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        assert path.is_relative_to(ROOT), f"{doc.name}: {target} leaves the repository"
        assert path.exists(), f"{doc.name}: {target} does not exist"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_named_in_backticks_exist(doc: Path) -> None:
    for name in NAMED.findall(doc.read_text(encoding="utf-8")):
        assert (ROOT / name).exists(), f"{doc.name}: `{name}` is not in the project"


def test_no_doc_points_at_files_outside_the_project() -> None:
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        assert "../shared" not in text and "MEASURING.md" not in text and "REFERENCE.md" not in text, doc.name


def test_the_link_parser_finds_links() -> None:
    text = 'see [a](docs/a.md), ![img](x.png "t"), [web](https://x.org) and [here](#top)\n```\n[no](in-code.md)\n```'
    assert _links(text) == ["docs/a.md", "x.png", "https://x.org", "#top"]
    assert [t for t in _links(text) if _relative(t)] == ["docs/a.md", "x.png"]
