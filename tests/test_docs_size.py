"""Words a newcomer reads in minutes: the README within 120 lines and 80-word paragraphs, results
as small tables whose cells stay short (docs/results.md)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def paragraphs(text: str) -> list[str]:
    """Prose paragraphs and list items (code blocks, tables and headings left out)."""
    out, cur, fenced = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced, cur = not fenced, []
            continue
        if fenced:
            continue
        if not line.strip() or line.startswith(("|", "#")) or (line.lstrip().startswith(("- ", "* ")) and cur):
            if cur:
                out.append(" ".join(cur))
            cur = []
            if not line.strip() or line.startswith(("|", "#")):
                continue
        cur.append(line)
    return out + ([" ".join(cur)] if cur else [])


def test_the_readme_is_short():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 120
    long = [p[:60] for p in paragraphs(text) if len(p.split()) > 80]
    assert not long, f"README paragraphs over 80 words: {long}"


def test_results_tables_have_short_cells():
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    cells = [c.strip() for line in text.splitlines() if line.startswith("|") for c in line.strip("|").split("|")]
    long = [c[:60] for c in cells if len(c.split()) > 50]
    assert not long, f"docs/results.md cells over 50 words: {long}"
