"""Examples -> fixed-shape tensors for a causal LM, and deterministic micro-batches.

Layout of one row (length ``seq_len``)::

    [BOS] text-tokens  tokens("\\n" + cue)  tokens(" " + label_word)  pad pad ...
    |<---------------- prompt, length P ---------------->|<-- answer, A -->|

The prompt is tokenised in two pieces, tokens(text) + tokens("\\n" + cue).
For byte-level BPE (GPT-2 style) this equals tokens(text + "\\n" + cue)
because the pre-tokenizer splits at the newline; the split is what lets us
truncate the text without touching the cue.  The answer is tokenised on its
own, so its ids are exactly ``label_tokens(...)`` for that label (no EOS).

``labels`` is already shifted: ``labels[:, i]`` is the token that the logits at
position ``i`` must predict.  It is set only on the answer mask
Omega = {P-1, ..., P+A-2} (the positions whose NEXT token is an answer token)
and is -100 everywhere else (prompt and padding).

A response example (prompt -> response, data/examples.py) has the same layout with its own answer,
tokens(" " + response) + EOS; with the tokenizer's chat template, BOS and the cue are replaced by the
template's text before and after the prompt (the user's turn and the assistant's opening), and the answer
is tokens(response) + EOS. A response longer than the row allows is cut at its end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from .examples import Example
from .said import MAX_LINE, word as quoted

CHAT_MARK = "\x00prompt\x00"  # where the prompt goes in the chat template's text

IGNORE_INDEX = -100
MIN_TEXT_TOKENS = 4


# eq=False: the generated __eq__ would compare tensors, which has no single truth value.
@dataclass(kw_only=True, frozen=True, eq=False)
class EncodedSplit:
    input_ids: torch.Tensor  # [N, S] long
    attention_mask: torch.Tensor  # [N, S] long, 1 = real token (prompt + answer), 0 = padding
    labels: torch.Tensor  # [N, S] long, shifted next-token targets on Omega, -100 elsewhere
    label_index: torch.Tensor  # [N] long

    def __post_init__(self) -> None:
        n, s = self.input_ids.shape
        assert self.attention_mask.shape == self.labels.shape == (n, s), "mask/labels shape differs from input_ids"
        assert self.label_index.shape == (n,), "label_index must be [N]"

    def __len__(self) -> int:
        return self.input_ids.shape[0]


@dataclass(kw_only=True, frozen=True)
class LabelTokens:
    token_ids: tuple[tuple[int, ...], ...]  # per label word, the ids of " " + word as tokenised after the cue


def label_tokens(tokenizer: PreTrainedTokenizerBase, label_words: Sequence[str]) -> LabelTokens:
    """Token ids of each answer ``" " + word``: non-empty, and their first tokens distinct — label accuracy
    picks among the first tokens, so two answers that start alike could never be told apart."""
    if not label_words:
        raise ValueError("label_words is empty")
    ids = tokenizer([" " + w for w in label_words], add_special_tokens=False)["input_ids"]
    token_ids = tuple(tuple(int(t) for t in row) for row in ids)
    for word, row in zip(label_words, token_ids):
        if not row:
            raise ValueError(f"label word {quoted(word)} tokenises to no tokens")
    _refuse_shared_first_tokens(tokenizer, label_words, [row[0] for row in token_ids])
    return LabelTokens(token_ids=token_ids)


def label_first_tokens(tokenizer: PreTrainedTokenizerBase, label_words: Sequence[str]) -> list[int]:
    """The first token of each answer: label accuracy picks among them (distinct: `label_tokens`)."""
    return [ids[0] for ids in label_tokens(tokenizer, label_words).token_ids]


CLASH_CHARS = 12  # of a word in the clash refusal, which stays one line of at most MAX_LINE characters


def _refuse_shared_first_tokens(tokenizer: PreTrainedTokenizerBase, words: Sequence[str], firsts: list[int]) -> None:
    """One line with the counts, whatever the number of classes: the first words that clash, the rest counted."""
    by_token: dict[int, list[str]] = {}
    for word, token in zip(words, firsts):
        by_token.setdefault(token, []).append(word)
    clashes = [(token, alike) for token, alike in by_token.items() if len(alike) > 1]
    if not clashes:
        return
    token, alike = clashes[0]
    a, b, start = (quoted(x, CLASH_CHARS) for x in (alike[0], alike[1], tokenizer.convert_ids_to_tokens(token)))
    first = (f"{a} and {b} both start with the token {start}" if len(alike) == 2 else
             f"{a}, {b} and {len(alike) - 2:,} more all start with the token {start}")
    more = f" (and {len(clashes) - 1:,} more groups)" if len(clashes) > 1 else ""
    n, distinct = len(words), len(by_token)
    vocabulary = f" (a vocabulary of {len(tokenizer):,})" if n > len(tokenizer) else ""
    counts = (f"{n:,} classes but only {distinct:,} distinct first token{'s' * (distinct != 1)} under this model's "
              f"tokenizer{vocabulary}: label words must start with distinct tokens")
    fix = "rename the classes so that their first words differ"
    line = f"{counts}; {first}{more}; {fix}"
    raise ValueError(line if len(line) <= MAX_LINE else f"{counts}; {fix}")


def _pad_id(tokenizer: PreTrainedTokenizerBase) -> int:
    for tid in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if tid is not None:
            return int(tid)
    return 0


def prompt_frame(tokenizer: PreTrainedTokenizerBase, cue: str, *, chat_template: bool) -> tuple[list[int], list[int]]:
    """The tokens before and after a prompt's text: (BOS, tokens("\\n" + cue)), or the chat template's
    user turn around the prompt and the assistant's opening after it."""
    if chat_template:
        text = tokenizer.apply_chat_template([{"role": "user", "content": CHAT_MARK}], add_generation_prompt=True,
                                             tokenize=False)
        before, mark, after = text.partition(CHAT_MARK)
        assert mark, "the chat template kept the user's text"
        ids = tokenizer([before, after], add_special_tokens=False)["input_ids"]
        return [int(t) for t in ids[0]], [int(t) for t in ids[1]]
    bos = [] if tokenizer.bos_token_id is None else [int(tokenizer.bos_token_id)]
    return bos, [int(t) for t in tokenizer("\n" + cue, add_special_tokens=False)["input_ids"]]


