"""Rule kinds and how each is read from a policy file.

| kind | fires when |
|---|---|
| nonfinite_term | any training metric measuring `quantity` (a loss term under any name) is NaN or +/-Inf |
| nonfinite | the metric is NaN or +/-Inf, or beyond float32 with `overflow` (`skipped_by`: see NonFinite) |
| threshold | the metric is above `above` or below `below` |
| spike | the metric is `ratio` x its trailing mean/median (or 1/`ratio`, direction down), or over `above` |
| runaway | the metric's recent median is `ratio` x its running minimum (after `warmup` values) |
| no_progress | after `evals` evals, no better than its first value(s) by `min_delta` |
| frozen | the very same value at `count` positions in a row |
| chance | a loss at ln k, an accuracy at 1/k (a k-way task at chance), `count` values in a row |
| stuck | a loss frozen, or at ln k for a k the run states, for `share` of its planned length (or `evals` evals) |
| zero_start | a loss and a gradient norm of exactly 0 on each of the first `count` logged steps |
| past_best | an eval no better than its best for `patience` evals, and worse than it by `min_delta` |
| early_stop | the eval metrics that decide have not beaten their best for max(`patience`, `share` x the run's) evals |
| collapse | an eval metric lost `drop` of the level it held in one eval, far beyond its usual move, and stays down |
| scale_collapse | the loss scale fell `halvings` samples in a row to under `below`, or is zero |
| trend | the metric rose (or fell) `count` evaluations in a row |
| divergence | `rising` rose while `falling` fell, `count` evaluations in a row |
| plateau | relative improvement < `eps` over the last `window` values |
| baseline | the eval metric is worse (or flat) vs the experiment's expected baseline |
| absence | no event of a type (or no finite metric) for `duration` |
| stall | no progress for longer than its phase allows: steps (`factor` x the usual gap), eval, save, first step |
| throughput | the run's rate under `fraction` of its recent level for `sustained`, naming the likely cause |
| log_pattern | a log line has the agent's `tag` (oom, nccl, ...) and/or matches `pattern` |
| lr_schedule | lr non-finite, zero after being positive, or rising while the schedule decays |
| status | an event field (`source.status` status) takes one of `values` (of `source`, if given) |
"""

from __future__ import annotations

from collections.abc import Callable

from trainwarden.core.metrics import QUANTITY_WORDS
from trainwarden.events import types as t
from trainwarden.events.envelope import TYPE_RE
from trainwarden.faults import logtags
from trainwarden.policies.kinds.earlystop import Collapse, EarlyStop
from trainwarden.policies.kinds.levels import Chance, PastBest
from trainwarden.policies.kinds.precision import ScaleCollapse
from trainwarden.policies.kinds.progress import Frozen, NoProgress, Runaway
from trainwarden.policies.kinds.relations import Baseline, Divergence, LrSchedule
from trainwarden.policies.kinds.signals import Absence, LogPattern, Status
from trainwarden.policies.kinds.stall import Stall
from trainwarden.policies.kinds.stuck import Stuck, ZeroStart
from trainwarden.policies.kinds.throughput import Throughput
from trainwarden.policies.kinds.values import OVERFLOWS, NonFinite, NonFiniteTerm, Plateau, Spike, Threshold, Trend
from trainwarden.policies.model import Kind
from trainwarden.policies.names import expand
from trainwarden.policies.schema import PolicyReader


def _events(r: PolicyReader, default: tuple[str, ...] = (t.METRIC,), key: str = "event") -> frozenset[str]:
    names = r.strings(key, default=default)
    bad = [n for n in names if not TYPE_RE.match(n)]
    if bad:
        r.fail(key, f"'{key}' must name event types like metric, gpu, health; got {bad[0]!r}")
        return frozenset(default)
    return frozenset(names)


def _nonfinite(r: PolicyReader) -> Kind:
    return NonFinite(
        names=r.metric(),
        events=_events(r),
        skipped_by=r.metric("skipped_by", required=False),
        skips=r.integer("skips", default=3, minimum=1),
        beside=r.choice("beside", ("any", "broken", "skipped"), default="any"),
        overflow=_overflow(r.choice("overflow", ("none", *OVERFLOWS), default="none")),
    )


