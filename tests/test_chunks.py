"""Model split, LoRA, readout adapter, and the gradient boundary between chunks."""
import pytest
import torch

from zerolock_core.method.chunks import build_chunks, chunk_bounds
from zerolock_core.config.field_words import ConfigError
from zerolock_core.config.run_config import ModelConfig
from zerolock_core.models.loading import load_causal_lm
from zerolock_core.method.objectives import task_cross_entropy
from zerolock_core.config.readout_spec import ReadoutSpec
from zerolock_core.train.reference_trainer import zerolock_microbatch
from zerolock_core.train.stage_worker import StageWorker, answer_positions


@pytest.mark.parametrize("layers,stages,boundaries,expected", [
    (8, 1, None, [(0, 8)]),
    (8, 3, None, [(0, 3), (3, 6), (6, 8)]),
    (8, 8, None, [(i, i + 1) for i in range(8)]),
    (22, 3, None, [(0, 8), (8, 15), (15, 22)]),
    (8, 3, (2, 7), [(0, 2), (2, 7), (7, 8)]),
])
def test_chunk_bounds(layers, stages, boundaries, expected):
    assert chunk_bounds(layers, stages, boundaries) == expected


@pytest.mark.parametrize("layers,speeds,expected", [
    (8, (), [(0, 3), (3, 6), (6, 8)]),  # auto with even stages: the even split
    (8, (1.0, 0.4, 1.0), [(0, 4), (4, 5), (5, 8)]),  # a 2.5x slower middle stage holds one layer
    (8, (0.5, 1.0, 1.0), [(0, 1), (1, 5), (5, 8)]),  # times 2, 4, 3: the slowest at 4 as with 2, 3, 3
])
def test_boundaries_auto_balances_the_stages_speeds(layers, speeds, expected):
    from zerolock_core.method.balance import AUTO

    assert chunk_bounds(layers, 3, AUTO, speeds) == expected


@pytest.mark.parametrize("layers,stages,boundaries,message", [
    (8, 0, None, "between 1 and"),
    (8, 9, None, "between 1 and"),
    (8, 3, (3,), "strictly increasing"),
    (8, 3, (5, 3), "strictly increasing"),
    (8, 2, (8,), "strictly increasing"),
])
def test_chunk_bounds_rejects(layers, stages, boundaries, message):
    with pytest.raises(ConfigError, match=message):
        chunk_bounds(layers, stages, boundaries)


def make_batch(vocab, b=4, s=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (b, s), generator=g)
    mask = torch.ones(b, s, dtype=torch.long)
    mask[1, 12:] = 0
    labels = torch.full((b, s), -100)
    labels[:, 10] = ids[:, 11]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


@pytest.fixture
def split_model(tiny_random_model_dir):
    def make(stages, **model_kw):
        model = load_causal_lm(tiny_random_model_dir)
        return model, build_chunks(model, ModelConfig(model=tiny_random_model_dir, **model_kw), stages=stages, seed=0)
    return make


@pytest.mark.parametrize("stages", [1, 2, 4])
def test_split_forward_equals_the_unsplit_model_bitwise(split_model, stages):
    model, chunks = split_model(stages)
    mb = make_batch(model.config.vocab_size)
    h = mb["input_ids"]
    for c in chunks:
        h = c(h, mb["attention_mask"])
    ref = model.model(input_ids=mb["input_ids"], attention_mask=mb["attention_mask"], use_cache=False)
    assert torch.equal(model.model.norm(h), ref.last_hidden_state)


