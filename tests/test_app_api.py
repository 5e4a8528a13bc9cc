"""API tier: the dashboard launched in-process on 127.0.0.1, driven with gradio_client."""
from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from app.cli_command import register
from app.form import RunForm, config_for
from app.page.plotly_asset import plotly_path, plotly_version
from app.server import ServeOptions, check_binding
from app.ui import build_app
from zerolock_core.config.field_words import ConfigError
from zerolock_core.config.run_config import RunConfig, replace
from zerolock_core.telemetry.events import read_events
from zerolock_core.rundir.metrics import Metrics
from zerolock_core.jobs.reference_job import ReferenceJob
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.rundir.runs_root import NotARun
from zerolock_core.runtime.processes import server_pid
from benchmarks.common.machine import free_port

pytestmark = [pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),  # inside gradio's queue, harmless
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]

# the tiny run of the issue: K=2, 3 steps, batch 4 in 2 micro-batches, sequence length 32
TINY = dict(methods=["zerolock"], stages=2, batch=4, microbatches=2, alpha="0.5", consistency="reverse", steps=3,
            seed=0, link="none", seq_len=32, eval_size=8, lr=2e-3, fail_stage=1, fail_step=2, fail_mode="none")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    demo = build_app(runs_root=root)
    port = free_port()
    demo.launch(**demo.page_options(), prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True)
    client = Client(f"http://127.0.0.1:{port}/", verbose=False)
    yield client, demo, root
    demo.controller.close()
    demo.close()


def start(client: Client, **changes) -> str:
    values = {**TINY, **changes}
    message, *_ = client.predict(*values.values(), api_name="/start_run")
    return message


def test_invalid_combination_is_explained_not_raised(app):
    client, demo, _ = app
    message = start(client, batch=6, microbatches=4)
    assert "Cannot start" in message and "batch b = 6 is not divisible by micro-batches m = 4" in message
    assert "1f1b needs micro-batches m >= stages K" in start(client, methods=["1f1b"], stages=3, microbatches=2,
                                                             batch=4)
    assert "stages K = 2.5 is not a whole number" in start(client, stages=2.5)  # not rounded to K = 2
    assert "stages K = 9 must be between 1 and the model's 8 layers" in start(client, stages=9)
    assert "α" in start(client, alpha="half")
    assert "choose at least one method" in start(client, methods=[])
    assert not demo.controller.busy


def test_explain_draws_the_simulated_schedules(app):
    client, _, _ = app
    text, timeline, memory = client.predict(4, 6, "gpipe", api_name="/explain")
    assert "update locking" in text and "6, 6, 6, 6" in text and "1, 1, 1, 1" in text
    assert timeline is not None and memory is not None


@pytest.mark.slow
def test_start_poll_stop_a_tiny_run(app):
    client, demo, root = app
    assert start(client).startswith("Started 1 run")
    assert "already in progress" in start(client)  # one batch at a time per app
    deadline = time.monotonic() + 240
    status = client.predict(api_name="/status")
    while status.get("events", 0) == 0 and status.get("busy") and time.monotonic() < deadline:
        time.sleep(0.5)
        status = client.predict(api_name="/status")
    assert status["events"] > 0, f"no events arrived: {status}"
    # the status line as the page's script fetches it: one plain POST, no queue
    reply = httpx.post(f"{client.src.rstrip('/')}/gradio_api/run/watch_line", json={"data": []}, timeout=30)
    line = reply.raise_for_status().json()["data"][0]
    assert "ZeroLock" in line["status"] and line["recovery"] == ""  # nothing injected: no recovery line
    assert line["key"].startswith(status["name"]) and line["figures"].startswith(line["key"])
    # the figures as the page's script fetches them: the parts on screen, one plain POST
    reply = httpx.post(f"{client.src.rstrip('/')}/gradio_api/run/watch_figures",
                       json={"data": [None, "recent actions", "MiB", ["timeline", "memory", "status"]]}, timeout=30)
    drawn = reply.raise_for_status().json()["data"][0]
    assert set(drawn["parts"]) == {"timeline", "memory", "status"}
    assert drawn["parts"]["status"]["name"] == status["name"]
    assert json.loads(drawn["parts"]["timeline"])["data"] and drawn["seen"]["run"] == status["name"]
    # the page's plotly.js comes from the app itself (the Python package's copy), compressed
    script = httpx.get(f"{client.src.rstrip('/')}{plotly_path()}", headers={"Accept-Encoding": "gzip"}, timeout=30)
    assert script.status_code == 200 and script.headers["content-encoding"] == "gzip"
    assert f"plotly.js v{plotly_version()}" in script.text[:200]
    assert "stopping" in client.predict(api_name="/stop_run") or not demo.controller.busy
    while demo.controller.busy and time.monotonic() < deadline:
        time.sleep(0.5)
    status = client.predict(api_name="/status")
    assert status["state"] in ("stopped", "finished"), status
    run_dir = root / status["name"]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["state"] == status["state"] and len(metrics["per_stage"]) == 2
    events, _ = read_events(RunDir(run_dir).event_files())
    assert {e["stage"] for e in events} == {0, 1}
    record = json.loads((run_dir / "dashboard.json").read_text())
    assert record["state"] == status["state"] and record["method"] == "zerolock"
    # the run is listed and can be reopened (as after a restart), and exported
    rows, _ = client.predict(None, api_name="/list_runs")
    assert rows["data"][0][0] == status["name"]
    message, *_ = client.predict(status["name"], api_name="/open_run")
    assert message.startswith("Opened")
    path, message = client.predict(status["name"], "events CSV", api_name="/export")
    header = (run_dir / "exports" / "events.csv").read_text().splitlines()[0]
    assert message.startswith("Wrote") and header.startswith("stage,kind") and "t0_ns (monotonic)" in header


