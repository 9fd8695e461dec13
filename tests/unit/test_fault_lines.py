"""Fault lines, from real runs: tagged before any metric parsing, named by the default policy with the
specifics that matter, and posted as one message per fault.

Every line is machine-printed output quoted from the corpus (tests/data/real, provenance in its
MANIFEST.yaml) or from the public issue named beside it.
"""

from pathlib import Path

import pytest
from trainwarden.agent.logsource import line_item
from trainwarden.agent.parse import fault_of, tag_of
from trainwarden.agent.tail import Line
from trainwarden.bot.stages import NotifyState, Pipeline
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.faults.words import describe
from trainwarden.policies.backtest import backtest
from trainwarden.policies.default import default_policy
from trainwarden.policies.engine import PolicyState, apply_policy, evaluate
from trainwarden.policies.errors import PolicyError

from tests.helpers import dev_corpus
from tests.policy_helpers import Clock, policy, run
from trainwarden.cli.policy import log_events

REAL = Path(__file__).resolve().parent.parent / "data" / "real"
MANIFEST = dev_corpus()


def corpus_line(name: str, number: int) -> str:
    return (REAL / name).read_text().splitlines()[number - 1]


WATCHDOG = corpus_line("nccl_basicsr_allreduce_timeout.log", 1)  # [rank1]:[E626 ...] ... WorkNCCL(SeqNum=808, ...
WATCHDOG_OLD = corpus_line("nccl_ofa_fairseq_old_format_timeout.log", 2)  # [E ProcessGroupNCCL.cpp:737] [Rank 3] ...
BAR_THEN_WATCHDOG = corpus_line("nemo_lightning_bar_then_nccl_timeout.log", 1)  # a bar with the watchdog glued on
TF_OOM = corpus_line("keras_tf_fit_generator_oom.log", 4)  # OP_REQUIRES failed ... OOM when allocating tensor
TF1_OOM = corpus_line("keras_tf1_fit_oom_traceback.log", 2)  # Resource exhausted: OOM when allocating tensor
TORCH_OOM = corpus_line("llamafactory_rank_prefixed_oom_eval.log", 5)  # [rank5]: torch.OutOfMemoryError: ...
TORCH_CUDA_OOM = corpus_line("llamafactory_oom_in_backward.log", 13)  # torch.cuda.OutOfMemoryError: ...

FAULT_LINES = [
    (WATCHDOG, "nccl"),
    (WATCHDOG_OLD, "nccl"),
    (BAR_THEN_WATCHDOG, "nccl"),
    (corpus_line("nccl_accelerate_vqgan_broadcast_timeout.log", 1), "nccl"),  # indented, [rank7]: prefixed
    (corpus_line("nccl_llamafactory_allreduce_timeout.log", 1), "nccl"),  # `[80746] [rank0]:` viewer prefix
    (corpus_line("nccl_basicsr_allreduce_timeout.log", 2), "nccl"),  # Exception (either an error or timeout) ...
    # https://github.com/NVIDIA-NeMo/Speech/issues/14399 (a NeMo launcher's prefix before torchrun's)
    (
        "B-nemo-ft3/0 [default1]:[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator and "
        "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait "
        "timeout after 600000ms, keys: /default_pg/0//cuda//0",
        "nccl",
    ),
    (TF_OOM, "oom"),
    (TF1_OOM, "oom"),
    (TORCH_OOM, "oom"),
    (TORCH_CUDA_OOM, "oom"),
    # https://github.com/bubbliiiing/yolo3-pytorch/issues/83
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "illegal_memory"),
    # https://github.com/skhu101/GauHuman/issues/21
    (
        "RuntimeError: merge_sort: failed to synchronize: cudaErrorIllegalAddress: an illegal memory access was "
        "encountered",
        "illegal_memory",
    ),
    # https://github.com/lzhxmu/CPPO/issues/6 (torchrun's ChildFailedError report)
    ("  exitcode  : -9 (pid: 14750)", "killed"),
    ("  traceback : Signal 9 (SIGKILL) received by PID 14750", "killed"),
    # https://github.com/lmzpai/roboMamba/issues/10
    (
        "E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python",
        "killed",
    ),
    # https://github.com/bert-nmt/bert-nmt/issues/47 (fairseq)
    (
        "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering the "
        "learning rate, using gradient clipping or increasing the batch size.",
        "nan",
    ),
    # https://github.com/yangjianxin1/Firefly/issues/68 (DeepSpeed)
    ("Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.", "nan"),
    # https://github.com/alibaba/Pai-Megatron-Patch/issues/60 (Megatron)
    (
        "AssertionError: Rank 3: found NaN in local grad norm in backwards pass. Device: 3, node: "
        "set-zw04-kubernetes-pc133.mt",
        "nan",
    ),
]

