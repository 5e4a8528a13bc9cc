"""Your own data in: files read through `datasets` (CSV with a header, JSON Lines, Parquet, save_to_disk),
their fields mapped to a classification or a prompt -> response task, Ω over exactly the answer's tokens,
a held-back eval split disjoint from the train rows, and every bad file refused before anything exists."""
import json
import re
from pathlib import Path

import pytest
import torch

from zerolock_core.config.run_config import DataConfig, ObjectiveConfig, RunConfig, TrainConfig, replace
from zerolock_core.data import Example, encode_split, load_task
from zerolock_core.data.encoding import IGNORE_INDEX, label_first_tokens, prompt_frame
from zerolock_core.data.user_task import ROW_NUMBER, FieldMap, held_back
from zerolock_core.models.loading import load_tokenizer

TOPICS = {"sport": ("match", "goal", "team"), "money": ("bank", "stock", "market"), "science": ("lab", "cell", "study")}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def class_rows(n: int = 40) -> list[dict]:
    names = list(TOPICS)
    return [{"id": i, "headline": " ".join(TOPICS[names[i % 3]][(i + j) % 3] for j in range(4)),
             "topic": names[i % 3]} for i in range(n)]


def qa_rows(n: int = 40) -> list[dict]:
    return [{"q": f"What is {i % 7} plus {i % 5}?", "a": f"It is {i % 7 + i % 5}."} for i in range(n)]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")


# ---- Ω: exactly the answer's tokens ------------------------------------------------------------------
@pytest.mark.parametrize("example,label_words", [
    (Example(text="a goal for the team", label=1), ("sport", "money", "science")),
    (Example(text="the bank and the market " * 20, label=2), ("sport", "money", "science")),  # the text is cut
    (Example(text="What is 2 plus 3?", response="It is 5."), ()),
    (Example(text="Say a long thing", response="word " * 100), ()),  # the response is cut at its end
])
def test_omega_covers_exactly_the_answer_tokens(tokenizer, example, label_words):
    split = encode_split([example], tokenizer=tokenizer, cue="Label:" if label_words else "Response:",
                         label_words=label_words, seq_len=48)
    row, labels = split.input_ids[0], split.labels[0]
    omega = (labels != IGNORE_INDEX).nonzero()[:, 0]
    answer = row[omega + 1].tolist()
    if label_words:
        expected = tokenizer(" " + label_words[example.label], add_special_tokens=False)["input_ids"]
    else:
        expected = tokenizer(" " + example.response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        expected = expected[:len(answer)]  # cut to the row, never below one token
        assert len(answer) >= 1
    assert answer == expected
    assert omega.tolist() == list(range(int(omega[0]), int(omega[0]) + len(answer)))  # one contiguous run
    assert int(split.attention_mask[0].sum()) == int(omega[-1]) + 2  # the row ends with the answer
    _, tail = prompt_frame(tokenizer, "Label:" if label_words else "Response:", chat_template=False)
    assert row[int(omega[0]) + 1 - len(tail):int(omega[0]) + 1].tolist() == tail  # the cue survives a cut


def test_the_chat_template_frames_the_prompt_and_the_answer_is_the_response_with_eos(tokenizer):
    tok = load_tokenizer("tiny")
    tok.chat_template = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                         "{% if add_generation_prompt %}assistant:{% endif %}")
    split = encode_split([Example(text="Hi there", response="Hello")], tokenizer=tok, cue="Response:",
                         label_words=(), seq_len=32, chat_template=True)
    omega = (split.labels[0] != IGNORE_INDEX).nonzero()[:, 0]
    prompt = tok.decode(split.input_ids[0, :int(omega[0]) + 1])
    assert prompt.replace(" ", "").endswith("user:Hithere\nassistant:".replace(" ", ""))
    assert split.input_ids[0, omega + 1].tolist() == tok("Hello", add_special_tokens=False)["input_ids"] + \
        [tok.eos_token_id]
    without = encode_split([Example(text="Hi there", response="Hello")], tokenizer=tok, cue="Response:",
                           label_words=(), seq_len=32, chat_template=False)
    assert "Response:" in tok.decode(without.input_ids[0])


# ---- files and fields ------------------------------------------------------------------------------------
def test_a_jsonl_classification_takes_its_label_words_from_the_data(tmp_path):
    task = load_task(f"jsonl:{write_jsonl(tmp_path / 'c.jsonl', class_rows())}",
                     fields=FieldMap(text_fields=("headline",), label_field="topic"))
    assert task.label_words == ("money", "science", "sport")  # sorted
    assert len(task.train) + len(task.eval) == 40 and len(task.eval) == 4
    assert {ex.label for ex in task.train} == {0, 1, 2}