def test_bp_on_split_model_equals_plain_autograd_on_unsplit_model(split_model):
    model, chunks = split_model(2)
    mb = make_batch(model.config.vocab_size)
    omega, targets = answer_positions(mb)
    # plain autograd on the unsplit (LoRA-wrapped) model
    logits = model(input_ids=mb["input_ids"], attention_mask=mb["attention_mask"], use_cache=False).logits
    loss_ref = task_cross_entropy(logits[omega], targets)
    loss_ref.backward()
    ref_grads = {n: p.grad.clone() for c in chunks for n, p in c.trainable_state().items()}
    for c in chunks:
        c.zero_grad(set_to_none=True)
    workers = [StageWorker(chunk=c, alpha=0.5, consistency="reverse", microbatches=1, lr=1e-3, weight_decay=0)
               for c in chunks]
    h = mb["input_ids"]
    for w in workers:
        h = w.forward(mb, h)
    loss = workers[-1].bp_loss_backward(mb, h)
    assert loss.total == pytest.approx(loss_ref.item(), abs=1e-6)
    for c in chunks:
        for n, p in c.trainable_state().items():
            torch.testing.assert_close(p.grad, ref_grads[n], rtol=1e-5, atol=1e-7)


def test_no_gradient_crosses_a_chunk_boundary_in_zerolock(split_model):
    model, chunks = split_model(3)
    mb = make_batch(model.config.vocab_size)
    workers = [StageWorker(chunk=c, alpha=0.5, consistency="reverse", microbatches=1, lr=1e-3, weight_decay=0)
               for c in chunks]
    # Run chunk by chunk, and after each local backward check which parameters got gradients.
    x, h_in = mb["input_ids"], None
    for k, w in enumerate(workers):
        for c in chunks:
            c.zero_grad(set_to_none=True)
        h_out = w.forward(mb, x)
        if h_in is not None:
            assert h_in.grad_fn is None and not h_in.requires_grad  # the boundary is detached
        w.local_backward(mb, h_in, h_out)
        for j, c in enumerate(chunks):
            got = [p.grad is not None and bool(p.grad.abs().sum() > 0) for p in c.trainable_state().values()]
            if j == k:
                assert any(got), f"chunk {k} got no gradient from its own loss"
            else:
                assert not any(got), f"chunk {k}'s loss reached chunk {j}"
        x = h_out.detach()
        h_in = x
    # And the autograd graph of the last chunk's loss does not contain any earlier parameter.
    omega, targets = answer_positions(mb)
    h = mb["input_ids"]
    for c in chunks[:-1]:
        h = c(h, mb["attention_mask"]).detach()
    loss = task_cross_entropy(chunks[-1].readout(chunks[-1](h, mb["attention_mask"]), omega), targets)
    earlier = [p for c in chunks[:-1] for p in c.trainable_state().values()]
    assert all(g is None for g in torch.autograd.grad(loss, earlier, allow_unused=True))


def test_zerolock_microbatch_only_sends_detached_states(split_model):
    """Chunk 0's gradients after a ZeroLock micro-batch are exactly those of its own local loss:
    nothing of chunk 1's loss flows back across the boundary (and chunk 1's state is detached)."""
    model, chunks = split_model(2)
    mb = make_batch(model.config.vocab_size)
    workers = [StageWorker(chunk=c, alpha=0.5, consistency="forward", microbatches=1, lr=1e-3, weight_decay=0)
               for c in chunks]
    losses = zerolock_microbatch(workers, mb)
    assert len(losses) == 2 and losses[0].consistency is None and losses[1].consistency is not None
    both = {n: p.grad.clone() for n, p in chunks[0].named_parameters() if p.requires_grad}
    assert any(g.abs().sum() > 0 for g in both.values())
    for c in chunks:
        c.zero_grad(set_to_none=True)
    workers[0].local_backward(mb, None, workers[0].forward(mb, mb["input_ids"]))  # chunk 0 alone
    alone = {n: p.grad for n, p in chunks[0].named_parameters() if p.requires_grad}
    assert sorted(both) == sorted(alone) and all(torch.equal(both[n], alone[n]) for n in both)


