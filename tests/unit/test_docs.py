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


def _text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def test_the_readme_says_how_long_the_tests_take_and_the_venvs_they_build_first() -> None:
    readme = _text("README.md")
    (line,) = [line for line in readme.splitlines() if line.startswith("./dev.sh test ")]
    assert re.search(r"about \d+ min on 2 cores", line), line  # CONTRIBUTING.md: the suite as CI ran it
    built = re.search(r"^\s*for dir in ([^;]+); do", _text("dev.sh"), re.M)  # dev.sh's ensure_frameworks
    assert built is not None
    for venv in built[1].split():
        assert f"`{venv}`" in readme, f"README.md does not say that ./dev.sh test builds {venv} first"


def test_the_readme_installs_from_a_checkout_until_a_release_exists() -> None:
    """`pip install 'trainwarden[all]'` does not resolve: nothing is on PyPI yet."""
    installs = [line for line in _text("README.md").splitlines() if "pip install" in line]
    assert installs
    for line in installs:
        assert re.search(r"pip install -e '?\.", line) and "'trainwarden[" not in line, line


def test_the_readme_layout_names_every_top_level_package() -> None:
    folders = re.findall(r'"trainwarden(?:\.\w+)?": "(\w+)"', _text("setup.py"))  # setup.py's ROOTS
    assert len(folders) >= 10
    layout = _text("README.md").partition("## Layout")[2].partition("\n## ")[0]
    missing = [folder for folder in folders if not re.search(rf"^{folder}/\s", layout, re.M)]
    assert not missing, f"README.md's Layout leaves out {missing}"


def test_the_agents_page_names_the_slack_commands_as_they_are_typed() -> None:
    """`/tw status`, not the old names (`/status`, `/launch`, ...), which only an old manifest still has."""
    old = re.findall(r"(?<![\w/])(?<!tw )/(?:status|launch|stop|snooze)\b", _text("docs/agents.md"))
    assert not old, old


def test_the_policy_error_example_is_what_policy_check_prints(tmp_path: Path, monkeypatch, capsys) -> None:
    """The example in docs/policies.md is the checker's output for this file: its rule kinds are today's."""
    from trainwarden.cli.entry import main

    (tmp_path / "team.yaml").write_text(
        "rules:\n  - id: loss-spikes\n    metric: loss\n    kind: spikes\n  - id: silent\n    kind: absence\n"
        "    event: metric\n    decision: WAIT\n    duration: 10 mins\n  - id: oom\n    kind: log_pattern\n"
        "    severity: critical\n    decision: STOP\n    pattern: 'CUDA out of memory ('\n"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["policy", "check", "team.yaml"]) == 1
    printed = capsys.readouterr().err
    documented = _text("docs/policies.md").partition("$ trainwarden policy check team.yaml\n")[2].partition("```")[0]
    assert documented == printed


def test_the_agent_page_has_sections() -> None:
    lines = _text("docs/agent.md").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    assert len(starts) >= 8, "docs/agent.md: give it sections (## headings)"
    longest = max(b - a for a, b in zip([0, *starts], [*starts, len(lines)], strict=True))
    assert longest <= 150, f"docs/agent.md has a stretch of {longest} lines without a heading"


def test_the_settings_page_says_where_the_demo_writes() -> None:
    from trainwarden.tools.demo import KEPT_EVIDENCE

    text = _text("docs/configuration.md")
    assert f"./{KEPT_EVIDENCE}/" in text and "never write into yours" not in text


@pytest.mark.parametrize(
    ("term", "said"),
    [("training-check method", "CONTINUE / WAIT / STOP"), ("training-check skill", "CONTINUE / WAIT / STOP"),
     ("Stage-5 procedure", "tmux")],
)  # fmt: skip
@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_lab_s_method_and_procedure_are_said_where_a_page_first_names_them(doc: Path, term: str, said: str) -> None:
    """A reader meets "the training-check method" or "the Stage-5 procedure" with a sentence saying what it is."""
    text = " ".join(doc.read_text(encoding="utf-8").split())  # one line: a definition may wrap
    at = text.find(term)
    if at < 0 or doc.parent.name == "decisions" or doc.name == "CHANGELOG.md":
        return
    assert said in text[max(0, at - 200) : at + 300], (
        f"{doc.relative_to(ROOT)}: say what the {term} is where it first appears"
    )
