"""The throughput kind over sampled events (a fixed clock), and its cause naming from GPU and process samples."""

from __future__ import annotations

from trainwarden.events import types as t
from trainwarden.policies.kinds.throughput import likely_cause
from trainwarden.policies.loader import load_policy
from trainwarden.policies.model import Policy

from tests.policy_helpers import T0, Clock, policy, run, summary

RULE = """\
  - id: throughput-drop
    kind: throughput
    fraction: {fraction}
    window: 2m
    sustained: 1m
    warmup: 30s
    span: 10s
"""


def _policy(fraction: float = 0.5) -> Policy:
    return policy(RULE.format(fraction=fraction))


def _steps(clock: Clock, start_s: float, end_s: float, every_s: float, step: int, **extra: object) -> tuple[list, int]:
    """Training steps every `every_s` seconds from `start_s` to `end_s`, counting from `step`."""
    out, at = [], start_s
    while at < end_s:
        step += 1
        out.append(clock.metric(at, step=step, loss=1.0, **extra))
        at += every_s
    return out, step


def _quiet(out: list) -> bool:
    return not _opened(out)


def _opened(out: list) -> list[dict]:
    return [data for typ, data in out if typ == t.ANOMALY_OPENED]


def test_steps_three_times_slower_for_the_sustained_window_warn_with_the_measured_rates():
    clock = Clock()
    fast, step = _steps(clock, 0, 300, 1.0, 0)  # 1 it/s for 5 minutes
    slow, step = _steps(clock, 300, 420, 3.0, step)  # then 1/3 it/s for 2 minutes
    out = run(_policy(), fast + slow)
    (opened,) = _opened(out)
    assert opened["rule"] == "throughput-drop" and opened["severity"] == "warning"
    # the first slow rates still span fast steps (0.8, 0.6 it/s); from 309 s each is under half: held 1m at 369 s
    assert opened["reason"].startswith("throughput fell to 33% of its recent level (it/s 1 -> 0.333 for 1m")
    assert opened["values"]["level"] == 1.0 and abs(opened["values"]["rate"] - 1 / 3) < 0.01
    assert opened["trigger"] == next(e.id for e in slow if e.ts >= T0 + 309 + 60)
    assert opened["values"]["step"] == 324


def test_a_steady_run_and_a_short_dip_stay_quiet_and_a_recovery_resolves():
    clock = Clock()
    steady, step = _steps(clock, 0, 600, 1.0, 0)
    assert _quiet(run(_policy(), steady))
    dip, step2 = _steps(clock, 600, 640, 4.0, step)  # 40 s slow: under the 1 minute sustained
    back, step3 = _steps(clock, 640, 700, 1.0, step2)
    assert _quiet(run(_policy(), steady + dip + back))
    slow, step4 = _steps(clock, 700, 820, 3.0, step3)
    again, _ = _steps(clock, 820, 900, 1.0, step4)
    said = [line for line in summary(run(_policy(), steady + dip + back + slow + again)) if line != "CONTINUE"]
    assert said == ["opened:throughput-drop", "resolved:throughput-drop"]


def test_the_warm_up_makes_no_level():
    clock = Clock()
    # 4 it/s while the first batches come from a cache, then the run's real 1 it/s: a level made of the first
    # 30 s would call the whole run a drop
    quick, step = _steps(clock, 0, 30, 0.25, 0)
    real, step = _steps(clock, 30, 300, 1.0, step)
    assert _quiet(run(_policy(), quick + real))
    unwarmed = policy(RULE.format(fraction=0.5).replace("warmup: 30s", "warmup: 0s"))
    assert _opened(run(unwarmed, quick + real))  # the same run without the warm-up: the test can fail


def test_an_eval_pause_is_no_slowdown():
    clock = Clock()
    events, step = _steps(clock, 0, 300, 1.0, 0)
    # then an eval every 8 s of training that takes 15 s: every rate spanning 10 s would hold a pause
    at = 300.0
    for _ in range(8):
        more, step = _steps(clock, at, at + 8, 1.0, step)
        events += [*more, clock.metric(at + 23, val_loss=0.9, step=step)]  # the eval's values arrive as it ends
        at += 23
    assert _quiet(run(_policy(), events))
    without = [e for e in events if "val_loss" not in e.data]
    assert _opened(run(_policy(), without))  # the pauses alone, no eval seen: a drop (the test can fail)


def test_a_reported_throughput_is_used_and_its_name_said():
    clock = Clock()
    events = [clock.metric(float(i), step=i, loss=1.0, tokens_per_s=5200.0) for i in range(200)]
    events += [clock.metric(float(i), step=i, loss=1.0, tokens_per_s=2100.0) for i in range(200, 300)]
    (opened,) = _opened(run(_policy(), events))
    assert opened["reason"].startswith("throughput fell to 40% of its recent level (tokens_per_s 5200 -> 2100 for 1m")
    assert opened["values"]["unit"] == "tokens_per_s"
    # an eval's own throughput (eval_samples_per_second) is no training rate: 0.4 would not fire at 0.3
    assert _opened(run(_policy(0.3), events)) == []


