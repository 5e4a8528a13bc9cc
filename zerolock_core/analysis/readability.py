"""Readability of the hidden state at every depth through the frozen final norm + head (the logit
lens), optionally through a small translator fitted per layer (the tuned lens), and through the model's
own top N layers (the `top:N` readout's lens: N = the last chunk's layers at K, as `--readout top:last`).

ZeroLock assumes an early chunk's hidden state can be read by the frozen head; this measures
whether it can. For each layer l = 1..L the eval split's hidden state after layer l is read out
at the answer positions Ω and scored exactly as `evaluation.evaluate_chunks` scores a chunk
(label accuracy, strict accuracy, answer NLL): the last layer's numbers are the last chunk's.

A translator is the affine `h + A h + b` (zero-initialised: the plain lens before fitting) or the
paper's residual MLP, fitted by Adam on the training split's rows at Ω with the base frozen. For a
large vocabulary the fit's softmax runs over the answer tokens only (the tokens of the label words),
which makes it cheap on a CPU; it is then scored over the whole vocabulary like everything else.

The top-layer lens reads the hidden state after layer l ≤ L − N through the *pretrained* top N layers
(what the engine's `top:N` runs; a run's own trained top layers are not used, so a fine-tune's curve
shows what its chunks hand to a frozen top). After layer L − N it would run layers already applied: it
stops there, where it equals the frozen head's reading of layer L.

One measurement for `zerolock bench readability`, the dashboard's Readability tab and notebook 7:
`lens_config` -> `measure_condition` per set of weights -> `readability_summary` (what the table,
the cut suggestions and readability_figures.py read).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch import nn

from ..rundir.artifacts import load_trained_weights
from ..method.chunks import Chunk, TopReadout, chunk_bounds, make_readout_adapter, planned_bounds
from ..config.run_config import DataConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig
from ..train.evaluation import EvalBatch, ReadoutScore, eval_batches
from ..models.loading import load_causal_lm
from ..models.partial_load import Keep
from .sampling_error import wilson
from ..train.run_setup import build_run_setup
from ..train.threads import DEFAULT_THREADS, threads_for

CURVES = ("lens", "tuned", "top")  # frozen head, fitted translator, the model's own top layers
FULL_SOFTMAX_MAX_VOCAB = 8192  # above this, translators are fitted on the answer tokens' softmax


@dataclass(kw_only=True, frozen=True)
class TranslatorFit:
    kind: str = "affine"  # affine | mlp (see chunks.make_readout_adapter)
    examples: int = 256  # training examples whose answer rows the fit uses
    steps: int = 150
    lr: float = 1e-3
    seed: int = 0


def num_layers(chunks: list[Chunk]) -> int:
    return sum(c.layer_range[1] - c.layer_range[0] for c in chunks)


@torch.no_grad()
def _layer_states(chunks: list[Chunk], batch: EvalBatch) -> Iterator[torch.Tensor]:
    """The hidden state [B, S, d] after every layer, in depth order."""
    x = batch.mb["input_ids"]
    for chunk in chunks:
        for h in chunk.layer_outputs(x, batch.mb["attention_mask"]):
            yield h
        x = h


def _layer_rows(chunks: list[Chunk], batch: EvalBatch) -> list[torch.Tensor]:
    """The hidden state's rows at Ω after every layer, in depth order: L tensors [|Ω|, d]."""
    return [h[batch.omega] for h in _layer_states(chunks, batch)]


def _head(chunks: list[Chunk]) -> Callable[[torch.Tensor], torch.Tensor]:
    last = chunks[-1]  # every chunk's norm + head are the same frozen weights
    return lambda rows: last.lm_head(last.norm(rows)).float()


