"""`--readout track:P`: every chunk before the last reads out through a frozen copy of the last chunk's layers
carrying the last chunk's own LoRA, pushed every P steps (method/tracking.py). The oracles: the copy holds
exactly the last chunk's adapters of step `tracked_version(s, P)`; the pipeline equals the reference bitwise
(the push through the coordinator's store included); a resumed or recovered run equals the unstopped one.
(p_{k-1} is what chunk k-1 trains: tests/test_chunks.py's readout table has `track:1`.)"""
import re

import pytest
import torch

from benchmarks.depth import lora_params_per_layer
from benchmarks.faults import case_config, run_with_deadline, DEADLINE_S
from zerolock_core.cli import main
from zerolock_core.config.readout_spec import ReadoutSpec, tracked_version
from zerolock_core.config.run_config import DataConfig, ModelConfig, RunConfig, TrainConfig, replace
from zerolock_core.jobs.job import train
from zerolock_core.method.tracking import CHECKPOINT_PREFIX, MemoryBoard, Tracking, payload_bytes
from zerolock_core.rundir.artifacts import load_final_weights
from zerolock_core.train.reference_trainer import curve_names, make_workers, train_reference, train_step
from zerolock_core.train.run_setup import build_run_setup

from tests.test_reference_resume import assert_same_weights


@pytest.mark.parametrize("text,period", [("track:1", 1), (" track:4 ", 4), ("track:10", 10)])
def test_track_parses_to_a_frozen_copy_of_the_last_chunk(text, period):
    spec = ReadoutSpec.parse(text)
    assert spec == ReadoutSpec(kind="track", to_last=True, period=period)
    assert spec.tracks and spec.reads_layers and spec.is_top and spec.ships_rows and not spec.trains_layers
    resolved = ReadoutSpec.of_model(text, [(0, 3), (3, 6), (6, 8)])
    assert (resolved.layers, resolved.period) == (2, period)
    assert resolved.layer_indices(8, after=3) == [6, 7]  # the last chunk's layers, whatever the chunk


# (step, P) -> the version read during that 0-based step: after floor(s / P) * P - P steps, at least 0
VERSIONS = [((0, 1), 0), ((1, 1), 0), ((2, 1), 1), ((5, 1), 4), ((0, 2), 0), ((3, 2), 0), ((4, 2), 2),
            ((5, 2), 2), ((6, 2), 4), ((7, 3), 3), ((8, 3), 3), ((9, 3), 6), ((2, 4), 0)]


@pytest.mark.parametrize("case,version", VERSIONS)
def test_the_version_a_step_reads_is_between_p_and_2p_minus_1_steps_old(case, version):
    step, period = case
    assert tracked_version(step, period) == version
    assert version % period == 0 and (version == 0 or period <= step - version <= 2 * period - 1)


BAD = [  # (flags, the one line's words): the tiny model's 8 layers
    (["--readout", "track:0"], "--readout: 'track:0': track:P reads through the last chunk's layers"),
    (["--readout", "track"], "--readout: 'track': track:P .*a number, e.g. track:4"),
    (["--readout", "track:x"], "--readout: 'track:x': track:P"),
    (["--readout", "track:-2"], "--readout: 'track:-2': track:P"),
    (["--runtime", "reference", "--readout", "track:2", "--method", "bp"], "--method bp trains only the last chunk"),
    (["--readout", "track:2", "--method", "terminal"], "--method terminal trains only the last chunk"),
    (["--readout", "track:2", "--boundaries", "auto"], "--boundaries auto cannot balance --readout track:2"),
]


@pytest.mark.parametrize("flags,message", BAD)
def test_bad_tracking_readouts_are_one_line_naming_the_flag(flags, message, capsys, tmp_path):
    code = main(["train", "--quiet", "--out", str(tmp_path / "run"), *flags])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("zerolock: error: ")
    assert len(err.strip().splitlines()) == 1, err
    assert re.search(message, err), err
    assert not (tmp_path / "run").exists()


def tiny(readout: str, *, steps: int = 5, out: str = "", runtime: str = "reference", **train) -> RunConfig:
    return RunConfig(model=ModelConfig(model="tiny", readout=readout, boundaries=(3, 6)),
                     data=DataConfig(seq_len=32, eval_size=8),
                     train=TrainConfig(runtime=runtime, stages=3, batch=4, microbatches=2, steps=steps, lr=1e-2,
                                       threads=1, **train), out=out)


