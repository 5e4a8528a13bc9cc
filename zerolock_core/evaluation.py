"""Eval metrics of every chunk's own readout: strict accuracy, label accuracy, NLL.

* accuracy (strict): at every answer position the argmax over the whole vocabulary is the label
  token (for one-token label words: the usual "argmax equals the label token").
* label_accuracy: at the first answer position, the argmax restricted to the label words'
  first tokens (they must be distinct) picks the right label.
* nll: mean cross-entropy per answer token.
"""
from __future__ import annotations

import torch

from .chunks import Chunk
from .stage_worker import answer_positions


@torch.no_grad()
def evaluate_chunks(chunks: list[Chunk], split, label_first_tokens: torch.Tensor, *,
                    limit: int = 0, batch_size: int = 32) -> list[dict[str, float]]:
    """Runs the eval split through all chunks in order; returns one metrics dict per chunk."""
    n = split.input_ids.shape[0] if limit <= 0 else min(limit, split.input_ids.shape[0])
    sums = [dict(correct=0, label_correct=0, nll=0.0, tokens=0) for _ in chunks]
    for start in range(0, n, batch_size):
        sl = slice(start, min(n, start + batch_size))
        mb = {"input_ids": split.input_ids[sl], "attention_mask": split.attention_mask[sl],
              "labels": split.labels[sl], "label_index": split.label_index[sl]}
        omega, targets = answer_positions(mb)
        example_of_row = omega.nonzero()[:, 0]
        first_row = torch.ones_like(example_of_row, dtype=torch.bool)
        first_row[1:] = example_of_row[1:] != example_of_row[:-1]
        x = mb["input_ids"]
        for chunk, acc in zip(chunks, sums):
            x = chunk(x, mb["attention_mask"])
            logits = chunk.readout(x, omega)
            acc["nll"] += float(torch.nn.functional.cross_entropy(logits, targets, reduction="sum"))
            acc["tokens"] += int(targets.numel())
            wrong = (logits.argmax(-1) != targets).float()
            per_example_wrong = torch.zeros(sl.stop - sl.start).index_add_(0, example_of_row, wrong)
            acc["correct"] += int((per_example_wrong == 0).sum())
            label_logits = logits[first_row][:, label_first_tokens]
            acc["label_correct"] += int((label_logits.argmax(-1) == mb["label_index"]).sum())
    return [dict(accuracy=s["correct"] / n, label_accuracy=s["label_correct"] / n,
                 nll=s["nll"] / max(1, s["tokens"]), examples=n) for s in sums]