@pytest.mark.slow
def test_closing_the_app_stops_its_runs(tmp_path):
    """The controller (one per app) stops a running batch and cancels the rest when the app closes."""
    import psutil

    from app.controller import EngineController

    controller = EngineController(tmp_path)
    form = RunForm(**{**TINY, "methods": ("zerolock", "gpipe"), "steps": 400})
    configs = [config_for(form, m, out=str(controller.new_run_dir(m, 2))) for m in form.methods]
    first, second = controller.start(configs)
    deadline = time.monotonic() + 240
    while not first.events and time.monotonic() < deadline:
        time.sleep(0.5)
        first.refresh()
    assert first.events, "no events arrived"
    server = server_pid()  # the stage processes are the engine's process server's children
    stage_procs = [p for p in psutil.Process().children(recursive=True)
                   if p.pid != server and "resource_tracker" not in " ".join(p.cmdline())]
    assert stage_procs
    controller.close()
    assert first.state == "stopped" and second.state == "cancelled"
    _, alive = psutil.wait_procs(stage_procs, timeout=30)
    assert not alive, alive
    assert not second.dir.exists()  # a cancelled run never starts


def test_binding_elsewhere_needs_a_password():
    check_binding("127.0.0.1", None)
    with pytest.raises(ConfigError, match="--password"):
        check_binding("0.0.0.0", None)
    check_binding("0.0.0.0", "s3cret")
    assert ServeOptions(host="0.0.0.0", password="s3cret").auth == [("zerolock", "s3cret")]
    parser = argparse.ArgumentParser()
    register(parser)
    args = parser.parse_args(["--host", "0.0.0.0", "--password", ""])
    with pytest.raises(ConfigError, match="--password"):
        args.func(args)
    with pytest.raises(ConfigError, match="--poll"):
        args = parser.parse_args(["--poll", "0.1"])
        args.func(args)


def test_zerolock_dashboard_command_refuses_an_open_host_without_password(capsys):
    from zerolock_core.cli import main

    assert main(["dashboard", "--host", "0.0.0.0", "--no-browser"]) == 2
    assert "--password" in capsys.readouterr().err


