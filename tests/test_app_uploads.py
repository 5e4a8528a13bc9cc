"""Uploads through the dashboard's own routes, as a browser or any HTTP client sends them: Gradio's route
refuses what is too large; the upload event keeps a file only once the engine's checks pass (the ones Run
makes), under a name that never replaces another; nothing refused stays anywhere, Gradio's copy included."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from gradio_client import Client, handle_file

from app.data_uploads import STAGING_PREFIX, UPLOAD_LIMIT_BYTES, delete_upload, save_upload, sweep_staging
from app.gradio_temp import discard_upload, own_temp_dir, remove_temp_dir
from zerolock_core.rundir.process_alive import process_alive
from app.ui import build_app
from benchmarks.common.machine import free_port

pytestmark = [pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]

CLASSIFY = dict(kind="classification", text_fields="", label_field="", label_words="", prompt_field="",
                response_field="", seq_len=64)
RESPOND = {**CLASSIFY, "kind": "prompt → response", "prompt_field": "q", "response_field": "a"}


def csv_rows(labels: list[str], n: int = 20) -> str:
    return "text,label\n" + "".join(f"row number {i},{labels[i % len(labels)]}\n" for i in range(n))


QA = "".join(json.dumps({"q": f"What is {i} plus one?", "a": f"It is {i + 1}."}) + "\n" for i in range(20))


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    """The dashboard launched as `zerolock dashboard` launches it: its own Gradio temp folder, the page's
    launch options (the upload limit among them). GRADIO_TEMP_DIR is restored afterwards."""
    root = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRADIO_TEMP_DIR", os.environ.get("GRADIO_TEMP_DIR", ""))  # restored when the module ends
        temp = own_temp_dir(root)
        demo = build_app(runs_root=root)
        port = free_port()
        demo.launch(**demo.page_options(), prevent_thread_lock=True, server_name="127.0.0.1", server_port=port,
                    quiet=True)
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        try:
            yield client, root, temp
        finally:
            demo.controller.close()
            demo.close()


def files_under(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def upload(client, path, previous: str, fields: dict) -> tuple[dict, str]:
    chosen, said, box = client.predict(handle_file(str(path)), previous, *fields.values(), api_name="/upload_data")
    assert box is None  # the upload box is emptied for the next file
    return chosen, said


# name, content, form fields -> the kept name, or (None, what the refusal says)
UPLOADS = [
    ("news.csv", csv_rows(["sport", "world"]), CLASSIFY, "news.csv", ""),
    ("header-only.csv", "text,label\n", CLASSIFY, None, "the file holds no rows"),
    ("one-class.csv", csv_rows(["sport"]), CLASSIFY, None, "a classification needs at least two classes"),
    ("alike.csv", csv_rows(["World news", "World sport"]), CLASSIFY, None, "start with distinct tokens"),
    ("bad.jsonl", '{"q": "a", "a": "b"}\n{"q": \n', RESPOND, None, "not valid JSON Lines"),
    ("qa.jsonl", QA, CLASSIFY, None, "fields are q, a (name them as the text fields)"),
    ("qa.jsonl", QA, RESPOND, "qa.jsonl", ""),
    ("empty.csv", "", CLASSIFY, None, "empty.csv is empty"),
    ("notes.txt", "text,label\na,b\n", CLASSIFY, None, "notes.txt: upload a .csv (with a header row)"),
    # names that clean to the same name: numbered, never replaced; the same bytes again keep their name
    ("....csv", csv_rows(["a", "b"]), CLASSIFY, "data.csv", ""),
    ("тест.csv", csv_rows(["c", "d"]), CLASSIFY, "data-2.csv", ""),
    ("数据.csv", csv_rows(["e", "f"]), CLASSIFY, "data-3.csv", ""),
    ("data.csv", csv_rows(["a", "b"]), CLASSIFY, "data.csv", ""),
]


def test_uploads_are_checked_in_full_then_kept_under_a_name_that_never_replaces_another(dashboard, tmp_path):
    client, root, temp = dashboard
    kept: dict[str, str] = {}  # name in data/ -> content
    choice = "topics"
    for n, (name, content, fields, keeps, says) in enumerate(UPLOADS):
        (tmp_path / str(n)).mkdir()
        path = tmp_path / str(n) / name
        path.write_text(content, encoding="utf-8")
        chosen, said = upload(client, path, choice, fields)
        if keeps:
            assert chosen["value"] == keeps and f"Uploaded <b>{keeps}</b>" in said, (name, said)
            kept[keeps] = content
            choice = keeps
        else:
            assert said.startswith("<p>⚠️") and says in said, (name, said)
            assert chosen["value"] == choice and f"the dataset is still <b>{choice}</b>" in said, (name, said)
            assert str(root) not in said  # the refusal names the file, not where it was checked
        # data/ holds what was kept, with the bytes uploaded, and nothing else (no staging folder left)
        assert sorted(p.name for p in (root / "data").iterdir()) == sorted(kept), name
        assert {p: (root / "data" / p).read_text(encoding="utf-8") for p in kept} == kept
        assert [c for c, _ in chosen["choices"]] == ["topics", "needle", *sorted(kept)]
        assert files_under(temp) == [], name  # Gradio's copy is gone, kept or refused


def test_a_file_over_the_limit_is_refused_by_gradios_own_route_and_nothing_stays(dashboard):
    client, _, temp = dashboard
    url = f"{client.src.rstrip('/')}/gradio_api/upload"
    over = io.BytesIO(b"text,label\n" + b"x" * (UPLOAD_LIMIT_BYTES - 10))
    reply = httpx.post(url, files={"files": ("big.csv", over, "text/csv")}, timeout=120)
    assert reply.status_code == 413 and "maximum allowed size" in reply.text
    assert files_under(temp) == []
    small = httpx.post(url, files={"files": ("small.csv", io.BytesIO(b"text,label\n"), "text/csv")}, timeout=60)
    assert small.status_code == 200  # under the limit: Gradio takes it (the upload event checks it)
    [path] = small.json()
    discard_upload(path)
    assert files_under(temp) == []


def test_delete_removes_an_uploaded_file_and_says_the_choice_went_back_to_the_built_in(dashboard, tmp_path):
    client, root, _ = dashboard
    path = tmp_path / "to-delete.csv"
    path.write_text(csv_rows(["yes", "no"]))
    chosen, _ = upload(client, path, "topics", CLASSIFY)
    assert chosen["value"] == "to-delete.csv"
    chosen, said = client.predict("to-delete.csv", api_name="/delete_data")
    assert not (root / "data" / "to-delete.csv").exists()
    assert chosen["value"] == "topics" and "to-delete.csv" not in [c for c, _ in chosen["choices"]]
    assert "Deleted <b>to-delete.csv</b>; the dataset is now <b>topics</b>" in said


@pytest.mark.parametrize("choice,says", [
    ("topics", "topics is built in"), ("needle", "needle is built in"), ("../outside.csv", "is not an uploaded file"),
    ("/etc/passwd", "is not an uploaded file"), ("no-such.csv", "is not an uploaded file"), ("", "is not an uploaded"),
])
def test_delete_refuses_a_built_in_dataset_a_path_or_an_unknown_name(tmp_path, choice, says):
    (tmp_path / "data").mkdir()
    (tmp_path / "outside.csv").write_text("x")
    with pytest.raises(ValueError, match=says):
        delete_upload(tmp_path, choice)
    assert (tmp_path / "outside.csv").exists()


def test_a_refused_check_keeps_nothing_and_names_the_file_not_its_staging_copy(tmp_path):
    source = tmp_path / "mine.csv"
    source.write_text("text,label\n")

    def refuse(spec: str) -> None:
        raise ValueError(f"{spec.partition(':')[2]}: the file holds no rows")

    with pytest.raises(ValueError, match=r"^mine\.csv: the file holds no rows$"):
        save_upload(tmp_path / "root", source, check=refuse)
    assert list((tmp_path / "root" / "data").iterdir()) == []
    assert save_upload(tmp_path / "root", source, check=lambda spec: None) == "mine.csv"
    assert not [p for p in (tmp_path / "root" / "data").iterdir() if p.name.startswith(STAGING_PREFIX)]


def never_a_process() -> int:
    """A pid above the kernel's pid_max: no process has it, now or later (an ended child's pid may be reused)."""
    return int(open("/proc/sys/kernel/pid_max").read()) + 1


def test_sweep_staging_removes_what_killed_dashboards_were_checking_and_keeps_a_live_ones(tmp_path):
    data = tmp_path / "data"
    live, ended = f"{STAGING_PREFIX}{os.getppid()}-abc", f"{STAGING_PREFIX}{never_a_process()}-def"
    older = f"{STAGING_PREFIX}k2j4x9"  # a staging folder named before it carried its owner's pid
    for name in (live, ended, older):
        (data / name).mkdir(parents=True)
        (data / name / "mine.csv").write_text("text,label\n")
    (data / "kept.csv").write_text("text,label\n")
    (data / f"{STAGING_PREFIX}notes.csv").write_text("a file, not a staging folder")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (data / f"{STAGING_PREFIX}1-link").symlink_to(elsewhere, target_is_directory=True)
    assert sweep_staging(tmp_path) == sorted([ended, older])
    assert sorted(p.name for p in data.iterdir()) == sorted(
        [live, "kept.csv", f"{STAGING_PREFIX}notes.csv", f"{STAGING_PREFIX}1-link"])
    assert elsewhere.is_dir() and sweep_staging(tmp_path / "no-runs-yet") == []


def test_a_staging_folder_is_named_by_the_process_checking_it(tmp_path):
    seen = []
    source = tmp_path / "mine.csv"
    source.write_text("text,label\n")
    save_upload(tmp_path / "root", source, check=lambda spec: seen.append(Path(spec.partition(":")[2]).parent.name))
    assert seen[0].startswith(f"{STAGING_PREFIX}{os.getpid()}-")


# by name, not by number: a test's id must be the same in every xdist worker (each has its own pid)
PIDS = {"this process": os.getpid, "its parent": os.getppid, "init": lambda: 1, "zero (a process group)": lambda: 0,
        "minus one (every process)": lambda: -1, "above pid_max": never_a_process, "beyond C's int": lambda: 2**70}


@pytest.mark.parametrize("which, alive", [("this process", True), ("its parent", True), ("init", True),
                                          ("zero (a process group)", False), ("minus one (every process)", False),
                                          ("above pid_max", False), ("beyond C's int", False)])
def test_process_alive_tells_running_processes_from_what_is_not_one(which, alive):
    assert process_alive(PIDS[which]()) is alive


def test_own_temp_dir_removes_what_ended_dashboards_left_and_keeps_a_live_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADIO_TEMP_DIR", "unchanged")
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True).stdout.strip()
    live = str(os.getppid())  # this test's parent process: alive while the test runs
    for name in (ended, live, "not-a-pid"):
        (tmp_path / ".gradio-tmp" / name / "abc").mkdir(parents=True)
        (tmp_path / ".gradio-tmp" / name / "abc" / "f.csv").write_text("x")
    folder = own_temp_dir(tmp_path, pid=12345678)
    assert os.environ["GRADIO_TEMP_DIR"] == str(folder) and folder.is_dir() and not any(folder.iterdir())
    assert sorted(p.name for p in (tmp_path / ".gradio-tmp").iterdir()) == sorted([live, "12345678"])
    remove_temp_dir(folder)  # the dashboard ends: its folder goes, the live one's stays
    assert [p.name for p in (tmp_path / ".gradio-tmp").iterdir()] == [live]
    remove_temp_dir(tmp_path / ".gradio-tmp" / live)
    assert not (tmp_path / ".gradio-tmp").exists()  # the last one out removes the folder


def test_discard_upload_leaves_a_file_outside_gradios_folder_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    inside = tmp_path / "gradio" / "hash" / "a.csv"
    inside.parent.mkdir(parents=True)
    inside.write_text("x")
    outside = tmp_path / "b.csv"
    outside.write_text("x")
    (tmp_path / "gradio" / "link.csv").symlink_to(outside)
    for path in (outside, tmp_path / "gradio" / "link.csv", tmp_path / "gradio" / "hash" / ".." / ".." / "b.csv"):
        discard_upload(path)
    assert outside.exists()
    discard_upload(inside)
    assert not inside.exists() and not inside.parent.exists() and (tmp_path / "gradio").is_dir()
