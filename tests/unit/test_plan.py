from trainwarden.remote.fleet import Experiment, Fleet, Server
from trainwarden.remote.plan import Plan, PlanState, allocate, is_done, next_steps


def fleet(**deps):
    server = Server(name="s1", host="h", user="u", work_dir="/w", gpus=(0, 1))
    exps = {n: Experiment(name=n, server="s1", command=("python",), depends_on=tuple(d)) for n, d in deps.items()}
    return Fleet(servers={"s1": server}, experiments=exps)


DAG = {"e1": [], "e2": ["e1"], "e3": ["e2"], "e4": ["e2"]}
PLAN = Plan(name="p", experiments=("e1", "e2", "e3", "e4"))


def state(**states):
    s = PlanState(started=True)
    gpu = iter([0, 1])
    for name, st in states.items():
        s.steps[name] = {"experiment": name, "state": st, "gpus": [next(gpu)] if st == "running" else []}
    return s


def test_only_roots_start():
    assert [(s.experiment, s.state, s.gpus) for s in next_steps(PLAN, PlanState(), {}, fleet(**DAG))] == [
        ("e1", "running", (0,))
    ]


def test_children_wait_for_their_parent_to_finish():
    assert next_steps(PLAN, state(e1="running"), {"e1": "running"}, fleet(**DAG)) == []
    steps = next_steps(PLAN, state(e1="running"), {"e1": "finished"}, fleet(**DAG))
    assert [(s.experiment, s.state) for s in steps] == [("e1", "finished"), ("e2", "running")]


def test_independent_children_run_in_parallel_on_distinct_gpus():
    steps = next_steps(PLAN, state(e1="finished", e2="finished"), {}, fleet(**DAG))
    assert [(s.experiment, s.gpus) for s in steps] == [("e3", (0,)), ("e4", (1,))]


def test_a_failed_parent_blocks_children_and_grandchildren():
    steps = next_steps(PLAN, state(e1="running"), {"e1": "failed"}, fleet(**DAG))
    assert [(s.experiment, s.state) for s in steps] == [("e1", "failed"), ("e2", "blocked"), ("e3", "blocked"),
                                                         ("e4", "blocked")]  # fmt: skip
    assert steps[1].reason == "e1 failed; it must finish first"
    assert steps[2].reason == "e2 blocked; it must finish first"


def test_no_gpu_is_shared():
    f = fleet(a=[], b=[], c=[])
    plan = Plan(name="p", experiments=("a", "b", "c"))
    assert [s.experiment for s in next_steps(plan, PlanState(), {}, f)] == ["a", "b"]
    assert next_steps(plan, state(a="running", b="running"), {"a": "running", "b": "running"}, f) == []


def test_max_parallel():
    plan = Plan(name="p", experiments=("a", "b", "c"), max_parallel=1)
    assert len(next_steps(plan, PlanState(), {}, fleet(a=[], b=[], c=[]))) == 1


def test_allocate():
    assert allocate(2, None, (0, 1, 2, 3), {1}) == (0, 2)
    assert allocate(2, None, (0, 1), {1}) is None
    assert allocate(1, (3,), (0, 1, 2, 3), {1}) == (3,)
    assert allocate(1, (1,), (0, 1), {1}) is None


def test_done_when_every_experiment_is_terminal():
    assert not is_done(PLAN, state(e1="finished", e2="running"))
    assert is_done(PLAN, state(e1="failed", e2="blocked", e3="blocked", e4="blocked"))