def test_class_indices_take_the_given_label_words_and_csv_parquet_and_saved_datasets_read_alike(tmp_path):
    import datasets

    rows = [{"text": r["headline"], "label": ["sport", "money", "science"].index(r["topic"])} for r in class_rows()]
    ds = datasets.Dataset.from_list(rows)
    ds.to_csv(str(tmp_path / "c.csv"), index=False)
    ds.to_parquet(str(tmp_path / "c.parquet"))
    fields = FieldMap(label_words=("sport", "money", "science"))
    tasks = [load_task(f"{kind}:{tmp_path / name}", fields=fields)
             for kind, name in (("csv", "c.csv"), ("parquet", "c.parquet"))]
    labelled = ds.cast_column("label", datasets.ClassLabel(names=["sport", "money", "science"]))
    datasets.DatasetDict(train=labelled.select(range(30)), test=labelled.select(range(30, 40))).save_to_disk(
        str(tmp_path / "saved"))
    saved = load_task(f"disk:{tmp_path / 'saved'}")  # ClassLabel names: no label words needed
    assert (tasks[0].train, tasks[0].eval) == (tasks[1].train, tasks[1].eval)
    assert tasks[0].label_words == saved.label_words == ("sport", "money", "science")
    assert saved.train + saved.eval == tuple(Example(text=r["text"], label=r["label"]) for r in rows)


@pytest.mark.parametrize("columns,text", [
    (("text", "title", "label"), "the text"),  # text first, whatever else the file has
    (("title", "description", "question", "label"), "the title. the description"),
    (("question", "fine_label", "label"), "the question"),  # TREC's shape
])
def test_the_text_fields_default_to_the_first_known_shape(tmp_path, columns, text):
    values = {"text": "the text", "title": "the title", "description": "the description", "question": "the question",
              "fine_label": "HUM:ind"}
    rows = [{**{c: values[c] for c in columns if c != "label"}, "label": ("yes", "no")[i % 2]} for i in range(10)]
    task = load_task(f"jsonl:{write_jsonl(tmp_path / 'd.jsonl', rows)}")
    assert {ex.text for ex in task.train} == {text}


@pytest.mark.parametrize("columns,response", [
    (("prompt", "response"), True),  # an instruction file's shape: prompt -> response, nothing to name
    (("prompt", "response", "text", "label"), False),  # a classification's text and label come first
])
def test_a_prompt_response_file_needs_no_field(tmp_path, columns, response):
    rows = [{"prompt": f"say {i}", "response": f"{i}", "text": f"t {i}", "label": ("yes", "no")[i % 2]}
            for i in range(10)]
    task = load_task(f"jsonl:{write_jsonl(tmp_path / 'd.jsonl', [{c: r[c] for c in columns} for r in rows])}")
    assert (task.label_words == ()) == response
    if response:
        assert {(ex.text, ex.response) for ex in task.train + task.eval} == {(f"say {i}", f"{i}") for i in range(10)}


TRAIN_ROWS = [r[ROW_NUMBER] - 1 for r in held_back([{}] * 10, 0.1, where="")[0]]  # the rows not held back


@pytest.mark.parametrize("empty,kept", [(tuple(TRAIN_ROWS[:2]), 8), (tuple(range(10)), None)])
def test_skip_bad_rows_leaves_them_out_and_says_how_many(tmp_path, empty, kept):
    """The studies' Alpaca file has two empty responses among 5,000: refused by default, left out on ask."""
    rows = [{"prompt": f"say {i}", "response": "" if i in empty else f"{i}"} for i in range(10)]
    spec = f"jsonl:{write_jsonl(tmp_path / 'd.jsonl', rows)}"
    with pytest.raises(ValueError, match="the field 'response' is empty"):
        load_task(spec)
    if kept is None:
        with pytest.raises(ValueError, match="every row was left out as bad"):
            load_task(spec, fields=FieldMap(skip_bad_rows=True))
        return
    task = load_task(spec, fields=FieldMap(skip_bad_rows=True))
    assert len(task.train + task.eval) == kept
    assert {ex.response for ex in task.train + task.eval} == {f"{i}" for i in range(10) if i not in empty}
    assert re.search(r"2 bad row\(s\) left out, the first: .*d\.jsonl.*, row \d+: the field 'response' is empty",
                     task.description), task.description


