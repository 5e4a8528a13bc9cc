"""`balanced_boundaries`: contiguous chunks whose stage times are as even as they can be (a table)."""
import pytest

from zerolock_core.method.balance import ChunkCosts, balanced_boundaries
from zerolock_core.method.chunks import chunk_bounds, planned_bounds
from zerolock_core.config.field_words import ConfigError


@pytest.mark.parametrize("costs,speeds,boundaries", [
    ([1] * 8, (1, 1, 1), (3, 6)),  # the even split, extra layers first
    ([1] * 8, (1, 1), (4,)),
    ([1] * 8, (1,), ()),
    ([1] * 8, (1, 0.4, 1), (4, 5)),  # times 4, 2.5, 3 (even: 3, 7.5, 2)
    ([1] * 8, (1, 0.5, 1), (4, 5)),  # 4, 2, 3: the slowest at 4 with the least squares; larger chunks first
    ([1] * 8, (0.5, 1), (2,)),  # 4, 6: the slowest at 6 as with 3 (6, 5), with the least squares
    ([1] * 6, (1, 0.25), (5,)),  # the slow stage holds one layer: 5, 4
    ([4, 1, 1, 1, 1], (1, 1), (1,)),  # a heavy first layer (an embedding) stands alone: 4, 4
    ([1, 1, 1, 1, 4], (1, 1), (4,)),  # a heavy last layer (a head): 4, 4
    ([1] * 30, (1, 0.4, 1), (13, 17)),  # SmolLM2's 30 layers: 13, 10, 13
    ([0, 0, 0], (1, 1, 1), (1, 2)),  # no cost at all: still a layer each
])
def test_balanced_boundaries(costs, speeds, boundaries):
    assert balanced_boundaries(costs, speeds) == boundaries


@pytest.mark.parametrize("layers,stages", [(8, 1), (8, 3), (8, 5), (30, 4), (7, 7)])
def test_equal_costs_and_speeds_give_the_even_split(layers, stages):
    cuts = balanced_boundaries(ChunkCosts.uniform(layers), (1.0,) * stages)
    assert [first for first, _ in chunk_bounds(layers, stages)[1:]] == list(cuts)


@pytest.mark.parametrize("costs,speeds", [([1, 1], (1, 1, 1)), ([1, 1], ()), ([1, -1], (1, 1)), ([1, 1], (1, 0))])
def test_what_cannot_be_split_is_refused(costs, speeds):
    with pytest.raises(ValueError):
        balanced_boundaries(costs, speeds)


@pytest.mark.parametrize("layers,speeds,readout_layers,boundaries", [
    (30, (1, 1, 1), 0, (10, 20)),
    (30, (1, 1, 1), 1, (10, 20)),  # 11, 11, 10: one readout layer fits in the even split
    (30, (1, 1, 1), 10, (7, 14)),  # 7 + 10, 7 + 10, 16: the last chunk takes what the others' readouts cost
    (30, (1, 0.4, 1), 0, (13, 17)),
    (30, (1, 0.4, 1), 5, (12, 13)),  # the slow stage's own readout: 1 + 5 layers at 0.4 = 15, others 17, 17
    (8, (1, 1, 1), 3, (2, 4)),  # the last chunk keeps the 3 top layers its readouts copy: 5, 5, 4
    (8, (1, 1), 7, (1,)),  # as many as there can be: 1 + 7 against 7
])
def test_balanced_boundaries_weigh_a_top_readout_on_every_chunk_before_the_last(layers, speeds, readout_layers,
                                                                                 boundaries):
    cuts = balanced_boundaries([1] * layers, speeds, readout_layers=readout_layers)
    assert cuts == boundaries and layers - cuts[-1] >= readout_layers


@pytest.mark.parametrize("readout,method,boundaries", [
    ("top-lora:10", "zerolock", (7, 14)),  # every chunk trains and runs its 10 top layers
    ("top:10", "zerolock", (7, 14)),
    ("top-lora:10", "bp", (10, 20)),  # only the last chunk reads out: nothing to weigh
    ("top-lora:10", "terminal", (10, 20)),
    ("head", "zerolock", (10, 20)),
    ("affine", "zerolock", (10, 20)),
])
def test_auto_boundaries_weigh_the_readout_only_where_every_chunk_reads_through_the_top(readout, method, boundaries):
    bounds = planned_bounds(30, 3, boundaries=(), speeds=(), readout=readout, method=method)
    assert tuple(first for first, _ in bounds[1:]) == boundaries


def test_auto_boundaries_refuse_top_last_naming_both_flags():
    with pytest.raises(ConfigError, match=r"--boundaries auto.*cannot balance --readout top-lora:last.*name N"):
        planned_bounds(30, 3, boundaries=(), speeds=(), readout="top-lora:last", method="zerolock")
    # with named boundaries, or under BP, top:last is as before
    assert planned_bounds(30, 3, boundaries=(12, 24), speeds=(), readout="top-lora:last",
                          method="zerolock") == [(0, 12), (12, 24), (24, 30)]


def test_a_readout_too_deep_to_balance_is_refused_naming_the_flag():
    with pytest.raises(ConfigError, match="--boundaries auto: a readout through 8 top layers leaves too few"):
        chunk_bounds(8, 2, (), readout_layers=8)


@pytest.mark.parametrize("every,readout_layers,extras", [
    (True, 0, [0.5 + 2, 2 + 1, 2 + 1]),  # embedding on the first; every chunk's head; the upstream head after
    (False, 0, [0.5, 0, 2]),  # BP: the last chunk alone reads out, nobody recomputes an upstream head
    (True, 2, [0.5 + 2 + 7, 2 + 1 + 7, 2 + 1]),  # a top:2 readout runs the top two layers (3 + 4) before the last
])
def test_chunk_costs_add_what_each_chunk_computes_beside_its_layers(every, readout_layers, extras):
    costs = ChunkCosts(layers=(1.0, 2.0, 3.0, 4.0), embedding=0.5, head=2.0, upstream_head=1.0)
    assert costs.extras(3, every_chunk_reads_out=every, readout_layers=readout_layers) == extras


@pytest.mark.parametrize("costs,speeds,every,boundaries", [
    (ChunkCosts(layers=(1.0,) * 8, head=2.0), (1, 1), True, (4,)),  # a head on each: they cancel
    (ChunkCosts(layers=(1.0,) * 8, head=2.0), (1, 1), False, (5,)),  # BP: the last chunk's head is 2 layers
    (ChunkCosts(layers=(1.0,) * 8, embedding=2.0), (1, 1), True, (3,)),  # 2 + 3 against 5
    (ChunkCosts(layers=(1.0,) * 8, head=1.0), (1, 0.5), True, (6,)),  # (6 + 1) / 1 against (2 + 1) / 0.5
    (ChunkCosts(layers=(1.0,) * 8, head=1.0, upstream_head=1.0), (1, 1), True, (5,)),  # 5 + 1 against 3 + 2
])
def test_balanced_boundaries_weigh_the_embedding_and_the_heads(costs, speeds, every, boundaries):
    assert balanced_boundaries(costs, speeds, every_chunk_reads_out=every) == boundaries
