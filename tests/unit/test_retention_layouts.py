"""Retention on each trainer's layout (pure): HF `checkpoint-N/` directories and trainer_state.json,
Lightning's ModelCheckpoint names and its pickled best_model_path, ultralytics' weights/; failed runs."""

import json
import pickle
from dataclasses import replace

import pytest
from trainwarden.remote.fleet import CheckpointConfig
from trainwarden.remote.layouts import RecordedBest, hf_best, lightning_best, parse_name
from trainwarden.remote.retention import CheckpointFile, failed_reason, failed_run_line, plan_retention

HF = CheckpointConfig(dir="/out", pattern="checkpoint-*")
LIGHTNING = CheckpointConfig(dir="/ckpt", pattern="*.ckpt", best_metric="val_loss")
ULTRALYTICS = CheckpointConfig(dir="/runs/detect/train/weights", pattern="*.pt")


def units(config: CheckpointConfig, *names: str, kind: str = "f", **targets: str) -> list[CheckpointFile]:
    """Entries in the order written, numbered from their names as the listing numbers them."""
    out = []
    for i, name in enumerate(names):
        epoch, step, metric = parse_name(name, config.best_metric)
        out.append(CheckpointFile(name=name, size=10, mtime=float(i), epoch=epoch, step=step, metric=metric,
                                  kind="l" if name in targets.values() else kind,
                                  target=next((t for t, n in targets.items() if n == name), None)))  # fmt: skip
    return out


HF_DIRS = units(HF, *(f"checkpoint-{n}" for n in range(1, 6)), kind="d")


def test_hf_checkpoint_dirs_are_numbered_by_their_global_step():
    assert parse_name("checkpoint-500", None) == (None, 500, None)
    assert parse_name("checkpoint-500.pth.tar", None) == (None, None, None)  # timm's, not HF's


def test_hf_keeps_the_best_its_trainer_state_names_and_the_last():
    state = {"best_model_checkpoint": "/home/alice/out/checkpoint-2", "best_metric": 0.3, "global_step": 5}
    record = hf_best(json.dumps(state), "checkpoint-5/trainer_state.json")
    assert record == RecordedBest("checkpoint-2", "checkpoint-5/trainer_state.json best_model_checkpoint")
    plan = plan_retention(HF_DIRS, HF, failed=False, record=record)
    assert plan.keep == {"checkpoint-2": ("best per checkpoint-5/trainer_state.json best_model_checkpoint",),
                         "checkpoint-5": ("latest",)}  # fmt: skip
    assert plan.delete == ("checkpoint-1", "checkpoint-3", "checkpoint-4") and plan.freed_bytes == 30


def test_hf_record_without_best_leaves_numbered_dirs_to_go_and_says_so():
    record = hf_best(json.dumps({"best_model_checkpoint": None}), "checkpoint-5/trainer_state.json")
    assert record.readable and record.name is None and "records no best_model_checkpoint" in (record.note or "")
    plan = plan_retention(HF_DIRS, HF, failed=False, record=record)
    assert plan.delete == ("checkpoint-1", "checkpoint-2", "checkpoint-3", "checkpoint-4")
    assert plan.notes == (
        record.note,
        "best unknown: only numbered intermediates may be deleted, everything else is kept",
    )


def test_hf_bad_json_is_a_note_and_deletes_nothing():
    record = hf_best('{"best_model_checkpoint": "/out/checkp', "checkpoint-5/trainer_state.json")
    assert not record.readable and "is not JSON" in (record.note or "")
    plan = plan_retention(HF_DIRS, HF, failed=False, record=record)
    assert plan.delete == () and set(plan.keep) == {f.name for f in HF_DIRS}
    assert plan.notes[0].startswith("checkpoint-5/trainer_state.json is not JSON")


def test_a_record_naming_what_is_not_there_falls_back_to_metrics():
    record = RecordedBest("checkpoint-9", "checkpoint-5/trainer_state.json best_model_checkpoint")
    plan = plan_retention(HF_DIRS, HF, failed=False, record=record)
    assert (
        plan.notes[0]
        == "checkpoint-5/trainer_state.json best_model_checkpoint names checkpoint-9, which is not in /out"
    )


def callbacks_state(best: object) -> dict[str, object]:
    """What a .ckpt pickles: ModelCheckpoint.state_dict() under its state key (lightning 2.x)."""
    state = {"monitor": "val_loss", "best_model_score": 0.3, "best_model_path": best, "current_score": 0.8,
             "dirpath": "/ckpt", "best_k_models": {}, "kth_best_model_path": "/ckpt/epoch=0-step=4.ckpt"}  # fmt: skip
    return {"epoch": 0, "global_step": 5, "callbacks": {"ModelCheckpoint{'monitor': 'val_loss'}": state}}


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_lightning_best_model_path_read_from_the_pickle_bytes(protocol):
    raw = pickle.dumps(callbacks_state("/ckpt/epoch=0-step=2.ckpt"), protocol=protocol)
    chunk = raw[raw.index(b"best_model_path") :][:4200]
    assert lightning_best(chunk, "last.ckpt") == RecordedBest("epoch=0-step=2.ckpt", "last.ckpt best_model_path")
    cut = lightning_best(chunk[:20], "last.ckpt")
    assert not cut.readable and cut.name is None
    empty = pickle.dumps(callbacks_state(""), protocol=protocol)
    none_yet = lightning_best(empty[empty.index(b"best_model_path") :], "last.ckpt")
    assert none_yet.readable and none_yet.name is None
    assert (
        lightning_best(b"", "epoch=0-step=5.ckpt").note
        == "epoch=0-step=5.ckpt holds no ModelCheckpoint state (best_model_path)"
    )


