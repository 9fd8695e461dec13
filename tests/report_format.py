"""The training-check report's format as the method (training-check skill) writes it, as a regex: the eight
lines in order, the method's values only, then trainwarden's extra fields. Written apart from workers/report.py."""

import re

LOCAL_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d [A-Z][A-Za-z0-9+-]*"  # `2026-12-06 14:03 CET`: local, its zone named
SKILL_REPORT = re.compile(
    rf"## Training Check - (?P<time>{LOCAL_TIME})\n"
    r"\n"
    r"- Data source: (?P<source>wandb_ok|log_fallback|unreachable)\n"
    r"- Run: (?P<run>[^\n]+)\n"
    r"- Recent metrics: (?P<metrics>[^\n]+)\n"
    r"- Anomalies: (?P<anomalies>[^\n]+)\n"
    r"- Evidence: (?P<evidence>[^\n]+)\n"
    r"- Decision: (?P<decision>CONTINUE|WAIT|STOP|none \(run ended: (?:finished|failed)\))\n"
    r"- Reason: (?P<reason>[^\n]+)\n"
    rf"- Next check: (?P<next>{LOCAL_TIME}|none \(run ended\)|none \(run being stopped\))\n"
    r"\n"
    r"(?P<extra>(?:- [A-Z][a-z ]+: [^\n]+\n)+)"
)


def skill_fields(report: str) -> dict[str, str]:
    """The report's fields; fails, showing the report, unless it opens with the method's eight lines exactly."""
    found = SKILL_REPORT.match(report)
    assert found, report
    fields = found.groupdict()
    extra = dict(line[2:].split(": ", 1) for line in fields.pop("extra").splitlines())
    return {**fields, **{f"extra:{k}": v for k, v in extra.items()}}
