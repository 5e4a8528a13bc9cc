"""Synthetic long-range retrieval task ("needle").

Everything here is SYNTHETIC.  Each text states a key colour early ("The
secret colour is blue."), then a variable number of filler sentences, then a
question; the answer after the cue ``"Answer:"`` is the key colour.

What it stresses: with pipeline stages trained on local objectives, the final
head only sees the last chunks' positions directly, so the task asks whether
the hidden states of the EARLY tokens stay readable by the final head over a
long context.  Shortcuts are closed on purpose: fillers mention two "decoy"
colours (never the key) in non-key roles, often several times, so neither
"most frequent colour" nor "only colour mentioned" finds the answer; only the
role ("the secret colour is ...") does.  Some fillers are news headlines from
the topics generator, so the vocabulary is shared with that task.
"""

from __future__ import annotations

import random

from .examples import Example, TaskData
from .topics import topics_headline

NEEDLE_LABEL_WORDS = ("red", "blue", "green", "yellow", "purple", "orange", "black", "white")
NEEDLE_CUE = "Answer:"

P_COLOUR_FILLER = 0.35
P_NEWS_FILLER = 0.2

_KEY_TEMPLATES = (
    "The secret colour is {c}.",
    "Remember this: the secret colour is {c}.",
    "Please remember that the secret colour is {c}.",
    "The secret colour for today is {c}.",
    "Listen carefully, because the secret colour is {c}.",
)
_QUESTIONS = (
    "What is the secret colour?",
    "Which colour was given as the secret colour?",
    "Do you remember the secret colour?",
    "Now, what was the secret colour?",
)
_SUBJECTS = (
    "my neighbour", "the teacher", "a farmer", "the old man", "our driver", "the librarian",
    "a young woman", "the baker", "the mayor", "my cousin", "the nurse", "a tourist",
    "the postman", "the cook", "the gardener", "a student",
)
_VERBS = (
    "visited", "cleaned", "repaired", "sold", "found", "borrowed", "moved", "closed",
    "opened", "carried", "photographed", "described", "forgot", "ordered",
)
_THINGS = (
    "the bicycle", "a wooden chair", "the kitchen window", "an old map", "the garden gate",
    "a basket of apples", "the piano", "a small boat", "the library book", "a pair of boots",
    "the lamp", "a kite", "the fence", "a teapot",
)
_PLACES = (
    "the market", "the station", "the harbour", "the park", "the village hall", "the museum",
    "the bakery", "the bridge", "the school", "the farm", "the river", "the hospital",
)
_TIMES = (
    "on Monday", "yesterday", "last spring", "early in the morning", "after lunch",
    "before the storm", "in the evening", "at noon",
)
_WEATHER = ("cold and windy", "warm", "grey", "wet", "bright and clear", "foggy")
_ITEMS = ("scarf", "umbrella", "notebook", "bucket", "kite", "blanket", "mug", "bicycle")
_VEHICLES = ("van", "car", "tractor", "bus", "truck")
_CLOTHES = ("coat", "hat", "jumper", "dress", "jacket")


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _plain_filler(rng: random.Random) -> str:
    s, v, t = rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_THINGS)
    p, when = rng.choice(_PLACES), rng.choice(_TIMES)
    return rng.choice((
        lambda: f"{_cap(s)} {v} {t} at {p} {when}.",
        lambda: f"{_cap(when)}, {s} walked to {p} and {v} {t}.",
        lambda: f"Nobody at {p} remembered who had {v} {t}.",
        lambda: f"The weather near {p} was {rng.choice(_WEATHER)} {when}.",
        lambda: f"{_cap(s)} said that {t} at {p} needed a new coat of paint.",
        lambda: f"The train to {p} was late again {when}, so {s} waited.",
    ))()


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _colour_filler(rng: random.Random, colour: str) -> str:
    s, p, when = rng.choice(_SUBJECTS), rng.choice(_PLACES), rng.choice(_TIMES)
    return rng.choice((
        lambda: f"{_cap(s)} bought {_a(colour)} {rng.choice(_ITEMS)} at {p}.",
        lambda: f"{_cap(rng.choice(_THINGS))} near {p} had been painted {colour}.",
        lambda: f"{_cap(_a(colour))} {rng.choice(_VEHICLES)} was parked outside {p} {when}.",
        lambda: f"{_cap(s)} wore {_a(colour)} {rng.choice(_CLOTHES)} to {p}.",
        lambda: f"The flowers by {p} were mostly {colour} this year.",
        lambda: f"{_cap(s)} said {colour} was their favourite colour.",
    ))()