def test_lightning_default_names_keep_the_recorded_best_last_ckpt_and_the_latest():
    layout = units(LIGHTNING, *(f"epoch=0-step={n}.ckpt" for n in range(1, 6)), "last.ckpt")
    record = RecordedBest("epoch=0-step=2.ckpt", "last.ckpt best_model_path")
    plan = plan_retention(layout, LIGHTNING, failed=False, record=record)
    assert set(plan.keep) == {"epoch=0-step=2.ckpt", "epoch=0-step=5.ckpt", "last.ckpt"}
    assert plan.delete == ("epoch=0-step=1.ckpt", "epoch=0-step=3.ckpt", "epoch=0-step=4.ckpt")


def test_lightning_metric_in_names_gives_the_best_without_a_record():
    losses = (0.9, 0.3, 0.5, 0.7, 0.8)
    layout = units(
        LIGHTNING, *(f"epoch=0-step={n}-val_loss={v:.2f}.ckpt" for n, v in enumerate(losses, 1)), "last.ckpt"
    )
    plan = plan_retention(layout, LIGHTNING, failed=False)
    assert plan.keep["epoch=0-step=2-val_loss=0.30.ckpt"] == ("best val_loss=0.3",)
    assert len(plan.delete) == 3 and "last.ckpt" in plan.keep


def test_lightning_last_ckpt_as_a_link_keeps_its_target():
    # save_last="link": last.ckpt is a symlink to the newest top-k file; deleting that would dangle it
    layout = units(LIGHTNING, "epoch=0-step=1.ckpt", "epoch=0-step=2.ckpt", "last.ckpt",
                   **{"epoch=0-step=1.ckpt": "last.ckpt"})  # fmt: skip
    layout = [replace(f, step=9) if f.name == "epoch=0-step=2.ckpt" else f for f in layout]
    plan = plan_retention(layout, LIGHTNING, failed=False)
    assert plan.keep["epoch=0-step=1.ckpt"] == ("target of last.ckpt",) and plan.delete == ()


def test_ultralytics_weights_keep_best_last_and_the_latest_period_save():
    # ultralytics/engine/trainer.py save_model(): weights/last.pt, weights/best.pt, weights/epoch{N}.pt with
    # save_period (docs.ultralytics.com/modes/train); the library cannot be installed here, its names are used
    layout = units(ULTRALYTICS, "epoch10.pt", "epoch20.pt", "best.pt", "epoch30.pt", "last.pt")
    plan = plan_retention(layout, ULTRALYTICS, failed=False)
    assert set(plan.keep) == {"best.pt", "last.pt", "epoch30.pt"} and plan.delete == ("epoch10.pt", "epoch20.pt")


def test_a_failed_run_keeps_no_weights_by_default_as_the_procedure_says():
    assert CheckpointConfig(dir="/c").failed_runs == "no_weights"
    for config, layout in ((ULTRALYTICS, units(ULTRALYTICS, "epoch10.pt", "best.pt", "last.pt")), (HF, HF_DIRS)):
        plan = plan_retention(layout, config, failed=True, record=RecordedBest("checkpoint-2", "s"))
        assert plan.keep == {} and set(plan.delete) == {f.name for f in layout}
        assert plan.notes[-1].startswith("failed run: no weights kept (checkpoints.failed_runs: no_weights)")
    kept = plan_retention(HF_DIRS, replace(HF, failed_runs="keep_best"), failed=True,
                          record=RecordedBest("checkpoint-2", "s"))  # fmt: skip
    assert list(kept.keep) == ["checkpoint-2"]


def test_the_dry_run_says_which_failed_run_rule_applies_and_why():
    stops = [{"type": "stop.requested", "by": "policy", "rule": "nan-loss"}, {"type": "stop.done"}]
    reason = failed_reason("stopped", stops)
    assert reason == "stopped by rule nan-loss" and failed_reason("failed", []) == "status failed"
    assert failed_reason("stopped", [{"type": "stop.requested", "rule": None}]) is None
    assert failed_run_line(reason, HF) == (
        "failed run (stopped by rule nan-loss): the procedure keeps logs, metrics and config, no weights; "
        "set checkpoints.failed_runs: keep_best to keep the best"
    )
    assert failed_run_line(reason, replace(HF, failed_runs="keep_best")).startswith(
        "failed run (stopped by rule nan-loss): checkpoints.failed_runs is keep_best"
    )
