"""Real trainers' lines, each read with its position: every line below is quoted from the corpus file named
beside it (tests/data/real; the test checks it is there) or from the public page named in its comment."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from trainwarden.agent.formats import parse_metrics
from trainwarden.agent.prefixes import strip_prefix
from trainwarden.agent.reading import MetricReader
from trainwarden.core.metrics import normalise

from tests.helpers import dev_corpus

REAL = Path(__file__).resolve().parent.parent / "data" / "real"
NAN = math.nan

# (corpus file or None for a public line cited in its comment, line, canonical metrics it must hold)
CASES = [
    # mlx-lm, current and older generations
    ("mlx_lm_lora_diverges_no_nan.log",
     "Iter 25: Train loss 1.593, Learning Rate 7.000e-05, It/sec 0.999, Tokens/sec 387.697, Trained Tokens 9699, "
     "Peak mem 8.104 GB",
     {"step": 25, "loss": 1.593, "lr": 7e-05, "tokens_per_s": 387.697, "trained_tokens": 9699, "peak_mem_gb": 8.104}),
    ("mlx_lm_lora_diverges_no_nan.log", "Iter 1: Val loss 2.086, Val took 17.177s", {"step": 1, "val_loss": 2.086}),
    ("mlx_lora_old_format_plateau.log", "Iter 370: Train loss 1.146, It/sec 1.238, Tokens/sec 87.913",
     {"step": 370, "loss": 1.146, "tokens_per_s": 87.913}),
    # Megatron-LM and Megatron-DeepSpeed
    ("megatron_llm_pretrain_healthy.log",
     " iteration      122/  250000 | consumed samples:       124928 | elapsed time per iteration (ms): 86545.2 | "
     "learning rate: 9.150E-06 | global batch size:  1024 | lm loss: 2.504220E+00 | loss scale: 1.0 | "
     "grad norm: 0.231 | number of skipped iterations:   0 | number of nan iterations:   0 |",
     {"step": 122, "loss": 2.50422, "lr": 9.15e-06, "loss_scale": 1.0, "grad_norm": 0.231, "skipped_iters": 0,
      "nan_iters": 0, "iter_time_ms": 86545.2, "consumed_samples": 124928}),
    ("megatron_deepspeed_gradnorm_nan_no_lm_loss.log",
     " iteration     5426/  250000 | consumed samples:        43408 | consumed tokens:     88899584 | "
     "elapsed time per iteration (ms): 4247.9 | learning rate: 2.999E-04 | global batch size:     8 | "
     "loss scale: 1.0 | grad norm: nan |",
     {"step": 5426, "lr": 2.999e-04, "loss_scale": 1.0, "grad_norm": NAN}),
    # DeepSpeed's fp16 loss scaler, also glued to a tqdm redraw
    ("deepspeed_cogvideo_initial_scale_calibration.log",
     "[2024-09-11 17:52:18,030] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
     "Attempted loss scale: 4294967296, reducing to 2147483648",
     {"loss_scale": 2147483648, "overflow": 1}),
    ("deepspeed_hysteresis_startup_calibration.log",
     "[2023-04-28 06:51:29,903] [INFO] [loss_scaler.py:188:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
     "Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1",
     {"loss_scale": 65536, "overflow": 1}),
    ("deepspeed_hf_overflow_storm_to_min_scale.log",
     " 14%|█▍        | 379/2724 [14:00:21<86:09:52, 132.28s/it][2023-06-07 22:18:11,762] [INFO] "
     "[loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 32, "
     "reducing to 16",
     {"loss_scale": 16, "overflow": 1}),
    ("deepspeed_t5_loss_scale_stuck_at_1.log",
     "[2021-11-27 00:36:54,800] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. "
     "Attempted loss scale: 1, reducing to 1",
     {"loss_scale": 1, "overflow": 1}),
    # fairseq: its overflow note, train_inner lines of both generations, epoch summaries and valid lines
    ("fairseq_v1_startup_overflow_loss_scale.log",
     "2020-04-05 18:47:19 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 64.0",
     {"loss_scale": 64.0, "overflow": 1}),
    ("fairseq_v1_train_inner_tpu_benchmark.log",
     "2020-07-17 07:11:02 | INFO | train_inner | epoch 001:   2800 / 160368 loss=9.255, ppl=611.12, wps=57.3, "
     "ups=0.04, wpb=1613, bsz=80, num_updates=2800, lr=2.8e-05, gnorm=3.23, train_wall=13, wall=1236",
     {"epoch": 1, "step": 2800, "loss": 9.255, "ppl": 611.12, "grad_norm": 3.23}),
    ("fairseq_v0_pointer_gnorm_jump.log",
     "| epoch 001:    430 / 614 loss=9.997, nll_loss=9.997, ppl=1021.81, wps=1340, ups=3.0, wpb=442, bsz=18, "
     "num_updates=431, lr=0.05, gnorm=11.481, clip=100%, oom=0",
     {"epoch": 1, "step": 431, "loss": 9.997, "grad_norm": 11.481}),
    ("fairseq_legacy_lstm_epoch10_healthy.log",
     "| epoch 010  2000 / 8223 loss=1.27 (1.50), wps=962, wpb=908, bsz=32, lr=0.001, clip=100%, gnorm=2.1427",
     {"epoch": 10, "loss": 1.27, "lr": 0.001, "grad_norm": 2.1427}),
    ("fairseq_legacy_lstm_epoch10_healthy.log",
     "| epoch 010 | train loss 1.44 | train ppl 2.72 | s/checkpoint    7747 | words/s    961 | words/batch    906 | "
     "bsz    32 | lr 0.001000 | clip 100% | gnorm 2.1113",
     {"epoch": 10, "loss": 1.44, "ppl": 2.72, "grad_norm": 2.1113}),
    ("fairseq_legacy_lstm_epoch10_healthy.log", "| epoch 010 | valid on 'valid' subset  1000 / 1311 loss=1.60",
     {"epoch": 10, "val_loss": 1.6}),
    ("fairseq_legacy_lstm_epoch10_healthy.log",
     "| epoch 010 | valid on 'valid' subset | valid loss 1.94 | valid ppl 3.83",
     {"epoch": 10, "val_loss": 1.94, "val_ppl": 3.83}),
    ("fairseq_v0_backtranslation_valid_bump.log",
     "| epoch 030 | valid on 'valid' subset | valid_loss 3.75939 | valid_nll_loss 1.99226 | valid_ppl 3.98",
     {"epoch": 30, "val_loss": 3.75939, "val_nll_loss": 1.99226, "val_ppl": 3.98}),
    # mmengine and mmcv, training and validation
    ("mmengine_xtuner_gradnorm_nan_loss_finite.log",
     "10/30 22:19:57 - mmengine - INFO - Epoch(train) [1][240/735]  lr: 1.9813e-04  eta: 2:44:49  time: 2.8874  "
     "data_time: 0.0042  memory: 10762  loss: 2.5128  grad_norm: nan",
     {"epoch": 1, "lr": 1.9813e-04, "loss": 2.5128, "grad_norm": NAN}),
    ("mmengine_mmdet_vfnet_healthy.log",
     "04/16 17:58:16 - mmengine - INFO - Epoch(train)  [1][8650/8930]  lr: 1.0000e-02  eta: 2 days, 1:47:04  "
     "time: 0.8467  data_time: 0.0130  memory: 5493  loss: 0.4560  loss_cls: 0.2140",
     {"epoch": 1, "lr": 0.01, "loss": 0.456, "loss_cls": 0.214}),
    ("mmcv_mmdet_fcos_epochs6_7_healthy.log",
     "2022-11-23 14:16:18,574 - mmdet - INFO - Epoch [7][50/228]\tlr: 2.500e-03, eta: 0:09:20, time: 0.471, "
     "data_time: 0.046, memory: 3160, loss_cls: 0.2271, loss_bbox: 0.3726, loss_centerness: 0.6143, loss: 1.2141, "
     "grad_norm: 6.3334",
     {"epoch": 7, "lr": 0.0025, "loss": 1.2141, "grad_norm": 6.3334}),
    ("mmcv_mmseg_iter_early_flat.log",
     "2023-06-21 05:37:06,540 - mmseg - INFO - Iter [200/21600]\tlr: 9.998e-03, eta: 1:05:45, time: 0.141, "
     "data_time: 0.008, memory: 22159, decode.loss_ce: 1.2669",
     {"step": 200, "lr": 0.009998, "decode_loss_ce": 1.2669}),
    ("mmcv_mmcls_val_glued_to_progress.log",
     "[>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>] 50/50, 163.1 task/s, elapsed: 0s, ETA:     0s2021-07-14 13:52:36,901 - mmcls - "
     "INFO - Epoch(val) [1][2]\taccuracy_top-1: 22.0000, accuracy_top-3: 38.0000",
     {"epoch": 1, "val_accuracy_top_1": 22.0, "val_accuracy_top_3": 38.0}),
    # Keras: the fit line (its epoch is the `Epoch N/M` line before it)
    ("keras_overfit_val_loss_explodes.log",
     "13/13 [==============================] - 169s 13s/step - loss: 0.2492 - accuracy: 0.9315 - val_loss: 6.5856 - "
     "val_accuracy: 0.5676",
     {"loss": 0.2492, "accuracy": 0.9315, "val_loss": 6.5856, "val_accuracy": 0.5676}),
    # TF-slim / TF object detection
    ("tf_slim_objdet_slow_checkpointing.log", "INFO:tensorflow:global step 665: loss = 1.4688 (646.632 sec/step)",
     {"step": 665, "loss": 1.4688}),
    # NeMo's Lightning bar
    ("nemo_lightning_bar_then_nccl_timeout.log",
     "Epoch 0:   6%|██                               | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6, "
     "v_num=95nc, reduced_train_loss=2.590, global_step=3.2e+4, consumed_samples=2.56e+7]",
     {"epoch": 0, "step": 32000, "loss": 2.6, "reduced_train_loss": 2.59}),
    # caffe (glog prefix)
    ("caffe_solver_lcnn_late_training.log",
     "I0914 09:36:00.295799  6584 solver.cpp:228] Iteration 1853400, loss = 0.667568",
     {"step": 1853400, "loss": 0.667568}),
    ("caffe_solver_lcnn_late_training.log",
     "I0914 09:36:00.295799  6584 sgd_solver.cpp:106] Iteration 1853400, lr = 0.000174348",
     {"step": 1853400, "lr": 0.000174348}),
    ("caffe_solver_lcnn_late_training.log",
     "I0914 09:36:00.295799  6584 solver.cpp:244]     Train net output #0: accuracy = 0.78125", {"accuracy": 0.78125}),
    # DeiT / timm console
    ("deit_engine_console_pyra_healthy.log",
     "Epoch: [67]  [10/31]  eta: 0:00:08  lr: 0.000396  loss: 0.0082 (0.0271)  time: 0.4222  data: 0.3565  "
     "max mem: 5990",
     {"epoch": 67, "lr": 0.000396, "loss": 0.0082}),
    # timm's train.py (a log pasted in a GitHub README), and its `Test:` lines are validation
    (None,
     "Train: 0 [  32/33 (100%)]  Loss: 1.336 (4.00)  Time: 0.934s,    8.57/s  (0.218s,   36.68/s)  LR: 5.000e-04  "
     "Data: 0.000 (0.014)",
     {"epoch": 0, "loss": 1.336, "lr": 5e-04}),
    # torchtune: its bar (epoch|step|Loss) under a rank prefix, and its DiskLogger lines
    ("torchtune_lora_multinode_bar_prefix.log",
     "[trainer0|0]:1|2|Loss: 2.764298677444458:   3%|▎         | 3/101 [00:53<27:44, 16.98s/it]",
     {"epoch": 1, "step": 2, "loss": 2.764298677444458}),
    ("torchtune_codellama_full_finetune_healthy.log",
     "Step 1 | loss:2.085338592529297 lr:2e-05 tokens_per_second_per_gpu:57.828881833956174",
     {"step": 1, "loss": 2.085338592529297, "lr": 2e-05}),
    # Ultralytics console: the training line and the validation line
    ("ultralytics_yolov8_console_healthy.log",
     "    70/1000      6.73G      1.081     0.4706      1.084         10        640: 100%|██████████| 16/16 "
     "[00:05<00:00,  2.78it/s]",
     {"epoch": 70, "box_loss": 1.081, "loss": 1.081 + 0.4706 + 1.084, "gpu_mem_gb": 6.73}),
    ("ultralytics_yolov8_console_healthy.log",
     "                   all        722       1444      0.989       0.99      0.993      0.681",
     {"metrics/precision(b)": 0.989, "metrics/recall(b)": 0.99, "metrics/map50(b)": 0.993,
      "metrics/map50_95(b)": 0.681}),
    # WaveGlow's `iteration:\tloss`
    ("waveglow_negative_loss_spike_no_recovery.log", "123892: 40490.179687500",
     {"step": 123892, "loss": 40490.1796875}),
    # nanoGPT behind a timestamp
    ("nanogpt_fp16_v100_loss_nan.log", "2023-03-22 09:32:32 step 3000: train loss 4.0390, val loss 4.0427",
     {"step": 3000, "loss": 4.039, "val_loss": 4.0427}),
    ("nanogpt_fp16_v100_loss_nan.log", "2023-03-22 09:32:52 iter 3010: loss nan, time 1019.95ms, mfu 14.12%",
     {"step": 3010, "loss": NAN, "time_ms": 1019.95, "mfu": 14.12}),
    # a custom loop's `=> STEP n` (YOLOv3 in TF2)
    ("tf2_yolov3_custom_loop_nan.log",
     "=> STEP  750   lr: 0.000600   giou_loss:  nan   conf_loss: 10.89   prob_loss: 0.06   total_loss:  nan",
     {"step": 750, "lr": 0.0006, "loss": NAN, "giou_loss": NAN}),
]  # fmt: skip


def _equal(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)


@pytest.mark.parametrize(("name", "line", "expected"), CASES, ids=[f"{c[0] or 'public'}:{c[1][:40]}" for c in CASES])
def test_a_real_line_is_read_with_its_position(name, line, expected):
    if name is not None:
        assert line in (REAL / name).read_text(), "quote the corpus line exactly"
    got = normalise(parse_metrics(line))
    assert {k: got.get(k) for k in expected}.keys() == expected.keys()
    assert all(k in got and _equal(got[k], v) for k, v in expected.items()), got
    if all(k.startswith("val_") or k in ("step", "epoch") for k in expected):
        assert not {"loss", "ppl", "accuracy"} & got.keys(), "a validation line must not yield training metrics"


@pytest.mark.parametrize(
    ("name", "line"),
    [("keras_overfit_val_loss_explodes.log", "Epoch 2/10"),  # a position alone: no metric event
     ("mlx_lm_lora_diverges_no_nan.log", "Iter 100: Saved adapter weights to checkpoints/100_adapters.npz."),
     ("deit_engine_console_pyra_healthy.log", "Epoch: [66] Total time: 0:00:07 (0.2573 s / it)"),
     ("tf_slim_objdet_slow_checkpointing.log", "INFO:tensorflow:Recording summary at step 664."),
     ("deepspeed_hf_overflow_storm_to_min_scale.log", " 14%|█▍        | 377/2724 [13:55:57<86:19:20, 132.41s/it]"),
     ("fairseq_v1_startup_overflow_loss_scale.log",
      "2020-04-05 18:38:41 | INFO | fairseq.trainer | loading train data for epoch 0")],
)  # fmt: skip
def test_lines_without_metrics(name, line):
    text = (REAL / name).read_text()
    assert line.strip() in text
    assert parse_metrics(line) == {}


# (line, what is left after the prefixes); provenance in the comment of each
PREFIXES = [
    # corpus: nanogpt_fp16_v100_loss_nan.log (a timestamp)
    ("2023-03-22 09:30:39 iter 2920: loss 3.9883, time 1099.34ms, mfu 15.34%",
     "iter 2920: loss 3.9883, time 1099.34ms, mfu 15.34%"),
    # corpus: deepspeed_cogvideo_initial_scale_calibration.log (bracketed timestamp, level, file:line:function)
    ("[2024-09-11 17:52:11,320] [INFO] [checkpointing.py:546:forward] ----Profiling time in checkpointing False",
     "----Profiling time in checkpointing False"),
    # a doubled bracketed timestamp, ISO with `T` and `Z` (a CI log pasted in a GitHub issue)
    ("[2024-06-01T10:14:26Z] [2024-06-01T10:14:26Z] OS: Ubuntu 22.04.4 LTS (x86_64)",
     "OS: Ubuntu 22.04.4 LTS (x86_64)"),
    # corpus: tf_slim_objdet_slow_checkpointing.log, torchtune_codellama_full_finetune_healthy.log (logging defaults)
    ("INFO:tensorflow:global step 665: loss = 1.4688 (646.632 sec/step)",
     "global step 665: loss = 1.4688 (646.632 sec/step)"),
    ("INFO:torchtune.utils.logging:Model is initialized with precision torch.bfloat16.",
     "Model is initialized with precision torch.bfloat16."),
    # corpus: mmcv_mmdet_fcos_epochs6_7_healthy.log (logging `asctime - name - LEVEL - `)
    ("2022-11-23 14:15:21,465 - mmdet - INFO - Epoch [6][150/228]\tlr: 2.500e-03", "Epoch [6][150/228]\tlr: 2.500e-03"),
    # corpus: mmengine_mmdet_loss_nan.log (mmengine)
    ("08/03 22:09:24 - mmengine - INFO - Epoch(train)  [1][ 500/2931]  lr: 2.0000e-02",
     "Epoch(train)  [1][ 500/2931]  lr: 2.0000e-02"),
    # Hugging Face examples (`asctime - LEVEL - name - `) under Open MPI's and Ray's prefixes, from logs pasted in
    # GitHub issues (huggingface/transformers on SageMaker; Ray Train)
    ("[1,mpirank:0,algo-1]<stderr>:09/21/2022 13:38:31 - INFO - __main__ - ***** Running training *****",
     "***** Running training *****"),
    ("(RayTrainWorker pid=107684) 03/03/2025 04:59:31 - INFO - __main__ - ***** Running training *****",
     "***** Running training *****"),
    # transformers' and LLaMA-Factory's own logging formats (logs pasted in GitHub issues and READMEs)
    ("[INFO|trainer.py:2134] 2024-09-17 23:35:34,372 >> ***** Running training *****", "***** Running training *****"),
    ("[INFO|2025-04-30 22:55:30] llamafactory.model.loader:143 >> trainable params: 20,971,520 || all params: "
     "8,051,232,768 || trainable%: 0.2605",
     "trainable params: 20,971,520 || all params: 8,051,232,768 || trainable%: 0.2605"),
    # corpus: fairseq_v1_train_inner_tpu_benchmark.log (fairseq)
    ("2020-07-17 07:11:02 | INFO | train_inner | epoch 001:   2800 / 160368 loss=9.255",
     "epoch 001:   2800 / 160368 loss=9.255"),
    # corpus: caffe_solver_lcnn_late_training.log (glog)
    ("I0914 09:36:00.295799  6584 solver.cpp:228] Iteration 1853400, loss = 0.667568",
     "Iteration 1853400, loss = 0.667568"),
    # corpus: keras_tf1_fit_oom_traceback.log (TensorFlow C++)
    ("2018-05-10 09:14:16.535628: W tensorflow/core/framework/op_kernel.cc:1192] Resource exhausted: OOM when "
     "allocating tensor with shape[123008,500]",
     "Resource exhausted: OOM when allocating tensor with shape[123008,500]"),
    # corpus: nccl_llamafactory_allreduce_timeout.log (viewer line number, rank, c10), nccl_ofa_fairseq_old_format*
    ("[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
     "operation timeout", "[Rank 0] Watchdog caught collective operation timeout"),
    ("[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout",
     "[Rank 1] Watchdog caught collective operation timeout"),
    # corpus: nccl_accelerate_vqgan_broadcast_timeout.log (indented as pasted)
    ("    [rank7]:[E816 01:45:40.183009389 ProcessGroupNCCL.cpp:607] [Rank 7] Watchdog",
     "[Rank 7] Watchdog"),
    # corpus: torchtune_lora_multinode_bar_prefix.log ([trainer0|0]: and a logging default after it)
    ("[trainer0|0]:INFO:torchtune.utils._logging:Learning rate scheduler is initialized.",
     "Learning rate scheduler is initialized."),
    # corpus: llamafactory_rank_prefixed_oom_eval.log (the indentation after a rank prefix is the line's own)
    ("[rank5]:     return func(*args, **kwargs)", "    return func(*args, **kwargs)"),
    # torchrun's and PyTorch's rank prefixes together (a log pasted in a GitHub issue)
    ("[default0]:[rank0]: Traceback (most recent call last):", "Traceback (most recent call last):"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "rest"), PREFIXES)
def test_prefixes_are_stripped(line, rest):
    assert strip_prefix(line) == rest


@pytest.mark.parametrize(
    "line",
    ["123873: -5.480178833",  # WaveGlow: a step and a loss, not a rank prefix
     "    Epoch 1/80", "Iter 5: Train loss 3.361", "Iteration 1853400, loss = 0.667568", "  File \"train.py\", line 1",
     "{'loss': 2.0491, 'learning_rate': 0.0001961913563176343, 'epoch': 0.28}", "step=1 loss=2.0"],
)  # fmt: skip
def test_lines_without_a_prefix_are_kept_whole(line):
    assert strip_prefix(line) is line or strip_prefix(line) == line


@pytest.mark.parametrize(
    "line", [line for line, _ in PREFIXES] + ["[rank3]: torch.OutOfMemoryError: CUDA out of memory."]
)
def test_strip_prefix_takes_off_at_least_the_torchrun_rank_prefix(line):
    ranked = re.sub(r"^\[(?:rank|default)\d+\]:\s?", "", line, count=1)  # what the agent stripped before
    assert strip_prefix(ranked) == strip_prefix(line)
    assert ranked.endswith(strip_prefix(line))


# Files where no line is a training metric, and why (a banner-or-fault excerpt is still read without error).
NO_METRICS = {
    "simple_faster_rcnn_map_identical_10_epochs.log": "`epoch 0 mAP is 0.3790 ...`: the `mAP is` phrasing is not read",
    "llamafactory_oom_in_backward.log": "a traceback ending in CUDA OOM; the run printed no metric line in the excerpt",
    "llamafactory_rank_prefixed_oom_eval.log": "rank-prefixed traceback lines of an OOM at model loading",
    "keras_tf1_fit_oom_traceback.log": "TensorFlow's allocator dump and a traceback (only `batch_size = 10` in source)",
    "keras_tf_fit_generator_oom.log": "TensorFlow's allocator dump (`MaxAllocSize`) and an OOM, before any fit line",
    "marian_startup_workspace_cuda_oom_bare.log": "Marian's config echo (`[config] workspace: 9000`) and a CUDA OOM",
    "sockeye1_training_started_cudamalloc_oom_bare.log": "a parameter count and MXNet's cudaMalloc OOM",
    "pytorchyolo_map_eval_then_dataloader_worker_aborted.log": "bars without a postfix, `---- mAP 0.92` (not read: "
    "one eval, a name the vocabulary lacks) and the killed DataLoader worker",
    # corpus-dev3: formats not read today (KNOWN_MISSES in tests/integration/test_corpus_scorecard.py), and a bare fault
    "catboost_v0_learn_glued_passed_early_healthy.log": "CatBoost 0.x `0:      learn 0.6355974416passed: 17.4 sec`: "
    "the value glued to the next field (not read)",
    "stylegan2_tf_tick_kimg_lines_healthy.log": "StyleGAN `tick 1     kimg 6.1      lod 0.00`: bare `name value` "
    "pairs (not read)",
    "loop_tqdm_bar_thcudacheck_out_of_memory.log": "a bar `Train (loss 63.31) epoch 1:` glued to THC's CUDA OOM, and "
    "its traceback (not read)",
    "colossalai_opt_cuda_oom_glued_traceback_bare.log": "one CUDA OOM line with another rank's traceback glued to it",
    # corpus-dev4b (issue 39): bare faults, and formats not read today (KNOWN_MISSES in test_corpus_scorecard.py)
    "tf1_stream_executor_cuda_error_out_of_memory_shrinking_allocs.log": "TensorFlow's allocator failing, no metric",
    "unet3d_brats_tensorpack_cuda_error_out_of_memory.log": "TensorFlow's allocator failing, no metric",
    "llamafactory_streaming_nccl_watchdog_stuck_480s_hang.log": "one NCCL watchdog line (a hang), no metric",
    "lambdalabs_sd_finetune_lightning_bar_summoning_checkpoint_killed.log": "one Lightning bar ending in a comma, "
    "then `Killed` (the bar is not read)",
    "keras_csvlogger_training_log_voice_id_healthy.training.log": "a Keras CSVLogger CSV named training.log (its rows "
    "are not read)",
    "keras_csvlogger_training_log_emotion_resnet50_val_acc_plateau.training.log": "a Keras CSVLogger CSV named "
    "training.log (its rows are not read)",
    "keras_csvlogger_training_log_irfanet_3ep_healthy.training.log": "a Keras CSVLogger CSV named training.log (its "
    "rows are not read)",
}
# Files whose metrics span several lines (agent.tables, the `Epoch N` line above): read by the agent's per-run
# reader, not line by line
MULTI_LINE = {
    "fastai_": "a table: rows of numbers under a header of names",
    "sb3_": "stable-baselines3's `| name | value |` box",
    "allennlp_epoch_metrics_table": "AllenNLP's `name | training | validation` rows, under `Epoch N/M`",
    "nnunet_v2_": "nnU-Net's `train_loss 0.36` lines under an `Epoch 3` line",
}
# Files whose metric lines carry no position of their own, and why
UNPLACED = {
    # corpus-dev4a (issue 39): positions not read yet
    "charrnn_lua_": "char-rnn's `228/9500 (epoch 1.200), train_loss = ...`: its iteration of a total is no step",
    "crnn_pytorch_": "crnn.pytorch's `[1/25][300/3183] Loss: ...`: epoch of epochs and batch of batches are not read",
    "wenet_": "WeNet's `TRAIN Batch 4/203700 loss ...` (epoch/batch): not read as a position",
    "keras_": "a fit line's epoch is the `Epoch N/M` line before it",
    "deepspeed_": "the loss scaler's messages name no step (the Trainer's dict lines carry the epoch)",
    "fairseq_v1_startup_overflow_loss_scale.log": "start-up: fp16 overflow notes before the first train_inner line",
    "acme_": "Acme's terminal logger counts episodes and steps per actor, learner and evaluator (`Learner Steps = 2`)",
    "allennlp_v0_": "`Batch 567/17168: accuracy: 0.42, loss: 1.32 ||`: a batch within an epoch no line names",
    "custom_logging_dpcnn": "`Train loss nan, accuracy 0.0000%`: a custom script's line without a position",
    "custom_tf_nli": "`0 completed epochs, 100 batches Average training batch loss: nan`: counts in words",
    "catboost_verbose100": "`100:\tlearn: 0.1697219\ttest: ...`: the iteration `100:` leading the line is no position",
    "colossalai_bert": "`Step 80 / 1000000 | Train Loss: 10.304 | ...`: `Step N / M` (spaced) is not read as the step",
    "dinov2_": "`Training  [     40/5000000]  eta: ...`: MetricLogger's bracketed counter is not read as the step",
    "pwg_": "`(Steps: 1000) train/embed_loss = nan.`: the parenthesised `(Steps: N)` is not read as the step",
    "auxiliaryasr_": "`train/loss     : 7.8355` lines under `--- epoch 34 ---`, a header no reader takes as the epoch",
}


def _metric_lines(path: Path) -> list[dict]:
    return [m for line in path.read_text(errors="replace").splitlines() if (m := normalise(parse_metrics(line)))]


@pytest.mark.parametrize("path", sorted(REAL / r["file"] for r in dev_corpus() if r["file"].endswith(".log")),
                         ids=lambda p: p.name)  # fmt: skip
def test_every_corpus_log_yields_metric_lines_with_a_position(path):
    if path.name.startswith(tuple(MULTI_LINE)):
        reader = MetricReader()
        read = [m for m in (reader.read(line)[0] for line in path.read_text().splitlines()) if m]
        assert [m for m in read if set(m) - {"step", "epoch"}], f"{path.name}: no metric read"
        return
    lines = _metric_lines(path)
    if path.name in NO_METRICS or path.name.startswith("nccl_"):
        return  # faults only: what their lines hold is the fault (agent.parse), not metrics
    assert lines, f"{path.name}: no metric line read"
    placed = [m for m in lines if {"step", "epoch"} & m.keys()]
    if not path.name.startswith(tuple(UNPLACED)):
        assert placed, f"{path.name}: no metric line with a step or an epoch"
