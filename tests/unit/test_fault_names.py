"""Faults named as people name them (issue 39 item 7): the shell's `Killed`, the DeepSpeed launcher's `exits with
return code = -9`, TensorFlow's `CUDA_ERROR_OUT_OF_MEMORY`, a component's missing heartbeat and the NCCL heartbeat
monitor are tagged, said in the words a person searches for, and named by the default policy as the scorecard
judges it.

Every line is quoted from the public issue thread named beside it (as its poster pasted it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from trainwarden.agent.parse import fault_of
from trainwarden.faults import REGISTRY
from trainwarden.faults.words import describe
from trainwarden.ops.backtest import log_events
from trainwarden.policies.backtest import Backtest, backtest
from trainwarden.policies.default import default_policy

from trainwarden.tools.scorecard import names_fault

SIGKILL_SAID = (
    "a training process died of signal 9 (SIGKILL): most likely the host ran out of memory (the kernel's OOM killer)"
)


def backtested(tmp_path: Path, *lines: str) -> Backtest:
    """The lines as a log the default policy reads through the agent's own parsing (`policy backtest`)."""
    log = tmp_path / "train.log"
    log.write_text("".join(line + "\n" for line in lines))
    return backtest(default_policy(), list(log_events(log, interval=10)))


def first_firing(result: Backtest) -> tuple[str, str]:
    assert result.firings, "no rule fired"
    first = result.firings[0]
    return first.rule, first.reason


SHELL_KILLED = [
    # https://github.com/xk-huang/yet-another-vectornet/issues/37 (bash, after the tqdm bar)
    "Killed",
    # https://github.com/CharlesShang/FastMaskRCNN/issues/172 and https://github.com/InternLandMark/LandMark/issues/61
    # (pasted in markdown), and the same line quoted or in code as an issue's reply shows it
    "**Killed**",
    "> Killed",
    "`Killed`",
    # https://github.com/chenhsuanlin/spatial-transformer-GAN/issues/35 (the shell's job status)
    "./train.sh: line 1:  7364 Killed                  python3 train_Donly.py --name=D0 --warpN=0 --pertFG=0.2",
    # https://github.com/divamgupta/deep-clustering-kingdra/issues/2 (behind a timestamp)
    "2020-11-24 20:22:28.106 /bin/bash: line 27: 318 Killed sh start.sh",
    # https://github.com/InternLandMark/LandMark/issues/65 (the bar the kill cut short, its fill shortened)
    " 31%|█████▉             | 331/1063 [01:06<03:59,  3.06it/s]Killed",
]


@pytest.mark.parametrize("line", SHELL_KILLED)
def test_the_shells_killed_line_is_a_host_out_of_memory_kill(line, tmp_path):
    assert fault_of(line) == "killed"
    assert "out of memory" in (describe("killed", line) or "")
    rule, reason = first_firing(backtested(tmp_path, "step 1 loss 2.31", line))
    assert rule == "log-killed" and "host ran out of memory" in reason
    assert names_fault("oom", backtested(tmp_path, "step 1 loss 2.31", line), [])


@pytest.mark.parametrize(
    "line",
    [
        "Killed 3 stale workers",
        # https://github.com/deepspeedai/DeepSpeed/issues/3232: the launcher killing the others is no fault of its own
        "[2023-04-14 13:11:27,879] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 13266",
    ],
)
def test_a_line_that_only_says_killed_in_passing_is_no_kill(line):
    assert fault_of(line) != "killed"


DEEPSPEED_MINUS_9 = [
    # https://github.com/deepspeedai/DeepSpeed/issues/3232
    "[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', "
    "'--local_rank=0', '--data_path', 'Dahoas/rm-static', '--model_name_or_path', 'facebook/opt-125m', "
    "'--zero_stage', '2', '--deepspeed', '--output_dir', "
    "'/content/DeepSpeedExamples/applications/DeepSpeed-Chat/output/actor-models/125m'] exits with return code = -9",
    # https://github.com/deepspeedai/DeepSpeed/issues/4890 (the command cut to [xxx] by its poster)
    "[ERROR] [launch.py:321:sigkill_handler [xxx] exits with return code = -9",
]


