"""What each command's `--help` says above and below its options: one paragraph on what the command is
for, and examples to copy. The parser (trainwarden/cli/parser.py) reads them by the command's words
("policy check"), so a command's help lives here with the others, said the same way, and a test checks
that every command and subcommand has its entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Said:
    description: str
    examples: tuple[str, ...]  # command lines, each optionally with "  # what it does"


def examples(lines: Sequence[str]) -> str:
    """Pure: the epilog, an "Examples:" block indented as argparse indents options."""
    return "\n".join(["Examples:", *(f"  {line}" for line in lines)])


HELP: dict[str, Said] = {
    "": Said(
        "trainwarden watches ML training runs: agents turn logs into events in Redis, workers evaluate a policy "
        "and stop runs that go wrong, with an evidence pack, and the bot says so on Slack or the console. "
        "`trainwarden COMMAND --help` says what each command does.",
        ("trainwarden demo                     # the whole NaN -> STOP path, self-contained",
         "trainwarden up --redis               # Redis and the four daemons on this machine",
         "trainwarden launch exp01 -- python train.py --lr 3e-4",
         "trainwarden check exp01              # the run's training-check report"),
    ),
    "agent": Said(
        "Follow the runs of this host: read their logs, W&B files, processes and GPUs, and publish what it "
        "reads as events. Runs come from `trainwarden launch` and `watch` (through the host's control stream), "
        "from --watch or from the settings file. One agent per host; it keeps its read offsets in a state file "
        "and spools events to disk while Redis is away.",
        ("trainwarden agent",
         "trainwarden agent --watch exp01=$HOME/proj/logs/exp01.log --metrics-port 9101"),
    ),
    "dispatcher": Said(
        "Read new events from the feed and queue one RQ job per run with new events, for the workers. One "
        "dispatcher per deployment is enough; it runs anywhere near Redis.",
        ("trainwarden dispatcher",
         "trainwarden dispatcher --metrics-port 9102"),
    ),
    "worker": Said(
        "Take the dispatcher's jobs: evaluate the policy over each run's new events, record anomalies and "
        "decisions, write evidence packs and stop the runs the policy (or a person) says to stop. Start one or "
        "more; jobs run in this process unless --fork. Each serves the fast lane (QUEUE-fast: runs with a NaN, a "
        "critical fault, a stop asked for) before the queue.",
        ("trainwarden worker",
         "trainwarden worker --log-level WARNING --metrics-port 9103"),
    ),
    "bot": Said(
        "Post anomalies, decisions and stops to Slack (with SLACK_BOT_TOKEN set) and answer its slash commands, "
        "or print them to this console without a token. One bot per deployment: a second one waits as a "
        "standby.",
        ("trainwarden bot                      # console notifier",
         "SLACK_BOT_TOKEN=xoxb-... SLACK_APP_TOKEN=xapp-... trainwarden bot"),
    ),
    "launch": Said(
        "Start a run and have the watchdog follow it. `launch RUN [OPTIONS] -- COMMAND...` starts COMMAND on this "
        "host in a tmux session (train-RUN) and registers its log with this host's agent; `launch EXP` starts "
        "an experiment from experiments_dir on its server over SSH, after the preflight. Options go anywhere "
        "before `--`; everything after the first `--` is the training command. A command that fails in its "
        "first seconds is reported with its exit status and last lines (exit 1); Ctrl-C during that check says "
        "whether the run was started.",
        ("trainwarden launch exp01 --workdir ~/proj --log ~/proj/logs/exp01.log -- python train.py --lr 3e-4",
         "trainwarden launch exp02 --no-wandb -- python train.py",
         "trainwarden launch lr-sweep-3 --gpus 0,1      # an experiment on its server (servers_file set)"),
    ),
    "watch": Said(
        "Add a run you started yourself to the running agent of its host, without restarting it: the agent "
        "follows its log and, on a STOP, signals its process, its tmux session or runs its stop command. It "
        "never starts an agent.",
        ("trainwarden watch exp01 --log ~/proj/logs/exp01.log --pid 12345",
         "trainwarden watch exp01 --log ~/proj/logs/exp01.log --match 'train.py.*exp01' --grace 30"),
    ),
    "stop": Said(
        "Ask the workers to stop a run (a stop.requested event; the worker or the run's agent carries it out: "
        "Ctrl-C, a grace period, then kill). A run that ended, or that nothing recorded says how to stop, is "
        "refused with the reason (exit 1).",
        ('trainwarden stop exp01 --reason "lr too high"',
         "trainwarden stop exp01 --wait --timeout 60    # and print stop.done / stop.failed"),
    ),
    "replay": Said(
        "Print a run's timeline and its state, folded from the event log alone (and from archive files with "
        "--from); filter by type and time, see the state as of a moment, or re-evaluate the recorded events "
        "with the recorded policy (--verify) to audit its decisions.",
        ("trainwarden replay exp01",
         'trainwarden replay exp01 --type anomaly --since "2h ago"',
         "trainwarden replay exp01 --as-of 09:51 --json",
         "trainwarden replay exp01 --verify"),
    ),
    "check": Said(
        "Print the training-check report for a run's current state: data source, recent metrics, anomalies, "
        "evidence, decision, reason and when to check next, as the training-check method writes it.",
        ("trainwarden check exp01",
         "trainwarden check exp01 --interval 1h"),
    ),
    "archive": Said(
        "Export runs' event logs to compressed JSONL files, then trim them from Redis. `replay --from` reads the "
        "files back (with what the log still holds), so nothing is lost for audit.",
        ("trainwarden archive exp01",
         "trainwarden archive --older-than 30d --dry-run",
         "trainwarden replay --from ~/.local/share/trainwarden/archive/exp01/"),
    ),
    "policy": Said(
        "Work with policy files: validate them, print one, backtest one over a recorded run, a log file or a "
        "labelled corpus, or count the decisions made per rule.",
        ("trainwarden policy check my-policy.yaml",
         "trainwarden policy backtest my-policy.yaml --run exp01"),
    ),
    "policy check": Said(
        "Validate policy files and print every problem with its file:line:column; exit 1 if any file has one "
        "(for CI and before a reload).",
        ("trainwarden policy check my-policy.yaml",
         "trainwarden policy check policies/*.yaml"),
    ),
    "policy show": Said(
        "Print a policy file: the one named, else the configured one, else the default policy (a start for a "
        "policy of your own).",
        ("trainwarden policy show",
         "trainwarden policy show > my-policy.yaml"),
    ),
    "policy backtest": Said(
        "Run a policy over a recorded history and say when it would have fired: over a run in the event log, a "
        "training log file, a local W&B run directory, or a corpus of labelled past runs (scored; exit 1 when "
        "the policy falls short).",
        ("trainwarden policy backtest my-policy.yaml --run exp01",
         "trainwarden policy backtest default --log old-run.log --interval 5",
         "trainwarden policy backtest my-policy.yaml --corpus tests/data/real --json"),
    ),
    "policy report": Said(
        "Count the STOP and WAIT decisions per rule over a period, the real ones and those of rules in shadow "
        "mode (what they would have done), to judge a rule before it is allowed to stop runs.",
        ("trainwarden policy report --since 7d",
         "trainwarden policy report --since 2026-12-01 --policy my-policy --json"),
    ),
    "schema": Said(
        "Print the JSON Schema of a YAML file trainwarden reads (for an editor's completion and inline errors), "
        "or of the JSON `policy backtest --json` prints.",
        ("trainwarden schema policy > policy.schema.json",
         "trainwarden schema settings"),
    ),
    "health": Said(
        "Show every daemon's last heartbeat in one table (pid, age, version, lag, last error) and the data "
        "directory; exit 0 only when every part is alive. For a monitoring check or a container's HEALTHCHECK.",
        ("trainwarden health",
         "trainwarden health --json",
         "trainwarden health --forget agent@old-gpu-box"),
    ),
    "up": Said(
        "Run the agent, dispatcher, worker and bot of a one-machine install as children of this command, their "
        "output prefixed on this console and in one log file each. --redis starts a redis-server (AOF on) when "
        "none answers at a local URL. Ctrl-C stops them all; SIGHUP makes each reload its settings.",
        ("trainwarden up --redis",
         "REDIS_URL=redis://127.0.0.1:6380/0 trainwarden up --logs /var/log/trainwarden"),
    ),
    "mcp": Said(
        "Serve trainwarden to an AI agent over the Model Context Protocol: the reads `check` (the training-check "
        "report), `status`, `runs`, `replay` and `policy_backtest`, and the actions `stop` and `launch`, which are "
        "refused unless the settings allow them (mcp.allow_actions) and are recorded with the caller's identity "
        "either way. The default transport is stdio, for an MCP client that starts the server itself; --http "
        "serves streamable HTTP at http://HOST:PORT/mcp instead (loopback only, unless --host says otherwise). "
        "docs/agents.md has the client configuration.",
        ("trainwarden mcp                                 # stdio: `claude mcp add trainwarden -- trainwarden mcp`",
         "trainwarden mcp --http --port 8770               # http://127.0.0.1:8770/mcp"),
    ),
    "runs": Said(
        "List the runs the event log knows, most recent first, with each one's status (launched, running, "
        "stopping, stopped, finished, failed) and the time of its last event. trainwarden's own events "
        "(the system run) are left out unless --all.",
        ("trainwarden runs",
         "trainwarden runs --all"),
    ),
    "dead-letters": Said(
        "Show the stream entries that could not be decoded, with where they came from and why; they were set "
        "aside so that the rest of the run's events go on being processed.",
        ("trainwarden dead-letters",
         "trainwarden dead-letters --count 100"),
    ),
    "config": Said(
        "Check the settings, servers and experiments files, and that every path trainwarden writes is "
        "writable; exit 1 on a problem, which is named with its file and line.",
        ("trainwarden config check",
         "trainwarden --config ~/proj/trainwarden.yaml config check"),
    ),
    "preflight": Said(
        "Run the pre-launch checks of an experiment on its server over SSH (GPUs free, paths, disk, W&B login, "
        "the Python environment) and print each with its fix; exit 1 if one fails.",
        ("trainwarden preflight lr-sweep-3",
         "trainwarden preflight lr-sweep-3 --gpus 0,1"),
    ),
    "plan": Said(
        "Run a plan (a DAG of experiments placed on free GPUs, each launched when its parents finished) and "
        "follow it, or show how far it got. Ctrl-C stops following; the runs keep going.",
        ("trainwarden plan run plans/stage5.yaml",
         "trainwarden plan status plans/stage5.yaml"),
    ),
    "checkpoints": Said(
        "Apply an experiment's checkpoint retention policy on its server: list what would be deleted, and "
        "delete it with --apply.",
        ("trainwarden checkpoints lr-sweep-3",
         "trainwarden checkpoints lr-sweep-3 --apply"),
    ),
    "collect": Said(
        "Write the procedure's files from the event log: training/runs.yaml, training/checkpoints.yaml, "
        "status.yaml and findings.md, with each run's final metrics from W&B or from its log.",
        ("trainwarden collect",
         "trainwarden collect exp01 exp02 --out ~/proj --no-wandb"),
    ),
    "simulate": Said(
        "Publish metric events of synthetic runs at a fixed rate through the agent's publisher, optionally "
        "with NaN losses, to load-test the dispatcher, workers and bot.",
        ("trainwarden simulate --runs 1000 --rate 1 --duration 60",
         "trainwarden simulate --runs 100 --rate 2 --duration 30 --nan-fraction 0.1 --processes 2"),
    ),
    "demo": Said(
        "Run the whole NaN -> anomaly -> STOP -> evidence path on this machine with nothing set up: a private "
        "redis-server, a synthetic run in tmux whose loss turns NaN, and the agent, dispatcher and worker as "
        "separate processes. The evidence pack is kept in ./trainwarden-demo-evidence.",
        ("trainwarden demo",
         "trainwarden demo --nan-at 10 --keep"),
    ),
}  # fmt: skip
