"""The whole way on the real clock, with the real daemons (agent, dispatcher, worker, the bot on the console): a
loop that prints steps and then blocks on a lock is said stalled within its budget, and the bot's next line says
where it is stuck. Measured: last step -> stall alert -> process.dump -> the console line.

The stall rule's floor is 3 s (allow_early_stop), so that the case takes seconds; the workers' ticks move the clock."""

import subprocess
import sys
import time

import pytest
import yaml
from trainwarden.agent.dumper import find_pyspy
from trainwarden.events import types as t
from trainwarden.events.keys import Keys

from tests.conftest import cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for
from trainwarden.cli.entry import main

pytestmark = [pytest.mark.redis]

LOOP = """
import threading, time
lock = threading.Lock()
lock.acquire()
for i in range(1, 16):
    print(f"step {i} loss {1 / i:.4f}", flush=True)
    time.sleep(0.2)
def wait_for_the_other_rank():
    lock.acquire()
wait_for_the_other_rank()
"""
POLICY = """name: stall-live
rules:
  - {id: run-stalled, kind: stall, floor: 3s, busy_floor: 6s, decision: WAIT, allow_early_stop: true}
"""


def test_a_hung_loop_is_said_stuck_where_it_waits_on_the_console(settings_file, store, tmp_path, capsys):
    body = yaml.safe_load(settings_file.read_text())
    (tmp_path / "policy.yaml").write_text(POLICY)
    body["policy"] = str(tmp_path / "policy.yaml")
    body["agent"].update(process_interval_s=0.3, nvml=False)
    body["workers"].update(tick_steady_s=0.5, tick_startup_s=0.5)
    settings_file.write_text(yaml.safe_dump(body))
    script, log = tmp_path / "train.py", tmp_path / "train.log"
    script.write_text(LOOP)
    daemons = [spawn(settings_file, tmp_path / f"{n}.log", n, env={"SLACK_BOT_TOKEN": ""})
               for n in ("agent", "dispatcher", "worker", "bot")]  # fmt: skip
    with open(log, "ab") as sink:
        proc = subprocess.Popen([sys.executable, str(script)], stdout=sink, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(lambda: store.redis.exists(Keys().beat("agent@testhost")), timeout=30, what="the agent's heartbeat")
        capsys.readouterr()
        assert main(cli_argv(settings_file, "watch", "hang", "--log", str(log), "--pid", str(proc.pid))[3:]) == 0
        (dump,) = wait_for(lambda: events_of(store, "hang", t.PROCESS_DUMP), timeout=60, what="the process.dump")
        bot_log = tmp_path / "bot.log"
        line = wait_for(lambda: [ln for ln in bot_log.read_text().splitlines() if "STUCK hang@testhost" in ln],
                        timeout=30, what="the bot's STUCK line")[0]  # fmt: skip
        seen = time.time()
        last_step = max(e.ts for e in events_of(store, "hang", t.METRIC) if e.data.get("step") is not None)
        (opened,) = [e for e in events_of(store, "hang", t.ANOMALY_OPENED) if e.data["rule"] == "run-stalled"]
        print(f"\nlast step -> stall alert {opened.ts - last_step:.2f} s (budget 3 s), -> process.dump "
              f"{dump.ts - last_step:.2f} s, -> console line seen {seen - last_step:.2f} s\n{line}")  # fmt: skip
        assert 3.0 <= opened.ts - last_step < 5.0
        assert dump.data["verdict"] == "hang" and dump.data["pid"] == proc.pid, dump.data
        assert f"(pid {proc.pid})" in line and "a hang" in line, line
        if find_pyspy() is not None:
            assert "in `lock.acquire`" in line and "At wait_for_the_other_rank, train.py:9" in line, line
    finally:
        proc.kill()
        proc.wait()
        for p in daemons:
            stop_process(p)
        for name in ("agent", "worker", "bot"):
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-2000:])