NOT_FAULTS = [
    # https://github.com/ymcui/Chinese-LLaMA-Alpaca/issues/534: DeepSpeed's dynamic loss scale at work
    "[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 64, reducing to 32",
    # https://github.com/yangjianxin1/Firefly/issues/171: torchrun tearing the other ranks down (a follow-on)
    "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 899505 closing signal SIGTERM",
    # keras_tf_fit_generator_oom.log line 8: TensorFlow's hint after an OOM, not the OOM itself
    corpus_line("keras_tf_fit_generator_oom.log", 8),
]


@pytest.mark.parametrize(("line", "tag"), FAULT_LINES)
def test_real_fault_lines_are_tagged_behind_any_prefix(line, tag):
    assert fault_of(line) == tag
    assert tag_of(line) == tag


@pytest.mark.parametrize("line", NOT_FAULTS)
def test_lines_that_only_look_alarming_are_no_fault(line):
    assert fault_of(line) is None


@pytest.mark.parametrize("line", [WATCHDOG, BAR_THEN_WATCHDOG, TF_OOM])
def test_a_fault_line_with_key_value_pairs_is_a_log_line_not_a_metric(line):
    item = line_item(run="r", host="h", line=Line(text=line, start=0, end=len(line) + 1, generation=0), now=0.0)
    assert item is not None and not item.is_metric
    assert item.event.type == t.LOG_LINE and item.event.data["tag"] in ("nccl", "oom")


@pytest.mark.parametrize(("tag", "line", "said"), [
    ("nccl", WATCHDOG, "NCCL ALLREDUCE timed out after 10m on rank 1 (SeqNum 808)"),
    ("nccl", WATCHDOG_OLD, "NCCL ALLREDUCE timed out after 30m on rank 3 (SeqNum 469508)"),
    ("oom", TORCH_OOM, "CUDA out of memory. Tried to allocate 270.00 MiB on GPU 5 (23.65 GiB total, 208.06 MiB free)"),
    ("oom", TORCH_CUDA_OOM, "CUDA out of memory. Tried to allocate 112.00 MiB"),
    ("oom", TF_OOM, "OOM when allocating tensor with shape[295,64,256,256] on GPU:0"),
    ("oom", TF1_OOM, "OOM when allocating tensor with shape[123008,500]"),
    ("killed", "  traceback : Signal 9 (SIGKILL) received by PID 14750",
     "a training process died of signal 9 (SIGKILL): most likely the host ran out of memory (the kernel's OOM killer)"),
    # https://github.com/pytorch/pytorch/pull/175254 (torchrun's report of a child killed by a signal)
    ("killed", "  exitcode  : -11 (pid: 5277)", "a training process died of signal 11 (SIGSEGV)"),
    ("illegal_memory", "RuntimeError: CUDA error: an illegal memory access was encountered",
     "CUDA illegal memory access (a kernel read or wrote outside its memory)"),
])  # fmt: skip
def test_a_fault_is_said_in_the_few_words_that_matter(tag, line, said):
    assert describe(tag, line) == said