def test_png_export_or_a_clear_reason(tmp_path):
    """plotly's write_image needs kaleido and a Chrome/Chromium; without them the export explains."""
    from app.exports import ExportError, figure_png
    from app.figures.timeline import timeline_figure

    fig = timeline_figure([{"stage": 0, "kind": "F", "mb": 0, "t0": 0, "t1": 5_000_000}], stages=1)
    try:
        path = figure_png(fig, tmp_path / "t.png", width=400)
    except ExportError as err:
        assert "camera button" in str(err)
    else:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_a_reference_job_trains_exactly_the_config_it_was_given(tmp_path):
    cfg = config_for(RunForm(methods=("bp",), stages=2, batch=4, microbatches=2, alpha="1,0.5", steps=2,
                             seq_len=16, eval_size=4, lr=1e-3, seed=4), "bp", out=str(tmp_path))
    # fields the Run form does not set, which a command line rebuilt from the config once left out
    cfg = replace(cfg, model={"readout_adapter_hidden": 17, "lora_rank": 2}, train={"threads": 1, "weight_decay": 0.01})
    job = ReferenceJob(cfg).start()
    deadline = time.monotonic() + 240
    while not job.done and time.monotonic() < deadline:
        time.sleep(0.2)
    job.stop()  # nothing left running, whatever happened
    assert job.state == "finished", job.reason
    recorded = RunConfig.from_dict(job.metrics.config)
    assert recorded.out == Path(cfg.out).name  # a record names its run, never the server's path
    assert replace(recorded, out=cfg.out) == cfg


def test_resume_from_the_runs_tab_explains_a_run_it_cannot_resume(app):
    client, demo, root = app
    (root / "not-a-run").mkdir(exist_ok=True)
    message, *_ = client.predict("not-a-run", api_name="/resume_run")
    assert "no run named 'not-a-run'" in message
    finished = sorted(p.name for p in root.iterdir() if (p / "metrics.json").exists()
                      and json.loads((p / "metrics.json").read_text())["state"] == "finished")
    if finished:  # a run of an earlier test in this module: finished runs are not resumed
        message, *_ = client.predict(finished[0], api_name="/resume_run")
        assert "that run finished" in message or "no checkpoints" in message


def test_readability_tab_measures_the_tiny_model_and_refuses_a_path(app):
    client, _, _ = app
    text, plot = client.predict("tiny", "topics", 3, 32, False, False, api_name="/readability")
    assert "Majority class" in text and "cut suggestion" in text and plot is not None and "top:last" not in text
    text, plot = client.predict("tiny", "topics", 3, 32, False, True, api_name="/readability")
    assert "through the top 2 layers (readout top:last): after layer 3: " in text
    assert "dashdot" in json.dumps(plot)  # the top lens drawn beside the frozen head's
    for model, dataset in (("./no-such-model-dir", "topics"), ("/etc", "topics"), ("tiny", "csv:/etc/passwd")):
        with pytest.raises(AppError, match="is not in the list of choices"):  # refused before the handler runs
            client.predict(model, dataset, 3, 32, False, False, api_name="/readability")
    from app.tabs.readability import measure  # and the handler refuses a path itself too

    text, plot = measure("/etc", "topics", 3, 32, False)
    assert text.startswith("⚠️") and "zerolock bench readability" in text and plot is None


# ---- every endpoint that takes a run refuses one outside the runs folder ---------------------------
def a_run_shaped_folder(d):
    """What a stopped pipeline run leaves: config, a stopped record, events, a checkpoint folder."""
    cfg = config_for(RunForm(**{**TINY, "methods": ("zerolock",)}), "zerolock", out=str(d))
    rd = RunDir(d)
    rd.write_config(cfg)
    rd.write_metrics(Metrics(config=cfg.to_dict(), state="stopped", reason="stopped on request", steps_done=2))
    rd.events.write_text(json.dumps({"stage": 0, "kind": "F", "mb": 0, "t0": 1, "t1": 2}) + "\n")
    rd.stage_checkpoints(0).mkdir(parents=True)
    return d


def snapshot(folder):
    return sorted((str(p.relative_to(folder)), p.stat().st_mtime_ns) for p in folder.rglob("*"))


ENDPOINTS = {
    "open_run": lambda client, name: client.predict(name, api_name="/open_run")[0],
    "resume_run": lambda client, name: client.predict(name, api_name="/resume_run")[0],
    "export": lambda client, name: client.predict(name, "events CSV", api_name="/export")[1],
    "export_model": lambda client, name: client.predict(name, "PEFT adapter (zip)", api_name="/export")[1],
    "try_it": lambda client, name: client.predict(name, "a late goal", True, 2, 3, api_name="/try_it")[1],
    "trace": lambda client, name: client.predict(name, api_name="/trace"),
    "compare": lambda client, name: client.predict([name], api_name="/compare")[0],
    "delete_run": lambda client, name: client.predict(name, True, api_name="/delete_run")[0],
}
HOSTILE = ["../outside", "../../outside", "{outside}", "{outside}/", "run/../../outside", "x/../../outside",
           "%2e%2e/outside", "..%2Foutside", "%2E%2E%2Foutside", "link-out", "link-out/", "link-file",
           "group-link/stopped_copy", "..", ".", "./", "", " ", "~", "~/outside", "/", "//etc", "/etc/passwd",
           "..\\outside", "a\x00b", "not-a-run", "a-file.txt"]


