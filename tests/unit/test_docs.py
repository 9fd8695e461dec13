"""The docs a newcomer reads: a short README, links that lead somewhere, the project's standard files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250
# [text](target) or [text](target "title"); images too. Targets with a scheme or only an anchor are not files.
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_BLOCK = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def relative_links(text: str) -> list[str]:
    """Targets of Markdown links outside code, without anchors; links to other sites are left out."""
    prose = INLINE_CODE.sub("", CODE_BLOCK.sub("", text))
    targets = []
    for target in LINK.findall(prose):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue
        targets.append(target.split("#", 1)[0])
    return targets


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move the reference into docs/"


def test_the_readme_keeps_the_command_ci_runs() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert "./dev.sh test" in lines


@pytest.mark.parametrize("name", ["LICENSE", "CHANGELOG.md", "CONTRIBUTING.md"])
def test_the_standard_files_exist(name: str) -> None:
    assert (ROOT / name).is_file()
    assert (ROOT / name).read_text(encoding="utf-8").strip()


def test_the_license_is_mit_as_the_package_says() -> None:
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_existing_files(doc: Path) -> None:
    broken = [
        target
        for target in relative_links(doc.read_text(encoding="utf-8"))
        if target and not (doc.parent / target).exists()
    ]
    assert not broken, f"{doc.relative_to(ROOT)} links to missing files: {broken}"


def test_the_link_finder_sees_links_and_skips_code() -> None:
    text = "see [a](docs/a.md#x), [web](https://x.org), [top](#top)\n```\n[b](nope.md)\n```\n`[c](nor.md)`"
    assert relative_links(text) == ["docs/a.md"]


def test_decision_records_have_a_status() -> None:
    records = sorted((ROOT / "docs" / "decisions").glob("[0-9][0-9][0-9][0-9]-*.md"))
    assert records
    for record in records:
        text = record.read_text(encoding="utf-8")
        assert re.search(r"^Status: (accepted|superseded)", text, re.M), record.name
        for section in ("## Context", "## Decision", "## Consequences"):
            assert section in text, f"{record.name} lacks {section}"
