"""Command-line conventions: options before or after the subcommand, `--` for launch, --version, messages."""

import importlib.metadata
from pathlib import Path

import pytest

from trainwarden.cli.entry import build_parser, main
from trainwarden.cli.launch import split_command


@pytest.mark.parametrize(
    "argv",
    [
        ["--config", "tw.yaml", "--log-level", "DEBUG", "runs"],
        ["runs", "--config", "tw.yaml", "--log-level", "DEBUG"],
        ["--config", "tw.yaml", "runs", "--log-level", "DEBUG"],  # one given before is not reset by the subparser
        ["policy", "check", "p.yaml", "--config", "tw.yaml", "--log-level", "DEBUG"],  # nested subcommands too
    ],
)
def test_global_options_are_taken_before_and_after_the_subcommand(argv):
    args = build_parser().parse_args(argv)
    assert (args.config, args.log_level, args.redis_url) == (Path("tw.yaml"), "DEBUG", None)


def test_defaults_without_global_options():
    args = build_parser().parse_args(["runs"])
    assert (args.config, args.log_level, args.redis_url) == (None, "INFO", None)


@pytest.mark.parametrize(
    ("argv", "options", "command"),
    [
        (["launch", "exp01", "--workdir", "/p", "--", "python", "train.py", "--", "-x"],
         ["launch", "exp01", "--workdir", "/p"], ["python", "train.py", "--", "-x"]),
        (["--log-level", "launch", "launch", "e", "--", "t"], ["--log-level", "launch", "launch", "e"], ["t"]),
        (["--config", "c.yaml", "launch", "exp01"], ["--config", "c.yaml", "launch", "exp01"], None),
        (["replay", "--", "launch"], ["replay", "--", "launch"], None),  # another command's `--` is argparse's
    ],
)  # fmt: skip
def test_launch_splits_at_the_first_double_dash(argv, options, command):
    assert split_command(argv) == (options, command)


def test_version(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"trainwarden {importlib.metadata.version('trainwarden')}\n"


def test_launch_without_a_command_and_without_servers_asks_for_the_command(tmp_path, capsys):
    settings = tmp_path / "tw.yaml"
    settings.write_text("redis_url: redis://127.0.0.1:1/0\n")  # never reached
    assert main(["launch", "exp01", "--config", str(settings)]) == 1
    err = capsys.readouterr().err
    assert "give the training command after --" in err and "no servers configured" not in err
    with pytest.raises(SystemExit) as exited:
        main(["launch", "exp01", "--config", str(settings), "python", "train.py"])  # `--` forgotten: a usage error
    assert exited.value.code == 2
    assert "give the training command after --" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"REDIS_URL": "localhost:6479"},
         "Redis URL 'localhost:6479' has no scheme; write it as redis://localhost:6479/0"),
        ({"--redis-url": "htp://x"}, "Redis URL 'htp://x' has the scheme 'htp://'; write it as redis://x/0"),
        ({"--redis-url": "secret@localhost:6479"}, "Redis URL '***@localhost:6479' has no scheme; write it as "
         "redis://***@localhost:6479/0"),  # a password in it is never shown
        ({"--redis-url": "redis://localhost:port"}, "Redis URL 'redis://localhost:port': Port could not be cast"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", [["runs"], ["health"], ["replay", "exp01"]])
def test_a_malformed_redis_url_is_one_line_with_the_fix(monkeypatch, capsys, given, said, command):
    """Not redis-py's 20-line traceback (ValueError: Redis URL must specify one of the following schemes)."""
    monkeypatch.delenv("TRAINWARDEN_CONFIG", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    if "REDIS_URL" in given:
        monkeypatch.setenv("REDIS_URL", given["REDIS_URL"])
    options = ["--redis-url", given["--redis-url"]] if "--redis-url" in given else []
    assert main([*options, *command]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"trainwarden: error: {said}"), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "secret" not in err
    assert "REDIS_URL, --redis-url or redis_url in the settings file" in err  # where to correct it


def test_policy_check_lists_problems_in_line_order(tmp_path, capsys):
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "name: t\nstartup: 3x\nrules:\n  - id: a\n    kind: spikey\n    metric: loss\n"
        "  - id: a\n    kind: nonfinite\n    metric: loss\n    decision: HALT\n"
    )
    assert main(["policy", "check", str(policy)]) == 1
    problems = [line.strip() for line in capsys.readouterr().err.splitlines()[1:]]
    lines = [int(problem.split(":")[1]) for problem in problems]
    assert len(lines) == 4 and lines == sorted(lines), problems
