"""The Inject failure panel: what it says belongs to the run it was said about, and a refusal is a
short warning toast in the panel's own words (never Gradio's bounds error)."""
from __future__ import annotations

import pathlib

import pytest

from app import failure_panel, toasts
from app.controller import Tracked
from app.failure_panel import NO_RUN, inject, on_inject, stage_control
from app.tabs.watch import watch_line
from zerolock_core.config.run_config import RunConfig, TrainConfig
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.jobs.pipeline_job import Run

CFG = RunConfig(train=TrainConfig(runtime="pipeline", stages=2, steps=50, ckpt_every=2))


class Watching:
    """The controller as the panel and the Watch line see it: one watched run, no batch."""
    busy = False

    def __init__(self, t: Tracked | None) -> None:
        self.t = t

    def watched(self) -> Tracked | None:
        return self.t

    def batch(self) -> list[Tracked]:
        return []


def finished_run(tmp_path: pathlib.Path, name: str) -> Tracked:
    """A watched pipeline run whose engine has ended (no process: its state is all inject() reads)."""
    run = Run(RunConfig(train=CFG.train, out=str(tmp_path / name)))
    run.state = "finished"
    return Tracked(name=name, rd=RunDir(tmp_path / name), cfg=CFG.to_dict(), method="zerolock", batch="",
                   state="finished", engine=run)


@pytest.mark.parametrize("watched_after, shown", [
    ("first", "Cannot inject: the run is finished"),  # the same run: its note stays
    ("second", ""),  # a new run is watched: nothing about the old one
])
def test_the_inject_note_shows_only_while_its_run_is_watched(tmp_path, watched_after, shown):
    runs = {name: finished_run(tmp_path, name) for name in ("first", "second")}
    controller = Watching(runs["first"])
    assert inject(controller, 0, "kill").text == "Cannot inject: the run is finished"
    controller.t = runs[watched_after]
    line = watch_line(controller)["inject"]
    assert (shown in line) if shown else line == ""


def test_with_no_run_watched_the_watch_line_leaves_the_panels_answer_alone():
    assert "inject" not in watch_line(Watching(None))


@pytest.mark.parametrize("stage, said", [
    (5, "stage 5 is not a stage of the watched run, which has K = 2: choose stages 0..1"),
    (-1, "stage -1 is not a stage of the watched run"),
    (None, "stage (empty) is not a stage"),
    (0, "the run is finished"),
])
def test_a_refused_injection_is_a_warning_toast_of_the_one_short_duration(tmp_path, monkeypatch, stage, said):
    shown = []
    monkeypatch.setattr(toasts.gr, "Warning", lambda message, duration: shown.append((message, duration)))
    html = on_inject(Watching(finished_run(tmp_path, "r")), stage, "kill")
    assert said in html
    assert len(shown) == 1 and said in shown[0][0] and shown[0][1] == toasts.WARNING_TOAST_S


def test_no_run_watched_is_a_toast_too(monkeypatch):
    shown = []
    monkeypatch.setattr(toasts.gr, "Warning", lambda message, duration: shown.append((message, duration)))
    on_inject(Watching(None), 1, "kill")
    assert shown == [(NO_RUN, toasts.WARNING_TOAST_S)]


def test_warning_toasts_are_short_and_made_in_one_place():
    assert 3 <= toasts.WARNING_TOAST_S < 10  # readable, and shorter than Gradio's default (10 s)
    app = pathlib.Path(failure_panel.__file__).parent
    makers = [p.name for p in app.glob("*.py") if any(f"gr.{t}(" in p.read_text() for t in ("Warning", "Info"))]
    assert makers == ["toasts.py"]


def test_the_stage_field_has_no_bounds_for_gradio_to_refuse_with_its_own_toast(tmp_path):
    control = stage_control(Watching(finished_run(tmp_path, "r")))
    assert control.maximum is None and control.minimum is None and control.label == "stage (K = 2: stages 0..1)"


@pytest.mark.parametrize("method, ckpt_every, said", [
    ("pipedream", 0, "PipeDream cannot be recovered"),  # the reason, not "no checkpoints"
    ("zerolock", 0, "this run writes no checkpoints to recover from"),
])
def test_a_run_that_cannot_recover_says_why_in_words_not_config_keys(tmp_path, method, ckpt_every, said):
    run = Run(RunConfig(train=TrainConfig(runtime="pipeline", method=method, stages=2, batch=4, microbatches=2,
                                          ckpt_every=ckpt_every), out=str(tmp_path / "r")))
    t = Tracked(name="r", rd=RunDir(tmp_path / "r"), cfg=run.cfg.to_dict(), method=method, batch="", engine=run)
    text = inject(Watching(t), 1, "kill").text
    assert text.startswith(f"Cannot inject: {said}") and "ckpt_every" not in text


class _Accepting:
    """A watched run that takes any injection (what the panel says after one)."""
    cfg = RunConfig(train=TrainConfig(runtime="pipeline", stages=2))

    def inject_failure(self, stage: int, mode: str) -> None:
        pass


@pytest.mark.parametrize("mode,watch", [("slow", "its bars grow longer, nothing to recover"),
                                        ("kill", "the gap, RESTORE, REPLAY")])
def test_an_injection_says_what_its_lane_will_show(mode, watch):
    assert failure_panel._attempt(_Accepting(), 1, mode).text.endswith(f"Watch its lane: {watch}.")
