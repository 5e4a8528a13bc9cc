"""A task from a user's rows (data/sources.py): which fields are the text and the label, or the prompt and
the response, and which rows are held back for eval. Every bad row is refused here, before a run exists,
in one line naming the file, the row and what is wrong.

* classification: `text_fields` joined by ". " (default: `text`, else `title` + `description`), the label
  from `label_field` (default `label`): a label word itself, or a class index into `label_words` (or into
  a ClassLabel column's names). The label words are `label_words`, else the distinct words of the data,
  sorted; any number of classes from two.
* response: `prompt_field` -> `response_field`; the answer is the response text. A file with no field
  named whose rows have `prompt` and `response` (and no text field of a classification) is read so.
"""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

from .examples import Example, TaskData
from .said import clip, listed, structure, word
from .sources import Source, Table, read

CLASSIFICATION_CUE = "Label:"
RESPONSE_CUE = "Response:"
DEFAULT_TEXT_FIELDS = (("text",), ("title", "description"), ("question",))  # the first whose fields the data has
DEFAULT_LABEL_FIELD = "label"
DEFAULT_RESPONSE_FIELDS = ("prompt", "response")  # an instruction file's shape (the studies' Alpaca rows)
TEXT_JOIN = ". "  # title + description, as AG News
ROW_NUMBER = "\0row"  # a held-back row's number in its file (a key no file's field can have)
EVAL_SEED = "zerolock/eval-fraction"  # the held-back rows depend on this and the fraction only


@dataclass(kw_only=True, frozen=True)
class FieldMap:
    text_fields: tuple[str, ...] = ()
    label_field: str = ""
    label_words: tuple[str, ...] = ()
    prompt_field: str = ""
    response_field: str = ""
    max_row_chars: int = 100_000
    eval_fraction: float = 0.1
    skip_bad_rows: bool = False  # leave out a row that would be refused, and count it (TaskData.description)

    @property
    def is_response(self) -> bool:
        return bool(self.prompt_field or self.response_field)

    @property
    def is_default(self) -> bool:
        """No field named: an AG-News-shaped CSV reads as AG News."""
        return not (self.text_fields or self.label_field or self.label_words or self.is_response)


def load_user_task(source: Source, fields: FieldMap, *, eval_source: Source | None = None) -> TaskData:
    """The task in `source`'s rows; eval: `eval_source`'s rows, else the source's own eval split (a saved
    DatasetDict's test split), else `fields.eval_fraction` of its rows held back (seeded, disjoint)."""
    if fields.is_response and not (fields.prompt_field and fields.response_field):
        raise ValueError("a prompt -> response task needs both the prompt field and the response field")
    table = read(source)
    columns = set(table.columns)
    if fields.is_default and set(DEFAULT_RESPONSE_FIELDS) <= columns and \
            not any(set(names) <= columns for names in DEFAULT_TEXT_FIELDS):
        fields = dataclasses.replace(fields, prompt_field=DEFAULT_RESPONSE_FIELDS[0],
                                     response_field=DEFAULT_RESPONSE_FIELDS[1])
    train_rows, eval_rows, eval_where = table.train, table.eval, "its eval split"
    if eval_source is not None:
        eval_table = read(eval_source)
        eval_rows, eval_where = eval_table.train, str(eval_source.path)
    elif eval_rows is None:
        train_rows, eval_rows = held_back(table.train, fields.eval_fraction, where=source.path)
        eval_where = f"{len(eval_rows)} of its rows held back"
    try:
        maker = _ResponseRows(fields, table) if fields.is_response else _ClassRows(fields, table)
    except ValueError as err:  # about the file as a whole: its fields, its classes
        raise ValueError(f"{source.path}: {err}") from None
    train = maker.examples(train_rows, where=str(source.path))
    evals = maker.examples(eval_rows, where=str(eval_source.path) if eval_source else
                           f"{source.path} ({eval_where})" if table.eval is not None else str(source.path))
    label_words = maker.label_words()
    kind = "prompt -> response" if fields.is_response else f"{len(label_words)} classes"
    left_out = (f"; {len(maker.skipped)} bad row(s) left out, the first: {maker.skipped[0]}"
                if maker.skipped else "")
    return TaskData(name=source.path.stem, label_words=label_words,
                    cue=RESPONSE_CUE if fields.is_response else CLASSIFICATION_CUE,
                    train=tuple(train), eval=tuple(evals),
                    description=f"{source.spec} ({kind}; {len(train)} train / {len(evals)} eval: {eval_where}"
                                f"{left_out})")


def held_back(rows: list[dict[str, Any]], fraction: float, *, where: object) -> tuple[list, list]:
    """(train, eval): `fraction` of `rows` (at least one) drawn with a fixed seed, the rest in file order;
    every row is in exactly one of them. Each row keeps its 1-based number in the file under ROW_NUMBER."""
    if not 0 < fraction < 1:
        raise ValueError(f"the eval fraction must be between 0 and 1 (exclusive), got {fraction}")
    numbered = [{**row, ROW_NUMBER: i + 1} for i, row in enumerate(rows)]
    n_eval = max(1, round(len(rows) * fraction))
    if len(rows) - n_eval < 1:
        raise ValueError(f"{where}: {len(rows)} row(s) are too few to hold {n_eval} back for eval "
                         "(give an eval file, or more rows)")
    chosen = set(random.Random(f"{EVAL_SEED}/{fraction}").sample(range(len(rows)), n_eval))
    return ([r for i, r in enumerate(numbered) if i not in chosen],
            [r for i, r in enumerate(numbered) if i in chosen])


