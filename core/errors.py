"""The root of trainwarden's one exception tree, and the errors of the command line.

A leaf module: it imports nothing of trainwarden, so every package may import it. Each package keeps
its errors in its own `errors.py` (small modules, stable imports) under one package base; a test
checks that every exception class defined anywhere in trainwarden derives from `TrainwardenError`
and is drawn here. Retrying is decided by class (e.g. callers retry `StoreUnavailable`), not by a flag.

    TrainwardenError                 every error trainwarden raises on purpose; `run=`, `host=` context is appended
    ├── ConfigError                  a settings file, config file or the environment is invalid (names file:line)
    │   ├── YamlFileError            a YAML file that does not match its schema (file:line:column)
    │   └── MissingExtra             (trainwarden.extras) a command needs an optional package; names the extra
    ├── CliError                     a `trainwarden` command cannot do what it was asked
    │   ├── UsageError               a command-line argument is invalid (says what was expected)
    │   ├── UnknownRun               a command names a run that has no events
    │   ├── NotStoppable             `trainwarden stop`: the run ended, or nothing recorded says how to stop it
    │   ├── PolicyNotRecorded        replay --verify needs a policy whose text the log does not hold
    │   ├── RedisServerError         a private redis-server could not be started
    │   ├── DemoError                the demo's run did not go as it should
    │   ├── UpError                  `trainwarden up` cannot start the daemons (no Redis, or they run already)
    │   ├── ActionNotAllowed         `trainwarden mcp`: the settings do not allow an agent this action (audited)
    │   └── SimulateError            a `trainwarden simulate` producer process failed
    ├── EventLogError                (events.errors) the event log
    │   ├── EventError               an event or envelope that breaks the schema
    │   │   ├── EnvelopeError        building an event with bad fields (caller bug)
    │   │   └── DecodeError          a stored entry that cannot be read back (it is dead-lettered)
    │   └── StoreError               Redis refused an operation on the event log
    │       ├── StoreUnavailable     Redis unreachable or timed out; callers retry (appends are idempotent)
    │       │   └── StoreRefused     Redis up but refusing writes for now (OOM, MISCONF, READONLY, BUSY): retried alike
    │       ├── StoreAuthFailed      Redis refused our credentials (NOAUTH, WRONGPASS): fatal, said in one line
    │       ├── AclUncheckable       Redis cannot check an ACL user's rights for us (before 7.0)
    │       └── LeaseLost            another process took over this one's lease (the notifier's): it stands by
    ├── AgentError                   (agent.errors) the agent's sources and control stream
    │   ├── SourceUnavailable        a metric source cannot be read now (the agent says so and keeps running)
    │   │   ├── GpuUnavailable       NVML missing (no driver, no nvidia-ml-py) or failing
    │   │   ├── WandbUnavailable     W&B run files or API cannot be read
    │   │   └── MetricFileError      a structured metric file (TensorBoard events, ...) is corrupt or needs a package
    │   ├── WandbFileError           a W&B transaction log that is not what it should be (bad header, checksum)
    │   ├── SpoolUnwritable          the spool cannot be written (full or read-only disk): events wait in memory
    │   ├── ControlMessageError      a control-stream message the agent cannot use (skipped, with the reason)
    │   └── AgentBusy                `agent --burst` while another agent holds the host's agent lease
    ├── PolicyError                  (policies.errors) a policy that does not validate (every problem, file:line:col)
    ├── WorkerError                  (workers.errors) the RQ jobs
    │   ├── NoWorkerContext          a job ran in a process that `trainwarden worker` did not set up
    │   ├── NoValidPolicy            the policy file is invalid at start and no valid policy was ever recorded
    │   ├── RunBusy                  another worker holds the run's lock for too long (the entry is retried)
    │   ├── RunsFailed               some runs of a multi-run job failed (their feed entries are retried)
    │   └── UnknownAction            a pending action of a kind no class declares (logged and dropped)
    ├── RemoteError                  (remote.errors) launching, stopping and reaching runs on servers
    │   ├── LaunchError              a run could not be started (names the run and the cause)
    │   │   ├── PreflightFailed      a preflight check failed (says the fix)
    │   │   ├── WandbGuardRefused    the run would log to W&B offline or not at all
    │   │   └── PlanHeld             a plan holds the experiment back (a parent has not finished)
    │   ├── StopError                the run controller could not even attempt a stop
    │   ├── WandbUnreachable         `collect` could not ask W&B for final metrics (no key, no network, no run)
    │   └── SshError                 talking to a server over SSH failed
    │       ├── HostKeyRejected      the host key is unknown or changed (says how to check and add it)
    │       ├── SshAuthFailed        the server refused our key
    │       ├── SshUnreachable       the server cannot be reached
    │       └── SshTimeout           a remote command did not finish in time
    ├── ArchiveError                 (archive.errors) archiving a run's log or reading it back
    │   ├── ArchiveFormatError       a file that is not what `trainwarden archive` writes (file:line)
    │   │   └── ArchiveLineError     what is wrong with one line (the reader adds file:line)
    │   ├── ArchiveNotFound          a run's history is in archive files that are not on this machine
    │   ├── HistoryIncomplete        archives kept trimming the log while it was read: a hole remains
    │   ├── ArchiveConflict          the stream's head moved while an archive of it was written (nothing trimmed)
    │   ├── ArchiveBusy              another archive of the run is in progress
    │   ├── ArchiveWriteFailed       the file could not be written (disk full, permissions; nothing trimmed)
    │   └── ArchiveVerifyFailed      the file read back does not hold what was read from the log (nothing trimmed)
    └── BotError                     (bot.errors) the Slack bot
        ├── SlackError               talking to Slack's Web API failed
        │   ├── SlackUnavailable     5xx, connection reset, timeouts after retries (the notification is retried)
        │   └── SlackRejected        ok=false: of the setup (retried later) or of one message (sent as plain text)
        ├── NotifierBusy             `bot --burst` while another notifier holds the notifier lease
        ├── EndpointUnavailable      HTTP mode: the endpoint's port is taken (said in one line, exit 1)
        └── CommandError             a slash command or button that is not carried out (the message is shown)
            ├── BadInput             refused input (unknown name, shell metacharacters, too long)
            └── NotAllowed           the user or channel is not on the command's allow-list

A message a user sees says what is wrong and what to do about it.
"""

