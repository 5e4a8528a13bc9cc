"""Datasets for ZeroLock: synthetic tasks, AG News, pretraining text, encoding."""

from .agnews import load_agnews_csv, load_agnews_hub, read_agnews_csv
from .corpus import make_pretraining_corpus, tokenizer_training_texts
from .encoding import (EncodedSplit, LabelTokens, encode_split, label_first_tokens, label_tokens, microbatches,
                       steps_per_epoch)
from .examples import Example, TaskData
from .needle import make_needle
from .registry import load_data, load_task
from .topics import make_topics

__all__ = [
    "EncodedSplit",
    "Example",
    "LabelTokens",
    "TaskData",
    "encode_split",
    "label_first_tokens",
    "label_tokens",
    "load_data",
    "load_agnews_csv",
    "load_agnews_hub",
    "load_task",
    "make_needle",
    "make_pretraining_corpus",
    "make_topics",
    "microbatches",
    "read_agnews_csv",
    "steps_per_epoch",
    "tokenizer_training_texts",
]