class _Rows:
    """Turns rows into Examples, refusing the first bad one by its row number."""

    def __init__(self, fields: FieldMap) -> None:
        self.fields = fields
        self.skipped: list[str] = []  # "FILE, row N: why" of each row left out (fields.skip_bad_rows)

    @staticmethod
    def refuse_structured(table: Table, names: tuple[str, ...]) -> None:
        """A field of structs or lists is no text and no label (its str() would train a Python repr)."""
        for name in names:
            kind = next((k for row in table.train + (table.eval or []) if (k := structure(row.get(name)))), None)
            if kind:
                raise ValueError(f"the field {word(name)} holds {kind}, not plain text or labels: name a field of "
                                 "plain values, or flatten it into one first")

    def examples(self, rows: list[dict[str, Any]], *, where: str) -> list[Example]:
        out = []
        for i, row in enumerate(rows):
            number = row.get(ROW_NUMBER, i + 1)  # held-back rows keep their number in the file
            try:
                out.append(self.example(row))
            except ValueError as err:
                if not self.fields.skip_bad_rows:
                    raise ValueError(f"{where}, row {number}: {err}") from None
                self.skipped.append(f"{where}, row {number}: {err}")
        if rows and not out:
            raise ValueError(f"{where}: every row was left out as bad; the first: {self.skipped[0]}")
        return out

    def example(self, row: dict[str, Any]) -> Example:
        raise NotImplementedError

    def label_words(self) -> tuple[str, ...]:
        return ()

    def text(self, row: dict[str, Any], name: str, *, flatten: bool = True) -> str:
        """The field's text; `flatten`: its whitespace runs as single spaces (a response keeps its lines)."""
        if name not in row:
            raise ValueError(f"no field {word(name)} (its fields: {listed(k for k in row if k != ROW_NUMBER)})")
        value = row[name]
        if value is None:  # a JSON row without it: `datasets` fills the column with None
            raise ValueError(f"the field {name!r} has no value")
        if isinstance(value, str) and not value.strip():
            raise ValueError(f"the field {name!r} is empty")
        return " ".join(str(value).split()) if flatten else str(value).strip()

    def check_length(self, *texts: str) -> None:
        n = sum(len(t) for t in texts)
        if n > self.fields.max_row_chars:
            raise ValueError(f"the row is {n} characters long, over the limit of {self.fields.max_row_chars} "
                             "(max row characters)")


class _ResponseRows(_Rows):
    def __init__(self, fields: FieldMap, table: Table) -> None:
        super().__init__(fields)
        self.refuse_structured(table, (fields.prompt_field, fields.response_field))

    def example(self, row: dict[str, Any]) -> Example:
        prompt = self.text(row, self.fields.prompt_field, flatten=False)
        response = self.text(row, self.fields.response_field, flatten=False)
        self.check_length(prompt, response)
        return Example(text=prompt, response=response)


class _ClassRows(_Rows):
    def __init__(self, fields: FieldMap, table: Table) -> None:
        super().__init__(fields)
        self.label_field = fields.label_field or DEFAULT_LABEL_FIELD
        self.text_fields = fields.text_fields or next(
            (names for names in DEFAULT_TEXT_FIELDS if set(names) <= set(table.columns)), ())
        if not self.text_fields:
            raise ValueError(f"which fields are the text? the file's fields are {listed(table.columns)} "
                             "(name them as the text fields)")
        self.refuse_structured(table, (*self.text_fields, self.label_field))
        self.words = fields.label_words or (table.class_names if table.class_column == self.label_field else ())
        if not fields.label_words and not self.words:  # the labels are the words themselves
            values = {row.get(self.label_field) for row in table.train + (table.eval or [])}
            self.words = tuple(sorted(str(v).strip() for v in values if isinstance(v, str) and v.strip()))
        if len(set(self.words)) != len(self.words):
            again = next(w for i, w in enumerate(self.words) if w in self.words[:i])
            raise ValueError(f"the label words repeat {word(again)} ({len(self.words):,} words, "
                             f"{len(set(self.words)):,} distinct)")
        if len(self.words) == 1:  # none: class indices without words, refused at the first row
            raise ValueError(f"one label word ({clip(self.words[0])}): a classification needs at least two classes")

    def example(self, row: dict[str, Any]) -> Example:
        texts = [self.text(row, name) for name in self.text_fields]
        self.check_length(*texts)
        if self.label_field not in row or row[self.label_field] is None:
            raise ValueError(f"no label in the field {self.label_field!r}")
        value = row[self.label_field]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"the label {clip(repr(value))} is neither a label word nor a class index")
        if isinstance(value, int) or value.strip().lstrip("-").isdigit() and value.strip() not in self.words:
            index = int(value)
            if not self.words:
                raise ValueError(f"the label {index} is a class index, but no label words name the classes "
                                 "(give the label words, comma-separated, in class order)")
            if not 0 <= index < len(self.words):
                raise ValueError(f"the label {index} is out of range for {len(self.words)} label words "
                                 f"({listed(self.words)})")
            label = index
        elif value.strip() in self.words:
            label = self.words.index(value.strip())
        else:
            raise ValueError(f"the label {word(value.strip())} is not one of the label words ({listed(self.words)})")
        return Example(text=TEXT_JOIN.join(texts), label=label)

    def label_words(self) -> tuple[str, ...]:
        return self.words
