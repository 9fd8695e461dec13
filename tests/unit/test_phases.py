"""The agent tags the frameworks' own eval and save lines with a phase (agent/phases.py): one `phase` event per
eval or save, from the lines real libraries print, and none for a sanity check or an ordinary line."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainwarden.agent.logsource import RunLog
from trainwarden.agent.phases import PhaseTracker, phase_of
from trainwarden.agent.tail import LogTail
from trainwarden.events import types as t

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize(
    ("line", "found"),
    [
        # transformers Trainer.evaluation_loop / _save_checkpoint (at log_level="info")
        ("[INFO|trainer.py:2949] 2026-12-06 02:00:00,000 >> \n***** Running Evaluation *****", ("eval", True)),
        ("[INFO|trainer.py:4141] 2026-12-06 >> Saving model checkpoint to out/checkpoint-500", ("save", True)),
        # lightning TQDMProgressBar and ModelCheckpoint
        ("Validation DataLoader 0:  50%|█████     | 4/8 [00:00<00:00, 799.37it/s]", ("eval", True)),
        (
            "Epoch 0, global step 8: 'val_loss' reached 2.10000 (best 2.10000), saving model to "
            "'/tmp/ck/epoch=0-step=8.ckpt' as top 1",
            ("save", True),
        ),
        # keras ModelCheckpoint
        ("Epoch 3: val_loss improved from 0.52000 to 0.41000, saving model to best.keras", ("save", True)),
        ("Epoch 3: finished saving model to best.keras", ("save", False)),
        # accelerate Accelerator.save_state / save_accelerator_state
        ("INFO:accelerate.accelerator:Saving current state to ckpt/step_100", ("save", True)),
        ("INFO:accelerate.checkpointing:Random states saved in ckpt/step_100/random_states_0.pkl", ("save", False)),
        # plain loops
        ("Evaluating...", ("eval", True)),
        ("eval on 500 batches", ("eval", True)),
        ("Evaluation done in 41s", ("eval", False)),
        ("Evaluating: 100%|██████████| 40/40 [00:03<00:00, 12.1it/s]", ("eval", True)),
        ("valid epoch 2:  30%|███       | 3/10 [00:01<00:02, 3.1it/s]", ("eval", True)),
        ("saving checkpoint to out/ckpt.pt", ("save", True)),
        ("checkpoint saved out/ckpt.pt", ("save", False)),
        # no phase
        ("Sanity Checking DataLoader 0: 100%|██████████| 2/2 [00:00<00:00, 122.30it/s]", None),
        ("Epoch 0:  50%|█████     | 4/8 [00:00<00:00, 406.35it/s, v_num=0]", None),
        ("eval_steps=500", None),
        ("step 10 loss 2.31", None),
    ],
)
def test_the_frameworks_eval_and_save_lines_are_tagged(line: str, found: tuple[str, bool] | None):
    assert phase_of(line) == found


def test_a_redrawn_eval_bar_is_one_phase_and_a_new_step_ends_it():
    tracker = PhaseTracker()
    tracker.step(8)  # the training step before the eval
    bar = "Validation DataLoader 0:  {}%|          | {}/8 [00:00<00:00, 799.37it/s]"
    said = [tracker.line(bar.format(p, n)) for p, n in ((0, 0), (50, 4), (100, 8))]
    assert said == [("eval", True), None, None]
    tracker.step(8)  # the epoch bar redrawn at the step the eval began: still in it
    tracker.step(8)
    assert tracker.line(bar.format(0, 0)) is None
    tracker.step(16)
    assert tracker.line(bar.format(0, 0)) == ("eval", True)
    assert tracker.line("checkpoint saved x") is None  # the end of a save that the log never began


def test_a_real_lightning_log_yields_one_phase_event_per_validation():
    # captured from lightning 2's TQDMProgressBar (tests/data/logs/captured/README.md): 3 epochs, each validated
    log = RunLog(run="r", host="h", tail=LogTail(DATA / "logs" / "captured" / "lightning2_tqdm_bar.log"))
    items = log.poll(1.0) + log.finish(2.0, final=True)
    phases = [i.event for i in items if i.event.type == t.PHASE]
    assert [(e.data["phase"], e.data["started"]) for e in phases] == [("eval", True)] * 3
    assert all(e.data["line"].startswith("Validation:") for e in phases)
    assert len({e.producer for e in phases}) == 1 and len({e.seq for e in phases}) == 3


def test_real_logs_tag_their_saves_and_evals():
    # public logs of the backtest corpus (tests/data/real/MANIFEST.yaml names their sources)
    def tagged(name: str) -> list[tuple[str, bool]]:
        log = RunLog(run="r", host="h", tail=LogTail(DATA / "real" / name))
        items = log.poll(1.0) + log.finish(2.0, final=True)
        return [(i.event.data["phase"], i.event.data["started"]) for i in items if i.event.type == t.PHASE]

    assert tagged("nnunet_v1_epochs_slow_decrease_healthy.log") == [("save", True), ("save", False)] * 2
    assert tagged("lightning_bars_epoch_end_early.log") == [("eval", True)]  # its `Validation sanity check` is none
    assert tagged("pyg_ogbn_products_sage_three_epochs_healthy.log") == [("eval", True)] * 2
