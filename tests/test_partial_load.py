"""A stage process reads only its own weights: its layers, the norm + head, and the embedding on
stage 0; every other layer stays on the meta device. Oracle: the same chunk cut out of the fully
loaded model, tensor for tensor."""
import pytest
import torch

from zerolock_core.method.chunks import build_chunks, chunk_bounds
from zerolock_core.config.run_config import ModelConfig
from zerolock_core.models.loading import Keep, load_causal_lm
from zerolock_core.models.partial_load import materialised_keys


def _spec(request, name: str) -> str:
    return name if name == "tiny" else request.getfixturevalue(name)


def _expected_keys(stage: int) -> set[str]:
    return {"norm", "lm_head", "layers"} | ({"embed"} if stage == 0 else set())


@pytest.mark.parametrize("name,stages", [("tiny", 3), ("tiny_random_model_dir", 1), ("tiny_tied_model_dir", 3)])
def test_a_stage_holds_exactly_its_layers_and_equals_the_full_models_chunk(request, name, stages):
    spec = _spec(request, name)
    cfg = ModelConfig(model=spec)
    full = build_chunks(load_causal_lm(spec), cfg, stages=stages, seed=3)
    layers = full[0].config.num_hidden_layers
    for stage, (first, end) in enumerate(chunk_bounds(layers, stages)):
        model = load_causal_lm(spec, keep=Keep(first=first, end=end, embedding=stage == 0))
        chunk = build_chunks(model, cfg, stages=stages, seed=3, only=stage)[0]
        state = chunk.state_dict()
        assert {k.split(".")[0] for k in state} == _expected_keys(stage)
        assert {int(k.split(".")[1]) for k in state if k.startswith("layers.")} == set(range(first, end))
        reference = full[stage].state_dict()
        assert set(state) == set(reference)
        for key, value in state.items():
            assert torch.equal(value, reference[key]), key
        loaded = materialised_keys(model)
        assert not any(k.startswith("model.layers.") and not first <= int(k.split(".")[2]) < end for k in loaded)
        assert ("model.embed_tokens.weight" in loaded) == (stage == 0)


def test_tied_head_is_the_embedding_on_stage_0_and_its_values_elsewhere(tiny_tied_model_dir):
    first_stage = load_causal_lm(tiny_tied_model_dir, keep=Keep(first=0, end=2, embedding=True))
    assert first_stage.lm_head.weight is first_stage.model.embed_tokens.weight
    later = load_causal_lm(tiny_tied_model_dir, keep=Keep(first=2, end=4, embedding=False))
    assert later.model.embed_tokens.weight.is_meta
    assert torch.equal(later.lm_head.weight, first_stage.model.embed_tokens.weight)
    assert later.lm_head.weight.dtype == torch.float32  # stored bf16, upcast on load


def test_a_partial_model_without_the_needed_tensor_is_refused(tmp_path, tiny_random_model_dir):
    import shutil

    from safetensors.torch import load_file, save_file

    from zerolock_core.config.field_words import ConfigError

    broken = tmp_path / "broken"
    shutil.copytree(tiny_random_model_dir, broken)
    weights = load_file(broken / "model.safetensors")
    del weights["model.layers.1.mlp.up_proj.weight"]
    save_file(weights, broken / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ConfigError, match="model.layers.1.mlp.up_proj.weight"):
        load_causal_lm(str(broken), keep=Keep(first=0, end=2, embedding=True))
