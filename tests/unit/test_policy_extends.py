"""`extends: default`: a custom policy keeps the default's rules unless it replaces (same id) or disables them,
and its hash covers the merged rules (#37: a one-rule policy silently dropped the NaN STOP)."""

import pytest
from trainwarden.events import types as t
from trainwarden.policies.default import default_policy, default_policy_text
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.lint import warnings
from trainwarden.policies.loader import load_policy

GN = "  - {id: gn-high, kind: threshold, metric: grad_norm, above: 100, decision: STOP}\n"
MINE = "name: mine\nrules:\n" + GN
EXTENDS = "name: mine\nextends: default\nrules:\n" + GN


def ids(policy):
    return [r.id for r in policy.rules]


def test_extends_default_keeps_the_defaults_rules_and_adds_a_new_id_after_them():
    policy = load_policy(EXTENDS, source="mine.yaml")
    assert ids(policy) == [*ids(default_policy()), "gn-high"]
    assert policy.rules[:-1] == default_policy().rules
    assert policy.rule("loss-nonfinite").decision == t.STOP
    assert (policy.name, policy.startup, policy.mode) == ("mine", default_policy().startup, "enforce")
    assert policy.base_text == default_policy_text()
    # without `extends` the file is still the whole policy (existing policies keep their meaning and hash)
    assert ids(load_policy(MINE, source="mine.yaml")) == ["gn-high"]
    with pytest.raises(PolicyError, match="needs a list of 'rules'"):
        load_policy("name: mine\n", source="mine.yaml")


def test_a_rule_with_a_default_id_replaces_it_in_place():
    text = "extends: default\nrules:\n  - {id: loss-spike, kind: spike, metric: loss, ratio: 5}\n"
    policy = load_policy(text, source="mine.yaml")
    assert ids(policy) == ids(default_policy())
    assert policy.rule("loss-spike").kind.ratio == 5
    assert default_policy().rule("loss-spike").kind.ratio == 3
    assert [r for r in policy.rules if r.id != "loss-spike"] == [
        r for r in default_policy().rules if r.id != "loss-spike"
    ]


def test_disable_removes_default_rules_and_rules_may_be_left_out():
    policy = load_policy("name: quiet\nextends: default\ndisable: [gpu-util-low, gpu-temp-high]\n", source="q.yaml")
    assert ids(policy) == [i for i in ids(default_policy()) if i not in ("gpu-util-low", "gpu-temp-high")]


def test_the_hash_covers_the_merged_rules_and_the_recorded_base():
    same_as_default = load_policy("name: default\nextends: default\n", source="d.yaml")
    assert same_as_default.hash == default_policy().hash
    assert load_policy(EXTENDS, source="a").hash != load_policy(MINE, source="b").hash
    # a replay loads the text with the base recorded beside it, not the default installed now
    older = default_policy_text().replace("ratio: 3              # loss > 3x", "ratio: 4              # loss > 4x")
    assert older != default_policy_text()
    replayed = load_policy(EXTENDS, source="recorded", base_text=older)
    assert replayed.rule("loss-spike").kind.ratio == 4
    assert replayed.hash != load_policy(EXTENDS, source="now").hash


def test_the_file_sets_what_it_names_and_inherits_the_rest():
    policy = load_policy("extends: default\nstartup: 10m\nmode: shadow\n", source="s.yaml")
    assert (policy.name, policy.startup.seconds, policy.mode) == ("policy", 600.0, "shadow")


def test_a_stopping_policy_without_a_nonfinite_loss_rule_gets_one_warning_line():
    (line,) = warnings(load_policy(MINE, source="mine.yaml"))
    assert "\n" not in line
    assert line.startswith("warning: policy 'mine' stops runs (rule 'gn-high') but has no rule for a non-finite loss")
    assert warnings(default_policy()) == []
    assert warnings(load_policy(EXTENDS, source="mine.yaml")) == []
    # no STOP (anomalies only, or STOP in shadow mode): nothing to warn about
    assert warnings(load_policy(MINE.replace("decision: STOP", "decision: WAIT"), source="w")) == []
    assert warnings(load_policy("mode: shadow\n" + MINE, source="s")) == []
    # disabling the default's NaN rule brings the warning back
    off = load_policy("name: no-nan\nextends: default\ndisable: [loss-nonfinite]\n", source="off.yaml")
    assert len(warnings(off)) == 1