from __future__ import annotations

from typing import Any


class TrainwardenError(Exception):
    """Base class; keyword-only context (`run=`, `host=`, `event_id=`) travels with the message."""

    def __init__(self, message: str, **context: Any) -> None:
        self.context = {k: v for k, v in context.items() if v is not None}
        super().__init__(message)

    def __str__(self) -> str:
        message = super().__str__()
        if not self.context:
            return message
        where = ", ".join(f"{k}={v}" for k, v in self.context.items())
        return f"{message} [{where}]"


class ConfigError(TrainwardenError):
    """The settings file, a config file or the environment is invalid; fixing the file is the remedy."""


class YamlFileError(ConfigError):
    """A YAML file (settings, servers, experiments, plans) is invalid; the message starts with file:line:col.

    Raised by `core/yamlfile.py`, the reader every package shares.
    """


class CliError(TrainwardenError):
    """Base class of the command line's own errors (the `trainwarden` commands)."""


class UsageError(CliError):
    """A command-line argument is invalid."""


class UnknownRun(CliError):
    """The run has no events in the log."""

    def __init__(self, run: str, *, meant: str | None = None) -> None:
        """`meant`: the known run most like `run` (core/words.py `closest`), for "did you mean"."""
        self.run = run
        hint = f"; did you mean {meant!r}?" if meant is not None else ""
        super().__init__(f"unknown run {run!r}: it has no events{hint} (see `trainwarden runs`)")


class NotStoppable(CliError):
    """`trainwarden stop` of a run that ended, or that nothing recorded says how to stop (nothing is asked)."""


class PolicyNotRecorded(CliError):
    """A decision names a policy hash whose text is not in the `trainwarden.system` run's `policy.loaded` events."""


class RedisServerError(CliError):
    """A private redis-server could not be started."""


class DemoError(CliError):
    """The demo's vertical slice did not complete."""


class UpError(CliError):
    """`trainwarden up` cannot start the daemons of this machine (says what to start first)."""


class ActionNotAllowed(CliError):
    """An MCP client asked for an action (stop, launch) that `mcp.allow_actions` does not allow; nothing was done."""


class SimulateError(CliError):
    """A `trainwarden simulate` producer process failed (its traceback is in its output)."""
