"""One job lifecycle (jobs/base.py): the states and their moves, the status both the CLI and the
dashboard read, and the start / end / fallback record / lock that both runtimes' jobs share."""
from __future__ import annotations

import ast
import json
import threading
from pathlib import Path

import pytest

from zerolock_core.config.run_config import RunConfig, TrainConfig
from zerolock_core.jobs.base import TERMINAL, TRANSITIONS, JobBase, JobState, JobStatus, can_move
from zerolock_core.jobs.job import progress_words
from zerolock_core.rundir.metrics import STATES, Metrics
from zerolock_core.rundir.run_dir import RunDir

ROOT = Path(__file__).resolve().parents[1]
S = JobState


# ---- the states ---------------------------------------------------------------------------------
@pytest.mark.parametrize("old,new,allowed", [
    (S.CREATED, S.STARTING, True),  # a fresh run, or a resumed one with steps left
    (S.CREATED, S.FINISHING, True),  # a resumed run that only lacks its final eval, or a failed start
    (S.CREATED, S.RUNNING, False),
    (S.STARTING, S.RUNNING, True),
    (S.STARTING, S.RECOVERING, True),
    (S.STARTING, S.FINISHING, True),
    (S.RUNNING, S.RECOVERING, True),
    (S.RECOVERING, S.RUNNING, True),
    (S.RECOVERING, S.RECOVERING, True),
    (S.RUNNING, S.STARTING, False),
    (S.RUNNING, S.FINISHED, False),  # every end goes through finishing: the record is made there
    (S.FINISHING, S.FINISHED, True),
    (S.FINISHING, S.STOPPED, True),
    (S.FINISHING, S.FAILED, True),
    (S.FINISHING, S.RUNNING, False),
    (S.FINISHED, S.STARTING, False),  # an ended job stays ended: `--resume` is a new job
    (S.STOPPED, S.RUNNING, False),
    (S.FAILED, S.FINISHING, False),
])
def test_a_job_moves_only_along_its_lifecycle(old, new, allowed):
    assert can_move(old, new) is allowed
    assert can_move(old.value, new.value) is allowed  # the bare names read the same


@pytest.mark.parametrize("path", [
    [S.CREATED, S.STARTING, S.RUNNING, S.FINISHING, S.FINISHED],  # fresh, to its end
    [S.CREATED, S.STARTING, S.RUNNING, S.RECOVERING, S.RUNNING, S.FINISHING, S.STOPPED],
    [S.CREATED, S.STARTING, S.FINISHING, S.FAILED],  # stopped or failed while the stages started
    [S.CREATED, S.FINISHING, S.FINISHED],  # resumed: only the final eval was left
    [S.CREATED, S.STARTING, S.RUNNING, S.FINISHING, S.FINISHED],  # resumed with steps left: as fresh
])
def test_every_lifecycle_walks_through_set_state(path, tmp_path):
    job = Probe(tmp_path)
    for state in path[1:]:
        job._set_state(state)
    assert job.state is path[-1] and job.done


def test_the_terminal_states_are_the_records_states():
    assert set(TERMINAL) == set(STATES) and all(s.terminal for s in TERMINAL)
    assert not any(s.terminal for s in S if s not in TERMINAL)
    assert set(TRANSITIONS) == {s for s in S if not s.terminal}
    assert json.dumps({"state": S.RUNNING}) == '{"state": "running"}' and f"{S.RUNNING}" == "running"


def test_an_illegal_move_is_refused(tmp_path):
    job = Probe(tmp_path)
    with pytest.raises(AssertionError, match="created -> running"):
        job._set_state(S.RUNNING)


# ---- the status ---------------------------------------------------------------------------------
def test_a_status_round_trips_through_json():
    st = JobStatus(state=S.RECOVERING, total_steps=80, steps_done=12, stage_states=["running", "loading"],
                   stage_steps=[13, 12], elapsed_s=40.0, eta_s=100.0, s_per_step=1.5, startup_s=8.0, downtime_s=3.0,
                   dir="/runs/x", recovering=[1], open_recoveries=[{"stage": 1, "kind": "local", "down_s": 3.0}],
                   eval_progress=None, reason="", stopping=False)
    d = json.loads(json.dumps(st.to_dict()))
    assert d["state"] == "recovering" and type(d["state"]) is str
    assert JobStatus.from_dict(d) == st
    assert JobStatus.from_dict({**d, "busy": True}) == st  # the dashboard's own keys are not the job's


