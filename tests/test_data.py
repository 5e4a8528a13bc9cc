"""Tests for zerolock_core.data: synthetic tasks, AG News, corpus, encoding."""

from __future__ import annotations

import collections
import math
import random
import re
import sys
import types
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Tokenizer, PreTrainedTokenizerFast

from zerolock_core.data import (
    EncodedSplit, Example, encode_split, label_tokens, load_agnews_csv, load_agnews_hub, load_task,
    make_needle, make_pretraining_corpus, make_topics, microbatches, read_agnews_csv,
    tokenizer_training_texts,
)
from zerolock_core.data.needle import NEEDLE_LABEL_WORDS
from zerolock_core.data.user_task import FieldMap
from zerolock_core.data.topics import TOPIC_LABEL_WORDS, draw_headlines

CUES = ("Topic:", "Answer:")


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def topics():
    return make_topics()


@pytest.fixture(scope="module")
def needle():
    return make_needle()


@pytest.fixture(scope="module")
def fast_tok() -> PreTrainedTokenizerFast:
    return _train_tokenizer()[0]


@pytest.fixture(scope="module")
def slow_tok(tmp_path_factory) -> GPT2Tokenizer:
    raw = _train_tokenizer()[1]
    folder = tmp_path_factory.mktemp("bpe")
    vocab, merges = raw.model.save(str(folder))
    return GPT2Tokenizer(vocab, merges, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="</s>")


_TOKENIZER_CACHE: list = []


