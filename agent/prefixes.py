"""Pure: the prefixes loggers, launchers and log viewers put before a trainer's own line, stripped so that
format detection sees the line the trainer printed.

- timestamps: `2023-03-22 09:30:39 iter 2920: ...`; bracketed, also doubled: `[2024-05-01 10:00:00] `,
  `[2024-05-01 10:00:00,123] ` (Megatron-LM, DeepSpeed);
- Python `logging`: `INFO:root:`, `INFO:tensorflow:`, `2021-07-14 13:52:26,135 - mmcls - INFO - `,
  `12/03/2024 10:00:00 - INFO - __main__ - `; mmengine: `08/03 22:09:24 - mmengine - INFO - `;
- fairseq `2020-04-05 18:38:34 | INFO | fairseq.trainer | `, loguru `2024-01-01 12:00:00.123 | INFO | m:f:12 - `;
- DeepSpeed: `[2024-09-11 17:52:18,030] [INFO] [loss_scaler.py:183:update_scale] `; transformers
  `[INFO|trainer.py:2134] 2024-09-17 23:35:34,372 >> `, LLaMA-Factory `[INFO|2025-04-30 22:55:30] x.y:143 >> `;
- glog (caffe, absl): `I0914 09:36:00.295799  6584 solver.cpp:228] `; PyTorch's c10:
  `[E816 01:45:40.183009389 ProcessGroupNCCL.cpp:607] `, `[E ProcessGroupNCCL.cpp:737] `;
- TensorFlow C++: `2018-05-10 09:14:16.535586: W tensorflow/core/framework/op_kernel.cc:1192] `;
- NeMo `[NeMo I 2024-01-01 12:00:00 exp_manager:123] `, detectron2 `[03/14 10:00:00 d2.utils.events]: `;
- ranks and workers: `[rank4]:`, `[default0]:`, `[trainer0|0]:`, `[1,0]<stdout>:` (Open MPI), `0: ` (`srun --label`),
  `(RayTrainWorker pid=107684) ` (Ray);
- Facebook research's LogFormatter (SwAV, XLM): `INFO - 08/11/20 13:38:32 - 1 day, 22:12:28 - `;
- a log viewer's line numbers, as pasted: `[80746] `.

Several prefixes in a row are all stripped (`[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] `).
A line that starts with none of the characters a prefix starts with costs one test.
"""

from __future__ import annotations

import re

_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|TRACE|SUCCESS|NOTICE)"
_NUMERAL = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|(?i:nan|inf))"
# the date-times loggers print: ISO (`2024-05-01 10:00:00,123`), US (`12/03/2024 10:00:00`), mmengine (`05/01 10:00:00`)
_WHEN = (
    r"(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    r"|\d\d/\d\d/\d{4},? \d\d:\d\d:\d\d(?:[.,]\d+)?"
    r"|\d\d/\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?)"
)
_NAME = r"[\w.<>]+"
# what follows a bare date-time: a logger's level and name in one of the usual layouts, or a plain separator
_AFTER_WHEN = (
    rf"(?: - (?:{_NAME} - )?{_LEVEL}(?: - {_NAME})? -\s"  # logging: asctime - name - LEVEL - / - LEVEL - name -
    rf"| \| {_LEVEL}\s*\| {_NAME} \| "  # fairseq: | INFO | fairseq.trainer |
    rf"| \| {_LEVEL}\s*\| {_NAME}:{_NAME}:\d+ - "  # loguru: | INFO     | module:function:12 -
    r"|: [IWEF] [\w/.+-]+:\d+\] ?"  # TensorFlow C++: : W tensorflow/core/...cc:277]
    rf"|:? \[?{_LEVEL}\]?:? "  # 2024-... INFO msg / [INFO] msg
    r"|:? )"
)
_GLOG = r"[IWEF]\d{3,4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.+-]+:\d+\] "

PREFIX_RE = re.compile(
    rf"{_WHEN}{_AFTER_WHEN}"
    rf"|\[{_WHEN}\]:? ?"
    rf"|{_GLOG}"
    r"|\((?:\w+ )?pid=\d+(?:, ip=[\d.]+)?\) "  # Ray: (RayTrainWorker pid=107684)
    rf"|{_LEVEL}:[\w.]+:"  # Python logging's default format: INFO:root:, INFO:tensorflow:
    # Facebook research's LogFormatter (SwAV, XLM, DINO forks): level - %x %X - elapsed -
    rf"|{_LEVEL} - \d\d/\d\d/\d\d \d\d:\d\d:\d\d - (?:\d+ days?, )?\d+:\d\d:\d\d - "
    r"|\[(?:"
    rf"{_LEVEL}\] ?"  # DeepSpeed: [INFO]
    rf"|{_LEVEL}\|[\w.-]+:\d+\] {_WHEN} >> ?"  # transformers: [INFO|trainer.py:2134] 2024-09-17 23:35:34,372 >>
    rf"|{_LEVEL}\|{_WHEN}\] [\w.]+:\d+ >> ?"  # LLaMA-Factory: [INFO|2025-04-30 22:55:30] llamafactory.x.y:143 >>
    r"|(?:rank|default|trainer)?\d+(?:\|\d+)?\]:\s?"  # [rank4]: [default0]: [trainer0|0]:
    r"|\d+,[\w:,.-]+\]<std(?:out|err)>: ?"  # Open MPI --tag-output: [1,0]<stdout>: [1,mpirank:0,algo-1]<stderr>:
    r"|\d+\] "  # a log viewer's line number
    r"|[\w.-]+\.py:\d+(?::\w+)?\] ?"  # DeepSpeed: [loss_scaler.py:183:update_scale]
    r"|[IWEF](?:\d{3,4} \d\d:\d\d:\d\d\.\d+ (?:\d+ )?| )[\w.+-]+:\d+\] ?"  # c10: [E816 01:45:40.1 X.cpp:6]
    r"|NeMo [IWEDC] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [\w.]+:\d+\] ?"
    r"|\d\d/\d\d \d\d:\d\d:\d\d [\w.]+\]:? ?"  # detectron2
    r")"
    # srun --label; `123: -5.48` is a step and a loss (WaveGlow), `2296: 4.1, 4.3 avg loss, ...` too (Darknet)
    rf"|\d{{1,4}}: (?!\s*{_NUMERAL}\s*$|{_NUMERAL}, {_NUMERAL} avg)",
)
# the first character of every shape above
_FIRST = frozenset("[(0123456789IWEFDCTSN")


def strip_prefix(line: str) -> str:
    """`line` without its logger, launcher and viewer prefixes; the line itself when it has none.

    Leading blanks before a prefix go with it; a line without a prefix keeps its indentation."""
    first = line[:1]
    if first not in _FIRST:
        if first not in (" ", "\t"):
            return line
        start = len(line) - len(line.lstrip())
        if line[start : start + 1] not in _FIRST:
            return line
    else:
        start = 0
    pos = start
    while line[pos : pos + 1] in _FIRST and (found := PREFIX_RE.match(line, pos)) is not None and found.end() > pos:
        pos = found.end()
    return line if pos == start else line[pos:]
