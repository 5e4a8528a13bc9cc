"""Benchmarks: small, fast versions of every experiment's code path produce well-formed results.

The slow tests share one set of pipeline runs (K=2, b=4, m=2, seq 32, 2 steps): every benchmark
that asks for the same config gets the cached run, so the file spawns few pipelines.
"""

import math
import time
from pathlib import Path

import pytest

from benchmarks import BENCHMARKS
from benchmarks.envelope import Probe, run_envelope, search_largest
from benchmarks.common.image_export import png_export_error, save_figures
from benchmarks.memory import run_memory, stage_breakdown
from benchmarks.common.pipeline_runs import PipelineRuns
from benchmarks.common.settings import METHODS, BenchSettings
from zerolock_core.config.run_config import LinkConfig
from zerolock_core.runtime.recovery_phases import PHASES
from zerolock_core.runtime.link_emulation import EmulatedHop, link_model
from zerolock_core.schedule import LINK_PROFILES, Costs, LinkProfile, build_schedule, simulate

K, B, M, SEQ, STEPS = 2, 4, 2, 32, 2
SETTINGS = BenchSettings(seq_len=SEQ, steps=STEPS, threads=1)


# ---- fast: no process spawned --------------------------------------------------------------


def test_every_benchmark_registers_with_the_cli():
    from benchmarks import benchmark_parser
    from zerolock_core.cli import parse

    for name in BENCHMARKS:
        args = parse(["bench", name, "--out", "/tmp/x"])
        assert callable(args.func) and args.benchmark_argv == ["--out", "/tmp/x"], name
        args, _ = benchmark_parser(name).parse_known_args(["--out", "/tmp/x"])  # its own flags, imported lazily
        assert callable(args.func) and getattr(args, "out", "/tmp/x") == "/tmp/x", name
    for name in (
        "memory",
        "geometry",
        "envelope",
        "throughput",
        "links",
        "quality",
        "readout",
        "crosscheck",
        "efficiency",
        "simulator",
    ):
        assert name in BENCHMARKS


@pytest.mark.parametrize(
    "threshold,max_multiple,expected", [(0, 10, 0), (1, 10, 1), (7, 10, 7), (10, 10, 10), (25, 10, 10)]
)
def test_envelope_search_finds_the_largest_fitting_batch(threshold, max_multiple, expected):
    per_multiple = 1000  # activations grow linearly: j * 1000 bytes + a constant

    def probe(j):
        fits = j <= threshold
        return Probe(multiple=j, batch=4 * j, fits=fits, max_activation_bytes=j * per_multiple + 100 if fits else None)

    largest, probes = search_largest(probe, budget_bytes=threshold * per_multiple + 150, max_multiple=max_multiple)
    assert largest == expected
    assert len({p.multiple for p in probes}) == len(probes)  # never probes a batch twice
    assert len(probes) <= 5
    if expected < max_multiple and expected > 0:
        assert {expected, expected + 1} <= {p.multiple for p in probes}  # the boundary is witnessed


def test_envelope_search_bisects_when_the_linear_guess_is_wrong():
    def probe(j):  # memory grows faster than linearly past j = 3
        fits = j <= 5
        return Probe(multiple=j, batch=j, fits=fits, max_activation_bytes=j if fits else None)

    largest, probes = search_largest(probe, budget_bytes=100, max_multiple=40)
    assert largest == 5 and {5, 6} <= {p.multiple for p in probes}


def test_link_emulator_delays_by_the_modelled_time():
    """Checked on byte counts and modelled times (lower bounds only, never a wall-clock limit)."""
    model = LinkProfile(bandwidth_bytes_per_s=2e6, latency_s=0.015)
    hop = EmulatedHop(model)
    started: list[float] = []

    class Done:
        def wait(self):
            return True

    def start():
        started.append(time.perf_counter())
        return Done()

    sizes = [20_000, 40_000]  # 10 ms and 20 ms on the wire
    before = time.perf_counter()
    works = [hop.submit(n, start) for n in sizes]
    after = time.perf_counter()
    for w in works:
        assert w.wait()
    hop.close()
    arrivals = [w._p.arrival_s for w in works]
    first = model.transfer_s(sizes[0])
    assert before + first <= arrivals[0] <= after + first
    # the second message queues behind the first on the hop: it leaves after the first's wire time
    assert arrivals[1] - arrivals[0] == pytest.approx(model.wire_s(sizes[1]), abs=1e-6)
    # the real transfer never starts before the modelled arrival
    assert all(s >= a - 1e-4 for s, a in zip(started, arrivals))
    assert [w._p.nbytes for w in works] == sizes


def test_link_profiles_match_the_paper_ends():
    constrained = link_model(LinkConfig(profile="constrained"))
    assert constrained.bandwidth_bytes_per_s == pytest.approx(50e6 / 8) and constrained.latency_s == 0.030
    custom = link_model(LinkConfig(profile="custom", bandwidth_mbps=8, latency_ms=5))
    assert custom.transfer_s(1_000_000) == pytest.approx(1.0 + 0.005)
    assert link_model(LinkConfig()) is None


