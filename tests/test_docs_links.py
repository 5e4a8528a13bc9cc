"""Every relative link and image of the repository's Markdown pages (README.md, CONTRIBUTING.md,
docs/*.md, notebooks/README.md) points at a file inside the repository, and every `#anchor` at a
heading of its page; no page points outside the repository. The front door stays short: the README
within 200 lines, each docs page within 600."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", *(REPO / "docs").glob("*.md"),
                *(REPO / "notebooks").glob("*.md")])
README_LINES, DOCS_PAGE_LINES = 200, 600

# [text](target) and ![alt](target), the text may hold one level of brackets; an optional "title"
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML = re.compile(r"""<(?:a|img)\s[^>]*?(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
FENCE = re.compile(r"^ {0,3}(```|~~~)")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced code blocks, inline code removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"(`+)(?:(?!\1).)+?\1", "", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link text kept, lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor on the page (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    lines, fenced = [], False
    for line in page.read_text().splitlines():  # headings keep their inline code: `x` becomes x
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    for line in lines:
        m = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    found = []
    for line in prose_lines(page.read_text()):
        found += LINK.findall(line) + HTML.findall(line)
    return found


def relative(page: Path) -> list[str]:
    return [t for t in links(page) if not SCHEME.match(t)]


def test_the_pages_are_found_and_have_links():
    names = {p.relative_to(REPO).as_posix() for p in PAGES}
    assert {"README.md", "CONTRIBUTING.md", "docs/results.md", "docs/results-quality.md",
            "notebooks/README.md"} <= names
    assert len(relative(REPO / "README.md")) >= 10


def test_the_readme_is_a_short_front_door():
    lines = len((REPO / "README.md").read_text().splitlines())
    assert lines <= README_LINES, f"README.md has {lines} lines (at most {README_LINES}): move detail to docs/"


@pytest.mark.parametrize("page", sorted((REPO / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_docs_page_is_within_its_length(page):
    lines = len(page.read_text().splitlines())
    assert lines <= DOCS_PAGE_LINES, f"docs/{page.name} has {lines} lines (at most {DOCS_PAGE_LINES}): split it by topic"


def test_the_readme_links_every_results_page_and_the_results_index_too():
    """A topic page is reachable from the front door and from the results index's Contents."""
    topics = {p.name for p in (REPO / "docs").glob("results-*.md")}
    assert topics, "no results pages"
    readme = {t.partition("#")[0] for t in relative(REPO / "README.md")}
    index = {t.partition("#")[0] for t in relative(REPO / "docs" / "results.md")}
    assert {f"docs/{name}" for name in topics} <= readme
    assert topics <= index


@pytest.mark.parametrize("heading,anchor", [
    ("Does the tiny model's gap close?", "does-the-tiny-models-gap-close"),
    ("Memory (paper Fig. 4)", "memory-paper-fig-4"),
    ("Run directories, stopping and resume", "run-directories-stopping-and-resume"),
    ("Batch geometry — `zerolock bench geometry` (K=3)", "batch-geometry--zerolock-bench-geometry-k3"),
    ("[Results](x.md) for α", "results-for-α"),
])
def test_an_anchor_is_what_github_makes_of_the_heading(heading, anchor):
    assert slug(heading) == anchor


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_points_at_a_file_or_heading_inside_the_repository(page):
    broken = []
    for target in relative(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.is_relative_to(REPO):
            broken.append(f"{target}: outside the repository")
        elif not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(REPO).as_posix()}")
    assert not broken, f"{page.relative_to(REPO).as_posix()}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_page_names_a_path_outside_the_repository(page):
    """The repository stands alone: no `../shared`-style path, in a link or in the text."""
    assert "../shared" not in page.read_text()
    for target in relative(page):
        assert (page.parent / target.partition("#")[0]).resolve().is_relative_to(REPO), target