def status(**kw) -> JobStatus:
    return JobStatus(**{"state": "running", "total_steps": 80, "elapsed_s": 75.0, **kw})


@pytest.mark.parametrize("st,words", [
    (status(state="created", elapsed_s=0.0), "created, elapsed 00:00"),
    (status(state="starting"), "starting 01:15"),  # the reference runtime: no stage phases
    (status(state="starting", stage_states=["loading", "linking"]), "starting 01:15 (0: loading, 1: linking)"),
    (status(steps_done=10), "running, elapsed 01:15"),
    (status(s_per_step=1.25, eta_s=3725.0), "running, 1.25 s/step, ETA 1:02:05, elapsed 01:15"),
    (status(state="recovering", open_recoveries=[{"stage": 2, "kind": "local", "down_s": 0.5}]),
     "stage 2 down — restarting (0.5 s); elapsed 01:15"),
    (status(state="finishing"), "evaluating the final weights (starting); elapsed 01:15"),
    (status(state="finishing", eval_progress={"phase": "scoring", "scored": 3, "total": 8}),
     "evaluating the final weights: 3/8 examples; elapsed 01:15"),
    (status(state="starting", stopping=True), "stopping: every stage finishes its current action and saves; "
                                              "elapsed 01:15"),
    (status(state="finished"), "finished, elapsed 01:15"),
])
def test_progress_words_are_a_pure_function_of_the_status(st, words):
    before = st.to_dict()
    assert progress_words(st) == words == progress_words(JobStatus.from_dict(before))
    assert st.to_dict() == before


def test_the_dashboard_reads_the_jobs_status_fields(tmp_path):
    """The dashboard's /status says what the job's status says: the fields the CLI's words read."""
    from app.controller import Tracked

    st = status(state="recovering", steps_done=7, stage_states=["running", "loading"], s_per_step=0.5, eta_s=36.5,
                open_recoveries=[{"stage": 1, "kind": "global", "down_s": 2.0}], stopping=True)

    class Engine:
        state, metrics, done = st.state, None, False

        def status(self) -> JobStatus:
            return st

    t = Tracked(name="r", rd=RunDir(tmp_path), cfg={"train": {"steps": 80, "stages": 2}}, method="zerolock",
                batch="", engine=Engine(), state=str(st.state))
    shown = t.status()
    for key in ("steps_done", "total_steps", "elapsed_s", "eta_s", "s_per_step", "stage_states", "eval_progress",
                "open_recoveries", "stopping"):
        assert shown[key] == getattr(st, key), key
    assert shown["state"] == "recovering"


# ---- Run.status without starting anything -------------------------------------------------------
def pipeline_cfg(tmp_path) -> RunConfig:
    return RunConfig(train=TrainConfig(runtime="pipeline", stages=2, batch=4, microbatches=2, steps=80, ckpt_every=1),
                     out=str(tmp_path / "run"))


def test_run_status_needs_no_monkeypatch(tmp_path):
    """A `Run` that was never started answers; give it a store and it reads the stages' steps from it."""
    import torch.distributed as dist

    from zerolock_core.jobs.pipeline_job import Run
    from zerolock_core.runtime import protocol
    from zerolock_core.runtime.store_view import StoreView

    run = Run(pipeline_cfg(tmp_path))
    st = run.status()
    assert (st.state, st.steps_done, st.total_steps, st.stopping) == (S.CREATED, 0, 80, False)
    assert progress_words(st) == "created, elapsed 00:00"
    run._store = StoreView(dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False))
    try:
        for s, n in enumerate([5, 4]):
            run._store.set(protocol.stage_step(s), str(n))
        run.state = S.RUNNING
        st = run.status()
        assert (st.state, st.steps_done, st.stage_steps) == (S.RUNNING, 4, [5, 4])
    finally:
        run._store.close()


