"""How the dispatcher splits runs into jobs (pure)."""

from trainwarden.workers.dispatcher import chunk_runs


def test_chunk_runs_fills_jobs_and_spreads_bursts_over_idle_workers():
    work = [(f"r{i}", [f"{i}-0"]) for i in range(100)]
    assert [len(job) for job in chunk_runs(work, runs_per_job=32)] == [32, 32, 32, 4]
    assert [len(job) for job in chunk_runs(work, runs_per_job=32, spread=8)] == [12] * 8 + [4]
    assert [len(job) for job in chunk_runs(work[:5], runs_per_job=32, spread=8)] == [1] * 5
    assert chunk_runs([], runs_per_job=32) == []
    jobs = chunk_runs(work, runs_per_job=7, spread=3)
    assert [item for job in jobs for item in job] == work  # every run once, in order
