"""`zerolock generate` and the dashboard's Try it: what the fine-tuned model says, beside what its base model
says, for a few prompts.

A prompt is put to both models the way the run's task puts its texts (`data.encode_split`: BOS, the text cut
to the run's sequence length, then a newline and the task's cue; or a prompt -> response run's chat template).
On a classification run each model answers with the label word it scores highest at the answer's first
position, among the label words' first tokens: the rule the engine's label accuracy scores by
(train/evaluation.py), exact and one forward pass per prompt, and an eval row's answer is right or wrong
against its label. A prompt -> response run answers greedily (`do_sample=False`, so the same run and prompt
always give the same words). The fine-tuned model is the run's LoRA merged into a copy of the base in memory
(`trained_model.load_trained_model`); nothing is written.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torch is imported where it is used: `zerolock --help` reads DEFAULT_NEW_TOKENS and must stay light
DEFAULT_NEW_TOKENS = 8
MAX_NEW_TOKENS = 256  # a look at the model, not a long text: the tiny model's window is 256 positions
MAX_EVAL_ROWS = 200


@dataclass(kw_only=True, frozen=True)
class GenerateRequest:
    prompts: tuple[str, ...] = ()  # texts of the user's (the task's cue is added to each)
    eval_rows: int = 0  # and the first N rows of the run's eval split, with their expected answers
    max_new_tokens: int = DEFAULT_NEW_TOKENS  # a response run's; a classification run answers one label word

    def __post_init__(self) -> None:
        if not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            raise ValueError(f"new tokens: {self.max_new_tokens} is not in 1..{MAX_NEW_TOKENS}")
        if not 0 <= self.eval_rows <= MAX_EVAL_ROWS:
            raise ValueError(f"eval rows: {self.eval_rows} is not in 0..{MAX_EVAL_ROWS}")
        if any(not p.strip() for p in self.prompts):
            raise ValueError("a prompt is empty: give some text")
        if not self.prompts and not self.eval_rows:
            raise ValueError("nothing to ask: give a prompt, or a number of eval rows")


@dataclass(kw_only=True, frozen=True)
class Answer:
    prompt: str  # the text as given (or the eval row's), without the cue
    base: str  # the base model's answer: the label word it scores highest, or its greedy continuation
    tuned: str  # the fine-tuned model's
    expected: str | None  # an eval row's label word or response; None for a prompt of the user's
    picked: bool = False  # the answers are label words picked among the task's (a classification run)

    def right(self, answer: str) -> bool | None:
        """Whether a picked label is the expected one; None where there is nothing to judge (a prompt of
        the user's, or a free answer, which a cut at its token budget would misjudge)."""
        return answer == self.expected if self.picked and self.expected is not None else None

    def marked(self, answer: str) -> str:
        """A model's answer, and ✓ / ✗ where it is a label judged against the expected one."""
        right = self.right(answer)
        return answer.strip() + ("" if right is None else " ✓" if right else " ✗")


@dataclass(kw_only=True, frozen=True)
class Tally:
    """Correct answers of each model over the answers that have an expected label."""
    tuned: int
    base: int
    rows: int


def tally(answers: list[Answer]) -> Tally | None:
    """The counts of right answers; None unless the answers were picked labels (a classification run)."""
    if not any(a.picked for a in answers):
        return None
    judged = [a for a in answers if a.right(a.tuned) is not None]
    return Tally(tuned=sum(bool(a.right(a.tuned)) for a in judged), base=sum(bool(a.right(a.base)) for a in judged),
                 rows=len(judged))


def generate_answers(run: str | Path, request: GenerateRequest) -> list[Answer]:
    from ..data import Example, encode_split, load_data
    from ..data.encoding import label_first_tokens, prompt_ids
    from ..models.loading import load_causal_lm
    from ..train.run_setup import DATA_SEED
    from .trained_model import load_trained_model

    trained = load_trained_model(run)  # refuses a directory without a trained model before anything else
    cfg, tokenizer = trained.cfg, trained.tokenizer
    task = load_data(cfg.data, seed=DATA_SEED)  # the run's own file and fields
    rows = task.eval[:request.eval_rows]
    if len(rows) < request.eval_rows:
        raise ValueError(f"eval rows: the run's eval split has {len(task.eval)} rows, not {request.eval_rows}")
    # a prompt of the user's has no answer: any label word (or an empty response) encodes the same prompt
    asked = [Example(text=p, label=0) if task.label_words else Example(text=p, response="") for p in request.prompts]
    examples = asked + list(rows)
    enc = encode_split(examples, tokenizer=tokenizer, cue=task.cue, label_words=task.label_words,
                       seq_len=cfg.data.seq_len, chat_template=cfg.data.chat_template)
    base, tuned = load_causal_lm(cfg.model.model), trained.peft_model.merge_and_unload()
    firsts = label_first_tokens(tokenizer, task.label_words) if task.label_words else []

    def answer(model, ids: torch.Tensor) -> str:
        if firsts:
            return _pick(model, ids, firsts, task.label_words)
        return _greedy(model, tokenizer, ids, request.max_new_tokens)

    answers = []
    for i, ex in enumerate(examples):
        ids = prompt_ids(enc.input_ids[i], enc.labels[i])
        answers.append(Answer(prompt=ex.text, base=answer(base, ids), tuned=answer(tuned, ids),
                              expected=None if i < len(asked) else
                              ex.response if ex.response is not None else task.label_words[ex.label],
                              picked=bool(firsts)))
    return answers


def _pick(model, ids: torch.Tensor, firsts: list[int], words: tuple[str, ...]) -> str:
    """The label word whose first token the model scores highest after the prompt (label accuracy's rule)."""
    import torch

    with torch.no_grad():
        logits = model(input_ids=ids[None], attention_mask=torch.ones_like(ids)[None]).logits[0, -1]
    return words[int(logits[torch.tensor(firsts)].argmax())]


def _greedy(model, tokenizer, ids: torch.Tensor, max_new_tokens: int) -> str:
    import torch

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with torch.no_grad():
        out = model.generate(input_ids=ids[None], attention_mask=torch.ones_like(ids)[None], do_sample=False,
                             max_new_tokens=max_new_tokens, pad_token_id=pad)
    return tokenizer.decode(out[0, ids.shape[0]:], skip_special_tokens=True)