@pytest.fixture(scope="module")
def hostile(app, tmp_path_factory):
    client, demo, root = app
    outside = a_run_shaped_folder(tmp_path_factory.mktemp("outside") / "stopped_copy")
    (root / "link-out").symlink_to(outside, target_is_directory=True)
    (root / "link-file").symlink_to(outside / "config.json")
    (root / "group-link").symlink_to(outside.parent, target_is_directory=True)
    (root / "not-a-run").mkdir(exist_ok=True)
    (root / "a-file.txt").write_text("x")
    return client, demo, root, outside


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
@pytest.mark.parametrize("name", HOSTILE)
def test_a_name_outside_the_runs_folder_is_refused_by_every_endpoint_and_touches_nothing(hostile, endpoint, name):
    client, demo, root, outside = hostile
    name = name.replace("{outside}", str(outside))
    before, inside = snapshot(outside.parent), snapshot(root)
    reply = ENDPOINTS[endpoint](client, name)
    if endpoint == "trace":
        assert reply["value"] is None and reply["interactive"] is False  # no file to download
    else:
        assert reply.startswith(("⚠️", "Choose a run first", "Nothing selected")), reply
    assert snapshot(outside.parent) == before and snapshot(root) == inside
    assert not demo.controller.busy
    watched = demo.controller.watched()
    assert watched is None or RunDir(watched.dir).path.resolve().is_relative_to(root.resolve())


@pytest.mark.parametrize("name,why", [
    ("../x", "is not a run under the runs folder"), ("/abs", "is not a run under the runs folder"),
    ("link-out", "leads outside the runs folder"), ("not-a-run", "no run named 'not-a-run'"),
    ("a\x00b", "is not a run name"), ("", "choose a run first"),
])
def test_runs_root_says_why_a_name_is_refused(hostile, name, why):
    _, demo, _, _ = hostile
    with pytest.raises(NotARun, match=re.escape(why)):
        demo.controller.root.resolve(name)


def test_a_run_inside_the_root_resolves_also_through_an_inner_symlink(hostile):
    _, demo, root, _ = hostile
    run = a_run_shaped_folder(root / "inner-run")
    (root / "inner-link").symlink_to(run, target_is_directory=True)
    assert demo.controller.root.resolve("inner-link").path == run.resolve()
    assert demo.controller.root.resolve("inner-run").path == run.resolve()


@pytest.mark.slow
def test_sigterm_ends_the_dashboard_and_its_live_run_with_a_record_and_no_process(tmp_path):
    """`kill PID` on `zerolock dashboard` while a run trains (Ctrl-C takes the same path: StopSignals):
    the run stops with its record, every process ends, the dashboard exits 0."""
    import psutil

    from benchmarks.dashboard import wait_http

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "zerolock_core", "dashboard", "--no-browser", "--port", str(port),
                             "--runs-dir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/")
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        message, *_ = client.predict(*{**TINY, "steps": 400, "fail_mode": "none"}.values(), api_name="/start_run")
        assert message.startswith("Started 1 run"), message
        deadline = time.monotonic() + 240
        while not list(tmp_path.glob("*/checkpoints/stage1/step00000002/MANIFEST.json")):
            assert time.monotonic() < deadline and proc.poll() is None, "the run never checkpointed"
            time.sleep(0.2)
        family = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert "stopping its runs" in out
    _, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, [p.cmdline()[:3] for p in alive]
    [run] = [RunDir(p) for p in tmp_path.iterdir() if p.is_dir()]
    assert run.read_metrics().state == "stopped" and not run.is_live()


# ---- your own data: upload, preview, train, export, try it ------------------------------------------------
DATA_FIELDS = dict(data_kind="prompt → response", text_fields="", label_field="", label_words="", prompt_field="q",
                   response_field="a")