def response_answers(tokenizer: PreTrainedTokenizerBase, responses: Sequence[str], *,
                     chat_template: bool) -> list[list[int]]:
    """Each response's answer tokens: its text (after a space, without the chat template) and EOS."""
    eos = [] if tokenizer.eos_token_id is None else [int(tokenizer.eos_token_id)]
    texts = [r if chat_template else " " + r for r in responses]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    return [[int(t) for t in row] + eos for row in ids]


def uses_chat_template(tokenizer: PreTrainedTokenizerBase, wanted: bool) -> bool:
    """The chat template applies to a response task when the run wants it and the tokenizer has one."""
    return wanted and bool(getattr(tokenizer, "chat_template", None))


def encode_split(
    examples: Sequence[Example],
    *,
    tokenizer: PreTrainedTokenizerBase,
    cue: str,
    label_words: Sequence[str],
    seq_len: int,
    chat_template: bool = False,
) -> EncodedSplit:
    """Encode ``examples`` as ``[N, seq_len]`` tensors (right-padded; see module docstring).

    Too-long prompts lose the END of their text: the beginning is kept (the
    needle task states its key early), and BOS, the cue and the answer always
    survive.  For a classification the text budget is the same for every label
    (it reserves the LONGEST answer), so where a prompt gets cut never depends
    on its label. `chat_template` applies to response examples only.
    """
    responses = [ex for ex in examples if ex.response is not None]
    if responses and len(responses) != len(examples):
        raise ValueError("a split mixes labelled examples and responses")
    if responses:
        chat_template = uses_chat_template(tokenizer, chat_template)
        head, tail = prompt_frame(tokenizer, cue, chat_template=chat_template)
        answer_room = seq_len - len(head) - len(tail) - MIN_TEXT_TOKENS
        if answer_room < 1:
            raise ValueError(f"seq_len {seq_len} is too small: the prompt's frame takes {len(head) + len(tail)} "
                             f"tokens and at least {MIN_TEXT_TOKENS} text tokens and one answer token are needed "
                             f"(seq_len >= {len(head) + len(tail) + MIN_TEXT_TOKENS + 1})")
        answers = [a[:answer_room] for a in response_answers(tokenizer, [ex.response for ex in examples],
                                                              chat_template=chat_template)]
    else:
        label_answers = label_tokens(tokenizer, label_words).token_ids
        head, tail = prompt_frame(tokenizer, cue, chat_template=False)
        fixed = len(head) + len(tail) + max(len(a) for a in label_answers)
        if seq_len - fixed < MIN_TEXT_TOKENS:
            raise ValueError(
                f"seq_len {seq_len} is too small: BOS + cue + longest answer take {fixed} tokens "
                f"and at least {MIN_TEXT_TOKENS} text tokens are needed (seq_len >= {fixed + MIN_TEXT_TOKENS})"
            )
        for i, ex in enumerate(examples):
            if not 0 <= ex.label < len(label_answers):
                raise ValueError(f"example {i}: label {ex.label} is out of range for {len(label_answers)} label words")
        longest = max(len(a) for a in label_answers)
        answers = [list(label_answers[ex.label]) for ex in examples]
    if not head and not tail:  # an empty text would leave nothing to predict the answer from
        raise ValueError(f"cue {cue!r} tokenises to no tokens and the tokenizer has no BOS token")

    n = len(examples)
    texts = tokenizer(
        [ex.text for ex in examples], add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False
    )["input_ids"] if n else []
    pad = _pad_id(tokenizer)
    rows, prompt_len, answer_len = [], [], []
    for answer, text in zip(answers, texts):
        budget = seq_len - len(head) - len(tail) - (len(answer) if responses else longest)
        row = head + list(text[:budget]) + tail + answer
        prompt_len.append(len(row) - len(answer))
        answer_len.append(len(answer))
        rows.append(row + [pad] * (seq_len - len(row)))

    input_ids = torch.tensor(rows, dtype=torch.long).reshape(n, seq_len)
    p = torch.tensor(prompt_len, dtype=torch.long).reshape(n, 1)
    a = torch.tensor(answer_len, dtype=torch.long).reshape(n, 1)
    pos = torch.arange(seq_len).reshape(1, seq_len)
    attention_mask = (pos < p + a).long()
    omega = (pos >= p - 1) & (pos < p - 1 + a)
    shifted = torch.full_like(input_ids, IGNORE_INDEX)
    shifted[:, :-1] = input_ids[:, 1:]
    labels = shifted.masked_fill(~omega, IGNORE_INDEX)
    label_index = torch.tensor([ex.label for ex in examples], dtype=torch.long)
    return EncodedSplit(input_ids=input_ids, attention_mask=attention_mask, labels=labels, label_index=label_index)


