"""Plain text for pretraining a tiny language model, and its tokenizer texts.

The documents come from the same generators as the synthetic ``topics`` and
``needle`` tasks (so the vocabulary is shared), drawn from a separate seed
namespace ("zerolock/corpus/...") that the task splits never use.  They never
contain a cue ("Topic:", "Answer:") and never attach a label word as a label:
topics documents are bare headlines, needle documents stop at the question.
The topic label words do occur, in newsroom sentences placed independently of
the content, so their output embeddings are trained (see `_section_mention`).
"""

from __future__ import annotations

import random

from .needle import NEEDLE_CUE, NEEDLE_LABEL_WORDS, filler_sentence, needle_passage
from .topics import TOPIC_CUE, TOPIC_LABEL_WORDS, draw_headline

_NEEDLE_DECOY_POOL = NEEDLE_LABEL_WORDS


def _news_document(rng: random.Random) -> str:
    # One to three headlines, like a news digest; labels are drawn and discarded.
    return " ".join(draw_headline(rng, rng.randrange(4)).text for _ in range(rng.randint(1, 3)))


def _filler_document(rng: random.Random) -> str:
    decoys = tuple(rng.sample(_NEEDLE_DECOY_POOL, 2))
    return " ".join(filler_sentence(rng, decoys) for _ in range(rng.randint(3, 10)))


_SECTION_TEMPLATES = (
    "Find more stories in the {w} section.",
    "The {w} desk filed this report.",
    "{w} editors checked the story on {day}.",
    "Readers of the {w} pages wrote in about it.",
    "It was the most read {w} item of the week.",
    "Our {w} newsletter goes out every {day}.",
)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _section_mention(rng: random.Random) -> str:
    """A newsroom sentence naming a section. The section is drawn independently of the
    document's content, so the words the model later answers with (World, Sports, Business,
    Tech) get trained embeddings without any text-to-label association being taught."""
    return rng.choice(_SECTION_TEMPLATES).format(w=rng.choice(TOPIC_LABEL_WORDS), day=rng.choice(_DAYS))


def _with_mention(rng: random.Random, doc: str) -> str:
    if rng.random() >= 0.4:
        return doc
    return f"{doc} {_section_mention(rng)}" if rng.random() < 0.5 else f"{_section_mention(rng)} {doc}"


def make_pretraining_corpus(*, seed: int, n_documents: int) -> list[str]:
    """``n_documents`` unlabelled texts: 50 % news, 25 % needle passages, 25 % filler."""
    if n_documents < 0:
        raise ValueError(f"n_documents must be >= 0, got {n_documents}")
    rng = random.Random(f"zerolock/corpus/{seed}")
    docs = []
    for _ in range(n_documents):
        u = rng.random()
        if u < 0.5:
            docs.append(_with_mention(rng, _news_document(rng)))
        elif u < 0.75:
            docs.append(needle_passage(rng, rng.randrange(len(NEEDLE_LABEL_WORDS))))
        else:
            docs.append(_with_mention(rng, _filler_document(rng)))
    return docs


def tokenizer_training_texts(corpus: list[str], *, repeats: int = 100) -> list[str]:
    """``corpus`` plus the cues and label words as standalone lines, ``repeats`` times.

    This is tokenizer VOCABULARY, not language-model training text: the extra
    lines only make BPE learn every answer (" " + word, as it is tokenised
    after the cue) and each cue as whole tokens.  Never train the LM on them.
    """
    extra = [TOPIC_CUE, NEEDLE_CUE] + [f" {w}" for w in TOPIC_LABEL_WORDS + NEEDLE_LABEL_WORDS]
    return list(corpus) + extra * repeats