@pytest.mark.parametrize("line", DEEPSPEED_MINUS_9)
def test_deepspeeds_return_code_minus_9_is_a_sigkill_most_likely_the_host_out_of_memory(line, tmp_path):
    assert fault_of(line) == "killed"
    assert describe("killed", line) == SIGKILL_SAID
    rule, reason = first_firing(backtested(tmp_path, "step 1 loss 2.31", line))
    assert (rule, SIGKILL_SAID in reason) == ("log-killed", True)


def test_deepspeeds_other_signals_are_said_by_their_name_without_guessing_memory():
    # https://github.com/deepspeedai/DeepSpeedExamples/issues/626
    line = (
        "[2023-07-10 04:26:35,999] [ERROR] [launch.py:324:sigkill_handler] ['/global/D1/homes/sushant/sushanta/venv/"
        "bin/python3.10', '-u', 'trainCLM.py', '--local_rank=1', '--deepspeed', '/home/sushant/D1/sushanta/try/"
        "nepaligpt/clm/config/deepspeed_config.json'] exits with return code = -11"
    )
    assert describe("killed", line) == "a training process died of signal 11 (SIGSEGV)"


TF_CUDA_OOM = [
    # https://github.com/tensorflow/tensorflow/issues/12237
    (
        "2017-08-12 08:25:16.508376: E tensorflow/stream_executor/cuda/cuda_driver.cc:924] failed to allocate 1.51G "
        "(1617277696 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY",
        "failed to allocate 1.51 GiB",
    ),
    # https://github.com/tensorflow/tensorflow/issues/14231 (on Windows: the build's path in the prefix)
    (
        "2017-11-03 11:34:30.628747: E C:\\tf_jenkins\\home\\workspace\\rel-win\\M\\windows-gpu\\PY\\35\\tensorflow\\"
        "stream_executor\\cuda\\cuda_driver.cc:924] failed to allocate 1.97G (2120187392 bytes) from device: "
        "CUDA_ERROR_OUT_OF_MEMORY",
        "failed to allocate 1.97 GiB",
    ),
    # https://github.com/daddydrac/Anaconda-CUDA-Accelerated-TensorFlowGPU-Development-Environment/issues/1
    (
        "2019-07-21 23:23:06.228049: E tensorflow/stream_executor/cuda/cuda_driver.cc:828] failed to allocate 32.00M "
        "(33554432 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        "failed to allocate 32.00 MiB",
    ),
]


@pytest.mark.parametrize(("line", "size"), TF_CUDA_OOM)
def test_tensorflows_cuda_error_out_of_memory_is_an_oom(line, size, tmp_path):
    assert fault_of(line) == "oom"
    said = describe("oom", line) or ""
    assert said.startswith("out of memory (GPU, TensorFlow)") and size in said
    result = backtested(tmp_path, "step 1 loss 2.31", line)
    assert first_firing(result)[0] == "log-oom" and names_fault("oom", result, [])


COMPONENT_HEARTBEAT = [
    # https://github.com/alex-petrenko/sample-factory/issues/285
    (
        "[2023-09-18 21:35:46,519][196071] No heartbeat for components :InferenceWorker_p0-w0 (337 seconds)",
        "hang: no heartbeat from InferenceWorker_p0-w0 for 5m37s",
    ),
    # https://github.com/alex-petrenko/sample-factory/issues/316 (its title)
    (
        "No heartbeat for components: RolloutWorker_w2 (552 seconds)",
        "hang: no heartbeat from RolloutWorker_w2 for 9m12s",
    ),
]


@pytest.mark.parametrize(("line", "said"), COMPONENT_HEARTBEAT)
def test_a_components_missing_heartbeat_is_named_a_hang(line, said, tmp_path):
    assert fault_of(line) == "hang"
    assert describe("hang", line) == said
    result = backtested(tmp_path, "step 1 loss 2.31", line)
    assert first_firing(result) == ("log-hang", said) or said in first_firing(result)[1]
    assert names_fault("hang", result, [])


