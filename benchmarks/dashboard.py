"""`zerolock bench dashboard` (not a test): how fast the first timeline bars appear, and what watching costs.

    zerolock bench dashboard [--steps 600] [--repeats 1] [--poll S[,S...]] [--out DIR]

Starts the dashboard as its own process (one per --poll value), then, in each round, on the tiny
default config:
  1. an unwatched run, started through the API (no browser, nothing polls the app);
  2. per --poll value, a watched run: headless Chromium presses Run and stays on Watch live until
     the run ends;
  3. an interleaved run (the first --poll's dashboard): the page switches between Watch live and the
     Run tab every SEGMENT_S seconds, so the steps per second with the Watch tab showing and hidden
     come from the same run, under the same load from the rest of the machine. On a shared host the
     sequential comparison (1 vs 2) swings by more than the effect; this one does not drift with it.
Prints the time from pressing Run to the first drawn timeline bar (and how much of it is the engine
starting its stage processes), the app process's CPU use (psutil, children excluded) during training
in both cases, the browser's, and the training throughput of both runs; writes DIR/dashboard.json.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import psutil

from zerolock_core.config.arg_types import floats_arg
from zerolock_core.config.run_config import RunConfig
from zerolock_core.rundir.metrics import Metrics
from zerolock_core.viz.poll_interval import DEFAULT_POLL_S
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.telemetry import read_events
from zerolock_core.vocabulary import Kind
from .common.machine import free_port
from .common.publish import publish
from .common.settings import report_header, results_dir

SEGMENT_S = 6.0  # the interleaved run's Watch-shown and Watch-hidden stretches (a figures tick each)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
FIRST_BAR_JS = """() => { const gd = document.querySelector('#timeline .js-plotly-plot');
  return !!(gd && gd._fullData && gd._fullData.some(t => (t.x || []).length > 0)); }"""
# the page's main thread from the Run click on: every task over 50 ms (the Long Tasks API). The longest is how
# long the page froze after the first Run on a fresh page; the sum, how long it was unresponsive in all
LONG_TASKS_JS = """() => { window.__zlLongest = 0; window.__zlBlocked = 0;
  new PerformanceObserver(list => { for (const e of list.getEntries()) {
      window.__zlLongest = Math.max(window.__zlLongest, e.duration); window.__zlBlocked += e.duration; } })
    .observe({type: 'longtask'}); }"""
FREEZE_SETTLE_S = 3.0  # after the first bars, what the page still does for the first draw is counted too


@dataclass(kw_only=True)
class CpuSampler:
    """CPU seconds of some processes, sampled twice a second with a monotonic timestamp (ns)."""
    procs: list[psutil.Process]
    samples: list[tuple[int, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def _cpu(self) -> float:
        total = 0.0
        for p in self.procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    def start(self) -> "CpuSampler":
        threading.Thread(target=self._loop, daemon=True).start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic_ns(), self._cpu()))
            time.sleep(0.5)

    def stop(self) -> None:
        self._stop.set()

    def percent(self, t0_ns: int, t1_ns: int) -> float:
        """Mean CPU % (100 = one core) between two monotonic times."""
        inside = [s for s in self.samples if t0_ns <= s[0] <= t1_ns]
        if len(inside) < 2:
            return float("nan")
        (a, ca), (b, cb) = inside[0], inside[-1]
        return 100 * (cb - ca) / ((b - a) / 1e9)


def wait_http(url: str, timeout: float = 120) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"the dashboard did not answer at {url}")


def newest_run(root: Path, before: set[Path], timeout: float = 120) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = [p for p in root.iterdir() if p.is_dir() and p not in before]
        if new:
            return new[0]
        time.sleep(0.2)
    raise RuntimeError(f"no run directory appeared under {root} within {timeout:g} s of pressing Run")


def wait_metrics(run_dir: Path, timeout: float = 900) -> Metrics:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        metrics = RunDir(run_dir).read_metrics()
        if metrics is not None:
            return metrics
        time.sleep(1.0)
    raise RuntimeError(f"{run_dir} did not finish in {timeout} s")


def training_window(run_dir: Path) -> tuple[int, int]:
    events, _ = read_events(RunDir(run_dir).event_files())
    return min(e["t0"] for e in events), max(e["t1"] for e in events)


def first_event_written_ns(run_dir: Path) -> int:
    """When the first event line was written (its end time): the engine's part of the wait."""
    first = RunDir(run_dir).event_files()[0].read_text().splitlines()[0]
    return json.loads(first)["t1"]


