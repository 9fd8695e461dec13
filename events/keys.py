"""Every Redis key trainwarden uses, from one place.

Per-run keys carry the run in a hash tag (`{run}`) so that on Redis Cluster all of a run's keys
live on one shard and the append script may touch them together.
"""

from __future__ import annotations

from dataclasses import dataclass

NAMESPACE = "tw"  # the prefix of every key; several deployments may share one Redis under different ones


@dataclass(frozen=True, slots=True)
class Keys:
    namespace: str = NAMESPACE

    def log(self, run: str) -> str:
        """The run's event stream: the source of truth."""
        return f"{self.namespace}:{{{run}}}:log"

    def hwm(self, run: str) -> str:
        """Hash producer -> highest seq stored in the run's log (idempotent appends)."""
        return f"{self.namespace}:{{{run}}}:hwm"

    def cursor(self, run: str) -> str:
        """Hash holding the workers' checkpoint for the run (read position, rule state, pending actions)."""
        return f"{self.namespace}:{{{run}}}:cursor"

    def view(self, run: str) -> str:
        """Hash holding the readers' snapshot of the run's state (events/run_view.py): `after`, `state`, `recent`."""
        return f"{self.namespace}:{{{run}}}:view"

    def archive(self, run: str) -> str:
        """Hash archive file name -> what it holds (ids, count, path, hash): where the log's trimmed head went."""
        return f"{self.namespace}:{{{run}}}:archive"

    def archiving(self, run: str) -> str:
        """Lease held by the one archive of the run in progress (`host:pid:token`; workers/archive_lease.py)."""
        return f"{self.namespace}:{{{run}}}:archiving"

    def lock(self, run: str) -> str:
        return f"{self.namespace}:{{{run}}}:lock"

    def queued(self, run: str) -> str:
        """Set while a processing job for the run waits in the queue (dispatcher dedup)."""
        return f"{self.namespace}:{{{run}}}:queued"

    def fast(self, run: str) -> str:
        """Set while a processing job for the run waits in the fast lane (dispatcher dedup, workers/lanes.py)."""
        return f"{self.namespace}:{{{run}}}:fast"

    def outbox(self, run: str) -> str:
        """List of writes to shared keys waiting to follow the run's committed writes (Redis Cluster only)."""
        return f"{self.namespace}:{{{run}}}:outbox"

    def outbox_pattern(self) -> str:
        return f"{self.namespace}:{{*}}:outbox"

    def feed(self) -> str:
        """One small entry per append batch: which run changed, which entries, which types."""
        return f"{self.namespace}:feed"

    def runs(self) -> str:
        """Sorted set run -> time of its last event."""
        return f"{self.namespace}:runs"

    def schedule(self) -> str:
        """Sorted set run -> wall-clock time its next tick is due (workers/schedule.py)."""
        return f"{self.namespace}:schedule"

    def breaker(self) -> str:
        """Sorted set stop request id -> time: the policy STOPs carried out lately, across runs (events/breaker.py)."""
        return f"{self.namespace}:breaker:stops"

    def breaker_held(self) -> str:
        """Hash run -> JSON of its STOP the breaker holds for a person (events/breaker.py)."""
        return f"{self.namespace}:breaker:held"

    def breaker_rules(self) -> str:
        """Hash rule definition (`Rule.definition`) -> when a policy holding it was first loaded (events/breaker.py)."""
        return f"{self.namespace}:breaker:rules"

    def breaker_running(self) -> str:
        """String: the number of running runs, kept a few seconds (the stop breaker's share, events/breaker.py)."""
        return f"{self.namespace}:breaker:running"

    def dead_letters(self) -> str:
        return f"{self.namespace}:dead"

    def agent_control(self, host: str) -> str:
        """Stream an agent reads to learn which runs to watch on its host (written by launches)."""
        return f"{self.namespace}:agent:{{{host}}}:control"

    def notify(self, run: str) -> str:
        """Hash holding the notifier's checkpoint for the run (read position, noise-control state)."""
        return f"{self.namespace}:{{{run}}}:notify"

    def notified(self, run: str) -> str:
        """Hash notification key -> intent or result (exactly-once posting, see bot/delivery.py)."""
        return f"{self.namespace}:{{{run}}}:notified"

    def breaker_notice(self) -> str:
        """String: JSON of the stop breaker's Slack message (its ts, the runs it lists; events/breaker_notice.py)."""
        return f"{self.namespace}:breaker:notice"

    def pack_files(self, run: str, event_id: str) -> str:
        """Hash file name -> bytes of an evidence pack's chart and report (or a critical anomaly's chart, by its
        id), kept for a while so that a bot on another machine can upload them (events/packfiles.py)."""
        return f"{self.namespace}:{{{run}}}:pack:{event_id}"

    def heartbeat(self, role: str) -> str:
        """Wall-clock time of the last loop of a daemon (the bot's dead-man's switch reads it)."""
        return f"{self.namespace}:heartbeat:{role}"

    def slack_request(self, signature: str) -> str:
        """Set (with a TTL) once a signed Slack request was accepted: a replay of it is refused (bot/app.py)."""
        return f"{self.namespace}:slack:seen:{signature}"

    def beat(self, component: str) -> str:
        """Hash holding a daemon's last heartbeat (events/heartbeat.py); `component` is `role@host`."""
        return f"{self.namespace}:beat:{component}"

    def beats(self) -> str:
        """Set of the components that have a heartbeat hash (read without SCAN)."""
        return f"{self.namespace}:beats"

    def probe(self) -> str:
        """String `trainwarden health` writes (expiring in a minute) to learn whether Redis takes writes."""
        return f"{self.namespace}:probe"

    def silent(self) -> str:
        """Hash component -> ts of the last beat before it went silent (events/silence.py)."""
        return f"{self.namespace}:silent"

    def fault(self, name: str) -> str:
        """Marker a failpoint sets when reached (see workers/faults.py)."""
        return f"{self.namespace}:fault:{name}"