def test_the_cause_from_the_gpu_samples_another_process():
    clock = Clock()
    fast = [clock.metric(float(i), step=i, loss=1.0, samples_per_second=64.0) for i in range(200)]
    gpu_ok = clock.event(t.GPU, 199.5, gpu=0, gpu_util=97.0, throttle=[], mapped="process")
    slow = [clock.metric(float(i), step=i, loss=1.0, samples_per_second=30.0) for i in range(200, 290)]
    gpu_shared = clock.event(t.GPU, 250.0, gpu=0, gpu_util=99.0, throttle=[], mapped="process",
                             others=[{"pid": 4242, "name": "python"}])  # fmt: skip
    (opened,) = _opened(run(_policy(), [*fast, gpu_ok, *slow[:50], gpu_shared, *slow[50:]]))
    assert opened["reason"].endswith("): another process on GPU 0 (pid 4242, python)")
    assert "samples_per_second 64 -> 30 for 1m" in opened["reason"]


def test_the_cause_names_the_throttling_that_came_with_the_drop():
    clock = Clock()
    fast = [clock.metric(float(i), step=i, loss=1.0, tokens_per_s=9000.0) for i in range(200)]
    capped = clock.event(t.GPU, 199.5, gpu=0, gpu_util=99.0, gpu_temp=76.0, throttle=["sw_power_cap"],
                         clock_mhz=1755.0, clock_max_mhz=1980.0)  # fmt: skip
    slow = [clock.metric(float(i), step=i, loss=1.0, tokens_per_s=4000.0) for i in range(200, 290)]
    hot = clock.event(t.GPU, 230.0, gpu=0, gpu_util=99.0, gpu_temp=91.0, throttle=["sw_power_cap", "hw_thermal"],
                      clock_mhz=900.0, clock_max_mhz=1980.0)  # fmt: skip
    (opened,) = _opened(run(_policy(), [*fast, capped, *slow[:30], hot, *slow[30:]]))
    assert opened["reason"].endswith("): GPU 0 throttled (hw_thermal, 91 C, SM clock 900/1980 MHz)")


def test_cause_naming_is_a_function_of_the_last_samples():
    hot = {"0": {"gpu_util": 98.0, "gpu_temp": 89.0, "throttle": ["hw_thermal"], "clock_mhz": 1100.0,
                 "clock_max_mhz": 1980.0}}  # fmt: skip
    assert likely_cause(hot, {"0": 98.0}, 100.0, None) == "GPU 0 throttled (hw_thermal, 89 C, SM clock 1100/1980 MHz)"
    capped = {"0": {"gpu_util": 99.0, "gpu_temp": 70.0, "throttle": ["sw_power_cap", "applications_clocks"],
                    "power_w": 300.0, "power_limit_w": 300.0}}  # fmt: skip
    assert likely_cause(capped, {}, None, None) == "GPU 0 throttled (sw_power_cap, 70 C, 300/300 W)"
    # at its power cap all along, while the rate was normal too: not what slowed the run down now
    assert likely_cause(capped, {}, None, None, {"0": ["sw_power_cap"]}).startswith("no cause seen")
    starved = {"0": {"gpu_util": 31.0, "throttle": []}}
    assert likely_cause(starved, {"0": 95.0}, 12.0, "io_schedule") == (
        "I/O: GPU 0's utilisation fell with it (95% -> 31%) while its processes wait on disk I/O (the kernel's "
        "io_schedule)"
    )
    assert likely_cause(starved, {"0": 95.0}, 180.0, None) == (
        "the input pipeline: GPU 0's utilisation fell with it (95% -> 31%) while its processes use 180% CPU "
        "(CPU-bound data loading)"
    )
    assert likely_cause(starved, {"0": 40.0}, 180.0, None).startswith("no cause seen")  # 31 of 40: not fallen
    assert likely_cause({}, {}, 3.0, "folio_wait_bit_common") == (
        "I/O: its processes wait on disk I/O (the kernel's folio_wait_bit_common)"
    )
    assert likely_cause({"0": {"gpu_util": 97.0}}, {"0": 97.0}, 100.0, "hrtimer_nanosleep") == (
        "no cause seen in the samples (GPU 0 at 97%, its processes at 100% CPU, waiting on a sleep (the kernel's "
        "hrtimer_nanosleep))"
    )
    many = {"1": {"others": [{"pid": p} for p in (1, 2, 3, 4, 5)]}}
    assert likely_cause(many, {}, None, None) == "another process on GPU 1 (pid 1, pid 2, pid 3 and 2 more)"


def test_policy_checks_its_parameters():
    bad = "name: t\nrules:\n  - id: x\n    kind: throughput\n    fraction: 2\n    sustained: 5 mins\n"
    try:
        load_policy(bad, source="t.yaml")
    except Exception as exc:  # the loader's error lists every problem
        text = str(exc)
    else:
        raise AssertionError("a fraction of 2 and a duration of '5 mins' were accepted")
    assert "'fraction' is the share of its recent level" in text and "'sustained' must be a duration" in text


def test_a_save_phase_pause_is_no_slowdown_even_when_rates_span_longer_than_sustained():
    # rates spanning 2m of steps: after a 3-minute save, every rate for 2 minutes would span the pause
    rule = RULE.format(fraction=0.5).replace("span: 10s", "span: 2m")
    clock = Clock()
    before, step = _steps(clock, 0, 300, 1.0, 0)
    save = [clock.event(t.PHASE, 300, phase="save", started=True, line="saving checkpoint ckpt/step_300.pt")]
    after, step = _steps(clock, 480, 720, 1.0, step)
    assert _quiet(run(policy(rule), before + save + after))
    # the same pause with no phase line said is a slowdown: the rule is not blind to it
    assert _opened(run(policy(rule), before + after))