def unwatched_run(url: str, root: Path, app: CpuSampler, steps: int) -> dict:
    from gradio_client import Client

    d = RunConfig()  # the run the Run form opens with: it takes its defaults from the same config dataclasses
    t, o = d.train, d.objective
    alpha = ",".join(f"{a:g}" for a in o.alpha)  # the form's alpha is text
    before = set(root.iterdir())
    Client(url, verbose=False).predict([t.method], t.stages, t.batch, t.microbatches, alpha, o.consistency, steps,
                                       t.seed, d.link.profile, d.data.seq_len, d.data.eval_size, t.lr,
                                       api_name="/start_run")
    run_dir = newest_run(root, before)
    metrics = wait_metrics(run_dir)
    t0, t1 = training_window(run_dir)
    return {"throughput": metrics.throughput_samples_per_s, "app_cpu_pct": app.percent(t0, t1),
            "run": run_dir.name}


@contextlib.contextmanager
def run_form(url: str, steps: int) -> Iterator[tuple[Any, Any]]:
    """Headless Chromium (browser, page) on the dashboard's Run form, its steps field filled in."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.wait_for_selector("#run-button")
            page.get_by_label("steps", exact=True).fill(str(steps))
            yield browser, page
        finally:
            browser.close()


def watched_run(url: str, root: Path, app: CpuSampler, steps: int) -> dict:
    before = set(root.iterdir())
    with run_form(url, steps) as (browser, page):
        browser_proc = psutil.Process(browser.process.pid) if getattr(browser, "process", None) else None
        chrome = CpuSampler(procs=[c for c in psutil.Process().children(recursive=True)
                                   if "chrom" in c.name().lower()] or ([browser_proc] if browser_proc else [])).start()
        page.evaluate(LONG_TASKS_JS)
        t_click = time.monotonic_ns()
        page.click("#run-button")
        page.wait_for_function(FIRST_BAR_JS, timeout=600_000, polling=100)
        t_bar = time.monotonic_ns()
        page.wait_for_timeout(FREEZE_SETTLE_S * 1000)
        longest_ms, blocked_ms = page.evaluate("() => [window.__zlLongest, window.__zlBlocked]")
        run_dir = newest_run(root, before)
        metrics = wait_metrics(run_dir)  # from the files: a wait in the page would cost the browser CPU too
        chrome.stop()
    t0, t1 = training_window(run_dir)
    return {"throughput": metrics.throughput_samples_per_s, "app_cpu_pct": app.percent(t0, t1),
            "browser_cpu_pct": chrome.percent(t0, t1), "first_bar_s": (t_bar - t_click) / 1e9,
            "first_run_longest_block_s": longest_ms / 1e3, "first_run_blocked_s": blocked_ms / 1e3,
            "first_event_s": (first_event_written_ns(run_dir) - t_click) / 1e9, "run": run_dir.name}


def step_ends(run_dir: Path) -> list[int]:
    """When stage 0 ended each optimizer step (monotonic ns, the clock of the benchmark's own marks)."""
    events, _ = read_events(RunDir(run_dir).event_files())
    return sorted(e["t1"] for e in events if e["kind"] == Kind.STEP and e["stage"] == 0)


def segment_rates(ends_ns: list[int], segments: list[tuple[bool, int, int]]) -> dict[bool, float]:
    """Steps per second while the Watch tab showed (True) and while it was hidden (False): the steps
    that ended inside each kind's segments over those segments' length, clipped to the training
    (first to last step end)."""
    if len(ends_ns) < 2:
        return {}
    first, last = ends_ns[0], ends_ns[-1]
    totals = {True: [0, 0], False: [0, 0]}
    for shown, a, b in segments:
        a, b = max(a, first), min(b, last)
        if b > a:
            totals[shown][0] += sum(a < t <= b for t in ends_ns)
            totals[shown][1] += b - a
    return {shown: n / (ns / 1e9) for shown, (n, ns) in totals.items() if ns > 0}


def interleaved_run(url: str, root: Path, steps: int, segment_s: float = SEGMENT_S) -> dict:
    """One run watched every other SEGMENT_S: the Watch tab shown, then the Run tab, and so on."""
    before = set(root.iterdir())
    segments: list[tuple[bool, int, int]] = []
    with run_form(url, steps) as (_, page):
        page.click("#run-button")
        page.wait_for_function(FIRST_BAR_JS, timeout=600_000, polling=100)
        run_dir = newest_run(root, before)
        shown, mark = True, time.monotonic_ns()
        deadline = time.monotonic() + 900
        while not RunDir(run_dir).metrics.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{run_dir} did not finish in 900 s")
            page.wait_for_timeout(200)
            if time.monotonic_ns() - mark >= segment_s * 1e9:
                now = time.monotonic_ns()
                segments.append((shown, mark, now))
                shown, mark = not shown, now
                page.click("#tab-watch-button" if shown else "#tab-run-button")
        segments.append((shown, mark, time.monotonic_ns()))
    metrics = wait_metrics(run_dir)
    rates = segment_rates(step_ends(run_dir), segments)
    return {"throughput": metrics.throughput_samples_per_s, "segment_s": segment_s,
            "segments": len(segments), "steps_per_s_shown": rates.get(True), "steps_per_s_hidden": rates.get(False),
            "cost": 1 - rates[True] / rates[False] if True in rates and False in rates else None,
            "run": run_dir.name}


@dataclass(kw_only=True)
class Server:
    """One dashboard process at one --poll, its own runs directory, its CPU sampled."""
    poll: float
    root: Path
    url: str = ""
    proc: subprocess.Popen | None = None
    cpu: CpuSampler | None = None

    def start(self) -> "Server":
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/"
        self.root.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-m", "app", "--no-browser", "--port", str(port), "--runs-dir",
                                      str(self.root), "--poll", str(self.poll)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(self.url)
        self.cpu = CpuSampler(procs=[psutil.Process(self.proc.pid)]).start()
        return self

    def stop(self) -> None:
        if self.cpu is not None:
            self.cpu.stop()
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def default_run_words() -> str:
    """The runs, in the report's words: the Run form's defaults, which are the engine's config defaults."""
    d = RunConfig()
    return (f"the Run form's defaults ({d.model.model}, K={d.train.stages}, b={d.train.batch}, "
            f"m={d.train.microbatches}, seq {d.data.seq_len})")


def run_dashboard_bench(*, steps: int, repeats: int, polls: tuple[float, ...] = (DEFAULT_POLL_S,),
                        keep: bool = False) -> dict[str, Any]:
    """Rounds of: one unwatched run, then one watched run per --poll value (each on its own dashboard
    process, started together at the outset), so a burst of other work on the machine hits every
    poll value alike."""
    if not Path(CHROMIUM).exists():
        raise ValueError(f"the dashboard benchmark needs {CHROMIUM} (apt-get install chromium)")
    if not polls or any(p <= 0 for p in polls):
        raise ValueError(f"--poll takes positive seconds, e.g. 1 or 1,2 (got {polls})")
    root = Path(tempfile.mkdtemp(prefix="zerolock-bench-dashboard-"))
    servers = [Server(poll=poll, root=root / f"poll-{poll:g}") for poll in dict.fromkeys(polls)]
    rounds = []
    try:
        for server in servers:
            server.start()
        first = servers[0]
        for _ in range(repeats):
            rounds.append({"unwatched": unwatched_run(first.url, first.root, first.cpu, steps),
                           "watched": {f"{s.poll:g}": watched_run(s.url, s.root, s.cpu, steps) for s in servers},
                           "interleaved": interleaved_run(first.url, first.root, steps)})
    finally:
        for server in servers:
            server.stop()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    unwatched = statistics.fmean(r["unwatched"]["throughput"] for r in rounds)
    cost = {f"{s.poll:g}": 1 - statistics.fmean(r["watched"][f"{s.poll:g}"]["throughput"] for r in rounds) / unwatched
            for s in servers}
    interleaved = [r["interleaved"]["cost"] for r in rounds if r["interleaved"]["cost"] is not None]
    return report_header("dashboard", None, config={
        "runs": default_run_words(), "steps": steps,
        "polls_s": [s.poll for s in servers], "default_poll_s": DEFAULT_POLL_S, "repeats": repeats,
        "segment_s": SEGMENT_S},
        rounds=rounds, watching_cost=cost,
        watching_cost_interleaved=statistics.fmean(interleaved) if interleaved else None)


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    polls = " and ".join(f"{p:g}" for p in c["polls_s"])
    lines = [f"dashboard benchmark: {c['runs']}, {c['steps']} steps, --poll {polls} (default {c['default_poll_s']:g}); "
             f"{report['machine']}"]
    for i, r in enumerate(report["rounds"], start=1):
        u = r["unwatched"]
        lines.append(f"  round {i}  unwatched          {u['throughput']:6.1f} samples/s   app CPU "
                     f"{u['app_cpu_pct']:5.1f}% of a core")
        for poll, w in r["watched"].items():
            lines.append(f"           watched, --poll {poll:<3s} {w['throughput']:6.1f} samples/s   app CPU "
                         f"{w['app_cpu_pct']:5.1f}% of a core   browser CPU {w['browser_cpu_pct']:5.1f}%   first bar "
                         f"{w['first_bar_s']:.1f} s after Run (first event written at {w['first_event_s']:.1f} s)"
                         + (f"; the page froze {w['first_run_longest_block_s']:.1f} s at most after the first Run "
                            f"({w['first_run_blocked_s']:.1f} s blocked in all)"
                            if "first_run_longest_block_s" in w else ""))
        i = r.get("interleaved")
        if i is not None and i["cost"] is not None:
            lines.append(f"           interleaved, every {i['segment_s']:g} s: {i['steps_per_s_shown']:.2f} steps/s "
                         f"with Watch showing, {i['steps_per_s_hidden']:.2f} hidden ({i['segments']} stretches): "
                         f"watching costs {100 * i['cost']:.1f}%")
    costs = ", ".join(f"{100 * v:.1f}% at --poll {p}" for p, v in report["watching_cost"].items())
    lines.append(f"  watching costs {costs} of the training throughput (mean over {len(report['rounds'])} round(s), "
                 "watched run vs unwatched run)")
    if report.get("watching_cost_interleaved") is not None:
        lines.append(f"  interleaved in one run (Watch shown vs hidden, same load): watching costs "
                     f"{100 * report['watching_cost_interleaved']:.1f}% (mean over the rounds)")
    return "\n".join(lines)


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=int, default=600,
                   help="steps per run: long enough (~50 s of training on 2 cores) for a steady-state CPU reading "
                        "and several Watch-shown and Watch-hidden stretches in the interleaved run")
    p.add_argument("--repeats", type=int, default=1, help="rounds to run (one unwatched run, one watched per --poll)")
    p.add_argument("--keep", action="store_true", help="keep the runs directories")
    p.add_argument("--poll", type=floats_arg, default=(DEFAULT_POLL_S,),
                   help="the dashboard's --poll; several (e.g. 1,2) are measured side by side, one dashboard each")
    p.add_argument("--out", default=None, help="results directory (default results/dashboard-TIMESTAMP)")

    def run(a: argparse.Namespace) -> int:
        out = results_dir("dashboard", a.out)
        report = run_dashboard_bench(steps=a.steps, repeats=a.repeats, polls=a.poll, keep=a.keep)
        print(publish(report, out=out, name="dashboard", figures=lambda r: {}, format_report=format_report))
        return 0

    p.set_defaults(func=run)
