"""A run's fine-tuned model as one PEFT model: the base model the run recorded, with the LoRA of every
chunk's decoder layers as the run left them in final/ (whatever its method, resumed or recovered).

The chunks are rebuilt exactly as the run built them (`build_chunks`: the same seeded LoRA, so even a chunk
that never trained, as terminal's first ones, has its own A) and its final weights loaded into them with
`load_trained_weights`, which refuses files of another model, adapter or K. Readouts are not part of the
model: affine / mlp adapters and the per-chunk layer copies of `top-lora:N` / `sample-lora:N` train the chunks'
local losses and are left out (`TrainedModel.left_out` says which).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from ..rundir.artifacts import load_trained_weights
from ..config.run_config import RunConfig
from ..rundir.run_dir import RunDir
from ..rundir.runs_root import NOT_A_RUN_BUT_AN_EXPORT, is_export

LORA_PREFIX = "base_model.model.model.layers."  # a chunk layer's name in a PeftModel of the whole causal LM
ADAPTER = "default"  # peft's adapter name, as inject_adapter_in_model gave it to the chunks


@dataclass(kw_only=True)
class TrainedModel:
    run: RunDir
    cfg: RunConfig
    peft_model: object  # peft.PeftModel: the base model (frozen) with the run's LoRA, unmerged
    tokenizer: object
    left_out: list[str]  # the run's trained readouts that are not part of the model ([] for readout head)

    @property
    def note(self) -> str:
        """One line on what the model leaves out ("" when nothing)."""
        if not self.left_out:
            return ""
        return (f"left out: {', '.join(self.left_out)}: readouts train the chunks' local losses and are not part "
                f"of the model (it reads its last layer through the base model's own norm and head)")


def check_trained_run(run: str | Path) -> tuple[RunDir, RunConfig]:
    """The run at `run` and its config, or a ValueError saying why it has no trained model to give."""
    rd = RunDir(run)
    name = rd.name  # the messages name the run, never the server's path to it (shown_path.py)
    if not rd.path.is_dir():
        raise ValueError(f"{name}: no such run directory")
    if is_export(rd.path):  # a merged model's config.json is not a run's
        raise ValueError(f"{name} {NOT_A_RUN_BUT_AN_EXPORT}")
    if not rd.config_json.exists():
        raise ValueError(f"{name} is not a run directory (it has no {rd.config_json.name})")
    if rd.is_live():
        raise ValueError(f"{name} is being written right now (training, resuming or evaluating): wait for it "
                         f"to end")
    cfg = rd.saved_config()
    chunks = rd.final_chunks()
    missing = [k for k in range(cfg.train.stages) if k not in chunks]
    if missing:
        raise ValueError(f"{name} has no trained weights in {rd.final.name}/ for chunk(s) "
                         f"{', '.join(map(str, missing))} (the run ended before writing them; resume it first)")
    return rd, cfg


def load_trained_model(run: str | Path) -> TrainedModel:
    """The run's base model with its trained LoRA (a `peft.PeftModel`, eval mode, fp32, nothing trainable)."""
    from peft import LoraConfig, get_peft_model

    from ..method.chunks import build_chunks
    from ..models.loading import load_causal_lm, load_tokenizer

    rd, cfg = check_trained_run(run)
    m = cfg.model
    chunks = build_chunks(load_causal_lm(m.model), m, stages=cfg.train.stages, seed=cfg.train.seed,
                          method=cfg.train.method, speeds=cfg.train.speeds)
    load_trained_weights(chunks, rd.path)
    trained = {f"{LORA_PREFIX}{name}": p.detach() for c in chunks for name, p in c.layers.named_parameters()
               if "lora_" in name}
    lora = LoraConfig(r=m.lora_rank, lora_alpha=m.lora_alpha, lora_dropout=0.0, target_modules=list(m.lora_targets),
                      bias="none", task_type="CAUSAL_LM")
    with warnings.catch_warnings():  # transformers' deprecation of a name peft still calls: not the user's to fix
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing", category=FutureWarning)
        model = get_peft_model(load_causal_lm(m.model), lora, adapter_name=ADAPTER)
    # as the run recorded it (a preset's name, a local directory), not the path peft found it at
    model.peft_config[ADAPTER].base_model_name_or_path = m.model
    _put_lora(model, trained, rd)
    model.eval()
    model.requires_grad_(False)
    return TrainedModel(run=rd, cfg=cfg, peft_model=model, tokenizer=load_tokenizer(m.model),
                        left_out=[_readout_words(c) for c in chunks if _readout_words(c)])


def _put_lora(model, trained: dict[str, torch.Tensor], rd: RunDir) -> None:
    """Every LoRA tensor of the PEFT model from the run's, and every one of the run's used: the chunks put LoRA
    into the decoder layers only, so a target that matches elsewhere in the whole model must not pass."""
    params = {name: p for name, p in model.named_parameters() if "lora_" in name}
    extra, unused = sorted(set(params) - set(trained)), sorted(set(trained) - set(params))
    if extra or unused:
        raise ValueError(f"{rd.name}: the run's LoRA does not map onto the model's "
                         f"(only in the model: {extra[:3]}; only in the run: {unused[:3]})")
    with torch.no_grad():
        for name, p in params.items():
            assert p.shape == trained[name].shape, f"{name}: load_trained_weights checked the shapes"
            p.copy_(trained[name])


def _readout_words(chunk) -> str:
    """What a chunk's readout holds that training changed, in words ("" for the plain head or frozen top)."""
    if chunk.readout_adapter is not None:
        return f"chunk {chunk.index}'s readout adapter"
    top = chunk.readout_top
    if top is not None and any(p.requires_grad for p in top.parameters()):
        layers = [int(i) for i in top.layers]
        which = "the top layers" if layers == list(range(layers[0], layers[-1] + 1)) \
            else f"sampled layers {', '.join(map(str, layers))}"
        return f"chunk {chunk.index}'s readout layers (LoRA on its copy of {which})"
    return ""