def _train_tokenizer() -> tuple[PreTrainedTokenizerFast, Tokenizer]:
    if not _TOKENIZER_CACHE:
        raw = Tokenizer(models.BPE())
        raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        raw.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=500, special_tokens=["<pad>", "<s>", "</s>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        raw.train_from_iterator(tokenizer_training_texts(make_pretraining_corpus(seed=0, n_documents=300)), trainer)
        fast = PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
        _TOKENIZER_CACHE.append((fast, raw))
    return _TOKENIZER_CACHE[0]


# ---------------------------------------------------------------- synthetic tasks

SMALL_MAKERS = {
    "topics": lambda seed: make_topics(seed=seed, n_train=200, n_eval=40),
    "needle": lambda seed: make_needle(seed=seed, n_train=80, n_eval=16),
    "corpus": lambda seed: make_pretraining_corpus(seed=seed, n_documents=60),
}


@pytest.mark.parametrize("name", SMALL_MAKERS)
@pytest.mark.parametrize(("seed_a", "seed_b", "equal"), [(0, 0, True), (3, 3, True), (0, 1, False), (1, 2, False)])
def test_determinism_by_seed(name, seed_a, seed_b, equal):
    a, b = SMALL_MAKERS[name](seed_a), SMALL_MAKERS[name](seed_b)
    assert (a == b) is equal


def test_generators_leave_global_rng_alone():
    random.seed(123)
    before = random.random()
    random.seed(123)
    make_topics(n_train=20, n_eval=4), make_needle(n_train=8, n_eval=8), make_pretraining_corpus(seed=0, n_documents=5)
    assert random.random() == before


@pytest.mark.parametrize(("task", "n_train", "n_eval", "n_labels", "cue"), [
    ("topics", 10_000, 1_000, 4, "Topic:"),
    ("needle", 4_000, 500, 8, "Answer:"),
])
def test_sizes_balance_disjoint(task, n_train, n_eval, n_labels, cue, request):
    data = request.getfixturevalue(task)
    assert (len(data.train), len(data.eval)) == (n_train, n_eval)
    assert len(data.label_words) == n_labels and data.cue == cue
    for split in (data.train, data.eval):
        counts = collections.Counter(e.label for e in split)
        assert sorted(counts) == list(range(n_labels))
        assert max(counts.values()) - min(counts.values()) <= 1
    assert not {e.text for e in data.eval} & {e.text for e in data.train}


@pytest.mark.parametrize("task", ["topics", "needle"])
def test_cue_never_inside_text(task, request):
    data = request.getfixturevalue(task)
    bad = [e.text for e in data.train + data.eval if any(c in e.text for c in CUES)]
    assert bad == []


def test_topics_headline_lengths(topics):
    lengths = [len(e.text.split()) for e in topics.train + topics.eval]
    assert 8 <= min(lengths) and max(lengths) <= 30


@pytest.mark.parametrize(("kind", "low", "high"), [("ambiguous", 0.10, 0.20), ("noise", 0.02, 0.07)])
def test_ambiguous_and_noise_fractions(kind, low, high):
    items = draw_headlines(random.Random("test"), 4000)
    fraction = sum(h.kind == kind for h in items) / len(items)
    assert low < fraction < high


def _bag(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def test_bag_of_words_baseline_is_good_but_not_perfect(topics):
    # Multinomial naive Bayes with add-one smoothing.
    counts = [collections.Counter() for _ in range(4)]
    prior = collections.Counter(e.label for e in topics.train)
    for e in topics.train:
        counts[e.label].update(_bag(e.text))
    vocab = len(set().union(*counts))
    totals = [sum(c.values()) for c in counts]

    def predict(text: str) -> int:
        words = _bag(text)
        scores = [math.log(prior[c]) + sum(math.log((counts[c][w] + 1) / (totals[c] + vocab)) for w in words)
                  for c in range(4)]
        return max(range(4), key=scores.__getitem__)

    accuracy = sum(predict(e.text) == e.label for e in topics.eval) / len(topics.eval)
    assert 0.6 < accuracy < 0.97


def test_needle_states_key_early_and_once(needle):
    pattern = re.compile(r"secret colour (?:for today )?is (\w+)\.")
    for e in needle.train[:500] + needle.eval:
        found = pattern.findall(e.text)
        assert found == [NEEDLE_LABEL_WORDS[e.label]], e.text
        sentences_before = e.text[: pattern.search(e.text).start()].count(". ")
        assert sentences_before <= 8  # <= 2 lead fillers (a news filler can hold a few ". ")


@pytest.mark.parametrize("filler", [(0, 0), (2, 3), (20, 20)])
def test_needle_filler_range(filler):
    data = make_needle(n_train=16, n_eval=8, filler_sentences=filler)
    assert all(e.text.endswith("?") for e in data.train + data.eval)
    lengths = [len(e.text.split()) for e in data.train]
    assert (max(lengths) < 25) if filler == (0, 0) else (min(lengths) > 5 * filler[0])


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(filler_sentences=(5, 2)), r"filler_sentences .* got \(5, 2\)"),
    (dict(n_train=0), r"n_train >= 1"),
])
def test_needle_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_needle(**kwargs)


def test_corpus_has_no_cues_and_no_labels():
    corpus = make_pretraining_corpus(seed=0, n_documents=2000)
    assert len(corpus) == 2000
    label_alt = "|".join(TOPIC_LABEL_WORDS + NEEDLE_LABEL_WORDS)
    for doc in corpus:
        assert not any(c in doc for c in CUES), doc
        assert not re.search(r"(Topic|Answer)\s*:", doc), doc
        assert not re.search(rf"\?\s*({label_alt})\b", doc), doc  # no answer after the question
        assert not re.fullmatch(rf"\s*({label_alt})\s*", doc), doc
    # Vocabulary is shared with the tasks.
    words = set(" ".join(corpus).split())
    assert {"secret", "colour", "talks", "deal", "Arsenal", "Microsoft"} <= words


def test_corpus_disjoint_from_task_texts(topics):
    corpus = set(make_pretraining_corpus(seed=0, n_documents=500))
    assert not corpus & {e.text for e in topics.eval}


def test_tokenizer_training_texts_adds_label_lines(fast_tok):
    corpus = ["a b c"]
    texts = tokenizer_training_texts(corpus, repeats=3)
    assert texts[:1] == corpus
    assert texts.count(" Business") == 3 and texts.count(" violet") == 0 and texts.count(" blue") == 3
    for word in TOPIC_LABEL_WORDS + NEEDLE_LABEL_WORDS:
        assert len(fast_tok(" " + word, add_special_tokens=False)["input_ids"]) == 1, word