# ---- JobBase: start, end, the fallback record, the lock -----------------------------------------
class Probe(JobBase):
    """A job whose runtime is a thread: `launch` and `record` say what its parts do."""
    THREAD_NAME = "probe-job"

    def __init__(self, tmp_path: Path, *, launch=None, record=None) -> None:
        super().__init__(RunConfig(train=TrainConfig(runtime="reference", steps=3), out=str(tmp_path / "run")))
        self.launch, self.record = launch, record
        self.gate = threading.Event()  # the runtime's processes run until it is set
        self.gate.set()

    def _launch(self) -> None:
        self._set_state(S.STARTING)
        if self.launch is not None:
            self.launch()

    def _watch(self) -> None:
        self._set_state(S.RUNNING)
        self.gate.wait(30)
        self._end()

    def _record(self) -> Metrics | None:
        return self.record() if self.record is not None else None

    def status(self) -> JobStatus:
        return self._status()


def lock_is_free(job: JobBase) -> bool:
    try:
        job.rd.lock().release()
        return True
    except Exception:
        return False


def test_a_job_that_ends_with_its_record_writes_it_and_releases_the_lock(tmp_path):
    job = Probe(tmp_path, record=lambda: Metrics(config={}, state="finished", steps_done=3))
    job.gate.clear()
    assert job.start() is job
    assert not lock_is_free(job) and job.state in (S.STARTING, S.RUNNING) and not job.done  # held while it runs
    job.gate.set()
    metrics = job.wait(30)
    assert metrics.state == "finished" and job.state is S.FINISHED and job.done
    assert job.rd.read_metrics().steps_done == 3
    assert lock_is_free(job)


@pytest.mark.parametrize("record,reason", [
    (None, "the run ended without writing its record"),
    (lambda: 1 / 0, "ending the run: ZeroDivisionError: division by zero"),
])
def test_a_job_without_a_record_ends_failed_with_the_fallback(tmp_path, record, reason):
    job = Probe(tmp_path, record=record)
    metrics = job.start().wait(30)
    assert (metrics.state, metrics.reason) == ("failed", reason) and job.state is S.FAILED
    on_disk = json.loads(job.rd.metrics.read_text())
    assert on_disk["state"] == "failed" and on_disk["reason"] == reason and on_disk["errors"] == {"run": reason}
    assert job.reason == reason and job.status().reason == reason
    assert lock_is_free(job)


def test_a_launch_that_fails_ends_the_job_at_once(tmp_path):
    def launch():
        raise OSError("no processes left")

    job = Probe(tmp_path, launch=launch)
    job.start()
    assert job._thread is None and job.state is S.FAILED
    assert job.metrics.reason == "could not start the run: OSError: no processes left"
    assert job.rd.read_metrics().state == "failed" and lock_is_free(job)
    with pytest.raises(RuntimeError, match="run already failed"):
        job.start()


# ---- one path for each thing --------------------------------------------------------------------
def imports_in(path: Path) -> list[tuple[str, list[str]]]:
    tree = ast.parse(path.read_text())
    return [(node.module or "", [a.name for a in node.names]) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)]


def test_the_jobs_import_only_the_lifecycle_and_make_job_imports_both():
    jobs = ROOT / "zerolock_core" / "jobs"
    for runtime_job in ("pipeline_job.py", "reference_job.py", "base.py"):
        modules = [m for m, _ in imports_in(jobs / runtime_job)]
        assert "job" not in modules, runtime_job  # `from .job import ...` would close the circle again
    assert {"pipeline_job", "reference_job"} <= {m for m, _ in imports_in(jobs / "job.py")}


def python_files():
    for folder in ("zerolock_core", "app", "benchmarks", "tests", "theory", "notebooks"):
        yield from (ROOT / folder).rglob("*.py")


def test_config_error_and_the_json_writer_are_imported_from_where_they_live():
    wrong = []
    for path in python_files():
        for module, names in imports_in(path):
            if "ConfigError" in names and not module.endswith("field_words"):
                wrong.append(f"{path.relative_to(ROOT)}: ConfigError from {module}")
            if "write_json_atomic" in names and not module.endswith("atomic_files"):
                wrong.append(f"{path.relative_to(ROOT)}: write_json_atomic from {module}")
    assert wrong == []