def test_trainable_parameters_and_pushed_bytes_against_a_hand_count():
    chunks = build_run_setup(tiny("track:2")).chunks
    config = chunks[0].config  # the tiny model: d = 128, 4 heads, 2 of keys and values (64), LoRA r = 4 on q, v
    per_layer = lora_params_per_layer(config, ("q_proj", "v_proj"), 4)
    assert per_layer == 4 * (128 + 128) + 4 * (128 + 64) == 1792
    for c, layers in zip(chunks, (3, 3, 2)):  # no trainable parameter beyond the chunk's own LoRA
        assert sum(p.numel() for p in c.trainable_state().values()) == per_layer * layers
    for c in chunks[:2]:  # each copy: the last chunk's two layers, frozen, LoRA for LoRA the last chunk's
        assert list(c.readout_top.layers) == ["6", "7"]
        assert c.tracked_state().keys() == chunks[2].trainable_state().keys()
        assert not any(p.requires_grad for p in c.readout_top.parameters())
        for name, p in c.tracked_state().items():  # the initial adapters: seeded as the last chunk's own
            assert torch.equal(p, chunks[2].trainable_state()[name])
    assert chunks[2].readout_top is None and chunks[2].tracked_state() == {}
    # one push: the last chunk's LoRA in fp32, to each of the K - 1 = 2 chunks before it every P steps
    assert payload_bytes(chunks[2].trainable_state()) == 2 * per_layer * 4 == 14_336
    board = MemoryBoard()
    publisher = Tracking(chunks[2], period=2, board=board)
    publisher.start(0)
    assert 14_336 < len(board.get(0)) == publisher.pushed_bytes < 14_336 + 1024  # + the safetensors header


@pytest.mark.parametrize("period", [1, 2, 3])
def test_the_copy_holds_the_last_chunks_adapters_of_the_version_its_step_reads(period):
    setup = build_run_setup(tiny(f"track:{period}", steps=7))
    workers = make_workers(setup)
    names = curve_names("zerolock", 3)
    last = workers[2].chunk
    history = {0: {n: p.detach().clone() for n, p in last.trainable_state().items()}}
    for step in range(7):
        want = history[tracked_version(step, period)]
        for w in workers[:2]:
            got = w.chunk.tracked_state()
            assert all(torch.equal(got[n], want[n]) for n in want), (step, period)
        train_step(setup, workers, names, step)
        history[step + 1] = {n: p.detach().clone() for n, p in last.trainable_state().items()}
    assert not torch.equal(history[7]["layers.6.self_attn.q_proj.lora_B.default.weight"],
                           history[0]["layers.6.self_attn.q_proj.lora_B.default.weight"]), "the last chunk trained"
    assert tracked_version(6, period) > 0, "and the copies read a trained version"


def test_a_tracking_copy_changes_what_the_earlier_chunks_learn(tmp_path):
    """Against `top:last` (the same layers, frozen, no LoRA): equal while the copy holds the initial
    adapters (B = 0), different once it reads a trained version."""
    runs = {}
    for readout in ("track:1", "top:last"):
        out = tmp_path / readout.replace(":", "")
        train_reference(tiny(readout, steps=3, out=str(out), final_eval=False), progress=False)
        runs[readout] = load_final_weights(out)
    assert runs["track:1"][0].keys() == runs["top:last"][0].keys()
    assert any(not torch.equal(runs["track:1"][0][n], runs["top:last"][0][n]) for n in runs["top:last"][0])
    two = {}
    for readout in ("track:2", "top:last"):  # with P = 2, steps 0..2 read version 0: the initial adapters
        out = tmp_path / ("two-" + readout.replace(":", ""))
        train_reference(tiny(readout, steps=3, out=str(out), final_eval=False), progress=False)
        two[readout] = load_final_weights(out)
    assert all(torch.equal(two["track:2"][k][n], two["top:last"][k][n]) for k in (0, 1) for n in two["top:last"][k])


