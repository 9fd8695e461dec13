"""Real sample lines of each format in agent.formats, with the canonical metrics each must yield. Every line is
quoted exactly from the file its `source` names: a corpus log (tests/data/real, provenance in its MANIFEST.yaml)
or a console log captured from the library itself (tests/data/logs/captured, README.md there says which
version printed it and how). tests/unit/test_formats_table.py runs them all."""

from __future__ import annotations

from dataclasses import dataclass

NAN = float("nan")
CAPTURED = "logs/captured/"  # under tests/data
REAL = "real/"


@dataclass(frozen=True, slots=True)
class Sample:
    line: str
    holds: dict[str, float | int]  # canonical names (events.metrics.normalise) and values; NaN matches NaN
    source: str  # a file under tests/data that holds the line as printed


SAMPLES: dict[str, tuple[Sample, ...]] = {
    "model summary": (
        Sample("Trainable params: 5                                                             ", {},
               CAPTURED + "lightning2_tqdm_bar.log"),
    ),
    "model summary modes": (
        Sample("Modules in eval mode: 0                                                         ", {},
               CAPTURED + "lightning2_rich_bar.log"),
    ),
    "model summary flops": (
        Sample("Total FLOPs: 0                                                                  ", {},
               CAPTURED + "lightning2_tqdm_bar.log"),
    ),
    "python dict": (
        Sample("{'loss': '3.367', 'grad_norm': '3.612', 'learning_rate': '5e-05', 'epoch': '0.25'}",
               {"loss": 3.367, "grad_norm": 3.612, "lr": 5e-05, "epoch": 0.25}, CAPTURED + "hf_trainer5_tqdm_nan.log"),
        Sample("{'loss': '0', 'grad_norm': 'nan', 'learning_rate': '1.667e-05', 'epoch': '1.25'}",
               {"loss": 0, "grad_norm": NAN, "epoch": 1.25}, CAPTURED + "hf_trainer5_tqdm_nan.log"),
        Sample("{'eval_loss': 'nan', 'eval_runtime': '0.003', 'eval_samples_per_second': '1.059e+04', "
               "'eval_steps_per_second': '1324', 'epoch': '1.5'}",
               {"val_loss": NAN, "epoch": 1.5}, CAPTURED + "hf_trainer5_tqdm_nan.log"),
        Sample("{'loss': 1.1039, 'learning_rate': 1.866666666666667e-05, 'epoch': 0.33}",
               {"loss": 1.1039, "epoch": 0.33}, REAL + "hf_dict_koelectra_evals_summary_healthy.log"),
    ),
    "json": (
        Sample('{"train_lr": 8.159469122054745e-05, "train_loss": 3.20298746091237, "epoch": 249, '
               '"n_parameters": 11590840}',
               {"loss": 3.20298746091237, "epoch": 249}, REAL + "deit_jsonl_p2t_imagenet_healthy.log"),
    ),
    "fp16 overflow": (
        Sample("[2021-11-27 00:36:54,800] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. "
               "Attempted loss scale: 1, reducing to 1",
               {"loss_scale": 1, "overflow": 1}, REAL + "deepspeed_t5_loss_scale_stuck_at_1.log"),
    ),
    "torchtune bar": (
        Sample("[trainer0|0]:1|2|Loss: 2.764298677444458:   3%|▎         | 3/101 [00:53<27:44, 16.98s/it]",
               {"epoch": 1, "step": 2, "loss": 2.764298677444458}, REAL + "torchtune_lora_multinode_bar_prefix.log"),
    ),
    "ultralytics": (
        Sample("    70/1000      6.73G      1.081     0.4706      1.084         10        640: 100%|██████████| 16/16 "
               "[00:05<00:00,  2.78it/s]",
               {"epoch": 70, "box_loss": 1.081, "gpu_mem_gb": 6.73}, REAL + "ultralytics_yolov8_console_healthy.log"),
    ),
    "rich bar": (
        Sample("Epoch 2/2  ━━━━━━━━━━━━━━━━━ 8/8 0:00:00 • 0:00:00 488.07it/s "
               "train_loss: 2.334 ",
               {"epoch": 2, "step": 24, "loss": 2.334}, CAPTURED + "lightning2_rich_bar.log"),
    ),
    "tqdm bar": (
        Sample("Epoch 2:  12%|█▎        | 1/8 [00:00<00:00, 406.35it/s, train_loss=2.660, val_loss=3.090]",
               {"epoch": 2, "step": 17, "loss": 2.66, "val_loss": 3.09}, CAPTURED + "lightning2_tqdm_bar.log"),
        Sample("Epoch 0:   6%|██                               | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6, "
               "v_num=95nc, reduced_train_loss=2.590, global_step=3.2e+4, consumed_samples=2.56e+7]",
               {"epoch": 0, "step": 32000, "loss": 2.6}, REAL + "nemo_lightning_bar_then_nccl_timeout.log"),
        Sample("Tokenizing train dataset:  27%|██▋       | 2700/10000 [00:00<00:00, 26015.43 examples/s]", {},
               CAPTURED + "datasets_map_bars.log"),  # a `datasets` map bar: progress, no metric
    ),
    "iter phrases": (
        Sample("2023-03-22 09:32:52 iter 3010: loss nan, time 1019.95ms, mfu 14.12%",
               {"step": 3010, "loss": NAN, "time_ms": 1019.95}, REAL + "nanogpt_fp16_v100_loss_nan.log"),
        Sample("Iter 1: Val loss 2.086, Val took 17.177s", {"step": 1, "val_loss": 2.086},
               REAL + "mlx_lm_lora_diverges_no_nan.log"),
    ),
    "imagenet meters": (
        Sample("Epoch: [2][11/30]\tTime  0.073 ( 0.041)\tData  0.000 ( 0.000)\tLoss 1.3194e+00 (1.3329e+00)\t"
               "Acc@1  78.12 ( 71.59)\tAcc@5 100.00 ( 99.43)",
               {"epoch": 2, "step": 71, "loss": 1.3194, "acc1": 78.12, "acc5": 100.0},
               CAPTURED + "pytorch_imagenet_example.log"),
        Sample("Test: [5/5]\tTime  0.020 ( 0.005)\tLoss 1.1293e+00 (1.1757e+00)\tAcc@1  71.88 ( 73.75)\t"
               "Acc@5 100.00 (100.00)", {"val_loss": 1.1757, "val_acc1": 73.75, "val_acc5": 100.0},
               CAPTURED + "pytorch_imagenet_example.log"),
        Sample(" *   Acc@1 73.750 Acc@5 100.000", {"val_acc1": 73.75, "val_acc5": 100.0},
               CAPTURED + "pytorch_imagenet_example.log"),
    ),
    "boosting": (
        Sample("[0]\ttrain-logloss:0.48063\ttrain-error:0.04000\teval-logloss:0.50276\teval-error:0.12000",
               {"step": 0, "loss": 0.48063, "val_loss": 0.50276, "val_error": 0.12},
               CAPTURED + "xgboost_train.log"),
        Sample("[1]\tvalid_0's binary_logloss: 0.614894\tvalid_0's auc: 0.957307",
               {"step": 1, "val_loss": 0.614894, "val_auc": 0.957307}, CAPTURED + "lightgbm_train.log"),
    ),
    "pipe separated": (
        Sample("| epoch 010 | valid on 'valid' subset | valid loss 1.94 | valid ppl 3.83",
               {"epoch": 10, "val_loss": 1.94, "val_ppl": 3.83}, REAL + "fairseq_legacy_lstm_epoch10_healthy.log"),
        Sample("Step 1 | loss:2.085338592529297 lr:2e-05 tokens_per_second_per_gpu:57.828881833956174",
               {"step": 1, "loss": 2.085338592529297, "lr": 2e-05},
               REAL + "torchtune_codellama_full_finetune_healthy.log"),
    ),
    "caffe": (
        Sample("I0914 09:36:00.295799  6584 solver.cpp:244]     Train net output #0: accuracy = 0.78125",
               {"accuracy": 0.78125}, REAL + "caffe_solver_lcnn_late_training.log"),
    ),
    "marian": (
        Sample("[2025-01-27 14:01:07] Ep. 3 : Up. 5350 : Sen. 299,352 : Cost 0.68636936 * 881,133 @ 23,996 after "
               "96,696,035 : Time 32.34s : 27242.83 words/s : gNorm 0.8900 : L.r. 2.5000e-06",
               {"epoch": 3, "step": 5350, "loss": 0.68636936, "grad_norm": 0.89, "lr": 2.5e-06},
               REAL + "marian_finetune_gnorm_stalled_once_healthy.log"),
        Sample("[2021-07-17 21:11:31] Ep. 1 : Up. 82000 : Sen. 5,529,093 : Cost 2.79048038 : Time 817.42s : "
               "2193.04 words/s", {"step": 82000, "loss": 2.79048038, "words_per_s": 2193.04},
               REAL + "marian_streaming_data_bouncy_cost_healthy.log"),
        Sample("[2021-07-17 20:59:21] [valid] Ep. 1 : Up. 80000 : cross-entropy : 67.9483 : new best",
               {"epoch": 1, "step": 80000, "val_loss": 67.9483},
               REAL + "marian_streaming_data_bouncy_cost_healthy.log"),
        Sample("[2025-01-27 14:00:35] [valid] Ep. 3 : Up. 5300 : ce-mean-words : 0.813648 : stalled 1 times (last "
               "best: 0.813412)", {"step": 5300, "val_loss": 0.813648},
               REAL + "marian_finetune_gnorm_stalled_once_healthy.log"),
    ),
    "darknet": (
        Sample(" 2296: -nan, -nan avg loss, 0.002610 rate, 2.130433 seconds, 18368 images, 242.507999 hours left",
               {"step": 2296, "loss": NAN, "avg_loss": NAN, "lr": 0.00261},
               REAL + "darknet_alexeyab_yolov4_avg_loss_minus_nan.log"),
        Sample("0|yolo     | 10313: 0.576849, 0.677636 avg, 0.002000 rate, 3.992994 seconds, 1320064 images",
               {"step": 10313, "loss": 0.576849, "avg_loss": 0.677636},
               REAL + "darknet_yolov3_region_minus_nan_count0_healthy.log"),
    ),
    "step: loss": (
        Sample("123892: 40490.179687500", {"step": 123892, "loss": 40490.1796875},
               REAL + "waveglow_negative_loss_spike_no_recovery.log"),
    ),
    "faulthandler modules": (
        Sample("Extension modules: numpy._core._multiarray_umath, numpy.linalg._umath_linalg, torch._C, "
               "torch._C._dynamo.autograd_compiler, torch._C._dynamo.eval_frame, torch._C._dynamo.guards, "
               "torch._C._dynamo.utils, torch._C._fft, torch._C._linalg, torch._C._nested, torch._C._nn, "
               "torch._C._sparse, torch._C._special (total: 13)", {}, CAPTURED + "faulthandler_segfault.log"),
    ),
    "ultralytics validation": (
        Sample("                   all        722       1444      0.989       0.99      0.993      0.681",
               {"metrics/precision(b)": 0.989}, REAL + "ultralytics_yolov8_console_healthy.log"),
    ),
    "general": (
        Sample("5/5 - 0s - 5ms/step - accuracy: 0.5333 - loss: 0.8422 - val_accuracy: 0.3800 - val_loss: 1.0468",
               {"loss": 0.8422, "accuracy": 0.5333, "val_loss": 1.0468, "val_accuracy": 0.38},
               CAPTURED + "keras3_verbose2.log"),
        Sample("INFO:tensorflow:global step 665: loss = 1.4688 (646.632 sec/step)", {"step": 665, "loss": 1.4688},
               REAL + "tf_slim_objdet_slow_checkpointing.log"),
        Sample("=> STEP  750   lr: 0.000600   giou_loss:  nan   conf_loss: 10.89   prob_loss: 0.06   total_loss:  nan",
               {"step": 750, "loss": NAN}, REAL + "tf2_yolov3_custom_loop_nan.log"),
        Sample("2019-05-05 09:39:55.511381, iter: 1284, lr: 0.00100, 'loss': nan, 'loss_cls': nan, 'loss_bbox': 0.097, "
               "'loss_rpn_cls': 0.004, 'loss_rpn_bbox': 0.015, time: 0.615",
               {"step": 1284, "loss": NAN, "loss_bbox": 0.097},
               REAL + "paddle_models_faster_rcnn_loss_cls_nan.log"),
        Sample("2020-12-21 19:00:28.049095: train loss : 1.3331", {"loss": 1.3331},
               REAL + "nnunet_v1_epochs_slow_decrease_healthy.log"),
    ),
}  # fmt: skip
