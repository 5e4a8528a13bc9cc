"""Synthetic news-topic classification ("topics"), shaped like AG News.

Everything here is SYNTHETIC: headlines are generated from templates and the
word lists in ``topics_lexicon.py``; no real news text is used.  Four classes
as in AG News (World, Sports, Business, Sci/Tech).  Each text is a headline,
optionally followed by ``". "`` and a second, description-like sentence (AG
News text is title + description).

The task is deliberately not separable, so a fine-tuned model lands clearly
below 100 %:
  * every class uses the same shared vocabulary ("deal", "talks", "record"...);
  * ``P_DISTRACTOR`` of clean items carry a phrase from another class;
  * ``P_AMBIGUOUS`` of items come from mixed scenarios (a tech company's
    earnings, a club's stadium deal, a government's science budget...) whose
    label is either of two plausible classes, 50/50;
  * ``P_NOISE`` of items are a clean headline of a different class than the
    label (label noise).
The Bayes-optimal accuracy is therefore roughly 1 - P_NOISE - P_AMBIGUOUS / 2.

Determinism: all randomness comes from ``random.Random`` instances seeded
with strings derived from the seed (string seeds hash with SHA-512, so they
are stable across processes and Python runs); the global RNG is never used.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from .examples import Example, TaskData
from .topics_lexicon import (
    ATTRIBUTIONS, CLUBS, CORPORATIONS, LEXICONS, SHARED_ADJECTIVES, SHARED_CLAUSES, SHARED_NOUNS, SHARED_PAIR_VERBS,
    SHARED_VERBS_PLURAL, SHARED_VERBS_SINGULAR, SOURCES, STATES, TECH_COMPANIES, TIMES, YEARS, ClassLexicon,
)

TOPIC_LABEL_WORDS = ("World", "Sports", "Business", "Tech")
TOPIC_CUE = "Topic:"
WORLD, SPORTS, BUSINESS, TECH = range(4)

P_AMBIGUOUS = 0.15
P_NOISE = 0.04
P_DISTRACTOR = 0.3
P_SECOND_SENTENCE = 0.6
MIN_WORDS, MAX_WORDS = 8, 30


@dataclass(kw_only=True, frozen=True)
class Headline:
    """A generated text with its label and how it was made."""

    text: str
    label: int
    kind: str  # "clean" | "ambiguous" | "noise"


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _number_phrase(rng: random.Random, label: int) -> str:
    r = rng.randint
    options: tuple[Callable[[], str], ...]
    if label == WORLD:
        options = (lambda: f"at least {r(2, 90)} killed", lambda: f"{r(2, 40)} hostages freed",
                   lambda: f"{r(2, 30)},000 troops deployed", lambda: f"{r(3, 60)} villagers missing")
    elif label == SPORTS:
        options = (lambda: f"{r(1, 7)}-{r(0, 4)} win", lambda: f"{r(4, 19)}th straight win",
                   lambda: f"{r(20, 45)} points from the leader", lambda: f"{r(2, 9)} goals in {r(2, 5)} games")
    elif label == BUSINESS:
        options = (lambda: f"{r(1, 30)}.{r(0, 9)} percent", lambda: f"${r(1, 90)} billion",
                   lambda: f"{r(5, 99)} cents a share", lambda: f"{r(2, 30)},000 jobs")
    else:
        options = (lambda: f"{r(1, 4)}.{r(0, 9)} gigahertz", lambda: f"version {r(1, 9)}.{r(0, 9)}",
                   lambda: f"{r(2, 90)} million users", lambda: f"{r(2, 64)}-bit chips")
    return rng.choice(options)()


def _headline_core(rng: random.Random, label: int) -> str:
    lex = LEXICONS[label]
    a, a2 = rng.sample(lex.actors, 2)
    o, o2 = rng.sample(lex.objects, 2)
    v, p = rng.choice(lex.verbs), rng.choice(lex.places)
    templates = (
        lambda: f"{a} {v} {rng.choice(SHARED_ADJECTIVES)} {o} {rng.choice(TIMES)}",
        lambda: f"{p}: {a} {v} {o}",
        lambda: f"{a} {v} {o} in {p} as {rng.choice(SHARED_CLAUSES)}",
        lambda: f"{_number_phrase(rng, label)} as {a} {v} {o}",
        lambda: f"{a} {v} {o}, {rng.choice(ATTRIBUTIONS)}",
        lambda: f"{rng.choice(SHARED_ADJECTIVES)} {rng.choice(SHARED_NOUNS)} for {a} after {o} in {p}",
        lambda: f"{a} and {a2} {rng.choice(SHARED_PAIR_VERBS)} {o}",
        lambda: f"{a} {v} {o} {rng.choice(TIMES)} amid {o2}",
    )
    return _cap(rng.choice(templates)())


def _second_sentence(rng: random.Random, lex_a: ClassLexicon, lex_b: ClassLexicon, label_a: int) -> str:
    """A description-like sentence; actor/verb from ``lex_a``, object from ``lex_b``."""
    a, a2 = rng.sample(lex_a.actors, 2)
    v, o, p = rng.choice(lex_a.verbs), rng.choice(lex_b.objects), rng.choice(lex_b.places)
    templates = (
        lambda: f"{_cap(a)} {v} {o} in {p} {rng.choice(TIMES)}, {rng.choice(ATTRIBUTIONS)}",
        lambda: f"{_cap(rng.choice(SHARED_ADJECTIVES))} talks between {a} and {a2} over {o} "
                f"{rng.choice(SHARED_VERBS_PLURAL)} {rng.choice(TIMES)}",
        lambda: f"{_cap(a)} called the {o} the {rng.choice(SHARED_ADJECTIVES)} {rng.choice(SHARED_NOUNS)} "
                f"since {rng.choice(YEARS)}",
        lambda: f"{_cap(a)} {v} {o} with {_number_phrase(rng, label_a)}, {rng.choice(ATTRIBUTIONS)}",
    )
    return f"{rng.choice(SOURCES)} - {rng.choice(templates)()}."


def _distractor_phrase(rng: random.Random, label: int) -> str:
    other = rng.choice([c for c in range(4) if c != label])
    lex = LEXICONS[other]
    return rng.choice((
        lambda: f"amid {rng.choice(lex.objects)}",
        lambda: f"near {rng.choice(lex.places)}",
        lambda: f"after {rng.choice(lex.objects)} in {rng.choice(lex.places)}",
        lambda: f"as {rng.choice(lex.actors)} {rng.choice(SHARED_VERBS_SINGULAR)}",
    ))()


def _with_length(rng: random.Random, make: Callable[[], str]) -> str:
    # Regenerate until the word count is in range; the templates make this rare.
    for _ in range(100):
        text = make()
        if MIN_WORDS <= len(text.split()) <= MAX_WORDS:
            return text
    raise AssertionError("headline templates cannot reach the required length")


def topics_headline(rng: random.Random, label: int, *, distractor: bool | None = None) -> str:
    """A clean headline of class ``label`` (optionally with a second sentence)."""
    assert 0 <= label < 4, label
    if distractor is None:
        distractor = rng.random() < P_DISTRACTOR

    def make() -> str:
        text = _headline_core(rng, label)
        if distractor:
            text = f"{text} {_distractor_phrase(rng, label)}"
        if rng.random() < P_SECOND_SENTENCE or len(text.split()) < MIN_WORDS:
            text = f"{text}. {_second_sentence(rng, LEXICONS[label], LEXICONS[label], label)}"
        return text

    return _with_length(rng, make)


def _ambiguous_core(rng: random.Random, pair: tuple[int, int]) -> str:
    w, s, b, t = LEXICONS
    r = rng.randint
    team, tech_co = rng.choice(CLUBS), rng.choice(TECH_COMPANIES)
    by_pair: dict[tuple[int, int], tuple[Callable[[], str], ...]] = {
        (BUSINESS, TECH): (
            lambda: f"{tech_co} {rng.choice(('posts', 'reports', 'forecasts'))} {rng.choice(SHARED_ADJECTIVES)} "
                    f"{rng.choice(('quarterly profit', 'revenue', 'earnings'))} on {rng.choice(t.objects)} sales",
            lambda: f"{tech_co} shares {rng.choice(('jump', 'slide', 'tumble', 'rally'))} after "
                    f"{rng.choice(TECH_COMPANIES)} {rng.choice(t.verbs)} {rng.choice(t.objects)}",
            lambda: f"{rng.choice(CORPORATIONS)} {rng.choice(('acquires', 'bids for', 'eyes'))} {tech_co} "
                    f"in ${r(1, 40)} billion deal",
        ),
        (SPORTS, BUSINESS): (
            lambda: f"{team} agrees ${r(20, 400)} million stadium deal with {rng.choice(CORPORATIONS)}",
            lambda: f"{team} shares {rng.choice(('jump', 'slide'))} as {rng.choice(CORPORATIONS)} eyes takeover",
            lambda: f"{rng.choice(CORPORATIONS)} signs sponsorship deal with {team} worth ${r(5, 90)} million",
        ),
        (WORLD, TECH): (
            lambda: f"The government {rng.choice(('raises', 'cuts', 'freezes'))} science budget for "
                    f"{rng.choice(t.objects)} research",
            lambda: f"{rng.choice(STATES)} launches {rng.choice(('satellite', 'rocket', 'spacecraft'))} "
                    f"as {rng.choice(w.actors)} {rng.choice(w.verbs)} {rng.choice(w.objects)}",
            lambda: f"{_cap(rng.choice(w.actors))} blames hackers for attack on government web site "
                    f"in {rng.choice(w.places)}",
        ),
        (WORLD, BUSINESS): (
            lambda: f"Oil prices {rng.choice(('rise', 'jump', 'fall'))} amid {rng.choice(w.objects)} in "
                    f"{rng.choice(w.places)}",
            lambda: f"{rng.choice(STATES)} imposes trade sanctions, hitting {rng.choice(b.objects)}",
            lambda: f"{_cap(rng.choice(w.actors))} defends tax plan amid {rng.choice(b.objects)} "
                    f"{rng.choice(TIMES)}",
        ),
        (WORLD, SPORTS): (
            lambda: f"{rng.choice(STATES)} vows security for Olympics amid {rng.choice(w.objects)}",
            lambda: f"{_cap(rng.choice(w.actors))} attends {rng.choice(s.objects)} in {rng.choice(w.places)} "
                    f"as {rng.choice(SHARED_CLAUSES)}",
            lambda: f"Athletes {rng.choice(('boycott', 'flee', 'return to'))} games in {rng.choice(w.places)} "
                    f"after {rng.choice(w.objects)}",
        ),
        (SPORTS, TECH): (
            lambda: f"{team} {rng.choice(('tests', 'adopts', 'rejects'))} new video replay technology "
                    f"for {rng.choice(s.objects)}",
            lambda: f"Scientists develop new doping test ahead of {rng.choice(s.objects)} at {rng.choice(s.places)}",
            lambda: f"{tech_co} {rng.choice(t.verbs)} {rng.choice(t.objects)} for {team} fans",
        ),
    }
    return _cap(rng.choice(by_pair[pair])())


def _ambiguous_headline(rng: random.Random, pair: tuple[int, int]) -> str:
    def make() -> str:
        text = _ambiguous_core(rng, pair)
        if rng.random() < P_SECOND_SENTENCE or len(text.split()) < MIN_WORDS:
            first, second = rng.sample(pair, 2)
            text = f"{text}. {_second_sentence(rng, LEXICONS[first], LEXICONS[second], first)}"
        return text

    return _with_length(rng, make)


AMBIGUOUS_PAIRS: tuple[tuple[int, int], ...] = (
    (BUSINESS, TECH), (SPORTS, BUSINESS), (WORLD, TECH),
    (WORLD, BUSINESS), (WORLD, SPORTS), (SPORTS, TECH),
)


def draw_headline(rng: random.Random, label: int) -> Headline:
    """One labelled item for class ``label``: clean, ambiguous or label noise."""
    assert 0 <= label < 4, label
    u = rng.random()
    if u < P_AMBIGUOUS:
        # Every class is in exactly three pairs, so each mixed scenario is
        # labelled with either of its classes equally often.
        pair = rng.choice([p for p in AMBIGUOUS_PAIRS if label in p])
        return Headline(text=_ambiguous_headline(rng, pair), label=label, kind="ambiguous")
    if u < P_AMBIGUOUS + P_NOISE:
        source = rng.choice([c for c in range(4) if c != label])
        return Headline(text=topics_headline(rng, source), label=label, kind="noise")
    return Headline(text=topics_headline(rng, label), label=label, kind="clean")


def draw_headlines(rng: random.Random, n: int, *, exclude: frozenset[str] = frozenset()) -> list[Headline]:
    """``n`` class-balanced items (labels i % 4, shuffled), texts not in ``exclude``."""
    labels = [i % 4 for i in range(n)]
    rng.shuffle(labels)
    out = []
    for label in labels:
        item = draw_headline(rng, label)
        while item.text in exclude:
            item = draw_headline(rng, label)
        out.append(item)
    return out


TRAIN_ROWS = 10_000  # a run's batch must fit in them (preflight checks it without drawing the task)


def make_topics(*, seed: int = 0, n_train: int = TRAIN_ROWS, n_eval: int = 1_000) -> TaskData:
    """The synthetic topics task: balanced train/eval, eval texts never in train."""
    if n_train < 1 or n_eval < 1:
        raise ValueError(f"topics needs n_train >= 1 and n_eval >= 1, got {n_train} and {n_eval}")
    train = draw_headlines(random.Random(f"zerolock/topics/{seed}/train"), n_train)
    seen = frozenset(h.text for h in train)
    evals = draw_headlines(random.Random(f"zerolock/topics/{seed}/eval"), n_eval, exclude=seen)
    return TaskData(
        name="topics",
        label_words=TOPIC_LABEL_WORDS,
        cue=TOPIC_CUE,
        train=tuple(Example(text=h.text, label=h.label) for h in train),
        eval=tuple(Example(text=h.text, label=h.label) for h in evals),
        description=(
            f"synthetic AG-News-like headlines (seed {seed}, {n_train} train / {n_eval} eval, "
            f"{P_AMBIGUOUS:.0%} ambiguous, {P_NOISE:.0%} label noise)"
        ),
    )
