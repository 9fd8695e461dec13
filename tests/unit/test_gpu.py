"""The GPU interface's recorded implementation, throttle reasons and XID meanings."""

from pathlib import Path

from trainwarden.agent.gpu import GpuSample, RecordedGpuSampler, Xid, frame_of
from trainwarden.agent.nvml import throttle_names
from trainwarden.agent.xid import describe

RECORDING = Path(__file__).resolve().parent.parent / "data" / "gpu" / "two_gpus.json"


def test_recorded_sampler_replays_frames_then_repeats_the_last():
    sampler = RecordedGpuSampler.load(RECORDING)
    assert [s.gpu_temp for s in sampler.sample()] == [71.0, 34.0]
    assert sampler.xids() == []
    hot = sampler.sample()
    assert [s.gpu_temp for s in hot] == [88.0, 34.0]
    assert (hot[0].clock_mhz, hot[0].clock_max_mhz, hot[0].power_limit_w) == (1095.0, 1980.0, 700.0)
    assert hot[0].data()["clock_mhz"] == 1095.0 and "clock_mhz" not in hot[1].data()  # not recorded: left out
    assert [x.code for x in sampler.xids()] == [79, 48]
    assert sampler.xids() == []  # each XID once
    assert [s.gpu_temp for s in sampler.sample()] == [88.0, 34.0]
    assert sampler.xids() == []


def test_a_frame_written_by_the_recorder_is_replayed_as_it_was():
    sample = GpuSample(index=0, gpu_util=50.0, throttle=("hw_slowdown",), pids=(7,))
    replay = RecordedGpuSampler(frames=[frame_of([sample], [Xid(index=0, code=13)])])
    assert replay.sample() == [sample]
    assert replay.xids() == [Xid(index=0, code=13)]


def test_gpu_event_data_leaves_out_what_was_not_measured():
    data = GpuSample(index=1, gpu_util=3.0, pids=(5,)).data()
    assert data == {"gpu": 1, "uuid": "", "name": "", "gpu_util": 3.0, "throttle": []}


def test_throttle_reason_bits():
    assert throttle_names(0x1 | 0x8 | 0x40) == ("hw_slowdown", "hw_thermal")  # idle is not a problem
    assert throttle_names(0) == ()


def test_xid_meanings():
    assert describe(79) == ("critical", "GPU has fallen off the bus")
    assert describe(99999)[1] == "XID 99999: see NVIDIA's XID catalogue"