@pytest.mark.parametrize("kind", ["mlp", "affine"])
def test_readout_adapter_is_identity_at_init(split_model, kind):
    model, chunks = split_model(2, readout=kind)
    h = torch.randn(3, 5, model.config.hidden_size)
    for c in chunks:
        assert torch.equal(c.readout_adapter(h), h)
        omega = torch.ones(3, 5, dtype=torch.bool)
        assert torch.equal(c.readout(h, omega), c.upstream_readout(h, omega))
        assert any("readout_adapter" in n for n in c.trainable_state())


def _moved_off_init(chunks) -> None:
    """Every trained readout weight nudged (adapters and LoRA start as the identity)."""
    with torch.no_grad():
        for c in chunks:
            for name, p in c.named_parameters():
                if p.requires_grad and name.startswith(("readout_adapter.", "readout_top.")):
                    p.add_(0.05 * torch.randn_like(p))


READOUTS = ["mlp", "affine", "top:2", "top-lora:2", "sample:2", "sample-lora:2", "track:1"]


@pytest.mark.parametrize("readout", READOUTS)
def test_consistency_target_is_the_upstream_chunks_own_readout(split_model, readout):
    """After the readouts have moved off their start, chunk k's target p_{k-1} (rebuilt from the
    message chunk k-1 sent) is exactly chunk k-1's readout, the distribution it trains."""
    model, chunks = split_model(3, readout=readout, boundaries=(1, 2))  # the last chunk: layers 2, 3
    _moved_off_init(chunks)
    workers = [StageWorker(chunk=c, alpha=0.5, consistency="reverse", microbatches=1, lr=1e-3, weight_decay=0)
               for c in chunks]
    mb = make_batch(model.config.vocab_size)
    omega, _ = answer_positions(mb)
    x = mb["input_ids"]
    for up, down in zip(workers, workers[1:]):
        h = up.forward(mb, x)
        message = up.outgoing(mb, h)
        h_in, rows = down.incoming(mb, message, tuple(h.shape))
        assert rows is not None and rows.shape == (int(omega.sum()), model.config.hidden_size)
        assert torch.equal(h_in, h.detach())
        own = up.chunk.readout(h, omega, mb["attention_mask"])
        assert torch.equal(down.chunk.upstream_readout(h_in, omega, rows), own)
        assert not torch.equal(down.chunk.upstream_readout(h_in, omega), own)  # the plain head's
        x = h_in


@pytest.mark.parametrize("readout", ["top:2", "top-lora:2"])
def test_a_top_readout_reads_through_copies_of_the_models_top_layers_and_the_last_chunk_through_the_head(
        split_model, readout):
    model, chunks = split_model(3, readout=readout, boundaries=(1, 2))
    first, last = chunks[0], chunks[-1]
    assert last.readout_top is None and not last.ships_readout  # its output is the model's top
    assert list(first.readout_top.layers) == ["2", "3"]
    assert all(t is not l for t, l in zip(first.readout_top.layers.values(), last.layers.values()))
    assert first.readout_top.layers["2"] is not chunks[1].readout_top.layers["2"]  # each chunk its own copy
    lora = {n for n in first.trainable_state() if n.startswith("readout_top.")}
    assert bool(lora) == (readout == "top-lora:2")
    if lora:  # seeded apart from the last chunk's own LoRA on the same layers
        a = first.trainable_state()["readout_top.layers.3.self_attn.q_proj.lora_A.default.weight"]
        assert not torch.equal(a, last.trainable_state()["layers.3.self_attn.q_proj.lora_A.default.weight"])
    # at the start (LoRA B = 0) the readout is the frozen model's top: chunk 0's readout of the
    # last chunk's input equals the model's own output there
    mb = make_batch(model.config.vocab_size)
    omega, _ = answer_positions(mb)
    h = mb["input_ids"]
    for c in chunks[:2]:
        h = c(h, mb["attention_mask"])
    with torch.no_grad():
        expected = last.readout(last(h, mb["attention_mask"]), omega)
        assert torch.allclose(chunks[1].readout(h, omega, mb["attention_mask"]), expected, atol=1e-5)


