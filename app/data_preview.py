"""The Run form's preview of a dataset: its first rows as the model will see them, token by token, the
answer's tokens (Ω: what the loss and the eval score) outlined. Read with the same code a run uses
(data.load_data, data.encode_split), so what it shows is what trains."""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zerolock_core.viz.palette import HIGHLIGHT_COLOUR, NEUTRAL

if TYPE_CHECKING:
    from zerolock_core.config.run_config import DataConfig

PREVIEW_ROWS = 3
CLASSIFICATION_KIND = "classification"
RESPONSE_KIND = "prompt → response"
DATA_KINDS = (CLASSIFICATION_KIND, RESPONSE_KIND)


@dataclass(kw_only=True, frozen=True)
class DataFields:
    """The Run form's data fields as typed (names comma-separated); only the chosen kind's are read."""
    kind: str = CLASSIFICATION_KIND
    text_fields: str = ""
    label_field: str = ""
    label_words: str = ""
    prompt_field: str = ""
    response_field: str = ""

    def config_fields(self) -> dict[str, object]:
        """The engine's DataConfig fields (run_fields.py) these stand for."""
        from zerolock_core.config.arg_types import names_arg, words_arg  # words_arg keeps an empty word to refuse

        if self.kind == RESPONSE_KIND:
            return dict(prompt_field=self.prompt_field.strip(), response_field=self.response_field.strip())
        return dict(text_fields=names_arg(self.text_fields), label_field=self.label_field.strip(),
                    label_words=words_arg(self.label_words))

    def data_config(self, dataset: str, *, seq_len: int, eval_size: int) -> "DataConfig":
        """The run's data section for `dataset` (a built-in task's name, or a file's `kind:path` spec, which
        alone reads these fields): what the run trains on and what the preview shows are one config."""
        from zerolock_core.config.run_config import DataConfig

        return DataConfig(dataset=dataset, seq_len=seq_len, eval_size=eval_size,
                          **(self.config_fields() if ":" in dataset else {}))


def check_data(data: "DataConfig", *, model: str) -> None:
    """The engine's checks of a run's data section, the ones Run makes before anything starts (preflight:
    every row read, the fields, the classes, their distinct first tokens under the model's tokenizer, rows
    that fit the sequence length); a ValueError in the form's words says what is wrong."""
    from zerolock_core.config.field_words import FORM, ConfigError, render
    from zerolock_core.config.run_config import ModelConfig, RunConfig
    from zerolock_core.train.preflight import check_dataset

    try:
        check_dataset(RunConfig(data=data, model=ModelConfig(model=model)))
    except ConfigError as err:
        raise ValueError(render(err, FORM)) from None


def preview_html(data: "DataConfig", *, model: str, rows: int = PREVIEW_ROWS) -> str:
    """The first `rows` train rows of a run's data section as its run reads and tokenises them (its eval
    split held back as the run holds it); a ValueError says what is wrong."""
    from zerolock_core.data import encode_split, load_data
    from zerolock_core.data.encoding import IGNORE_INDEX
    from zerolock_core.models.loading import load_tokenizer
    from zerolock_core.train.run_setup import DATA_SEED

    check_data(data, model=model)  # every check Run makes of it first (an empty label word), in the form's words
    task = load_data(data, seed=DATA_SEED)
    tokenizer = load_tokenizer(model)
    seq_len = data.seq_len
    enc = encode_split(task.train[:rows], tokenizer=tokenizer, cue=task.cue, label_words=task.label_words,
                       seq_len=seq_len, chat_template=data.chat_template)
    what = (f"{len(task.label_words)} classes: {', '.join(task.label_words)}" if task.label_words else
            "prompt → response")
    parts = [f"<p><b>{html.escape(task.name)}</b> — {html.escape(what)}; {len(task.train)} train / "
             f"{len(task.eval)} eval rows. The first {len(enc)} as the model sees them ({seq_len} tokens a row); "
             f"<span style='outline:2px solid {HIGHLIGHT_COLOUR}'>outlined</span>: the answer's tokens, what "
             "the loss trains and the eval scores.</p>"]
    for i in range(len(enc)):
        length = int(enc.attention_mask[i].sum())
        answer = {int(p) + 1 for p in (enc.labels[i] != IGNORE_INDEX).nonzero()[:, 0]}
        spans = []
        for pos in range(length):
            token = html.escape(tokenizer.decode([int(enc.input_ids[i, pos])])).replace("\n", "⏎")
            style = (f"outline:2px solid {HIGHLIGHT_COLOUR};font-weight:600" if pos in answer else
                     f"background:{NEUTRAL['idle']}")
            spans.append(f"<span style='{style};display:inline-block;margin:1px;padding:0 2px;white-space:pre'>{token}</span>")
        parts.append(f"<div class='data-preview-row' style='line-height:1.9;margin:6px 0;"
                     f"color:{NEUTRAL['ink']}'>{''.join(spans)}</div>")
    return "\n".join(parts)