@torch.no_grad()
def lens_scores(chunks: list[Chunk], split, label_first_tokens: torch.Tensor, *, limit: int = 0,
                translators: list[nn.Module] | None = None,
                progress: Callable[[int, int], None] | None = None) -> list[dict[str, float]]:
    """One metrics dict per layer (depth order), read through the frozen head (+ translators)."""
    head = _head(chunks)
    scores = [ReadoutScore() for _ in range(num_layers(chunks))]
    batches = eval_batches(split, limit=limit)
    for i, batch in enumerate(batches):
        for layer, rows in enumerate(_layer_rows(chunks, batch)):
            if translators is not None:
                rows = translators[layer](rows)
            scores[layer].add(head(rows), batch, label_first_tokens)
        if progress is not None:
            progress(i + 1, len(batches))
    return [{"layer": layer + 1, **s.metrics()} for layer, s in enumerate(scores)]


def pretrained_top(model: str, *, layers: int, top: int) -> TopReadout:
    """The model's own top `top` decoder layers as loaded (no LoRA, frozen): what `top:N` reads through."""
    base = load_causal_lm(model, keep=Keep(first=layers - top, end=layers, embedding=False))
    copies = nn.ModuleDict({str(i): base.model.layers[i] for i in range(layers - top, layers)})
    copies.requires_grad_(False)
    return TopReadout(copies, config=base.config, rotary=base.model.rotary_emb)


@torch.no_grad()
def top_lens_scores(chunks: list[Chunk], split, label_first_tokens: torch.Tensor, top: TopReadout, *,
                    limit: int = 0, progress: Callable[[int, int], None] | None = None) -> list[dict[str, float]]:
    """One metrics dict per layer l = 1 .. L − N: the hidden state after layer l read through `top`'s
    N layers, then the frozen norm + head."""
    head = _head(chunks)
    reach = num_layers(chunks) - len(top.layers)
    scores = [ReadoutScore() for _ in range(reach)]
    batches = eval_batches(split, limit=limit)
    for i, batch in enumerate(batches):
        for layer, h in zip(range(reach), _layer_states(chunks, batch)):
            scores[layer].add(head(top(h, batch.mb["attention_mask"])[batch.omega]), batch, label_first_tokens)
        if progress is not None:
            progress(i + 1, len(batches))
    return [{"layer": layer + 1, **s.metrics()} for layer, s in enumerate(scores)]