def answer_positions(labels: torch.Tensor) -> torch.Tensor:
    """The positions of one encoded row (`labels` [T]) whose next token is the answer's (Ω: labels are
    shifted, so position P-1 predicts the answer's first token)."""
    return (labels != IGNORE_INDEX).nonzero()[:, 0]


def prompt_ids(input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """An encoded row's prompt: everything up to and including the position that predicts the answer's
    first token — what a model is given to write the answer itself."""
    return input_ids[: int(answer_positions(labels)[0]) + 1]


def steps_per_epoch(n_examples: int, batch: int) -> int:
    """Full batches per epoch; the last ``n_examples % batch`` of each permutation are skipped."""
    return n_examples // batch


def microbatches(
    split: EncodedSplit, *, seed: int, step: int, batch: int, microbatches: int
) -> list[dict[str, torch.Tensor]]:
    """The ``step``-th batch of ``batch`` examples, cut into ``microbatches`` equal parts.

    Epoch e uses ``torch.randperm(N)`` from a generator seeded with ``seed + e``
    and yields ``N // batch`` whole batches from it; the leftover
    ``N % batch`` examples of that permutation are skipped, so a batch never
    straddles two epochs (the leftovers differ every epoch, so nothing is
    skipped for good).  When ``batch`` divides N this is ``epoch = step * batch
    // N``.  The result depends only on (split, seed, step, batch, microbatches).
    """
    n = len(split)
    if batch < 1 or microbatches < 1:
        raise ValueError(f"batch and microbatches must be >= 1, got {batch} and {microbatches}")
    if batch % microbatches != 0:
        raise ValueError(f"batch {batch} is not divisible by microbatches {microbatches}")
    if batch > n:
        raise ValueError(f"batch {batch} is larger than the split ({n} examples)")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    per_epoch = steps_per_epoch(n, batch)
    epoch, within = divmod(step, per_epoch)
    generator = torch.Generator().manual_seed(seed + epoch)
    index = torch.randperm(n, generator=generator)[within * batch : (within + 1) * batch]
    size = batch // microbatches
    fields = {
        "input_ids": split.input_ids,
        "attention_mask": split.attention_mask,
        "labels": split.labels,
        "label_index": split.label_index,
    }
    chunks = {k: v.index_select(0, index).split(size) for k, v in fields.items()}
    return [{k: chunks[k][j] for k in fields} for j in range(microbatches)]