def filler_sentence(rng: random.Random, decoys: tuple[str, ...] = ()) -> str:
    """One plausible filler sentence; may mention one of ``decoys``."""
    u = rng.random()
    if decoys and u < P_COLOUR_FILLER:
        return _colour_filler(rng, rng.choice(decoys))
    if u < P_COLOUR_FILLER + P_NEWS_FILLER:
        headline = topics_headline(rng, rng.randrange(4))
        return headline if headline.endswith(".") else headline + "."
    return _plain_filler(rng)


def needle_passage(rng: random.Random, label: int, *, filler_sentences: tuple[int, int] = (6, 14)) -> str:
    """Key statement near the start, fillers, then the question (no answer)."""
    assert 0 <= label < len(NEEDLE_LABEL_WORDS), label
    key = NEEDLE_LABEL_WORDS[label]
    decoys = tuple(rng.sample([c for c in NEEDLE_LABEL_WORDS if c != key], 2))
    fillers = [filler_sentence(rng, decoys) for _ in range(rng.randint(*filler_sentences))]
    lead = min(rng.choice((0, 0, 1, 2)), len(fillers))  # "early", not always first
    parts = fillers[:lead] + [rng.choice(_KEY_TEMPLATES).format(c=key)] + fillers[lead:]
    return " ".join(parts + [rng.choice(_QUESTIONS)])


def _draw(rng: random.Random, n: int, filler_sentences: tuple[int, int], exclude: frozenset[str]) -> list[Example]:
    labels = [i % len(NEEDLE_LABEL_WORDS) for i in range(n)]
    rng.shuffle(labels)
    out = []
    for label in labels:
        text = needle_passage(rng, label, filler_sentences=filler_sentences)
        while text in exclude:
            text = needle_passage(rng, label, filler_sentences=filler_sentences)
        out.append(Example(text=text, label=label))
    return out


TRAIN_ROWS = 4_000  # a run's batch must fit in them (preflight checks it without drawing the task)


def make_needle(
    *, seed: int = 0, n_train: int = TRAIN_ROWS, n_eval: int = 500, filler_sentences: tuple[int, int] = (6, 14)
) -> TaskData:
    """The synthetic needle task: balanced over the 8 colours, eval texts never in train."""
    if n_train < 1 or n_eval < 1:
        raise ValueError(f"needle needs n_train >= 1 and n_eval >= 1, got {n_train} and {n_eval}")
    lo, hi = filler_sentences
    if not 0 <= lo <= hi:
        raise ValueError(f"filler_sentences must be (low, high) with 0 <= low <= high, got {filler_sentences}")
    train = _draw(random.Random(f"zerolock/needle/{seed}/train"), n_train, filler_sentences, frozenset())
    evals = _draw(random.Random(f"zerolock/needle/{seed}/eval"), n_eval, filler_sentences,
                  frozenset(e.text for e in train))
    return TaskData(
        name="needle",
        label_words=NEEDLE_LABEL_WORDS,
        cue=NEEDLE_CUE,
        train=tuple(train),
        eval=tuple(evals),
        description=(
            f"synthetic long-range retrieval (seed {seed}, {n_train} train / {n_eval} eval, "
            f"{lo}-{hi} filler sentences after an early key colour)"
        ),
    )