@pytest.mark.parametrize("period", [1, 2])
def test_the_pipeline_equals_the_reference_bitwise(tmp_path, period):
    """Five steps: with P = 1 the copies read versions 0..3, with P = 2 versions 0 and 2, pushed through the
    coordinator's store by the last stage while the earlier stages run ahead."""
    readout = f"track:{period}"
    train_reference(tiny(readout, out=str(tmp_path / "ref"), final_eval=False), progress=False)
    metrics = train(tiny(readout, out=str(tmp_path / "pipe"), runtime="pipeline", final_eval=False), progress=False)
    assert metrics.state == "finished", metrics.reason
    assert_same_weights(tmp_path / "ref", tmp_path / "pipe")


@pytest.mark.parametrize("how,after,resumed_from", [("stop", 3, 3), ("crash", 3, 2)])
def test_a_resumed_reference_run_equals_the_unstopped_one(tmp_path, how, after, resumed_from):
    """P = 2, a checkpoint every 2 steps: stopped after step 3 the run keeps versions 0 and 2 in the last
    chunk's checkpoint (step 4 reads version 2, which no step after 3 publishes again)."""
    from zerolock_core.rundir.checkpoints import CheckpointStore
    from zerolock_core.rundir.run_dir import RunDir

    def cfg(out):
        return tiny("track:2", steps=6, out=str(out), ckpt_every=2, final_eval=False)

    train_reference(cfg(tmp_path / "unstopped"), progress=False)
    seen: list[int] = []

    def on_step(n, _):
        seen.append(n)
        if how == "crash" and n == after:
            raise RuntimeError("killed")

    out = tmp_path / "stopped"
    if how == "crash":
        with pytest.raises(RuntimeError, match="killed"):
            train_reference(cfg(out), progress=False, on_step=on_step)
    else:
        first = train_reference(cfg(out), progress=False, on_step=on_step,
                                should_stop=lambda: bool(seen) and seen[-1] >= after)
        assert (first.state, first.steps_done) == ("stopped", after)
        kept = CheckpointStore(RunDir(out), stage=2).load_latest()
        assert kept.step == 3 and {k.split("/")[1] for k in kept.tensors if k.startswith(CHECKPOINT_PREFIX)} == \
            {"0", "2"}
    resumed = train_reference(cfg(out), progress=False, resume=True)
    assert (resumed.state, resumed.resumed_from_step) == ("finished", resumed_from)
    assert_same_weights(tmp_path / "unstopped", out)


@pytest.mark.slow
@pytest.mark.parametrize("failure", ["2@3:kill", "0@3:kill"])
def test_a_recovered_pipeline_equals_the_unfailed_one(tmp_path, failure):
    """The last stage (the publisher) killed: its replacement restores step 2 and publishes again what it
    kept; an earlier stage killed: its replacement reads the versions it replays from the store."""
    def cfg(out, failures=()):
        return replace(case_config(out, method="zerolock", failures=failures), model={"readout": "track:1"})

    base, ended = run_with_deadline(cfg(tmp_path / "unfailed"))
    assert ended and base.state == "finished", base.reason
    metrics, ended = run_with_deadline(cfg(tmp_path / "failed", (failure,)))
    assert ended, f"the run did not end within {DEADLINE_S:g} s"
    assert metrics.state == "finished" and len(metrics.recovery) == 1, metrics.reason
    assert_same_weights(tmp_path / "unfailed", tmp_path / "failed")


@pytest.mark.slow
def test_a_restarted_torchrun_job_republishes_what_its_checkpoint_kept_and_ends_bitwise_equal(tmp_path):
    """A torchrun restart brings a fresh store: the versions published before it are gone. Restored at step 2
    (P = 1), stage 0 reads version 1, which only the last stage's checkpoint still holds."""
    import json

    from test_torchrun import torchrun_two_nodes, train_flags

    extra = ["--readout", "track:1"]
    local = tmp_path / "local"
    assert main(train_flags(local, method="zerolock", stages=2, ckpt_every=2, extra=extra)) == 0
    d = tmp_path / "restarted"
    results = torchrun_two_nodes(train_flags(d, method="zerolock", stages=2, ckpt_every=2,
                                             extra=[*extra, "--fail", "1@3"]), stages=2, max_restarts=1, logs=tmp_path)
    assert [r.returncode for r in results] == [0, 0], [r.stderr[-2000:] for r in results]
    metrics = json.loads((d / "metrics.json").read_text())
    assert metrics["state"] == "finished" and metrics["resumed_from_step"] == 2
    assert_same_weights(local, d)
