"""`balanced_boundaries`: contiguous chunks whose stage times are as even as they can be (a table)."""
import pytest

from zerolock_core.balance import balanced_boundaries, llama_layer_costs
from zerolock_core.chunks import chunk_bounds


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
    cuts = balanced_boundaries(llama_layer_costs(layers), (1.0,) * stages)
    assert [first for first, _ in chunk_bounds(layers, stages)[1:]] == list(cuts)


@pytest.mark.parametrize("costs,speeds", [([1, 1], (1, 1, 1)), ([1, 1], ()), ([1, -1], (1, 1)), ([1, 1], (1, 0))])
def test_what_cannot_be_split_is_refused(costs, speeds):
    with pytest.raises(ValueError):
        balanced_boundaries(costs, speeds)
