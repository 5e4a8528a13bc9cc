"""A user's file that cannot train is refused in one line that says why, before anything exists, and the Run
form's Preview says the same: a column of structs or lists named (never a TypeError, never a Python repr
trained), more classes than distinct first tokens said with the counts in at most 300 characters (10,000
classes once made a line of 159,106), an empty label word refused by its flag."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.data_preview import DataFields, preview_html
from zerolock_core.cli import build_parser, config_from_args, main
from zerolock_core.config.arg_types import words_arg
from zerolock_core.config.field_words import FORM, ConfigError, render
from zerolock_core.data.encoding import label_first_tokens
from zerolock_core.models.loading import load_tokenizer

MAX_LINE = 300


def parquet(path: Path, columns: dict[str, list]) -> None:
    pq.write_table(pa.table(columns), path)


def jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def yes_no(n: int = 40) -> list[str]:
    return ["yes" if i % 2 else "no" for i in range(n)]


# (file, how it is written, flags, what the one line must say)
FILES = [
    ("struct-label.parquet",
     lambda p: parquet(p, {"text": [f"row {i}" for i in range(40)], "label": [{"a": i % 2} for i in range(40)]}),
     [], r"the field 'label' holds structs \(JSON objects\), not plain text or labels"),
    ("list-label.parquet",
     lambda p: parquet(p, {"text": [f"row {i}" for i in range(40)], "label": [[i % 2] for i in range(40)]}),
     [], r"the field 'label' holds lists"),
    ("list-text.parquet",
     lambda p: parquet(p, {"text": [[f"row {i}", "more"] for i in range(40)], "label": yes_no()}),
     [], r"the field 'text' holds lists"),
    ("struct-text.jsonl",
     lambda p: jsonl(p, [{"meta": {"title": f"t {i}"}, "label": y} for i, y in enumerate(yes_no())]),
     ["--text-fields", "meta"], r"the field 'meta' holds structs"),
    ("struct-response.jsonl",
     lambda p: jsonl(p, [{"q": f"q {i}", "a": {"text": "x"}} for i in range(40)]),
     ["--prompt-field", "q", "--response-field", "a"], r"the field 'a' holds structs"),
    ("many-classes.jsonl",
     lambda p: jsonl(p, [{"text": f"row {i}", "label": f"c{i}"} for i in range(10_000)]),
     [], r"10,000 classes but only \d+ distinct first tokens? under this model's tokenizer \(a vocabulary of 2,048\)"
         r".*'c0', 'c1' and [\d,]+ more all start with the token"),
    ("unknown-label.jsonl",
     lambda p: jsonl(p, [{"text": f"row {i}", "label": "zzz"} for i in range(40)]),
     ["--label-words", ",".join(f"w{i}" for i in range(2000))],
     r"the label 'zzz' is not one of the label words \(w0, w1, w2, w3, w4, … \(2,000 in all\)\)"),
    ("zero-one.jsonl",
     lambda p: jsonl(p, [{"text": f"row {i}", "label": i % 2} for i in range(40)]),
     ["--label-words", "World,,Sports"], r"^--label-words: word 2 of 3 is empty"),
]


@pytest.mark.parametrize("name,write,flags,message", FILES, ids=[f[0] for f in FILES])
def test_a_file_that_cannot_train_is_refused_in_one_line_that_says_why(tmp_path, capsys, name, write, flags, message):
    path = tmp_path / name
    write(path)
    kind = {".jsonl": "jsonl", ".parquet": "parquet"}[path.suffix]
    out = tmp_path / "run"
    code = main(["train", "--quiet", "--dataset", f"{kind}:{path}", *flags, "--steps", "1", "--out", str(out)])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err[:2000]
    said = lines[0].removeprefix("zerolock: error: ").removeprefix("--dataset: ").removeprefix(f"{path}: ")
    assert re.search(message, said), said
    assert len(said) <= MAX_LINE and "Error" not in said and "{'" not in said, said
    assert not out.exists()


@pytest.mark.parametrize("name,write,flags,message", [f for f in FILES if f[0] != "zero-one.jsonl"],
                         ids=[f[0] for f in FILES if f[0] != "zero-one.jsonl"])
def test_preview_refuses_what_run_refuses(tmp_path, name, write, flags, message):
    path = tmp_path / name
    write(path)
    a = build_parser().parse_args(["train", "--dataset", f"{path.suffix.lstrip('.')}:{path}", *flags])
    data = config_from_args(a, out=None).data
    with pytest.raises(ValueError) as caught:
        preview_html(data, model="tiny")
    assert re.search(message.lstrip("^"), str(caught.value)), str(caught.value)


@pytest.mark.parametrize("words", ["World,,Sports", "World,Sports,", " ,World,Sports"])
def test_an_empty_label_word_is_refused_in_the_words_of_who_asked(tmp_path, words):
    path = tmp_path / "zero-one.jsonl"
    jsonl(path, [{"text": f"row {i}", "label": i % 2} for i in range(40)])
    with pytest.raises(ConfigError) as caught:
        config_from_args(build_parser().parse_args(["train", "--dataset", f"jsonl:{path}", "--label-words", words]),
                         out=None)
    assert str(caught.value).startswith("--label-words: word ") and "is empty" in str(caught.value)
    assert render(caught.value, FORM).startswith("label words: word ")
    with pytest.raises(ValueError, match="label words: word 2 of 3 is empty"):  # the Run form's Preview
        preview_html(DataFields(label_words="World,,Sports").data_config(f"jsonl:{path}", seq_len=64, eval_size=8),
                     model="tiny")


@pytest.mark.parametrize("text,words", [("World,Sports", ("World", "Sports")), (" World , Sports ", ("World", "Sports")),
                                        ("World,,Sports", ("World", "", "Sports")), ("", ()), ("  ", ())])
def test_label_words_keep_their_places(text, words):
    assert words_arg(text) == words


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")


@pytest.mark.parametrize("words", [
    tuple(f"c{i}" for i in range(10_000)),  # more classes than the vocabulary has tokens
    tuple("é" * 400 + str(i) for i in range(3000)),  # long words
    tuple(f"{chr(0x4e00 + i % 1500)}{'x' * 300}{i}" for i in range(10_000)),  # many groups of clashes
])
def test_words_that_start_alike_are_refused_with_the_counts_in_one_short_line(tokenizer, words):
    with pytest.raises(ValueError) as caught:
        label_first_tokens(tokenizer, words)
    said = str(caught.value)
    assert said.startswith(f"{len(words):,} classes but only ") and "distinct first token" in said, said
    assert "\n" not in said and len(said) <= MAX_LINE, said
