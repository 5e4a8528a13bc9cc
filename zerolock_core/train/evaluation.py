"""Eval metrics of every chunk's own readout: strict accuracy, label accuracy, NLL.

* accuracy (strict): at every answer position the argmax over the whole vocabulary is the label
  token (for one-token label words: the usual "argmax equals the label token").
* label_accuracy: at the first answer position, the argmax restricted to the label words'
  first tokens (they must be distinct) picks the right label.
* token_accuracy: the argmax over the whole vocabulary is right, per answer token.
* nll: mean cross-entropy per answer token.

A response task (prompt -> response, no label words) has no label accuracy (None); its `accuracy` is the
exact match of the whole response under teacher forcing.
"""
from __future__ import annotations

from typing import Callable

import torch

from ..method.chunks import Chunk
from .stage_worker import answer_positions


class ReadoutScore:
    """Running sums of the three metrics for one readout over eval batches."""

    def __init__(self) -> None:
        self.correct = self.label_correct = self.tokens = self.right_tokens = self.examples = 0
        self.labels = 0  # the number of label words (0: a response task)
        self.nll = 0.0

    def add(self, logits: torch.Tensor, batch: "EvalBatch", label_first_tokens: torch.Tensor) -> None:
        """`logits`: [|Ω|, V] at the batch's answer positions."""
        self.nll += float(torch.nn.functional.cross_entropy(logits, batch.targets, reduction="sum"))
        self.tokens += int(batch.targets.numel())
        wrong = (logits.argmax(-1) != batch.targets).float()
        self.right_tokens += int((wrong == 0).sum())
        per_example_wrong = torch.zeros(batch.size).index_add_(0, batch.example_of_row, wrong)
        self.correct += int((per_example_wrong == 0).sum())
        self.labels = label_first_tokens.numel()
        if self.labels:
            label_logits = logits[batch.first_row][:, label_first_tokens]
            self.label_correct += int((label_logits.argmax(-1) == batch.mb["label_index"]).sum())
        self.examples += batch.size

    def metrics(self) -> dict[str, float | None]:
        n = max(1, self.examples)
        return dict(accuracy=self.correct / n, label_accuracy=self.label_correct / n if self.labels else None,
                    token_accuracy=self.right_tokens / max(1, self.tokens), nll=self.nll / max(1, self.tokens),
                    examples=self.examples, labels=self.labels)


class EvalBatch:
    """One slice of an eval split with its answer positions Ω and each example's first answer row."""

    def __init__(self, split, sl: slice) -> None:
        self.mb = {"input_ids": split.input_ids[sl], "attention_mask": split.attention_mask[sl],
                   "labels": split.labels[sl], "label_index": split.label_index[sl]}
        self.size = sl.stop - sl.start
        self.omega, self.targets = answer_positions(self.mb)
        self.example_of_row = self.omega.nonzero()[:, 0]
        first_row = torch.ones_like(self.example_of_row, dtype=torch.bool)
        first_row[1:] = self.example_of_row[1:] != self.example_of_row[:-1]
        self.first_row = first_row


def eval_batches(split, *, limit: int = 0, batch_size: int = 32) -> list[EvalBatch]:
    n = split.input_ids.shape[0] if limit <= 0 else min(limit, split.input_ids.shape[0])
    return [EvalBatch(split, slice(start, min(n, start + batch_size))) for start in range(0, n, batch_size)]


@torch.no_grad()
def evaluate_chunks(chunks: list[Chunk], split, label_first_tokens: torch.Tensor, *,
                    limit: int = 0, batch_size: int = 32,
                    progress: Callable[[int, int], None] | None = None) -> list[dict[str, float]]:
    """Runs the eval split through all chunks in order; returns one metrics dict per chunk.
    `progress(scored, total)` is called after every batch."""
    scores = [ReadoutScore() for _ in chunks]
    batches = eval_batches(split, limit=limit, batch_size=batch_size)
    total, scored = sum(b.mb["input_ids"].shape[0] for b in batches), 0
    for batch in batches:
        x = batch.mb["input_ids"]
        for chunk, score in zip(chunks, scores):
            x = chunk(x, batch.mb["attention_mask"])
            score.add(chunk.readout(x, batch.omega, batch.mb["attention_mask"]), batch, label_first_tokens)
        scored += batch.mb["input_ids"].shape[0]
        if progress is not None:
            progress(scored, total)
    return [s.metrics() for s in scores]