FAULT_RUNS = [r for r in MANIFEST if r["label"] in ("ANOMALY:oom", "ANOMALY:nccl")]
SAID = {  # what each run's one message must say
    "nccl_accelerate_vqgan_broadcast_timeout.log": "NCCL BROADCAST timed out after 10m on rank 7 (SeqNum 80078)",
    "nccl_basicsr_allreduce_timeout.log": "NCCL ALLREDUCE timed out after 10m on rank 1 (SeqNum 808)",
    "nccl_llamafactory_allreduce_timeout.log": "NCCL ALLREDUCE timed out after 10m on rank 0 (SeqNum 1580)",
    "nccl_llamafactory_reduce_scatter_timeout.log": "NCCL _REDUCE_SCATTER_BASE timed out after 10m on rank 0",
    "nccl_ofa_fairseq_old_format_timeout.log": "NCCL ALLREDUCE timed out after 30m on rank 1 (SeqNum 469508)",
    "nemo_lightning_bar_then_nccl_timeout.log": "NCCL ALLREDUCE timed out after 30m on rank 0 (SeqNum 96120)",
    "keras_tf_fit_generator_oom.log": "OOM when allocating tensor with shape[295,64,256,256]",
    "keras_tf1_fit_oom_traceback.log": "OOM when allocating tensor with shape[123008,500]",
    "llamafactory_oom_in_backward.log": "CUDA out of memory. Tried to allocate 112.00 MiB",
    "llamafactory_rank_prefixed_oom_eval.log": "CUDA out of memory. Tried to allocate 270.00 MiB on GPU 5",
    "marian_valid_then_cuda_oom_tcmalloc.log": "CUDA out of memory (Marian: cudaMalloc(&data_, size) at device.cu:32)",
    "marian_startup_workspace_cuda_oom_bare.log": "CUDA out of memory (Marian: cudaMalloc(&data_, size) at "
    "device.cu:38)",
    "sockeye1_training_started_cudamalloc_oom_bare.log": "CUDA out of memory (MXNet: cudaMalloc failed in its GPU "
    "memory pool)",
    # corpus-dev3 (2026-12-05)
    "ccsr_ldm_lightning_cuda_oom_then_bar.log": "CUDA out of memory. Tried to allocate 20.00 MiB on GPU 3 (23.69 GiB "
    "total, 21.69 MiB free)",
    "colossalai_opt_cuda_oom_glued_traceback_bare.log": "CUDA out of memory. Tried to allocate 1.25 GiB on GPU 0 "
    "(31.75 GiB total, 1.06 GiB free)",
    "nccl_elastic_what_broadcast_timeout_bare.log": "NCCL BROADCAST timed out after 30m on rank 7 (SeqNum 806)",
    # not met today (no code change here): THC's `THCudaCheck FAIL ... error=2 : out of memory` and `RuntimeError: cuda
    # runtime error (2) : out of memory at ...THCStorage.cu:66` are not tagged `oom` (agent.parse.fault_of), so the
    # first firing is log-traceback (a warning), not log-oom, and the exit adds a second message
    "loop_tqdm_bar_thcudacheck_out_of_memory.log": "CUDA out of memory (PyTorch before 1.0: THC's cudaMalloc)",
    # corpus-dev4b (2026-12-07, issue 39): met since the fault names of issue 39 item 7
    "deepspeed_chat_launcher_sigkill_return_code_minus9.log": "out of memory",
    "tf1_stream_executor_cuda_error_out_of_memory_shrinking_allocs.log": "CUDA_ERROR_OUT_OF_MEMORY",
    "unet3d_brats_tensorpack_cuda_error_out_of_memory.log": "CUDA_ERROR_OUT_OF_MEMORY",
    "lambdalabs_sd_finetune_lightning_bar_summoning_checkpoint_killed.log": "out of memory",
}
# Corpus fault runs the default policy does not name as the test wants yet (issue 39 item 7; the scorecard's
# KNOWN_MISSES say the same): each case fails until a fix, and then its strict xfail fails so the entry goes.
NOT_MET: dict[str, str] = {}
FAULT_CASES = [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=NOT_MET[r["file"]])) if r["file"] in NOT_MET
               else r for r in FAULT_RUNS]  # fmt: skip


def test_every_corpus_fault_run_is_listed():
    assert sorted(r["file"] for r in FAULT_RUNS) == sorted(SAID)


@pytest.mark.parametrize("case", FAULT_CASES, ids=lambda r: r["file"])
def test_the_default_policy_names_each_corpus_fault(case):
    fault = case["label"].split(":")[1]
    result = backtest(default_policy(), list(log_events(REAL / case["file"], interval=10)))
    first = result.firings[0]
    # the shell's bare `Killed` is log-killed, said as most likely the host out of memory (SAID checks the words)
    rules = {f"log-{fault}", "log-killed"} if fault == "oom" else {f"log-{fault}"}
    assert first.rule in rules and first.what == "critical"
    assert SAID[case["file"]] in first.reason
    assert result.stop is None  # a crashed run is dead already: nothing to stop


def with_outcomes(events: list[Event]) -> list[Event]:
    """The run's log as the bot reads it: each input followed by what the policy appended for it."""
    policy, state = default_policy(), PolicyState()
    apply_policy(policy, state)
    out: list[Event] = []
    for event in events:
        out.append(event)
        for outcome in evaluate(policy, state, event):
            out.append(make_event(outcome.type, run=event.run, host="eval", producer="eval/run", seq=len(out),
                                  data=outcome.data, ts=event.ts))  # fmt: skip
    return out


def posted(events: list[Event]) -> list[str]:
    pipeline, state = Pipeline(flap_threshold=5, flap_window_s=3600.0), NotifyState()
    texts = []
    for event in events:
        notice, _ = pipeline.process(state, event)
        if notice is not None:
            texts.append(notice.text)
    return texts