def _overflow(choice: str) -> str | None:
    return None if choice == "none" else choice


def _runaway(r: PolicyReader) -> Kind:
    smooth = r.integer("smooth", default=3, minimum=1)
    return Runaway(
        names=r.metric(),
        ratio=r.number("ratio", default=2.0, minimum=1.0) or 2.0,
        warmup=max(r.integer("warmup", default=3, minimum=1), smooth),
        smooth=smooth,
        floor=r.number("floor", default=0.25, minimum=0.0) or 0.0,
        start_ratio=r.number("start_ratio", default=None, minimum=1.0),
        hold=r.integer("hold", default=0, minimum=0),
        events=_events(r),
    )


def _no_progress(r: PolicyReader) -> Kind:
    first = r.integer("first", default=1, minimum=1)
    return NoProgress(
        names=r.metric(),
        evals=max(r.integer("evals", default=5, minimum=2), first + 1),
        first=first,
        min_delta=r.number("min_delta", default=0.01, minimum=0.0) or 0.0,
        mode=r.choice("mode", ("min", "max"), default="min"),
        descent=r.integer("descent", default=0, minimum=0),
        unless_rising=r.metric("unless_rising", required=False),
        events=_events(r),
    )


def _frozen(r: PolicyReader) -> Kind:
    return Frozen(
        names=r.metric(),
        count=r.integer("count", default=3, minimum=2),
        digits=r.integer("digits", default=4, minimum=1),
        unless_falling=r.string("unless_falling", description="a metric whose fall on the same line resets"),
        unless_rising=r.metric("unless_rising", required=False),
        events=_events(r),
    )


def _chance(r: PolicyReader) -> Kind:
    quantity = r.choice("quantity", ("loss", "accuracy"), default="loss")
    loss = quantity == "loss"
    return Chance(
        names=r.metric(),
        quantity=quantity,
        count=r.integer("count", default=10, minimum=2),
        tolerance=r.number("tolerance", default=0.002 if loss else 0.05, minimum=0.0) or 0.0,
        spread=r.number("spread", default=0.01 if loss else 0.3, minimum=0.0) or 0.0,
        k_max=r.integer("k_max", default=1000 if loss else 10, minimum=2),
        events=_events(r),
    )


def _stuck(r: PolicyReader) -> Kind:
    share = r.number("share", default=0.1, positive=True) or 0.1
    if share > 1:
        r.fail("share", f"'share' is the part of the run's planned length it is stuck for (0.1: a tenth); got {share}")
    return Stuck(
        names=r.metric(),
        share=share,
        evals=r.integer("evals", default=5, minimum=1),
        count=r.integer("count", default=10, minimum=2),
        digits=r.integer("digits", default=4, minimum=1),
        tolerance=r.number("tolerance", default=0.01, minimum=0.0) or 0.0,
        spread=r.number("spread", default=0.05, minimum=0.0) or 0.0,
        level=r.number("level"),
        chance=r.boolean("chance", default=True),
        unless_rising=r.metric("unless_rising", required=False),
    )


def _zero_start(r: PolicyReader) -> Kind:
    return ZeroStart(
        names=r.metric(),
        grads=r.metric("grads", required=False) or expand(("grad_norm",), r.ctx.aliases),
        count=r.integer("count", default=5, minimum=1),
    )


def _past_best(r: PolicyReader) -> Kind:
    return PastBest(
        names=r.metric(),
        patience=r.integer("patience", default=10, minimum=1),
        min_delta=r.number("min_delta", default=0.02, minimum=0.0) or 0.0,
        mode=r.choice("mode", ("min", "max"), default="min"),
        events=_events(r),
    )


def _early_stop(r: PolicyReader) -> Kind:
    share = r.number("share", default=0.5, minimum=0.0) or 0.0
    if share >= 1:
        r.fail("share", f"'share' is the part of the run's evals with no new best (0.5: half); got {share}")
    return EarlyStop(
        metrics=r.metric(required=False),
        patience=r.integer("patience", default=10, minimum=1),
        share=share,
        min_delta=r.number("min_delta", default=0.0, minimum=0.0) or 0.0,
        plan_share=r.number("plan_share", default=0.25, positive=True) or 0.25,
        plan_patience=r.integer("plan_patience", default=5, minimum=1),
    )