def test_an_uploaded_jsonl_previews_trains_exports_and_answers(app, tmp_path):
    from gradio_client import handle_file

    client, demo, root = app
    path = tmp_path / "my qa.jsonl"  # a space in the name: kept as a safe name
    path.write_text("".join(json.dumps({"q": f"What is {i % 7} plus {i % 5}?", "a": f"It is {i % 7 + i % 5}."})
                            + "\n" for i in range(40)))
    # checked in full as the task the form's fields describe before it is kept
    choice, message, _ = client.predict(handle_file(str(path)), "topics", *DATA_FIELDS.values(), 32,
                                        api_name="/upload_data")
    assert choice["value"] == "my-qa.jsonl" and ["my-qa.jsonl"] * 2 in choice["choices"]
    assert "Uploaded <b>my-qa.jsonl</b>" in message
    assert (root / "data" / "my-qa.jsonl").read_bytes() == path.read_bytes()
    shown = client.predict("my-qa.jsonl", *DATA_FIELDS.values(), 32, api_name="/preview_data")
    assert "prompt → response; 36 train / 4 eval rows" in shown and shown.count("outline:2px solid") >= 4
    assert " It" in shown  # the response's first token, outlined
    message = start(client, steps=5, readout="head", dataset="my-qa.jsonl", **DATA_FIELDS)
    assert message.startswith("Started 1 run"), message
    deadline = time.monotonic() + 240
    while demo.controller.busy and time.monotonic() < deadline:
        time.sleep(0.5)
    [run] = [r for r in demo.controller.root.runs() if (r.saved_config().data.prompt_field == "q")]
    metrics = run.read_metrics()
    assert metrics.state == "finished" and metrics.eval["label_accuracy"] is None, metrics.reason
    assert metrics.eval["exact_match_examples"] == 4
    name = demo.controller.root.run_id(run)
    zip_path, said = client.predict(name, "PEFT adapter (zip)", api_name="/export")
    assert said.startswith("Wrote") and zip_path
    table, said = client.predict(name, "", True, 2, 4, api_name="/try_it")
    assert [row[1] for row in table["data"]] == ["It is 5.", "It is 7."] or len(table["data"]) == 2, table


@pytest.mark.parametrize("choice", ["../outside.jsonl", "/etc/passwd", "data/x.jsonl", "jsonl:/etc/passwd", "..",
                                    "ag_news", "my-qa.jsonl/../../x"])
def test_a_dataset_choice_that_is_not_built_in_or_uploaded_is_refused(app, choice):
    client, demo, root = app
    shown = client.predict(choice, *DATA_FIELDS.values(), 32, api_name="/preview_data")
    assert shown.startswith("<p>⚠️") and "is neither built in (topics, needle) nor an uploaded file" in shown
    message = start(client, readout="head", dataset=choice, **DATA_FIELDS)
    assert "Cannot start" in message and not demo.controller.busy


@pytest.mark.parametrize("name,content,says", [
    ("notes.txt", "hello", "notes.txt: upload a .csv (with a header row), .jsonl or .parquet file"),
    ("empty.jsonl", "", "empty.jsonl is empty"),
])
def test_an_upload_of_the_wrong_kind_is_refused_and_nothing_is_kept(app, tmp_path, name, content, says):
    from gradio_client import handle_file

    client, _, root = app
    (tmp_path / name).write_text(content)
    before = sorted(p.name for p in (root / "data").iterdir()) if (root / "data").is_dir() else []
    try:
        _, message, _ = client.predict(handle_file(str(tmp_path / name)), "topics", *DATA_FIELDS.values(), 32,
                                       api_name="/upload_data")
    except AppError as err:
        message = f"⚠️ {err}"
    assert "⚠️" in message and says in message
    assert (sorted(p.name for p in (root / "data").iterdir()) if (root / "data").is_dir() else []) == before


@pytest.mark.parametrize("name,size,says", [
    ("notes.txt", 10, "upload a .csv (with a header row), .jsonl or .parquet file"),
    ("big.csv", 2048, "the dashboard takes files up to"),
    ("empty.parquet", 0, "empty.parquet is empty"),
])
def test_save_upload_refuses_another_kind_an_empty_or_a_too_large_file(tmp_path, name, size, says):
    from app.data_uploads import save_upload

    (tmp_path / name).write_bytes(b"x" * size)
    with pytest.raises(ValueError, match=re.escape(says)):
        save_upload(tmp_path / "root", tmp_path / name, check=lambda spec: None, limit=1024)
    assert not (tmp_path / "root").exists()