def test_simulated_timeline_round_trips_through_the_measurement_code():
    """Treat a simulation as if it were measured: the costs read back equal the costs put in, and the
    prediction from them equals the 'measured' throughput."""
    from benchmarks.common.prediction import predict
    from zerolock_core.schedule.spans import costs_from_spans, spans_from_sim, throughput, window_start

    per_stage = {  # W: the part of B a split backward (zb-h1) runs apart; the other methods never read it
        0: {"F": 0.01, "B": 0.02, "W": 0.005, "L": 0.015, "STEP": 0.001},
        1: {"F": 0.012, "B": 0.025, "W": 0.004, "L": 0.02, "STEP": 0.001},
    }
    for method in METHODS:
        costs = Costs(
            forward=0.0, local=0.0, backward=0.0, step=0.0, hidden_bytes=1000, grad_bytes=1000, per_stage=per_stage
        )
        link = LINK_PROFILES["wifi"]
        sim = simulate(
            build_schedule(method, stages=2, microbatches=4, windows=3), costs=costs, link=link, inflight_limit=2
        )
        spans = spans_from_sim(sim)
        start = window_start(spans, microbatches=4, skip_windows=1)
        back = costs_from_spans(
            spans, stages=2, hidden_bytes=1000, grad_bytes=1000, skip_before=start, fold_sends=False
        )
        for s in (0, 1):
            for kind, value in back.per_stage[s].items():
                assert value == pytest.approx(per_stage[s][kind]), (method, s, kind)
        measured = throughput(spans, batch=8, microbatches=4, windows=3, skip_windows=1)
        pred = predict(
            method=method,
            stages=2,
            batch=8,
            microbatches=4,
            windows=3,
            costs=back,
            link=link,
            inflight_limit=2,
            skip_windows=1,
        )
        assert pred.samples_per_s == pytest.approx(measured)
        assert pred.inflight_peak == sim.inflight_peak


def test_readout_line_item_is_well_formed():
    from benchmarks.readout import measure_readout

    import torch

    rows = {
        v: measure_readout(
            vocab=512,
            hidden=16,
            seq_len=32,
            microbatch=2,
            answer_tokens=1,
            variant=v,
            alpha=0.5,
            consistency="reverse",
            device=torch.device("cpu"),
            repeats=2,
        )
        for v in ("omega", "full")
    }
    assert rows["omega"]["logit_rows"] == 2 and rows["full"]["logit_rows"] == 64
    assert rows["full"]["transient_peak_bytes"] > rows["omega"]["transient_peak_bytes"] > 0
    assert rows["full"]["would_ship_bytes"] == 2 * 32 * 512 * 4 and rows["omega"]["would_ship_bytes"] == 0
    assert all(r["time_s"] > 0 and r["saved_bytes"] > 0 for r in rows.values())
    with pytest.raises(ValueError, match="answer-tokens"):
        measure_readout(
            vocab=64,
            hidden=8,
            seq_len=8,
            microbatch=1,
            answer_tokens=8,
            variant="omega",
            alpha=0.5,
            consistency="reverse",
            device=torch.device("cpu"),
            repeats=1,
        )


def test_random_llama_preset_builds_and_loads(tmp_path):
    from zerolock_core.models.random_llama import LlamaShape, build_random_llama
    from zerolock_core.models.loading import load_causal_lm, load_tokenizer

    shape = LlamaShape(layers=2, hidden=32, heads=4, kv_heads=2, intermediate=64, vocab=3000, max_positions=64)
    path = build_random_llama(tmp_path / "shape", shape)
    model = load_causal_lm(str(path))
    assert model.config.num_hidden_layers == 2 and model.config.vocab_size == 3000
    assert model.config.num_key_value_heads == 2
    assert max(load_tokenizer(str(path)).get_vocab().values()) < 3000
    with pytest.raises(ValueError, match="smaller than the tiny tokenizer"):
        build_random_llama(
            tmp_path / "small", LlamaShape(layers=1, hidden=8, heads=2, kv_heads=1, intermediate=8, vocab=10)
        )


def test_figures_fall_back_to_html(tmp_path):
    import plotly.graph_objects as go

    res = save_figures({"a": go.Figure(go.Bar(x=[1], y=[2]))}, tmp_path, png=False)
    assert res["format"] == "html" and "<html>" in Path(res["files"][0]).read_text()
    assert "why_not_png" in res


def test_a_hung_png_export_falls_back_to_html_and_says_why(tmp_path, monkeypatch):
    import plotly.graph_objects as go
    import plotly.io as pio

    from benchmarks.common import image_export

    monkeypatch.setattr(image_export, "png_export_error", lambda: None)
    monkeypatch.setattr(image_export, "EXPORT_TIMEOUT_S", 0.2)
    monkeypatch.setattr(pio, "write_images", lambda *a, **k: time.sleep(30))
    res = image_export.save_figures({"a": go.Figure(go.Bar(x=[1], y=[2]))}, tmp_path)
    assert res["format"] == "html" and "TimeoutError" in res["why_not_png"]
    assert (tmp_path / "a.html").exists()


