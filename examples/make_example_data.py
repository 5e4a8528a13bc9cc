"""Writes the example files of the README's "Your own data" (examples/data/): synthetic headlines from the
`topics` generator, in shapes a user's data comes in. Deterministic: rerunning rewrites the same bytes.

    python examples/make_example_data.py

* `desks.csv` — a classification with a header row: `headline`, `desk` (three classes, the desk's word)
* `desks.parquet` — the same rows as Parquet, the class as an index (give the label words)
* `briefs.jsonl` — prompt -> response: a headline, and a one-line brief naming its desk
"""
from __future__ import annotations

import csv
import json
import random
from pathlib import Path

from zerolock_core.data.topics import draw_headline

OUT = Path(__file__).resolve().parent / "data"
DESKS = ("World", "Sports", "Business")  # three of the four topics: a class count the built-ins do not have
ROWS = 600


def rows(seed: str) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(ROWS):
        item = draw_headline(rng, i % len(DESKS))
        while item.label >= len(DESKS):  # label noise drew the fourth topic: draw again
            item = draw_headline(rng, i % len(DESKS))
        out.append({"headline": item.text, "desk": DESKS[item.label], "desk_index": item.label})
    return out


def main(out: Path = OUT) -> None:
    import datasets

    datasets.disable_progress_bars()
    out.mkdir(parents=True, exist_ok=True)
    data = rows("zerolock/examples/desks")
    with (out / "desks.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["headline", "desk"])
        writer.writerows([r["headline"], r["desk"]] for r in data)
    datasets.Dataset.from_list([{"text": r["headline"], "label": r["desk_index"]} for r in data]).to_parquet(
        str(out / "desks.parquet"))
    briefs = rows("zerolock/examples/briefs")
    with (out / "briefs.jsonl").open("w") as f:
        for r in briefs:
            f.write(json.dumps({"prompt": f"Write the brief for: {r['headline']}",
                                "response": f"A {r['desk']} story."}) + "\n")
    print(f"wrote {', '.join(sorted(p.name for p in out.iterdir()))} under {out}")


if __name__ == "__main__":
    main()