def fit_translators(chunks: list[Chunk], split, answer_vocab: torch.Tensor, fit: TranslatorFit,
                    progress: Callable[[int, int], None] | None = None) -> list[nn.Module]:
    """One translator per layer, fitted to the training rows at Ω with the base model frozen."""
    hidden = chunks[0].config.hidden_size
    batches = eval_batches(split, limit=fit.examples)
    per_layer: list[list[torch.Tensor]] = [[] for _ in range(num_layers(chunks))]
    targets = []
    for batch in batches:
        for layer, rows in enumerate(_layer_rows(chunks, batch)):
            per_layer[layer].append(rows)
        targets.append(batch.targets)
    target = torch.cat(targets)
    last = chunks[-1]
    vocab = last.lm_head.weight.shape[0]
    restricted = vocab > FULL_SOFTMAX_MAX_VOCAB
    if restricted:  # the softmax over the answer tokens only: their head rows, targets re-indexed
        position = {int(t): i for i, t in enumerate(answer_vocab)}
        target = torch.tensor([position[int(t)] for t in target])
        rows_of_head = last.lm_head.weight[answer_vocab]
        head = lambda rows: (last.norm(rows) @ rows_of_head.T).float()  # noqa: E731
    else:
        head = _head(chunks)
    translators = []
    for layer, rows in enumerate(per_layer):
        x = torch.cat(rows)
        torch.manual_seed(fit.seed * 1000 + layer)
        translator = make_readout_adapter(fit.kind, hidden, 64, seed=fit.seed, chunk=layer)
        optimizer = torch.optim.Adam(translator.parameters(), lr=fit.lr)
        for _ in range(fit.steps):
            logits = head(translator(x))
            loss = nn.functional.cross_entropy(logits, target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        translator.eval()
        for p in translator.parameters():
            p.requires_grad_(False)
        translators.append(translator)
        if progress is not None:
            progress(layer + 1, len(per_layer))
    return translators


def majority_rate(split, limit: int = 0) -> float:
    """The label accuracy of always answering the most frequent eval label (the chance line)."""
    labels = split.label_index if limit <= 0 else split.label_index[:limit]
    return float(torch.bincount(labels).max()) / max(1, labels.numel())


def suggest_boundaries(label_accuracy: list[float], *, stages: int, chance: float,
                       examples: int | None = None) -> dict[str, object]:
    """Where to cut K chunks so that every chunk ends where the head can read. A layer is readable
    when its label accuracy has covered at least half the way from chance to the last layer's and, measured
    on `examples` examples, its 95 % interval clears the majority class's (sampling_error.py): a blip
    within sampling error suggests no cut. Each cut is the readable layer nearest to where the even split
    would end that chunk. `boundaries` is in `--boundaries` terms: the 0-based first layer of chunks
    2..K, which is the 1-based number of the layer the previous chunk ends with. `examples` None: the
    accuracies' sample size is unknown, and no interval is asked for."""
    depth = len(label_accuracy)
    last = label_accuracy[-1]
    if stages < 2:
        return {"boundaries": [], "readable_from": None, "why": "one chunk: nothing to cut"}
    floor = None if examples is None else wilson(chance, examples)  # the majority class's interval
    if floor is not None:
        reads = wilson(last, examples)
        if not reads.clears(floor):  # the last layer itself is not clearly above chance
            how = "within sampling error" if reads.overlaps(floor) else "below it"
            return {"boundaries": None, "readable_from": None,
                    "why": f"last layer {reads.text()} vs majority class {floor.text()} on {examples} examples: "
                           f"{how}, no cut suggested"}
    elif last <= chance + 0.02:
        return {"boundaries": None, "readable_from": None,
                "why": f"even the last layer reads at chance ({last:.2f} vs {chance:.2f}): fine-tune first"}
    bar = chance + 0.5 * (last - chance)

    def clears(accuracy: float) -> bool:
        return accuracy >= bar and (floor is None or wilson(accuracy, floor.n).clears(floor))

    readable = [layer for layer in range(1, depth) if clears(label_accuracy[layer - 1])]
    sampled = "" if examples is None else f", each beyond its 95 % interval on {examples} examples"
    if len(readable) < stages - 1:
        return {"boundaries": None, "readable_from": readable[0] if readable else None,
                "why": f"only {len(readable)} layer(s) before the last read above {bar:.2f}{sampled}; "
                       f"{stages} chunks cannot all end readable"}
    even = [start for start, _ in chunk_bounds(depth, stages)[1:]]
    cuts: list[int] = []
    for i, target in enumerate(even):
        remaining = stages - 2 - i  # cuts still to place after this one
        options = [layer for layer in readable if (not cuts or layer > cuts[-1])
                   and len([r for r in readable if r > layer]) >= remaining]
        cuts.append(min(options, key=lambda layer: (abs(layer - target), layer)))
    first = readable[0]
    if examples is None:
        return {"boundaries": cuts, "readable_from": first,
                "why": f"layers {first}+ read label accuracy >= {bar:.2f} (majority class {chance:.2f})"}
    return {"boundaries": cuts, "readable_from": first,
            "why": f"layers {first}+ read label accuracy >= {bar:.2f}{sampled} (layer {first}: "
                   f"{wilson(label_accuracy[first - 1], examples).text()} vs majority class {floor.text()})"}


# a `(label) -> (done, total) callback` factory: the terminal's lines, the dashboard's bar, or nothing
Progress = Callable[[str], Callable[[int, int], None] | None]


def no_progress(label: str) -> None:
    return None


def lens_config(*, model: str, dataset: str, seq_len: int, method: str, stages: int, steps: int, eval_size: int,
                out: Path | None, boundaries: tuple[int, ...] | None, alpha: tuple[float, ...] = ObjectiveConfig.alpha,
                consistency: str = ObjectiveConfig.consistency, lr: float = TrainConfig.lr,
                seed: int = TrainConfig.seed, threads: int = DEFAULT_THREADS) -> RunConfig:
    """The reference-trainer config whose chunks the lens reads (and, with `out`, a fine-tune of
    `steps` steps by `method` to read after)."""
    return RunConfig(
        model=ModelConfig(model=model, boundaries=boundaries),
        data=DataConfig(dataset=dataset, seq_len=seq_len, eval_size=eval_size),
        objective=ObjectiveConfig(alpha=alpha, consistency=consistency),
        train=TrainConfig(runtime="reference", method=method, stages=stages, batch=8, microbatches=4,
                          steps=max(1, steps), lr=lr, seed=seed, threads=threads_for(threads)),
        out=None if out is None else str(out),
    )


def measure_condition(cfg: RunConfig, *, run_dir: Path | None, fit: TranslatorFit | None,
                      eval_size: int, progress: Progress = no_progress, top: bool = False) -> dict[str, Any]:
    """Lens (and tuned-lens, and with `top` the top:last lens) curves of one set of weights: the
    pretrained model or a run's."""
    setup = build_run_setup(cfg)
    if run_dir is not None:
        load_trained_weights(setup.chunks, run_dir)
    name = "pretrained" if run_dir is None else cfg.train.method
    t0 = time.perf_counter()
    lens = lens_scores(setup.chunks, setup.eval, setup.label_first_tokens, limit=eval_size,
                       progress=progress(f"{name}: lens over eval batches"))
    result: dict[str, Any] = {"lens": lens}
    if fit is not None:
        answers = torch.unique(torch.cat([s.labels[s.labels != -100] for s in (setup.train, setup.eval)]))
        translators = fit_translators(setup.chunks, setup.train, answers, fit,
                                      progress=progress(f"{name}: translators fitted (of {len(lens)} layers)"))
        result["tuned"] = lens_scores(setup.chunks, setup.eval, setup.label_first_tokens, limit=eval_size,
                                      translators=translators)
        result["answer_vocab"] = int(answers.numel())
    layers = num_layers(setup.chunks)
    first, end = planned_bounds(layers, cfg.train.stages, boundaries=cfg.model.boundaries, speeds=cfg.train.speeds,
                                readout=cfg.model.readout, method=cfg.train.method)[-1]
    if top and end - first < layers:  # K = 1: no chunk before the last reads through a top
        readout = pretrained_top(cfg.model.model, layers=layers, top=end - first)
        result["top"] = top_lens_scores(setup.chunks, setup.eval, setup.label_first_tokens, readout, limit=eval_size,
                                        progress=progress(f"{name}: through the top {end - first} layers"))
        result["top_layers"] = end - first
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["chance"] = majority_rate(setup.eval, eval_size)
    return result


def readability_summary(conditions: dict[str, Any], *, stages: int,
                        boundaries: tuple[int, ...] | None) -> dict[str, Any]:
    """From measured conditions (name -> `measure_condition`'s dict): the depth, the majority class's
    rate, the first layers of chunks 2..K and, per condition and curve, where to cut."""
    first = next(iter(conditions.values()))
    layers, chance = len(first["lens"]), first["chance"]
    cuts = [start for start, _ in chunk_bounds(layers, stages, boundaries)[1:]]
    suggestions = {name: {curve: suggest_boundaries([r["label_accuracy"] for r in c[curve]], stages=stages,
                                                    chance=chance, examples=c[curve][-1].get("examples"))
                          for curve in ("lens", "tuned") if curve in c}
                   for name, c in conditions.items()}
    return {"layers": layers, "chance": chance, "chunk_boundaries": cuts, "conditions": conditions,
            "suggestions": suggestions}


def measured_curves(summary: dict[str, Any]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(condition, "lens" or "tuned", its score per layer) of every curve measured."""
    return [(name, curve, c[curve]) for name, c in summary["conditions"].items() for curve in CURVES if curve in c]