@pytest.mark.parametrize("single_writes", [True, False], ids=["rewritten-one-by-one", "still-missing-falls-back"])
def test_a_png_the_batch_export_skipped_is_written_or_reported(tmp_path, monkeypatch, single_writes):
    import plotly.graph_objects as go
    import plotly.io as pio

    from benchmarks.common import image_export

    (tmp_path / "b.png").write_bytes(b"stale")  # an earlier run's file must not pass for this run's
    monkeypatch.setattr(image_export, "png_export_error", lambda: None)
    monkeypatch.setattr(pio, "write_images", lambda figs, paths, **k: Path(paths[0]).write_bytes(b"\x89PNG"))
    monkeypatch.setattr(pio, "write_image", lambda fig, path, **k: single_writes and Path(path).write_bytes(b"\x89PNG"))
    figs = {"a": go.Figure(go.Bar(x=[1], y=[2])), "b": go.Figure(go.Bar(x=[2], y=[1]))}
    res = image_export.save_figures(figs, tmp_path)
    if single_writes:
        assert res["format"] == "png" and (tmp_path / "b.png").read_bytes() == b"\x89PNG"
    else:
        assert res["format"] == "html" and "b.png" in res["why_not_png"] and (tmp_path / "b.html").exists()


@pytest.mark.skipif(png_export_error() is not None, reason=f"PNG export does not work here: {png_export_error()}")
def test_figures_as_png(tmp_path):
    import plotly.graph_objects as go

    res = save_figures({"a": go.Figure(go.Bar(x=[1], y=[2]))}, tmp_path)
    assert res["format"] == "png" and Path(res["files"][0]).read_bytes()[:4] == b"\x89PNG"


def test_memory_breakdown_adds_up():
    stage = {
        "model_bytes": 1000,
        "trainable_bytes": 100,
        "optimizer_bytes": 200,
        "stashed_weight_versions": 2,
        "peak_activation_bytes": 5000,
        "peak_rss_bytes": 10**8,
    }
    b = stage_breakdown(stage)
    assert b == {
        "model_state_bytes": 1300,
        "weight_cache_bytes": 200,
        "activation_bytes": 5000,
        "peak_bytes": 6500,
        "peak_rss_bytes": 10**8,
    }


def test_bad_settings_are_clear_value_errors():
    with pytest.raises(ValueError, match="--threads"):
        BenchSettings(threads=0)
    from benchmarks.geometry import grid

    with pytest.raises(ValueError, match="divides"):
        grid((3,), (2,))


# ---- slow: real pipelines (shared) ---------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return PipelineRuns(tmp_path_factory.mktemp("bench"), verbose=False)


@pytest.mark.slow
def test_memory_bench(runs):
    from benchmarks.memory import figures, format_report

    report = run_memory(SETTINGS, runs=runs, out=runs.root, stages=K, batch=B, microbatches=M)
    res = report["results"]
    assert list(res) == list(METHODS)
    assert res["gpipe"]["peak_inflight"] == [M, M] and res["zerolock"]["peak_inflight"] == [1, 1]
    assert res["1f1b"]["peak_inflight"] == [2, 1]
    assert res["pipedream"]["per_stage"][0]["weight_cache_bytes"] > 0
    assert all(s["weight_cache_bytes"] == 0 for m in ("gpipe", "1f1b", "zerolock") for s in res[m]["per_stage"])
    z, g = res["zerolock"]["summary"], res["gpipe"]["summary"]
    assert z["mean_activation_bytes"] < g["mean_activation_bytes"]
    assert report["vs"]["activation"]["gpipe"]["ours"] < 0 and report["vs"]["activation"]["gpipe"]["paper"] == -0.754
    text = format_report(report)
    assert "machine:" in text and "vs gpipe" in text
    assert set(figures(report)) == {"memory_per_stage", "memory_mean_max"}


@pytest.mark.slow
def test_efficiency_bench(runs):
    from benchmarks.efficiency import format_report, run_efficiency

    report = run_efficiency(SETTINGS, runs=runs, stages=K, batch=B, microbatches=M)
    for m, r in report["results"].items():
        assert 0 < r["efficiency"] and math.isfinite(r["efficiency"]), m
        assert 0 <= r["bubble_fraction"] < 1
        assert (r["textbook_bubble"] is not None) == (m in ("gpipe", "1f1b"))
    assert report["results"]["gpipe"]["textbook_bubble"] == pytest.approx((K - 1) / (M + K - 1))
    assert report["results"]["1f1b"]["textbook_bubble"] == pytest.approx((K - 1) / M)
    assert "textbook" in format_report(report)


