#!/usr/bin/env python3
"""Check the agent's real GPU path (NVML through pynvml) on a machine with an NVIDIA GPU.

The test suite cannot: CI and development machines have no GPU, so the tests replay recorded
samples (tests/data/gpu/*.json) through the same interface. Run this on a GPU server after
`pip install 'trainwarden[gpu]'`:

    python scripts/check_nvml.py                   # 5 samples, one a second, and any XID events
    python scripts/check_nvml.py --samples 30 --record gpu.json   # also save them for the tests

What it checks, each line saying PASS or FAIL:
  1. NVML initialises (driver loaded, nvidia-ml-py importable) and lists the GPUs;
  2. each sample has utilization, memory, temperature and power for every GPU (ECC may be
     absent on GPUs without ECC: reported, not a failure);
  3. XID events can be registered and waited on (`nvmlEventSetWait_v2` with a 0 ms timeout);
  4. the compute processes NVML reports are visible (start a CUDA program to see its pid), each named from
     /proc as the agent names another process on a run's GPU (the throughput rule's cause);
  5. the SM clock, its maximum and the enforced power limit are read (the throughput rule says a throttled
     GPU's clock against its maximum, and its power against the limit).
Exit status 0 when every check passed, 1 otherwise, 2 when NVML is unavailable.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainwarden.agent import procfs
from trainwarden.agent.errors import GpuUnavailable
from trainwarden.agent.gpu import frame_of


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--record", type=Path, help="write the samples as a recording RecordedGpuSampler replays")
    args = p.parse_args()

    from trainwarden.agent.nvml import NvmlSampler

    try:
        sampler = NvmlSampler()
    except GpuUnavailable as exc:
        print(f"FAIL  NVML: {exc}")
        return 2
    failures = 0

    def check(ok: bool, what: str) -> None:
        nonlocal failures
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {what}")

    info = sampler.info()
    check(info["gpus"] > 0, f"NVML {info['nvml']}, driver {info['driver']}, {info['gpus']} GPU(s)")
    check(bool(info["xid_events"]), f"XID events registered on GPUs {info['xid_events']}")
    frames = []
    for n in range(args.samples):
        samples = sampler.sample()
        xids = sampler.xids()
        frames.append(frame_of(samples, xids))
        for s in samples:
            measured = None not in (s.gpu_util, s.mem_used_mb, s.mem_total_mb, s.gpu_temp, s.power_w)
            check(measured, f"sample {n} GPU {s.index} {s.name}: util {s.gpu_util}% mem {s.mem_used_mb}/"
                  f"{s.mem_total_mb} MB temp {s.gpu_temp} C power {s.power_w} W throttle {list(s.throttle)} "
                  f"ECC {s.ecc_corrected}/{s.ecc_uncorrected} pids {list(s.pids)}")  # fmt: skip
            clocks = None not in (s.clock_mhz, s.clock_max_mhz, s.power_limit_w)
            check(clocks, f"sample {n} GPU {s.index}: SM clock {s.clock_mhz}/{s.clock_max_mhz} MHz, power limit "
                  f"{s.power_limit_w} W")  # fmt: skip
            for pid in s.pids:
                stat = procfs.read_stat(pid)
                print(f"INFO  GPU {s.index} process {pid}: {stat.comm if stat else '(not visible from here)'}")
        for x in xids:
            print(f"INFO  XID {x.code} on GPU {x.index}: {x.data()['meaning']}")
        time.sleep(args.interval)
    check(True, "waiting for XID events did not block or fail")
    sampler.close()
    if args.record:
        args.record.write_text(json.dumps({"info": info, "frames": frames}, indent=1))
        print(f"INFO  recording written to {args.record}")
    print("all checks passed" if failures == 0 else f"{failures} check(s) failed")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
