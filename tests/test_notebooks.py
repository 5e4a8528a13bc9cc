"""The teaching notebooks: every one executes top to bottom (their `assert`s are the checks).

Sources are jupytext `py:percent` files in `notebooks/`; the .ipynb is built in memory here and
never written to the repository. Each notebook runs in a fresh `python3` kernel started from
*this* interpreter, with the repository root as working directory.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("[0-9][0-9]_*.py"))
EXPECTED = ["01_update_locking.py", "02_bregman.py", "03_lemma1_prox.py", "04_lemma2_targets.py",
            "05_prop1_theorem1.py", "06_run_a_pipeline.py", "07_readability.py", "08_depth.py"]
# How many exercises each notebook ends with (08_depth.py has none yet: add it here when it does).
EXERCISES = {"01_update_locking.py": 3, "02_bregman.py": 3, "03_lemma1_prox.py": 3, "04_lemma2_targets.py": 3,
             "05_prop1_theorem1.py": 3, "06_run_a_pipeline.py": 3, "07_readability.py": 3, "08_depth.py": 3}
# The folder that `jupyter lab` must find on JUPYTER_CONFIG_PATH (notebooks/README.md's command): its
# labconfig/default_setting_overrides.json makes a double-click open a .py source as a notebook.
LAB_CONFIG = NB_DIR / ".jupyter"
LAB_COMMAND = 'JUPYTER_CONFIG_PATH="$PWD/notebooks/.jupyter" jupyter lab notebooks/'


def _read(path: Path):
    jupytext = pytest.importorskip("jupytext")
    return jupytext.read(path, fmt="py:percent")


# ---------------------------------------------------------------------------
# Fast structural checks
# ---------------------------------------------------------------------------

def test_all_eight_notebooks_exist_and_ipynb_files_are_ignored():
    assert [p.name for p in NOTEBOOKS] == EXPECTED
    ignored = (NB_DIR / ".gitignore").read_text().split()
    assert "*.ipynb" in ignored, "commit the py:percent sources only"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_source_is_a_well_formed_percent_notebook(path):
    nb = _read(path)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert nb.cells[0].cell_type == "markdown"
    assert "What this notebook shows" in nb.cells[0].source
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "assert " in code, "a notebook must assert its checks"
    compile(code, str(path), "exec")  # plain Python: the notebooks use no IPython magics


@pytest.mark.parametrize("name, count", EXERCISES.items(), ids=[Path(n).stem for n in EXERCISES])
def test_notebook_ends_with_exercises_and_hidden_solutions(name, count):
    """The last `## ` section is "## Exercises": `count` exercises (`### Exercise n · …`, the first one
    in the section's own cell), each followed by one code cell tagged `solution`, collapsed in
    JupyterLab (`jupyter.source_hidden`) and asserting its answer (it runs with the notebook). A
    collapsed cell still shows its first line, so that line gives nothing away."""
    jupytext = pytest.importorskip("jupytext")
    nb = _read(NB_DIR / name)
    sections = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and re.search(r"^## ", c.source, re.M)]
    section = nb.cells[sections[-1]:]
    assert re.search(r"^## Exercises$", section[0].source, re.M), "the last section must be ## Exercises"
    assert 2 <= count <= 3 and [c.cell_type for c in section] == ["markdown", "code"] * count
    for n, (task, solution) in enumerate(zip(section[::2], section[1::2]), start=1):
        assert re.findall(r"^### Exercise (\d+) · \S", task.source, re.M) == [str(n)], task.source[:200]
        assert "solution" in solution.metadata.get("tags", []), (name, n)
        assert solution.metadata.get("jupyter", {}).get("source_hidden") is True, (name, n)
        assert solution.source.splitlines()[0] == "# Solution", (name, n)
        assert "assert " in solution.source, (name, n)
    # Saving from JupyterLab writes the .py back: the metadata must survive the round trip.
    again = jupytext.reads(jupytext.writes(nb, fmt="py:percent"), fmt="py:percent").cells[-1]
    assert again.metadata == section[-1].metadata and again.source == section[-1].source


def test_jupyter_lab_serves_the_py_files_as_notebooks(tmp_path):
    """What notebooks/README.md's `jupyter lab` command does, for real: the server starts, serves the
    Lab page, its contents API opens every .py source as a notebook (jupytext's contents manager), and
    the shipped setting makes "Jupytext Notebook" the default viewer of Python files (double-click)."""
    import socket
    import subprocess
    import urllib.request

    pytest.importorskip("jupyterlab")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token = "zerolock-test"
    assert LAB_COMMAND in (NB_DIR / "README.md").read_text()
    # The user's own Jupyter config and Lab settings are swapped for empty folders, so that only the
    # shipped setting can make the default viewer (a `jupytext-config set-default-viewer` run on this
    # machine writes to the user's config and would hide a missing one).
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTER_DATA_DIR": str(tmp_path / "data"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"), "JUPYTER_CONFIG_PATH": str(LAB_CONFIG)}
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={NB_DIR}",
           "--ServerApp.contents_manager_class=jupytext.TextFileContentsManager", "--allow-root"]
    log = open(tmp_path / "lab.log", "w")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)

    def get(path: str):
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()

    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                status, _ = get("/api/status")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("jupyter lab did not come up: " + (tmp_path / "lab.log").read_text()[-2000:])
                time.sleep(0.5)
        status, page = get("/lab")
        assert status == 200 and b"JupyterLab" in page
        for path in NOTEBOOKS:
            status, body = get(f"/api/contents/{path.name}?type=notebook&content=1")
            model = json.loads(body)
            assert status == 200 and model["type"] == "notebook", path.name
            assert model["content"]["cells"][0]["cell_type"] == "markdown"
            assert model["content"]["metadata"]["kernelspec"]["name"] == "python3"
        status, body = get("/lab/api/settings/")
        assert "jupyterlab-jupytext:plugin" in {p["id"] for p in json.loads(body)["settings"]}  # its viewer exists
        status, body = get("/lab/api/settings/@jupyterlab/docmanager-extension:plugin")
        plugin = json.loads(body)
        default = plugin["schema"]["properties"]["defaultViewers"]["default"]
        viewers = plugin["settings"].get("defaultViewers", default)  # what the Lab page uses
        assert viewers.get("python") == "Jupytext Notebook", viewers
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()


# ---------------------------------------------------------------------------
# Execution
# ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def python3_kernel(tmp_path_factory):
    """A `python3` kernel spec that runs *this* interpreter, found first on JUPYTER_PATH.

    A fresh machine where only `pip install -e .[app,notebooks,test]` ran may have no `python3`
    kernel spec, or one (from another install) pointing at a different Python. Rather than
    installing anything into the user's Jupyter directories, write a spec to a temporary
    data directory and put it first on JUPYTER_PATH for the duration of the tests.
    """
    pytest.importorskip("ipykernel")
    data_dir = tmp_path_factory.mktemp("jupyter_data")
    spec_dir = data_dir / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (ZeroLock tests)",
        "language": "python",
        "metadata": {"debugger": False},
    }))
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join([str(data_dir)] + ([old] if old else []))
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    assert spec.argv[0] == sys.executable
    yield "python3"
    if old is None:
        os.environ.pop("JUPYTER_PATH", None)
    else:
        os.environ["JUPYTER_PATH"] = old


def execute_notebook(path: Path, kernel_name: str, timeout: int = 600) -> float:
    """Execute one py:percent notebook in memory; return its wall time in seconds."""
    nbclient = pytest.importorskip("nbclient")
    nb = _read(path)
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                                     resources={"metadata": {"path": str(ROOT)}})
    t0 = time.perf_counter()
    client.execute()
    return time.perf_counter() - t0


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_top_to_bottom(path, python3_kernel):
    seconds = execute_notebook(path, python3_kernel)
    print(f"{path.name}: {seconds:.1f} s")