# ---------------------------------------------------------------- AG News CSV

GOOD_CSV = (
    '"3","Wall St. Bears Claw Back","Reuters - Short-sellers, Wall Street\'s dwindling\\band of ultra-cynics."\n'
    '"4","Spam Wars","A new filter\\\\blocks it, \\""critics"" say."\n'
    '"2","Federer Wins","Federer, again."\n'
    '"1","Talks Stall","Diplomats met on\nMonday."\n'
)


def test_read_agnews_good(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text(GOOD_CSV)
    examples = read_agnews_csv(path)
    assert [e.label for e in examples] == [2, 3, 1, 0]
    assert examples[0].text == "Wall St. Bears Claw Back. Reuters - Short-sellers, Wall Street's dwindling band of ultra-cynics."
    assert examples[1].text == 'Spam Wars. A new filter blocks it, "critics" say.'
    assert examples[3].text == "Talks Stall. Diplomats met on Monday."
    assert read_agnews_csv(str(path), limit=2) == examples[:2]


@pytest.mark.parametrize(("content", "message"), [
    ('"3","title","desc"\n"1","only two"\n', r"train\.csv line 2: expected 3 columns \(class index, title, description\), got 2$"),
    ('"3","title","desc","extra"\n', r"train\.csv line 1: expected 3 columns .*, got 4$"),
    ('"5","title","desc"\n', r"train\.csv line 1: class index '5' is not one of 1, 2, 3, 4$"),
    ('"1","t","d"\n"x","title","desc"\n', r"train\.csv line 2: class index 'x' is not one of 1, 2, 3, 4$"),
    ('"0","title","desc"\n', r"class index '0' is not one of 1, 2, 3, 4$"),
    ("", r"train\.csv: AG News CSV is empty"),
])
def test_read_agnews_bad(tmp_path, content, message):
    path = tmp_path / "train.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        read_agnews_csv(path)


def test_read_agnews_missing(tmp_path):
    with pytest.raises(ValueError, match=r"^AG News CSV not found: .*nope\.csv$"):
        read_agnews_csv(tmp_path / "nope.csv")


def _write_rows(path: Path, n: int, offset: int = 0) -> None:
    path.write_text("".join(f'"{i % 4 + 1}","title {i + offset}","text {i + offset}"\n' for i in range(n)))


@pytest.mark.parametrize(("layout", "spec", "n_train", "n_eval"), [
    ("dir", ".", 20, 7),
    ("file+test", "train.csv", 20, 7),
    ("file", "mine.csv", 18, 2),
])
def test_load_agnews_csv(tmp_path, layout, spec, n_train, n_eval):
    if layout == "file":
        _write_rows(tmp_path / "mine.csv", 20)
    else:
        _write_rows(tmp_path / "train.csv", 20)
        _write_rows(tmp_path / "test.csv", 7, offset=100)
    data = load_agnews_csv(str(tmp_path / spec))
    assert (len(data.train), len(data.eval)) == (n_train, n_eval)
    assert data.label_words == ("World", "Sports", "Business", "Tech") and data.cue == "Topic:"
    if layout == "file":  # the held-out rows are the last ones
        assert data.eval[-1].text == "title 19. text 19"


def test_load_agnews_csv_dir_without_test(tmp_path):
    _write_rows(tmp_path / "train.csv", 5)
    with pytest.raises(ValueError, match=r"has no test\.csv"):
        load_agnews_csv(str(tmp_path))


# ---------------------------------------------------------------- AG News hub (never the network)

class _FakeSplit(list):
    def select(self, indices):
        return _FakeSplit(self[i] for i in indices)


def _fake_datasets(load):
    module = types.ModuleType("datasets")
    module.load_dataset = load
    return module


def test_hub_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` raise ImportError
    with pytest.raises(ValueError, match=r"^--dataset ag_news needs the 'datasets' package .*csv:PATH"):
        load_agnews_hub(n_train=10, n_eval=10)


def test_hub_load_failure(monkeypatch):
    def offline(name):
        raise ConnectionError("hub unreachable\nsecond line")

    monkeypatch.setitem(sys.modules, "datasets", _fake_datasets(offline))
    with pytest.raises(ValueError, match=r"ConnectionError: hub unreachable\).*csv:PATH") as info:
        load_agnews_hub(n_train=None, n_eval=None)
    assert "\n" not in str(info.value)


def test_hub_success_with_fake(monkeypatch):
    rows = _FakeSplit({"text": f"headline\\{i}", "label": i % 4} for i in range(10))
    monkeypatch.setitem(sys.modules, "datasets", _fake_datasets(lambda name: {"train": rows, "test": rows}))
    data = load_agnews_hub(n_train=6, n_eval=None)
    assert (len(data.train), len(data.eval)) == (6, 10)
    assert data.train[1] == Example(text="headline 1", label=1)


# ---------------------------------------------------------------- registry

@pytest.mark.parametrize("spec,message", [
    ("foo", r"expected one of: topics, needle, ag_news, csv:PATH, jsonl:PATH, parquet:PATH, disk:PATH"),
    ("csv:", r"'csv:' names no file: give csv:PATH"), ("", "expected one of"), ("Topics", "expected one of"),
    ("agnews", "expected one of")])
def test_registry_rejects(spec, message):
    with pytest.raises(ValueError, match=message):
        load_task(spec)


def test_registry_loads_and_caches(tmp_path, topics):
    first = load_task("topics")
    assert first is load_task("topics", seed=0)
    assert first == topics
    _write_rows(tmp_path / "train.csv", 10)
    assert len(load_task(f"csv:{tmp_path / 'train.csv'}").train) == 9


def test_a_user_file_is_parsed_once_while_its_bytes_stay_the_same(tmp_path, monkeypatch):
    """The preflight and the run read the same file: parsed once; rewritten (same size), parsed again."""
    from zerolock_core.data import registry

    parsed = []
    real = registry.load_user_task
    monkeypatch.setattr(registry, "load_user_task", lambda *a, **k: parsed.append(1) or real(*a, **k))
    path = tmp_path / "rows.csv"
    path.write_text("text,label\nalpha,a\nbravo,b\ncharlie,a\ndelta,b\n")
    spec, fields = f"csv:{path}", FieldMap(text_fields=("text",), label_field="label", eval_fraction=0.25)
    first = load_task(spec, fields=fields)
    assert load_task(spec, fields=fields) is first and len(parsed) == 1
    path.write_text("text,label\nalpha,b\nbravo,a\ncharlie,b\ndelta,a\n")  # same size, other labels
    assert load_task(spec, fields=fields) != first and len(parsed) == 2


# ---------------------------------------------------------------- encoding

TOY = [Example(text="Arsenal clinches league title", label=1), Example(text="Microsoft ships a new chip", label=3),
       Example(text="Talks stall", label=0)]


def _check_row(tok, split: EncodedSplit, i: int, label_words, example: Example) -> None:
    ids, mask, labels = split.input_ids[i], split.attention_mask[i], split.labels[i]
    length = int(mask.sum())
    assert mask[:length].eq(1).all() and mask[length:].eq(0).all()  # right padding
    assert ids[length:].eq(tok.pad_token_id).all()
    answer = label_tokens(tok, label_words).token_ids[example.label]
    omega = labels.ne(-100).nonzero().flatten().tolist()
    assert omega == list(range(length - len(answer) - 1, length - 1))
    assert ids[omega[0] + 1 : length].tolist() == list(answer) == labels[omega].tolist()
    assert tok.decode(labels[omega].tolist()) == " " + label_words[example.label]
    assert ids[0] == tok.bos_token_id


@pytest.mark.parametrize("seq_len", [24, 64])
def test_encode_toy_rows(fast_tok, seq_len):
    split = encode_split(TOY, tokenizer=fast_tok, cue="Topic:", label_words=TOPIC_LABEL_WORDS, seq_len=seq_len)
    assert split.input_ids.shape == split.labels.shape == split.attention_mask.shape == (3, seq_len)
    assert split.input_ids.dtype == split.labels.dtype == split.label_index.dtype == torch.long
    assert split.label_index.tolist() == [1, 3, 0]
    for i, ex in enumerate(TOY):
        _check_row(fast_tok, split, i, TOPIC_LABEL_WORDS, ex)
    length = int(split.attention_mask[2].sum())
    assert fast_tok.decode(split.input_ids[2, :length]) == "<s>Talks stall\nTopic: World"


@pytest.mark.parametrize(("task", "seq_len"), [("topics", 48), ("needle", 64), ("needle", 300)])
def test_encode_tasks_and_truncation(fast_tok, task, seq_len, request):
    data = request.getfixturevalue(task)
    examples = data.eval[:40]
    split = encode_split(examples, tokenizer=fast_tok, cue=data.cue, label_words=data.label_words, seq_len=seq_len)
    cue_ids = fast_tok("\n" + data.cue, add_special_tokens=False)["input_ids"]
    for i, ex in enumerate(examples):
        _check_row(fast_tok, split, i, data.label_words, ex)
        text_ids = fast_tok(ex.text, add_special_tokens=False)["input_ids"]
        length = int(split.attention_mask[i].sum())
        n_answer = len(label_tokens(fast_tok, data.label_words).token_ids[ex.label])
        kept = length - 1 - len(cue_ids) - n_answer
        assert split.input_ids[i, 1 : 1 + kept].tolist() == text_ids[:kept]  # beginning of the text kept
        assert split.input_ids[i, 1 + kept : 1 + kept + len(cue_ids)].tolist() == cue_ids
    if task == "needle" and seq_len == 64:  # needle texts are long: they must have been truncated
        assert split.attention_mask.sum(1).max() >= 60


def test_truncation_does_not_depend_on_label(fast_tok):
    text = " ".join(["deal"] * 200)
    words = ("a", "Business")  # answers of different lengths
    split = encode_split([Example(text=text, label=0), Example(text=text, label=1)],
                         tokenizer=fast_tok, cue="Topic:", label_words=words, seq_len=40)
    first_answer = [int(split.labels[i].ne(-100).nonzero()[0]) for i in range(2)]
    assert first_answer[0] == first_answer[1]
    assert torch.equal(split.input_ids[0, : first_answer[0] + 1], split.input_ids[1, : first_answer[1] + 1])


def test_encode_matches_slow_tokenizer(fast_tok, slow_tok, topics):
    kwargs = dict(cue="Topic:", label_words=TOPIC_LABEL_WORDS, seq_len=48)
    fast = encode_split(topics.eval[:50], tokenizer=fast_tok, **kwargs)
    slow = encode_split(topics.eval[:50], tokenizer=slow_tok, **kwargs)
    for name in ("input_ids", "attention_mask", "labels", "label_index"):
        assert torch.equal(getattr(fast, name), getattr(slow, name)), name


def test_seq_len_too_small(fast_tok):
    need = 1 + len(fast_tok("\nTopic:", add_special_tokens=False)["input_ids"]) + 1 + 4
    kwargs = dict(tokenizer=fast_tok, cue="Topic:", label_words=TOPIC_LABEL_WORDS)
    encode_split(TOY, seq_len=need, **kwargs)
    for seq_len in (need - 1, 3, 0):
        with pytest.raises(ValueError, match=rf"seq_len {seq_len} is too small.*seq_len >= {need}\)"):
            encode_split(TOY, seq_len=seq_len, **kwargs)


@pytest.mark.parametrize(("examples", "words", "message"), [
    ([Example(text="x", label=4)], TOPIC_LABEL_WORDS, r"example 0: label 4 is out of range for 4 label words"),
    ([Example(text="x", label=-1)], TOPIC_LABEL_WORDS, r"example 0: label -1 is out of range"),
    (TOY, ("same", "same"), r"2 classes but only 1 distinct first token.*'same' and 'same' both start"),
    (TOY, (), r"label_words is empty"),
])
def test_encode_bad_input(fast_tok, examples, words, message):
    with pytest.raises(ValueError, match=message):
        encode_split(examples, tokenizer=fast_tok, cue="Topic:", label_words=words, seq_len=32)


def test_encoding_the_whole_split_at_once_equals_encoding_it_in_pieces(fast_tok, topics):
    kw = dict(tokenizer=fast_tok, cue="Topic:", label_words=TOPIC_LABEL_WORDS, seq_len=96)
    whole = encode_split(topics.train, **kw)
    assert len(whole) == 10_000
    for start in (0, 4_321, 9_990):
        piece = encode_split(topics.train[start:start + 10], **kw)
        for field in ("input_ids", "attention_mask", "labels", "label_index"):
            assert torch.equal(getattr(piece, field), getattr(whole, field)[start:start + 10]), (start, field)


# ---------------------------------------------------------------- micro-batches

def _indexed_split(n: int, s: int = 5) -> EncodedSplit:
    ids = torch.arange(n).reshape(n, 1).repeat(1, s)  # row i is full of i
    return EncodedSplit(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids.clone(),
                        label_index=torch.arange(n))


@pytest.mark.parametrize(("n", "batch", "micro"), [(40, 8, 2), (40, 8, 8), (37, 6, 3), (10, 10, 1)])
def test_microbatches_shapes_and_epochs(n, batch, micro):
    split = _indexed_split(n)
    per_epoch = n // batch
    seen_epochs = []
    for epoch in range(2):
        rows = []
        for step in range(epoch * per_epoch, (epoch + 1) * per_epoch):
            parts = microbatches(split, seed=7, step=step, batch=batch, microbatches=micro)
            assert len(parts) == micro
            for part in parts:
                assert set(part) == {"input_ids", "attention_mask", "labels", "label_index"}
                assert part["input_ids"].shape == part["labels"].shape == (batch // micro, 5)
                assert part["label_index"].shape == (batch // micro,)
                assert torch.equal(part["input_ids"][:, 0], part["label_index"])
                rows += part["label_index"].tolist()
        assert len(rows) == len(set(rows)) == per_epoch * batch  # no example twice in an epoch
        seen_epochs.append(rows)
    if n > batch:
        assert seen_epochs[0] != seen_epochs[1]  # a fresh permutation each epoch


@pytest.mark.parametrize(("seed_a", "step_a", "seed_b", "step_b", "equal"), [
    (0, 3, 0, 3, True), (5, 11, 5, 11, True), (0, 3, 1, 3, False), (0, 3, 0, 4, False),
])
def test_microbatches_deterministic(seed_a, step_a, seed_b, step_b, equal):
    split = _indexed_split(64)
    a = microbatches(split, seed=seed_a, step=step_a, batch=16, microbatches=4)
    b = microbatches(split, seed=seed_b, step=step_b, batch=16, microbatches=4)
    same = all(torch.equal(x[k], y[k]) for x, y in zip(a, b) for k in x)
    assert same is equal


@pytest.mark.parametrize(("batch", "micro", "step", "message"), [
    (10, 3, 0, r"batch 10 is not divisible by microbatches 3"),
    (0, 1, 0, r"must be >= 1"),
    (100, 4, 0, r"batch 100 is larger than the split \(64 examples\)"),
    (8, 2, -1, r"step must be >= 0"),
])
def test_microbatches_bad(batch, micro, step, message):
    with pytest.raises(ValueError, match=message):
        microbatches(_indexed_split(64), seed=0, step=step, batch=batch, microbatches=micro)
