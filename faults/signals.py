"""A training process dying of a signal, as its launcher reports it: torchrun (torch.distributed.elastic),
multiprocessing, the DeepSpeed launcher. Tag `killed`. SIGTERM, SIGINT, SIGHUP and SIGABRT are the launcher or the
scheduler taking the job down (stage TEARDOWN); a SIGKILL is said as what it most likely is, the host out of memory."""

from __future__ import annotations

import re
import signal

from trainwarden.faults.host import KILLED, SIGKILL_REMEDY, SIGKILL_WORDS
from trainwarden.faults.model import TEARDOWN, Sample, Signature, Source

ELASTIC_ERRORS = "torch/distributed/elastic/multiprocessing/errors/__init__.py"
DEEPSPEED = "deepspeedai/DeepSpeed"

_SIGNAL = re.compile(
    r"Signal (\d+) \((SIG[A-Z]+)\)|exitcode\s*:\s*-(\d+)|died with <Signals\.(SIG[A-Z]+): (\d+)>"
    r"|exits with return code = -(\d+)"
)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def _killed(line: str) -> str | None:
    """`a training process died of signal 9 (SIGKILL): most likely the host ran out of memory (...)` from
    torchrun's, multiprocessing's or the DeepSpeed launcher's report."""
    found = _SIGNAL.search(line)
    if found is None:
        return None
    number = found.group(1) or found.group(3) or found.group(5) or found.group(6)
    name = found.group(2) or found.group(4) or _signal_name(int(number))
    return f"a training process died of signal {number} ({name})" + (SIGKILL_WORDS if name == "SIGKILL" else "")


_TEARDOWN_SIGNALS = r"(?:15|2|1|6)"
_TEARDOWN_NAMES = r"SIG(?:TERM|INT|HUP|ABRT)"

SIGNATURES = (
    Signature(
        id="signal_teardown",
        tag=KILLED,
        pattern=rf"Signal {_TEARDOWN_SIGNALS} \({_TEARDOWN_NAMES}\) received by PID"
        rf"|exitcode\s*:\s*-{_TEARDOWN_SIGNALS}\b"
        rf"|died with <Signals\.{_TEARDOWN_NAMES}",
        hints=("Signal ", "exitcode", "died with"),
        severity="critical",
        what="a training process was terminated (SIGTERM/SIGINT/SIGABRT)",
        remedy="something ended the job: torchrun after another rank failed (read the first fault above), the "
        "scheduler (time limit, preemption) or a person; SIGABRT follows a NCCL watchdog timeout or a C++ abort",
        source=Source("pytorch/pytorch", ELASTIC_ERRORS, " received by PID "),
        describe=_killed,
        stage=TEARDOWN,
        samples=(
            Sample(
                "  traceback : Signal 15 (SIGTERM) received by PID 8800",
                "a training process died of signal 15 (SIGTERM)",
                "torch 2.13.0 here (tests/conformance/frameworks/ddp.py runs it)",
            ),
            Sample(
                "  exitcode  : -15 (pid: 8800)  (SIGTERM)",
                "a training process died of signal 15 (SIGTERM)",
                "torch 2.13.0 here (tests/conformance/frameworks/ddp.py runs it)",
            ),
        ),
    ),
    Signature(
        id="signal_report",
        tag=KILLED,
        pattern=r"exitcode\s*:\s*-\d+|Signal \d+ \(SIG[A-Z]+\) received|died with <Signals\.SIG",
        hints=("Signal ", "exitcode", "died with"),
        severity="critical",
        what="a training process died of a signal",
        remedy=SIGKILL_REMEDY + "; a SIGSEGV points at a native extension or the driver",
        source=Source("pytorch/pytorch", ELASTIC_ERRORS, " received by PID "),
        describe=_killed,
        samples=(
            Sample(
                "  traceback : Signal 9 (SIGKILL) received by PID 14750",
                "a training process died of signal 9 (SIGKILL)" + SIGKILL_WORDS,
                "https://github.com/lzhxmu/CPPO/issues/6",
            ),
            Sample(
                "  exitcode  : -11 (pid: 5277)",
                "a training process died of signal 11 (SIGSEGV)",
                "https://github.com/pytorch/pytorch/pull/175254",
            ),
            Sample(
                "E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed "
                "(exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python",
                "a training process died of signal 9 (SIGKILL)" + SIGKILL_WORDS,
                "https://github.com/lmzpai/roboMamba/issues/10",
            ),
        ),
        not_samples=(
            "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 899505 closing signal SIGTERM",
        ),
    ),
    Signature(
        id="deepspeed_signal",
        tag=KILLED,
        pattern=r"exits with return code = -\d+",
        hints=("exits with return code",),
        severity="critical",
        what="a training process launched by DeepSpeed died of a signal",
        remedy=SIGKILL_REMEDY + "; a SIGSEGV points at a native extension or the driver",
        source=Source(DEEPSPEED, "deepspeed/launcher/launch.py", "{cmd} exits with return code = {last_return_code}"),
        describe=_killed,
        samples=(
            Sample(
                "[ERROR] [launch.py:321:sigkill_handler [xxx] exits with return code = -9",
                "a training process died of signal 9 (SIGKILL)" + SIGKILL_WORDS,
                "https://github.com/deepspeedai/DeepSpeed/issues/4890 (the command cut to [xxx] by its poster)",
            ),
            Sample(
                "[2023-07-10 04:26:35,999] [ERROR] [launch.py:324:sigkill_handler] ['/global/D1/homes/sushant/"
                "sushanta/venv/bin/python3.10', '-u', 'trainCLM.py', '--local_rank=1', '--deepspeed', '/home/sushant/"
                "D1/sushanta/try/nepaligpt/clm/config/deepspeed_config.json'] exits with return code = -11",
                "a training process died of signal 11 (SIGSEGV)",
                "https://github.com/deepspeedai/DeepSpeedExamples/issues/626",
            ),
        ),
    ),
)
