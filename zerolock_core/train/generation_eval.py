"""Exact match of greedy generation for a prompt -> response task: the whole model (every chunk in order,
the last chunk's head) answers each of a few eval prompts token by token, and an answer counts when it
is the response, EOS included, token for token. Teacher-forced scores (evaluation.py) say how likely
the response is; this says what the model would actually write."""
from __future__ import annotations

import torch

from ..method.chunks import Chunk
from ..data.encoding import answer_positions, prompt_ids

GENERATION_SAMPLE = 16  # eval rows generated at the final eval (each one a forward per answer token)


@torch.no_grad()
def greedy_answer(chunks: list[Chunk], prompt: torch.Tensor, *, max_new_tokens: int,
                  eos_token_id: int | None) -> list[int]:
    """Greedy continuation of `prompt` ([P] token ids) through all chunks, at most `max_new_tokens` long,
    stopping after EOS. No KV cache: a chunk's forward runs on the whole prefix each time. (`zerolock
    generate` answers with `transformers`' own generate on the merged model instead; this one reads the
    run's chunk stack as it stands at the final eval, where no merged model exists.)"""
    ids = prompt.reshape(1, -1)
    out: list[int] = []
    for _ in range(max_new_tokens):
        mask = torch.ones_like(ids)
        h = ids
        for chunk in chunks:
            h = chunk(h, mask)
        last = torch.zeros_like(ids, dtype=torch.bool)
        last[0, -1] = True
        token = int(chunks[-1].readout(h, last, mask).argmax(-1)[0])
        out.append(token)
        if token == eos_token_id:
            break
        ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    return out


def generation_exact_match(chunks: list[Chunk], split, *, eos_token_id: int | None,
                           sample: int = GENERATION_SAMPLE) -> dict[str, float | int]:
    """Greedy generation on the first `sample` rows of an encoded split; each is given its prompt (the row
    before Ω) and as many tokens as its response has."""
    n = min(sample, split.input_ids.shape[0])
    right = 0
    for i in range(n):
        expected = split.labels[i, answer_positions(split.labels[i])].tolist()
        got = greedy_answer(chunks, prompt_ids(split.input_ids[i], split.labels[i]), max_new_tokens=len(expected),
                            eos_token_id=eos_token_id)
        right += int(got == expected)
    return {"exact_match": right / max(1, n), "exact_match_examples": n}


def final_generation(setup) -> dict[str, float | int]:
    """The final eval's generation scores of a run (run_setup.RunSetup): none for a classification."""
    if setup.task.label_words:
        return {}
    return generation_exact_match(setup.chunks, setup.eval, eos_token_id=setup.tokenizer.eos_token_id)
