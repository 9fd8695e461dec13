"""Policy files: every invalid fixture is reported with its exact file:line:column and what was expected."""

from pathlib import Path

import pytest
from trainwarden.policies.default import default_policy, default_policy_text
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.loader import load_policy

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "policies"

EXPECTED = {
    "unknown-kind.yaml": ["4:11: unknown rule kind 'spikes'; expected one of: absence, baseline, chance, collapse"],
    "unknown-field.yaml": ["6:5: unknown field 'windw' in rule 'loss-spike' (kind spike); expected one of:"],
    "bad-duration.yaml": ["5:15: 'duration' must be a duration like 30s, 10m, 2h or 1h30m, got '10 mins'"],
    "bad-for.yaml": ["7:10: 'for' must be a number of samples (3, or '3 samples') or a duration"],
    "negative-window.yaml": ["6:13: 'window' must be at least 2, got -5"],
    "bad-regex.yaml": ["5:14: 'pattern' is not a valid regular expression: missing ), unterminated subpattern"],
    "bad-decision.yaml": ["6:15: 'decision' must be STOP, WAIT or none (anomaly only), got 'KILL'"],
    "duplicate-id.yaml": ["6:9: rule id 'a' is used twice (first at line 3)"],
    "missing-metric.yaml": ["3:5: rule 'gn' (kind threshold) needs 'metric'"],
    "threshold-without-limit.yaml": ["3:5: rule 'gn' (kind threshold) needs 'above', 'below' or both"],
    "bad-phase.yaml": ["7:12: 'phase' must be one of startup, steady, any, got 'warmup'"],
    "not-yaml.yaml": ["5:1: not valid YAML"],
    "no-rules.yaml": ["1:1: the policy needs a list of 'rules'"],
    "escalate-without-decision.yaml": ["7:7: escalate needs 'decision' (STOP or WAIT) and 'for'"],
    "extends-unknown.yaml": [
        "2:10: 'extends' must be 'default' (the policy shipped with trainwarden), got "
        "'defualt'; did you mean 'default'?"
    ],
    "disable-unknown.yaml": [
        "5:5: 'disable' names rule 'gpu-temp-hi', which the default policy does not have; did you mean 'gpu-temp-high'?"
    ],
    "disable-without-extends.yaml": [
        "2:10: 'disable' removes rules of the policy this one extends: add 'extends: default'"
    ],
    "disable-and-override.yaml": ["3:11: rule 'loss-spike' is both disabled and defined in 'rules'"],
    "many-problems.yaml": [
        "2:10: 'startup' must be a duration like 30s, 10m, 2h or 1h30m, or progress like '500 steps' or '3 evals', "
        "got 'half an hour'",
        "7:13: 'window' must be at least 2, got 0",
        "10:15: 'duration' must be a duration like 30s, 10m, 2h or 1h30m, got 15",
        "13:14: 'pattern' is not a valid regular expression",
        "14:15: 'severity' must be one of info, warning, critical, got 'fatal'",
    ],
}


def test_every_fixture_has_an_expectation():
    assert sorted(p.name for p in FIXTURES.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_invalid_policy_reports_file_line_and_column(name):
    path = FIXTURES / name
    with pytest.raises(PolicyError) as info:
        load_policy(path.read_text(), source=str(path))
    problems = info.value.problems
    assert len(problems) == len(EXPECTED[name]), problems
    for problem, expected in zip(problems, EXPECTED[name], strict=True):
        assert problem.startswith(f"{path}:{expected.split(': ', 1)[0]}: "), problem
        assert expected.split(": ", 1)[1] in problem


def test_the_default_policy_is_valid_and_stable():
    policy = default_policy()
    assert len(policy.rules) >= 20
    again = load_policy(default_policy_text(), source="again")
    assert again.hash == policy.hash
    kinds = {r.kind.kind for r in policy.rules}
    assert kinds == {"nonfinite", "threshold", "spike", "trend", "divergence", "plateau", "baseline", "absence",
                     "log_pattern", "lr_schedule", "status", "runaway", "no_progress", "frozen",
                     "scale_collapse", "chance", "past_best", "stall", "nonfinite_term", "throughput", "early_stop",
                     "collapse", "stuck", "zero_start"}  # fmt: skip


def test_comments_do_not_change_the_hash_but_a_threshold_does():
    text = default_policy_text()
    assert load_policy("# a comment\n" + text, source="x").hash == default_policy().hash
    assert load_policy(text.replace("above: 100", "above: 150"), source="x").hash != default_policy().hash


def test_aliases_extend_the_builtin_names():
    policy = load_policy("rules:\n  - {id: l, kind: nonfinite, metric: loss}\naliases:\n  loss: [my/loss]\n",
                         source="x")  # fmt: skip
    assert policy.rules[0].kind.names[0] == "my/loss"