# keras_tf1_fit_oom_traceback.log: TensorFlow's glog prefix (`W tensorflow/.../bfc_allocator.cc:217] ...`) is read
# as a metric `bfc_allocator_cc: 217` after the OOM line; a metric clears a log rule ("training went on"), so
# the traceback after it opens anew. It passes once such prefixes are no metric (the agent's prefix stripping).
@pytest.mark.parametrize("case", FAULT_CASES, ids=lambda r: r["file"])
def test_one_fault_one_message_whichever_comes_first_the_fault_or_the_exit(case):
    events = list(log_events(REAL / case["file"], interval=10))
    end = events[-1].ts + 1
    failed = make_event(t.RUN_FAILED, run=events[0].run, host="h", producer="h/run", seq=1, data={"exit_code": 1},
                        ts=end)  # fmt: skip
    judged_first = [*with_outcomes(events), failed]  # the worker judged the fault before the exit was read
    exit_first = [*events, failed, *[e for e in with_outcomes(events) if e.type not in (t.METRIC, t.LOG_LINE)]]
    for order in (judged_first, exit_first):
        texts = posted(order)
        assert len(texts) == 1, texts
        assert SAID[case["file"]] in texts[0]
    assert posted(judged_first)[0].startswith("ANOMALY") and "(log-" in posted(judged_first)[0]
    assert posted(exit_first)[0].startswith("FAILED")


def test_no_healthy_corpus_run_reports_a_fault():
    for entry in MANIFEST:
        if entry["label"] != "NOSTOP" or not entry["file"].endswith(".log"):
            continue
        events = log_events(REAL / entry["file"], interval=10)
        assert [e.data["line"][:80] for e in events if e.type == t.LOG_LINE and fault_of(e.data["line"])] == [], entry


def test_a_log_rule_names_a_known_tag_a_pattern_or_both():
    with pytest.raises(PolicyError, match="'tag' must name the agent's tags"):
        policy("  - {id: lp, kind: log_pattern, tag: out_of_memory}\n")
    with pytest.raises(PolicyError, match="needs 'tag'"):
        policy("  - {id: lp, kind: log_pattern, severity: critical}\n")
    both = policy("  - {id: lp, kind: log_pattern, tag: oom, pattern: 'Tried to allocate [\\d.]+ GiB'}\n")
    c = Clock()  # the tag and the pattern must both hold: 112.00 MiB is no GiB
    assert [typ for typ, _ in run(both, [c.log(0, TORCH_CUDA_OOM)]) if typ == t.ANOMALY_OPENED] == []
    opened = [d for typ, d in run(both, [c.log(10, TORCH_OOM.replace("270.00 MiB", "2.00 GiB"))])
              if typ == t.ANOMALY_OPENED]  # fmt: skip
    assert opened[0]["reason"].startswith("CUDA out of memory. Tried to allocate 2.00 GiB on GPU 5")


def test_a_traceback_reason_quotes_its_exception_line_not_its_first_line():
    # llamafactory_rank_prefixed_oom_eval.log as the agent groups it: the OOM ends rank 5's traceback
    block = "\n".join(["Traceback (most recent call last):", *[line.removeprefix("[rank5]: ") for line in
                       (REAL / "llamafactory_rank_prefixed_oom_eval.log").read_text().splitlines()[:5]]])  # fmt: skip
    out = run(default_policy(), [Clock().log(0, block, tag="oom")])
    opened = [d for typ, d in out if typ == t.ANOMALY_OPENED]
    assert [d["rule"] for d in opened] == ["log-oom"]
    assert opened[0]["reason"].startswith("CUDA out of memory. Tried to allocate 270.00 MiB")
    assert opened[0]["values"]["line"].startswith("torch.OutOfMemoryError: CUDA out of memory.")


def test_a_plain_traceback_is_quoted_by_its_exception_line():
    block = "\n".join([
        "Traceback (most recent call last):",
        '  File "train.py", line 8, in <module>',
        "    main()",
        "ValueError: bad shape (3, 4)",
    ])  # fmt: skip
    opened = [d for typ, d in run(default_policy(), [Clock().log(0, block)]) if typ == t.ANOMALY_OPENED]
    assert [(d["rule"], d["reason"]) for d in opened] == [("log-traceback", "log: ValueError: bad shape (3, 4)")]


def test_torchruns_own_traceback_is_a_child_failed():
    # https://github.com/lmzpai/roboMamba/issues/10: torchrun's own traceback after a child died
    block = "\n".join([
        "Traceback (most recent call last):",
        '  File "/root/miniconda3/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    ])  # fmt: skip
    opened = [d for typ, d in run(default_policy(), [Clock().log(0, block)]) if typ == t.ANOMALY_OPENED]
    assert [(d["rule"], d["reason"]) for d in opened] == [
        ("log-child-failed", "torchrun: a training process failed (ChildFailedError)")
    ]