def _collapse(r: PolicyReader) -> Kind:
    drop = r.number("drop", default=0.25, positive=True) or 0.25
    if drop >= 1:
        r.fail("drop", f"'drop' is the share of its value the metric loses in one eval (0.25: a quarter); got {drop}")
    return Collapse(
        drop=drop,
        noise=r.number("noise", default=4.0, minimum=0.0) or 0.0,
        min_evals=r.integer("min_evals", default=5, minimum=2),
        window=r.integer("window", default=20, minimum=2),
    )


def _scale_collapse(r: PolicyReader) -> Kind:
    return ScaleCollapse(
        names=r.metric(required=False) or expand(("loss_scale",), r.ctx.aliases),
        halvings=r.integer("halvings", default=2, minimum=1),
        below=r.number("below", default=16.0, minimum=0.0) or 0.0,
        events=_events(r),
        search_from=r.number("search_from", default=64.0, minimum=0.0) or 0.0,
        search_floor=r.number("search_floor", default=1.0, minimum=0.0) or 0.0,
        search_gap=r.integer("search_gap", default=100, minimum=1),
        unless_falling=r.string("unless_falling", description="a loss whose new low on the same line ends a collapse"),
    )


def _threshold(r: PolicyReader) -> Kind:
    names = r.metric()
    above, below = r.number("above"), r.number("below")
    if above is None and below is None and r.ok and not {"above", "below"} & set(r.fields):
        r.ctx.problem(r.node, f"{r.what} needs 'above', 'below' or both")
    return Threshold(names=names, above=above, below=below, events=_events(r))


def _spike(r: PolicyReader) -> Kind:
    window = r.integer("window", default=20, minimum=2)
    return Spike(
        names=r.metric(),
        ratio=r.number("ratio", default=2.0, minimum=1.0) or 2.0,
        window=window,
        stat=r.choice("stat", ("mean", "median"), default="mean"),
        direction=r.choice("direction", ("up", "down"), default="up"),
        min_samples=min(r.integer("min_samples", default=5), window),
        events=_events(r),
        above=r.number("above"),
    )


def _trend(r: PolicyReader) -> Kind:
    return Trend(
        names=r.metric(),
        direction=r.choice("direction", ("rising", "falling"), default="rising"),
        count=r.integer("count", default=3),
        min_delta=r.number("min_delta", default=0.0, minimum=0.0) or 0.0,
        min_giveback=r.number("min_giveback", default=0.0, minimum=0.0) or 0.0,
        events=_events(r),
    )


def _plateau(r: PolicyReader) -> Kind:
    return Plateau(
        names=r.metric(),
        window=r.integer("window", default=20, minimum=2),
        eps=r.number("eps", default=0.01, minimum=0.0) or 0.0,
        mode=r.choice("mode", ("min", "max"), default="min"),
        events=_events(r),
    )


def _divergence(r: PolicyReader) -> Kind:
    return Divergence(rising=r.metric("rising"), falling=r.metric("falling"), count=r.integer("count", default=2),
                      min_giveback=r.number("min_giveback", default=0.0, minimum=0.0) or 0.0)  # fmt: skip


def _baseline(r: PolicyReader) -> Kind:
    value, key = r.number("value"), r.string("config_key")
    if value is None and key is None and r.ok and not {"value", "config_key"} & set(r.fields):
        r.ctx.problem(r.node, f"{r.what} needs 'value' (a number) or 'config_key' (a path in the launch config)")
    fire_on = r.strings("fire_on", default=("worse",))
    if not set(fire_on) <= {"worse", "flat", "improving"}:
        r.fail("fire_on", "'fire_on' must list verdicts from: worse, flat, improving")
        fire_on = ("worse",)
    return Baseline(
        names=r.metric(),
        value=value,
        config_key=key,
        mode=r.choice("mode", ("min", "max"), default="min"),
        tolerance=r.number("tolerance", default=0.02, minimum=0.0) or 0.0,
        fire_on=fire_on,
    )