@pytest.mark.slow
def test_simulator_bench(runs):
    from benchmarks.simulator import figures, format_report, run_simulator

    report = run_simulator(
        SETTINGS, runs=runs, stages=(K,), batch=B, microbatches=M, extrapolate_to=(4,), with_probe=False
    )
    for r in report["validation"]:
        assert r["inflight_exact"], r  # the schedule fixes the in-flight counts exactly
        held = zip(r["measured_held_activation_bytes"], r["predicted_held_activation_bytes"])
        if r["method"] == "zb-h1":  # a micro-batch awaiting its W keeps only W's part of its graph: the
            assert all(m <= p for m, p in held), r  # simulator's whole micro-batch is an upper bound
        else:
            assert all(m == p for m, p in held), r
        assert r["predicted_samples_per_s"] > 0 and math.isfinite(r["error"])
    assert {p["link"] for p in report["predictions"]} >= {"local", "constrained"}
    assert all(p["stages"] == 4 and p["microbatches"] == 8 for p in report["predictions"])
    assert "PREDICTIONS" in format_report(report)
    assert "simulator_predictions" in figures(report)


@pytest.mark.slow
def test_throughput_and_geometry_benches(runs):
    from benchmarks.geometry import format_report as geometry_text, run_geometry
    from benchmarks.throughput import format_report as throughput_text, run_throughput

    t = run_throughput(SETTINGS, runs=runs, stages=(K,), batch=B, microbatches=M)
    rows = t["results"][str(K)]["rows"]
    assert [r["method"] for r in rows] == list(METHODS)
    for r in rows:
        assert len(r["measured"]["active_fraction"]) == K and r["predicted"]["samples_per_s"] > 0
        assert r["oversubscribed"] is (K > __import__("benchmarks.common.machine", fromlist=["cores"]).cores())
    assert set(t["results"][str(K)]["zerolock_vs"]) == set(METHODS) - {"zerolock"}  # every other method run
    assert "K" in throughput_text(t)
    g = run_geometry(SETTINGS, runs=runs, stages=K, batches=(B,), sizes=(B // M,), methods=METHODS)
    assert [(r["batch"], r["microbatches"], r["method"]) for r in g["results"]] == [(B, M, m) for m in METHODS]
    assert all(r["max_activation_bytes"] >= r["mean_activation_bytes"] > 0 for r in g["results"])
    assert "b/m" in geometry_text(g)
    skipped = run_geometry(SETTINGS, runs=runs, stages=K, batches=(B,), sizes=(B,), methods=("1f1b",))
    assert skipped["results"] == [] and skipped["skipped"][0]["microbatches"] == 1  # 1F1B needs m >= K


@pytest.mark.slow
def test_links_bench_pays_the_emulated_link(runs):
    """A constrained link: every hidden state arrives no earlier than the link model allows."""
    from benchmarks.links import format_report, run_links

    report = run_links(
        SETTINGS,
        runs=runs,
        stages=K,
        batch=B,
        microbatches=M,
        profiles=("constrained",),
        methods=("zerolock",),
        simulate=False,
    )
    row = report["results"]["constrained"]["rows"][0]
    from zerolock_core.rundir.run_dir import RunDir
    from zerolock_core.telemetry.events import read_events

    events, _ = read_events(RunDir(row["measured"]["run"]).event_files())
    model = LINK_PROFILES["constrained"]
    hidden = (B // M) * SEQ * 128 * 4  # the tiny model's hidden size is 128, fp32
    sends = {e["mb"]: e for e in events if e["kind"] == "SF"}
    recvs = {e["mb"]: e for e in events if e["kind"] == "RF"}
    assert set(sends) == set(recvs) == set(range(STEPS * M))
    for mb, s in sends.items():
        assert s["sent"] == hidden and recvs[mb]["recv"] == hidden
        assert (recvs[mb]["t1"] - s["t0"]) / 1e9 >= model.transfer_s(hidden) - 1e-3
    assert "constrained" in format_report(report)


@pytest.mark.slow
def test_envelope_counts_memory_budget_failures_as_oom(runs):
    report = run_envelope(
        SETTINGS, runs=runs, stages=K, microbatches=M, budget_bytes=1024, max_batch=2 * M, methods=("gpipe",)
    )
    r = report["results"]["gpipe"]
    assert r["largest_batch"] == 0 and r["first_oom_batch"] == M
    assert not r["probes"][0]["fits"] and "MemoryBudgetExceeded" in r["probes"][0]["error"]


@pytest.mark.slow
def test_quality_bench(runs):
    from benchmarks.quality import figures, format_report, run_quality

    report = run_quality(
        SETTINGS,
        runs=runs,
        out=runs.root / "quality",
        seeds=(0,),
        stages=K,
        batch=B,
        microbatches=M,
        eval_every=1,
        eval_size=1,
        arms=("bp", "1f1b", "zerolock a=0.5 reverse", "zerolock a=1"),
    )
    res = report["results"]
    assert res["bp"]["curves"][0]["step"] == [1, 2] and len(res["1f1b"]["curves"][0]["step"]) == 1
    for arm, r in res.items():
        assert 0 <= r["final"]["accuracy"]["mean"] <= 1 and r["final"]["nll"]["mean"] > 0, arm
    # 1F1B is BP, pipelined: the same training loss
    assert res["1f1b"]["curves"][0]["train_loss"] == pytest.approx(res["bp"]["curves"][0]["train_loss"], rel=1e-5)
    per_chunk = res["zerolock a=0.5 reverse"]["curves"][0]["per_chunk_label_accuracy"]
    assert len(per_chunk) == 2 and all(len(row) == K for row in per_chunk)  # every chunk, every eval
    assert "accuracy" in format_report(report) and set(figures(report)) == {"quality_curves", "quality_per_chunk"}


@pytest.mark.slow
def test_crosscheck_agrees_with_torch_pipelining_on_loss(runs):
    from benchmarks.crosscheck import format_report, run_crosscheck

    report = run_crosscheck(SETTINGS, out=runs.root / "crosscheck", runs=runs, batch=B, microbatches=M)
    assert list(report["results"]) == ["gpipe", "1f1b", "zb-h1"]  # zb-h1: torch's ScheduleInterleavedZeroBubble
    for name, r in report["results"].items():
        assert r["losses_agree"], (name, r["ours_losses"], r["torch_losses"])
        assert len(r["torch_losses"]) == STEPS
        assert r["torch_samples_per_s"] > 0 and r["ours_samples_per_s"] > 0
    assert "loss agrees" in format_report(report)


def test_readout_command_end_to_end(tmp_path, capsys):
    """The whole CLI path of a benchmark (flags, run, figures, JSON, table) on the in-process one."""
    import json

    from zerolock_core.cli import main

    rc = main(
        [
            "bench",
            "readout",
            "--vocabs",
            "256,1024",
            "--seq-len",
            "32",
            "--timings",
            "1",
            "--no-png",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 0
    report = json.loads((tmp_path / "readout.json").read_text())
    assert report["engine"]["reads_out_at"] == "omega" and report["command"].startswith("zerolock bench")
    assert [r["vocab"] for r in report["results"]] == [256, 256, 1024, 1024]
    assert report["figures"]["format"] == "html" and all(Path(f).exists() for f in report["figures"]["files"])
    out = capsys.readouterr().out
    assert "machine:" in out and "reads out at omega" in out


def test_repeats_run_round_robin_and_keep_the_best(tmp_path, monkeypatch):
    from benchmarks.common.pipeline_runs import RunOutcome
    from zerolock_core.rundir.metrics import Metrics

    order: list[tuple[str, int]] = []
    speed = {("gpipe", 0): 10.0, ("gpipe", 1): 30.0, ("zerolock", 0): 25.0, ("zerolock", 1): 20.0}

    def fake_once(self, cfg, repeat):
        order.append((cfg.train.method, repeat))
        return RunOutcome(
            cfg=cfg,
            dir=self.dir_for(cfg, repeat),
            metrics=Metrics(config={}, state="finished", throughput_samples_per_s=speed[(cfg.train.method, repeat)]),
        )

    monkeypatch.setattr(PipelineRuns, "_run_once", fake_once)
    runs = PipelineRuns(tmp_path, repeats=2, verbose=False)
    cfgs = [SETTINGS.pipeline(method=m, stages=K, batch=B, microbatches=M, out=tmp_path) for m in ("gpipe", "zerolock")]
    runs.prefetch(cfgs + cfgs)  # duplicates run once
    assert order == [("gpipe", 0), ("zerolock", 0), ("gpipe", 1), ("zerolock", 1)]  # round-robin
    assert runs.run(cfgs[0]).metrics.throughput_samples_per_s == 30.0  # best of the repeats
    assert runs.run(cfgs[1]).dir.name.endswith("-r0")
    assert len(order) == 4  # nothing ran again
    with pytest.raises(ValueError, match="--repeats"):
        PipelineRuns(tmp_path, repeats=0)


def _recovery_report(tmp_path, *, steps: int, variants):
    from benchmarks.common.publish import publish
    from benchmarks.recovery import format_table, run_recovery

    report = run_recovery(BenchSettings(seq_len=16, steps=steps), out=tmp_path, stages=2, batch=4, microbatches=2,
                          fail_stage=1, fail_step=2, ckpt_every=1, mode="kill", repeats=1, variants=variants)
    publish(report, out=tmp_path, name="recovery", figures=lambda r: {}, format_report=format_table)
    return report


@pytest.mark.slow
def test_recovery_bench_compares_local_replay_with_global_rollback(tmp_path):
    """E2's code path: one failure per method, its recovery broken down, the JSON and table well formed."""
    import json

    from benchmarks.recovery import format_table

    report = _recovery_report(tmp_path, steps=12, variants=(("zerolock", False), ("1f1b", False)))
    assert json.loads((tmp_path / "recovery.json").read_text()) == json.loads(json.dumps(report))
    assert report["command"].startswith("zerolock bench") and len(report["load_average"]) == 3
    recs = {m: [r["kind"] for r in runs] for m, runs in report["runs"].items()}
    assert recs == {"zerolock": ["local"], "1f1b": ["global"]}
    for summary in report["summary"].values():
        assert summary["detect_s"]["mean"] > 0 and summary["restart_s"]["mean"] > 0
        assert all(summary[f"{phase}_s"]["mean"] >= 0 for phase in PHASES)
        assert summary["bytes_transferred"]["mean"] > 0
    table = format_table(report)
    assert "zerolock" in table and "1f1b" in table and "paper total ms" in table


@pytest.mark.matrix
def test_recovery_bench_takes_over_with_a_ready_warm_standby(tmp_path):
    """The standby must be ready before the failure, which takes a long run on 2 cores (matrix tier)."""
    report = _recovery_report(tmp_path, steps=800, variants=(("zerolock", True),))
    assert [(r["kind"], r.get("warm_standby")) for r in report["runs"]["zerolock +standby"]] == [("local", "ready")]


def test_bench_faults_refuses_pipedream_up_front_and_tabulates_outcomes(tmp_path):
    from benchmarks.faults import classify, format_table

    row = classify(tmp_path / "pd", tmp_path / "none", "pipedream", ("1@3:kill",))
    assert row["outcome"] == "refused" and "PipeDream cannot be recovered" in row["reason"]
    report = {"machine": "m", "load_average": [0.1], "cases": [
        row, {"method": "zerolock", "failures": ["2@3:kill"], "outcome": "recovered bitwise", "detect_s": 0.1,
              "restore_s": 7.5, "replay_s": 0.05, "total_s": 7.7, "replayed_microbatches": 4}]}
    table = format_table(report)
    assert "1 recovered bitwise, 1 refused" in table
    assert "2@3:kill" in table and "7.50" in table


def test_the_results_blocks_of_every_page_are_what_the_committed_result_files_give():
    """Every `<!-- results: NAME -->` block of every page `zerolock bench readme` writes (README.md,
    the results pages docs/results-*.md) equals what it writes from docs/results/NAME.json: no number in
    them that no committed file holds; and every page of the repository with a block is one it writes."""
    from benchmarks.readme import PAGES, README, REPO, RESULTS_PAGE, TOPIC_PAGES, blocks, regenerate

    assert PAGES == (README, RESULTS_PAGE, *TOPIC_PAGES)
    assert blocks(README.read_text()) == ["headline"], "the README keeps one generated table: the headline"
    assert blocks(RESULTS_PAGE.read_text()) == [], "the results index holds no block: each moves with its section"
    assert all(blocks(page.read_text()) for page in TOPIC_PAGES), "a results page without a block"
    assert sum(len(blocks(page.read_text())) for page in TOPIC_PAGES) >= 10
    with_blocks = {page for page in [*REPO.glob("*.md"), *(REPO / "docs").glob("*.md")] if blocks(page.read_text())}
    assert with_blocks <= set(PAGES), f"pages with results blocks that `zerolock bench readme` misses: {with_blocks}"
    for page in PAGES:
        text = page.read_text()
        assert regenerate(text) == text, f"{page.name}: results blocks are stale: run `zerolock bench readme`"


def test_bench_readme_check_covers_every_page_and_writes_only_without_check(tmp_path, capsys):
    import argparse

    from benchmarks.readme import register

    fresh = tmp_path / "fresh.md"
    stale = tmp_path / "stale.md"
    fresh.write_text("<!-- results: threads -->\n<!-- /results: threads -->\n")
    stale.write_text(fresh.read_text())
    parser = argparse.ArgumentParser()
    register(parser)

    def run(*args: str) -> int:
        a = parser.parse_args([*args, "--page", str(fresh), "--page", str(stale)])
        return a.func(a)

    assert run() == 0  # writes both
    assert "docs/results/threads.json" in fresh.read_text() and stale.read_text() == fresh.read_text()
    assert run("--check") == 0
    stale.write_text(stale.read_text().replace("| 1 ", "| 9 "))
    before = stale.read_text()
    assert run("--check") == 1, "a stale second page fails the check"
    assert stale.read_text() == before, "--check writes nothing"
    assert "stale.md" in capsys.readouterr().err


def test_a_readme_block_without_its_result_file_is_refused(tmp_path):
    from benchmarks.readme import regenerate

    with pytest.raises(ValueError, match="no result file"):
        regenerate("<!-- results: nothing-here -->\n<!-- /results: nothing-here -->\n", results=tmp_path)


@pytest.mark.parametrize("stages,top,rank,expected", [
    (3, 2, 4, 5),   # SmolLM2-135M: 30 layers + 2 chunks x 2 copied layers = 34 layers of r=4 -> r=5 on 30
    (2, 0, 4, 4),   # no copied layers: the same rank
    (6, 4, 4, 7),   # 30 + 5 x 4 = 50 layers of r=4 -> 200/30 -> 7
])
def test_the_rank_matched_bp_control_trains_at_least_as_many_parameters_as_top_lora(stages, top, rank, expected):
    from types import SimpleNamespace

    from benchmarks.depth import lora_params_per_layer, matched_rank

    smollm2 = SimpleNamespace(hidden_size=576, num_attention_heads=9, num_key_value_heads=3, intermediate_size=1536,
                              num_hidden_layers=30)
    targets = ("q_proj", "v_proj")
    assert lora_params_per_layer(smollm2, targets, 1) == (576 + 576) + (576 + 192)
    got = matched_rank(smollm2, stages=stages, top=top, rank=rank, targets=targets)
    assert got == expected
    zerolock = lora_params_per_layer(smollm2, targets, rank) * (30 + (stages - 1) * top)
    assert lora_params_per_layer(smollm2, targets, got) * 30 >= zerolock > lora_params_per_layer(smollm2, targets, got - 1) * 30 or top == 0


@pytest.mark.parametrize("text,stages,expected", [("last", 3, [2]), ("last", 2, [4]), ("1,last", 4, [1, 2]), ("3", 2, [3])])
def test_top_layers_last_is_the_last_chunks_layers_at_each_k(text, stages, expected):
    from benchmarks.depth import resolved_top, top_layers_arg

    assert [resolved_top(n, model="tiny", stages=stages) for n in top_layers_arg(text)] == expected  # tiny: 8 layers


@pytest.mark.parametrize("text", ["", "two", "1,-2", "last,x"])
def test_top_layers_refuses_what_is_not_a_count_or_last(text):
    import argparse

    from benchmarks.depth import top_layers_arg

    with pytest.raises(argparse.ArgumentTypeError):
        top_layers_arg(text)


@pytest.mark.parametrize("out, suffix, expected", [
    ("runs/topics-K6-zerolock_a0.5-seed0", ".toml", "runs/topics-K6-zerolock_a0.5-seed0.toml"),
    ("runs/topics-K6-zerolock_a0.5-seed1", ".toml", "runs/topics-K6-zerolock_a0.5-seed1.toml"),
    ("runs/topics-K3-bp-seed2", ".log", "runs/topics-K3-bp-seed2.log"),
])
def test_each_depth_runs_config_and_log_are_its_own_even_with_a_dot_in_the_arm(out, suffix, expected):
    """α = 0.5's two seeds, run side by side, once shared "topics-K6-zerolock_a0.toml" (with_suffix)."""
    from benchmarks.depth import beside

    assert beside(out, suffix) == Path(expected)


def test_depth_command_end_to_end_on_tiny_writes_every_field_and_reruns_nothing(tmp_path, capsys):
    """`zerolock bench depth` through the CLI (K=3, BP, terminal and top-lora:last, 2 steps): every run's
    per-chunk curves, δ_k, cosines and cost are in the JSON; a second call finds every run finished."""
    import json

    from zerolock_core.cli import main

    args = ["bench", "depth", "--model", "tiny", "--stages", "3", "--steps", "2", "--eval-every", "1",
            "--eval-size", "8", "--batch", "4", "--microbatches", "2", "--seeds", "0", "--decisive-seeds", "0",
            "--arms", "bp,terminal,zerolock a=1 top-lora:{N}", "--jobs", "2", "--no-png", "--out", str(tmp_path)]
    assert main(args) == 0
    report = json.loads((tmp_path / "depth.json").read_text())
    arms = report["results"]["topics K=3"]
    assert list(arms) == ["bp", "terminal", "zerolock a=1 top-lora:2"]  # tiny: 8 layers, the last chunk holds 2
    for name, entry in arms.items():
        (run,) = entry["runs"]
        assert run["step"] == [1, 2] and all(len(acc) == 3 for acc in run["label_accuracy"])
        for field in ("delta_k", "gradient_cosine", "trainable_params", "stage_weight_bytes", "stage_activation_bytes"):
            assert len(run[field]) == 3, (name, field)
        assert run["gradient_cosine"][-1] == pytest.approx(1.0, abs=1e-6)  # α = 1: the last chunk's loss is the task's
    terminal, top = arms["terminal"]["runs"][0], arms["zerolock a=1 top-lora:2"]["runs"][0]
    assert terminal["trainable_params"][:2] == [0, 0] and terminal["stage_activation_bytes"][:2] == [0, 0]
    assert top["stage_weight_bytes"][0] > terminal["stage_weight_bytes"][0]  # the copied top layers are held
    assert top["bytes_per_microbatch"][0] > terminal["bytes_per_microbatch"][0]  # the readout's rows travel
    assert "largest stage MB" in capsys.readouterr().out
    assert main(args) == 0
    assert "3 runs, 3 already finished" in capsys.readouterr().out
    # a second study at K=2 (BP only), merged with the first: one report, both K, the figure over K
    k2 = [*args[:args.index("--stages") + 1], "2", *args[args.index("--stages") + 2:]]
    k2[k2.index("--arms") + 1], k2[-1] = "bp", str(tmp_path / "k2")
    assert main(k2) == 0
    merged = tmp_path / "merged"
    assert main(["bench", "depth", "--model", "tiny", "--steps", "2", "--no-png", "--out", str(merged), "--merge",
                 f"{tmp_path / 'depth.json'},{tmp_path / 'k2' / 'depth.json'}"]) == 0
    both = json.loads((merged / "depth.json").read_text())
    assert list(both["results"]) == ["topics K=2", "topics K=3"] and both["config"]["stages"] == [2, 3]
    assert len(both["parts"]) == 2 and "depth_by_k" in str(both["figures"])
    from benchmarks.depth import by_k_figure, merge_reports
    from benchmarks.common.settings import BenchSettings

    figure = by_k_figure(both)
    lines = {t.name: list(t.customdata) for t in figure.data}  # each point's K (x stands a little apart per arm)
    assert lines == {"bp": [2, 3], "terminal": [3], "zerolock a=1 top-lora:last": [3]}
    assert all(abs(x - k) < 0.5 for t in figure.data for x, k in zip(t.x, t.customdata))
    from benchmarks.depth import format_verdict

    verdict = format_verdict([both])
    assert "| topics K=2 | " in verdict and "| topics K=3 | " in verdict
    k2_row = next(line for line in verdict.splitlines() if line.startswith("| topics K=2 |"))
    cells = [c.strip() for c in k2_row.split("|")[2:-1]]
    assert cells[0].endswith("(1)") and cells[1:6] == ["–"] * 5 and cells[6].endswith("/ – / – / –")  # BP only at K=2
    first = json.loads((tmp_path / "depth.json").read_text())
    with pytest.raises(ValueError, match="both studies hold topics K=3"):
        merge_reports(BenchSettings(), [first, first])
    with pytest.raises(ValueError, match="differ in lr"):
        merge_reports(BenchSettings(), [first, {**both, "results": {}, "settings": {**both["settings"], "lr": 1.0}}])


def test_wshare_measures_every_condition_with_its_own_trainable_weights():
    """The middle chunk of K=3 on tiny (3 layers, d=128, 2 KV heads of 32): LoRA's parameter counts by formula,
    full fine-tuning every weight of the layers; every part timed (values, not their sizes: never wall-clock)."""
    from benchmarks.wshare import CONDITIONS, run_wshare

    report = run_wshare(BenchSettings(seq_len=16, threads=1), stages=3, batch=4, microbatches=2, timings=1)
    rows = {r["condition"]: r for r in report["results"]}
    assert list(rows) == [c.name for c in CONDITIONS]
    per_layer_qv = lambda r: r * (128 + 128) + r * (128 + 64)  # q: A r×128, B 128×r; v: A r×128, B 64×r
    assert rows["LoRA r=4, q,v"]["trainable_params"] == 3 * per_layer_qv(4)
    assert rows["LoRA r=64, q,v"]["trainable_params"] == 3 * per_layer_qv(64)
    assert rows["full fine-tuning"]["trainable_params"] > rows["LoRA r=64, all linear"]["trainable_params"]
    assert all(r["B_s"] > 0 and r["W_s"] > 0 and r["BW_s"] > 0 and 0 < r["w_share"] < 1 for r in rows.values())


def test_the_arms_of_one_method_differ_by_dash_and_by_marker_in_the_depth_figures():
    from benchmarks.depth import arm_family, arm_styles

    arms = {"bp": "bp", "zerolock a=1": "zerolock", "zerolock a=0.5": "zerolock", "zerolock a=1 top:3": "zerolock"}
    styles = arm_styles({"results": {"topics K=3": {name: {"method": m} for name, m in arms.items()}}})
    zerolock = [styles[arm_family(name)] for name, m in arms.items() if m == "zerolock"]
    assert len({s["color"] for s in zerolock}) == 1  # one method, one colour
    assert len({s["line"]["dash"] for s in zerolock}) == len({s["marker"]["symbol"] for s in zerolock}) == 3
    assert "zerolock a=1 top:last" in styles  # keyed by the arm across K (top:3 at K=3 is top:last)


@pytest.mark.parametrize("text,shown", [
    ("--task trec6=csv:../shared/data/trec6.csv", "--task trec6=csv:$DATA/trec6.csv"),
    ("jsonl:../../shared/data/alpaca5k.jsonl", "jsonl:$DATA/alpaca5k.jsonl"),
    ("--dataset csv:examples/data/desks.csv", "--dataset csv:examples/data/desks.csv"),  # inside: kept
])
def test_a_page_names_the_studies_data_folder_as_data_never_by_a_path_outside(text, shown):
    from benchmarks.readme import portable

    assert portable(text) == shown