def test_an_agnews_shaped_csv_needs_no_field(tmp_path):
    path = tmp_path / "news.csv"
    path.write_text("".join(f'"{i % 4 + 1}","title {i}","text {i}"\n' for i in range(20)))
    task = load_task(f"csv:{path}")
    assert task.label_words == ("World", "Sports", "Business", "Tech") and len(task.train) == 18


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5])
def test_held_back_eval_rows_never_overlap_the_train_rows(fraction):
    rows = [{"id": i} for i in range(97)]
    train, evals = held_back(rows, fraction, where="f")
    train_ids, eval_ids = {r["id"] for r in train}, {r["id"] for r in evals}
    assert not train_ids & eval_ids and train_ids | eval_ids == set(range(97))
    assert len(evals) == round(97 * fraction)
    assert held_back(rows, fraction, where="f") == (train, evals)  # seeded


def test_an_eval_file_replaces_the_held_back_rows(tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", qa_rows(30))
    evals = write_jsonl(tmp_path / "eval.jsonl", qa_rows(8))
    task = load_task(f"jsonl:{train}", fields=FieldMap(prompt_field="q", response_field="a"),
                     eval_spec=f"jsonl:{evals}")
    assert len(task.train) == 30 and len(task.eval) == 8 and task.kind == "response"


def test_label_words_that_start_alike_are_named_with_a_fix(tokenizer):
    with pytest.raises(ValueError, match=r"'team' and 'teams' both start with the token 'Ġteam'.*rename the classes"):
        label_first_tokens(tokenizer, ("team", "teams", "World"))


# ---- bad files: one line, nothing created ----------------------------------------------------------------
BAD_FILES = [
    # (file name, content, flags, the message's key part)
    ("empty.jsonl", "", ["--prompt-field", "q", "--response-field", "a"], r"empty\.jsonl: the file holds no rows"),
    ("broken.jsonl", '{"q": "a", "a": "b"}\n{"q": \n', ["--prompt-field", "q", "--response-field", "a"],
     r"broken\.jsonl: not valid JSON Lines \(.*on line 2"),
    ("missing.jsonl", '{"q": "a", "a": "b"}\n' * 30 + '{"q": "a"}\n', ["--prompt-field", "q", "--response-field", "a"],
     r"missing\.jsonl, row 31: the field 'a' has no value"),
    ("blank.jsonl", '{"q": "a", "a": "b"}\n' * 30 + '{"q": "a", "a": "  "}\n',
     ["--prompt-field", "q", "--response-field", "a"], r"blank\.jsonl, row \d+: the field 'a' is empty"),
    ("range.jsonl", '{"text": "a b c", "label": 1}\n' * 30 + '{"text": "a b c", "label": 3}\n',
     ["--label-words", "yes,no,maybe"], r"range\.jsonl, row \d+: the label 3 is out of range for 3 label words"),
    ("long.jsonl", '{"q": "a", "a": "b"}\n' * 30 + json.dumps({"q": "x" * 500, "a": "b"}) + "\n",
     ["--prompt-field", "q", "--response-field", "a", "--max-row-chars", "100"],
     r"long\.jsonl, row \d+: the row is 501 characters long, over the limit of 100"),
    ("bad.csv", "text,label\nfine,yes\nfine,no\n" + "x,yes\n" * 148 + "x,yes,extra\n", [],
     r"bad\.csv: cannot be read as CSV \(.*line 152"),
    ("agnews.csv", '"1","t","d"\n' * 100 + '"7","t","d"\n', [], r"agnews\.csv line 101: class index '7'"),
    ("huge.csv", '"1","t","d"\n' + '"2","t","' + "y" * 200_000 + '"\n', [], r"huge\.csv line 2: field larger than"),
    ("nolabel.jsonl", '{"text": "a b c", "label": 0}\n' * 30, [], r"row 1: the label 0 is a class index, but no label words"),
]


@pytest.mark.parametrize("name,content,flags,message", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_file_is_refused_in_one_line_before_anything_is_created(tmp_path, capsys, name, content, flags, message):
    from zerolock_core.cli import main

    path = tmp_path / name
    path.write_text(content)
    kind = {".jsonl": "jsonl", ".csv": "csv"}[path.suffix]
    out = tmp_path / "run"
    code = main(["train", "--quiet", "--dataset", f"{kind}:{path}", *flags, "--steps", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("zerolock: error: ")
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert re.search(message, lines[0]), lines[0]
    assert not out.exists()


@pytest.mark.parametrize("flags,message", [
    (["--prompt-field", "q"], "needs both --prompt-field and --response-field"),
    (["--dataset", "topics", "--label-field", "y"], "--label-field names a field of your own file"),
    (["--prompt-field", "q", "--response-field", "a", "--label-words", "x,y"], "--label-words belongs to a classification"),
])
def test_field_flags_that_contradict_each_other_are_refused(tmp_path, flags, message):
    from zerolock_core.cli import build_parser, config_from_args
    from zerolock_core.config.field_words import ConfigError

    data = write_jsonl(tmp_path / "d.jsonl", qa_rows())
    args = build_parser().parse_args(["train", "--dataset", f"jsonl:{data}", *flags])
    with pytest.raises(ConfigError, match=message):
        config_from_args(args, out=str(tmp_path / "run"))


# ---- training on them: the pipeline equals the reference ---------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("task", ["classification", "response"])
def test_the_pipeline_equals_the_reference_bitwise_on_a_users_file(tmp_path, task):
    from zerolock_core.rundir.artifacts import load_final_weights
    from zerolock_core.jobs.job import train
    from zerolock_core.train.reference_trainer import train_reference

    if task == "classification":
        path = write_jsonl(tmp_path / "c.jsonl", class_rows())
        data = dict(dataset=f"jsonl:{path}", text_fields=("headline",), label_field="topic")
    else:
        path = write_jsonl(tmp_path / "qa.jsonl", qa_rows())
        data = dict(dataset=f"jsonl:{path}", prompt_field="q", response_field="a")

    def cfg(name, runtime):
        return RunConfig(data=DataConfig(seq_len=32, eval_size=8, **data), objective=ObjectiveConfig(alpha=(0.5,)),
                         train=TrainConfig(runtime=runtime, method="zerolock", stages=3, batch=4, microbatches=2,
                                           steps=3, threads=1), out=str(tmp_path / name))

    ref = train_reference(cfg("ref", "reference"), progress=False)
    got = train(cfg("pipe", "pipeline"), progress=False)
    a, b = load_final_weights(tmp_path / "ref"), load_final_weights(tmp_path / "pipe")
    assert sorted(a) == sorted(b) == [0, 1, 2]
    for k in a:
        for name in a[k]:
            assert torch.equal(a[k][name], b[k][name]), (k, name)
    for metrics in (ref, got):
        assert metrics.state == "finished"
        if task == "response":
            assert metrics.eval["label_accuracy"] is None and 0 <= metrics.eval["token_accuracy"] <= 1
            assert metrics.eval["exact_match_examples"] == 4  # the held-back rows
        else:
            assert 0 <= metrics.eval["label_accuracy"] <= 1
    assert got.eval == ref.eval


# ---- the README's example files ----------------------------------------------------------------------
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_committed_example_files_are_what_the_script_makes_and_read_as_the_docs_say(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_example_data", EXAMPLES / "make_example_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    for name in ("desks.csv", "briefs.jsonl"):  # text files: byte for byte (Parquet embeds its writer's version)
        assert (tmp_path / name).read_bytes() == (EXAMPLES / "data" / name).read_bytes(), name
    desks = load_task(f"csv:{EXAMPLES / 'data' / 'desks.csv'}", fields=FieldMap(text_fields=("headline",),
                                                                               label_field="desk"))
    indexed = load_task(f"parquet:{EXAMPLES / 'data' / 'desks.parquet'}",
                        fields=FieldMap(label_words=("World", "Sports", "Business")))
    assert desks.label_words == ("Business", "Sports", "World") and len(desks.train) == 540
    assert [desks.label_words[e.label] for e in desks.train] == [indexed.label_words[e.label] for e in indexed.train]
    briefs = load_task(f"jsonl:{EXAMPLES / 'data' / 'briefs.jsonl'}",
                       fields=FieldMap(prompt_field="prompt", response_field="response"))
    assert briefs.kind == "response" and len(briefs.eval) == 60


def test_generate_puts_a_response_runs_prompts_in_its_own_frame_and_expects_the_response(tmp_path):
    from zerolock_core.export.generation import GenerateRequest, generate_answers
    from zerolock_core.train.reference_trainer import train_reference

    path = write_jsonl(tmp_path / "qa.jsonl", qa_rows())
    cfg = RunConfig(data=DataConfig(dataset=f"jsonl:{path}", prompt_field="q", response_field="a", seq_len=32,
                                    eval_size=8),
                    train=TrainConfig(runtime="reference", method="zerolock", stages=2, batch=4, microbatches=2,
                                      steps=2, threads=1), out=str(tmp_path / "run"))
    train_reference(cfg, progress=False)
    answers = generate_answers(tmp_path / "run", GenerateRequest(prompts=("What is 1 plus 1?",), eval_rows=2,
                                                                 max_new_tokens=3))
    evals = load_task(f"jsonl:{path}", fields=FieldMap(prompt_field="q", response_field="a")).eval
    assert [a.expected for a in answers] == [None, evals[0].response, evals[1].response]
    assert [a.prompt for a in answers] == ["What is 1 plus 1?", evals[0].text, evals[1].text]