def _absence(r: PolicyReader) -> Kind:
    return Absence(
        duration=r.duration("duration", required=True, default=900.0),
        watch=_events(r),
        names=r.metric(required=False),
    )


def _nonfinite_term(r: PolicyReader) -> Kind:
    return NonFiniteTerm(quantity=r.choice("quantity", tuple(sorted(set(QUANTITY_WORDS.values()))), default="loss"))


def _stall(r: PolicyReader) -> Kind:
    return Stall(
        floor=r.duration("floor", default=120.0) or 120.0,
        busy_floor=r.duration("busy_floor", default=600.0) or 600.0,
        factor=r.number("factor", default=3.0, minimum=1.0) or 3.0,
        window=r.integer("window", default=20, minimum=1),
        min_steps=r.integer("min_steps", default=3, minimum=2),
        eval_factor=r.number("eval_factor", default=5.0, minimum=1.0) or 5.0,
        eval_floor=r.duration("eval_floor", default=120.0) or 120.0,
        save_budget=r.duration("save_budget", default=900.0) or 900.0,
        first_step_budget=r.duration("first_step_budget", default=1200.0) or 1200.0,
        allow_early_stop=r.boolean("allow_early_stop", default=False),
    )


def _throughput(r: PolicyReader) -> Kind:
    fraction = r.number("fraction", default=0.5, positive=True) or 0.5
    if fraction >= 1:
        r.fail("fraction", f"'fraction' is the share of its recent level the rate falls to (0.5: half); got {fraction}")
    return Throughput(
        fraction=fraction,
        window=r.duration("window", default=600.0) or 600.0,
        sustained=r.duration("sustained", default=300.0),
        warmup=r.duration("warmup", default=300.0),
        span=r.duration("span", default=30.0) or 30.0,
        min_samples=r.integer("min_samples", default=5, minimum=1),
    )


def _log_pattern(r: PolicyReader) -> Kind:
    regex = r.regex("pattern", required=False, description="a regular expression searched in the line's text")
    tags = r.strings("tag")
    unknown = [tag for tag in tags if tag not in logtags.TAG_RANK]
    if unknown:
        r.fail("tag", f"'tag' must name the agent's tags ({', '.join(logtags.TAG_RANK)}); got {unknown[0]!r}")
    if r.ok and not {"pattern", "tag"} & set(r.fields):
        r.ctx.problem(r.node, f"{r.what} needs 'tag' (a tag of the agent's, e.g. oom), 'pattern' (a regex) or both")
    return LogPattern(pattern=regex.pattern if regex else "", regex=regex, tags=tags)


def _lr_schedule(r: PolicyReader) -> Kind:
    return LrSchedule(
        names=r.metric(required=False) or expand(("lr",), r.ctx.aliases),
        schedule=r.choice("schedule", ("decay", "any"), default="decay"),
        tolerance=r.number("tolerance", default=0.01, minimum=0.0) or 0.0,
        zero=r.boolean("zero", default=True),
    )


def _status(r: PolicyReader) -> Kind:
    event = _events(r, default=(t.SOURCE_STATUS,))
    return Status(
        event_type=sorted(event)[0],
        field_name=r.string("field", default="status") or "status",
        values=r.strings("values", required=True),
        source=r.string("source", description="only events with this `source` count (source.status: metrics, nvml)"),
    )


READERS: dict[str, Callable[[PolicyReader], Kind]] = {
    "nonfinite": _nonfinite,
    "nonfinite_term": _nonfinite_term,
    "threshold": _threshold,
    "spike": _spike,
    "runaway": _runaway,
    "no_progress": _no_progress,
    "frozen": _frozen,
    "chance": _chance,
    "stuck": _stuck,
    "zero_start": _zero_start,
    "past_best": _past_best,
    "early_stop": _early_stop,
    "collapse": _collapse,
    "scale_collapse": _scale_collapse,
    "trend": _trend,
    "divergence": _divergence,
    "plateau": _plateau,
    "baseline": _baseline,
    "absence": _absence,
    "stall": _stall,
    "throughput": _throughput,
    "log_pattern": _log_pattern,
    "lr_schedule": _lr_schedule,
    "status": _status,
}