def test_the_runner_stopping_for_the_missing_heartbeat_folds_into_it(tmp_path):
    """https://github.com/alex-petrenko/sample-factory/issues/285: the two lines are one fault, one anomaly."""
    heartbeat, stopping = (
        "[2023-09-18 21:35:46,519][196071] No heartbeat for components :InferenceWorker_p0-w0 (337 seconds)",
        "[2023-09-18 21:35:46,519][196071] Stopping training due to lack of heartbeats from <class "
        "'sample_factory.algo.sampling.inference_worker.InferenceWorker‘>",
    )
    assert fault_of(stopping) == "hang"
    result = backtested(tmp_path, "step 1 loss 2.31", heartbeat, stopping)
    assert [m.rule for m in result.firings if m.what == "critical"] == ["log-hang"]


NCCL_HEARTBEAT = [
    # https://github.com/Intellindust-AI-Lab/DEIM/issues/105
    (
        "[rank1]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 1] [PG 0 Rank 1] ProcessGroupNCCL's watchdog got "
        "stuck for 600 seconds without making progress in monitoring enqueued collectives. This typically "
        "indicates a NCCL/CUDA API hang blocking the watchdog, and could be triggered by another thread "
        "holding the GIL inside a CUDA api, or other deadlock-prone behaviors.If you suspect the watchdog is "
        "not actually stuck and a longer timeout would help, you can either increase the timeout "
        "(TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor "
        "(TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free to file an issue to "
        "PyTorch about the short timeout or false positive abort; otherwise, please attempt to debug the "
        "hang. workMetaList_.size() = 103",
        "hang: NCCL's watchdog got stuck for 10m on rank 1 (a NCCL/CUDA call hung)",
    ),
    # https://github.com/sgl-project/sglang/issues/1691
    (
        "[rank0]:[E1019 01:04:03.356947152 ProcessGroupNCCL.cpp:1413] [PG 3 Rank 0] Heartbeat monitor timed out! "
        "Process will be terminated after dumping debug info. workMetaList_.size()=121",
        "hang: NCCL's heartbeat monitor timed out on rank 0 (the watchdog made no progress: a NCCL/CUDA call hung)",
    ),
    # https://github.com/modelscope/ms-swift/issues/7992 (behind its viewer's timestamp; cut after its first sentence)
    (
        "18:11:06.680 [rank4]:[E205 18:11:06.375750231 ProcessGroupNCCL.cpp:1870] [PG ID 12 PG GUID "
        "99(EXPERT_MODEL_PARALLEL_GROUP) Rank 4] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making "
        "progress in monitoring enqueued collectives.",
        "hang: NCCL's watchdog got stuck for 8m on rank 4 (a NCCL/CUDA call hung)",
    ),
]


@pytest.mark.parametrize(("line", "said"), NCCL_HEARTBEAT)
def test_the_nccl_heartbeat_monitor_is_named_a_hang_and_nccl(line, said, tmp_path):
    assert fault_of(line) == "nccl"
    assert describe("nccl", line) == said
    result = backtested(tmp_path, "step 1 loss 2.31", line)
    rule, reason = first_firing(result)
    assert rule == "log-nccl" and said in reason
    assert names_fault("hang", result, []) and names_fault("nccl", result, [])


def test_every_host_oom_kill_is_said_with_the_words_out_of_memory():
    """`grep "out of memory"` finds each message and remedy that blames the OOM killer."""
    texts = [(s.id, text) for s in REGISTRY for text in (s.what, s.remedy, *(x.said or "" for x in s.samples))]
    blaming = [(sid, text) for sid, text in texts if re.search(r"oom.killer|out-of-memory", text, re.IGNORECASE)]
    assert blaming, "no signature blames the OOM killer"
    assert [sid for sid, text in blaming if "out of memory" not in text] == []