def test_top_with_no_layers_is_the_plain_head(split_model):
    model, head = split_model(3)
    _, top0 = split_model(3, readout="top:0")
    mb = make_batch(model.config.vocab_size)
    omega, _ = answer_positions(mb)
    for a, b in zip(head, top0):
        assert b.readout_top is None and not b.ships_readout and not b.receives_readout
        assert a.trainable_state().keys() == b.trainable_state().keys()
        h = torch.randn(4, 16, model.config.hidden_size)
        assert torch.equal(a.readout(h, omega), b.readout(h, omega, mb["attention_mask"]))


@pytest.mark.parametrize("kind", ["top", "top-lora"])
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_top_last_reads_through_the_last_chunks_layers_at_every_k(split_model, kind, stages):
    model, last = split_model(stages, readout=f"{kind}:last")
    layers = model.config.num_hidden_layers
    first, end = chunk_bounds(layers, stages, None)[-1]
    n = end - first
    _, explicit = split_model(stages, readout=f"{kind}:{n}")
    mb = make_batch(model.config.vocab_size)
    omega, _ = answer_positions(mb)
    for a, b in zip(last[:-1], explicit[:-1]):
        assert list(a.readout_top.layers) == list(b.readout_top.layers) == [str(i) for i in range(layers - n, layers)]
        assert a.trainable_state().keys() == b.trainable_state().keys()
        assert all(torch.equal(a.trainable_state()[k], b.trainable_state()[k]) for k in a.trainable_state())
        h = torch.randn(4, 16, model.config.hidden_size)
        with torch.no_grad():
            assert torch.equal(a.readout(h, omega, mb["attention_mask"]), b.readout(h, omega, mb["attention_mask"]))


@pytest.mark.parametrize("text,spec", [
    ("head", ReadoutSpec(kind="head")), ("top:3", ReadoutSpec(kind="top", layers=3)),
    ("top-lora:last", ReadoutSpec(kind="top-lora", to_last=True)), (" top:last ", ReadoutSpec(kind="top", to_last=True)),
])
def test_readout_specs_parse(text, spec):
    assert ReadoutSpec.parse(text) == spec
    assert ReadoutSpec.of_model(text, [(0, 5), (5, 8)]).layers == (3 if spec.to_last else spec.layers)


@pytest.mark.parametrize("text", ["top", "top:", "top:-1", "top:lastx", "head:last", "affine:2", "last"])
def test_bad_readout_specs_name_the_choices(text):
    with pytest.raises(ValueError, match="head | affine | mlp | top:N | top-lora:N"):
        ReadoutSpec.parse(text)


def test_message_without_adapters_is_the_hidden_state_itself(split_model):
    model, chunks = split_model(2)
    w = StageWorker(chunk=chunks[0], alpha=0.5, consistency="reverse", microbatches=1, lr=1e-3, weight_decay=0)
    mb = make_batch(model.config.vocab_size)
    h = w.forward(mb, mb["input_ids"])
    message = w.outgoing(mb, h)
    assert message.shape == h.shape and torch.equal(message, h.detach())


def test_lora_init_does_not_depend_on_the_split(split_model):
    _, one = split_model(1)
    _, four = split_model(4)
    merged = {n: p for c in four for n, p in c.trainable_state().items()}
    assert set(merged) == set(one[0].trainable_state())
    for n, p in one[0].trainable_state().items():
        assert torch.equal(p, merged[n])


@pytest.mark.parametrize("targets,message", [
    (("no_such_module",), r"chunk 0 \(layers 0..1\) has no trainable parameter: --lora-targets no_such_module"),
    (("layers.0.self_attn.q_proj",), r"chunk 1 \(layers 2..3\) has no trainable parameter"),
])
def test_a_chunk_without_trainable_parameters_is_an_error(split_model, targets, message):
    with pytest.raises(ConfigError, match=message):
        split_model(2, lora_targets=targets)
