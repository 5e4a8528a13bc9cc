"""One table over several `zerolock bench quality` result files: the results page's summary of a series of runs.

Every arm of every file is a row: its label accuracy at each eval step (the mean over its seeds), its
NLL at the end and what each chunk's own readout reads at the end (first seed). A row is labelled by
what its file changed against the first file (K, seeds, LoRA targets, chunk boundaries), so rows from
a K=2 or a seed-1 run say so.
"""

from __future__ import annotations

from statistics import mean
from typing import Any, Callable

from .common.table import joined, markdown_table

# the settings a series varies, and how a row says it changed
VARIED: tuple[tuple[str, Callable[[Any], str]], ...] = (
    ("stages", lambda v: f"K={v}"),
    ("seeds", lambda v: "seed " + ", ".join(map(str, v))),
    ("lora_targets", lambda v: "LoRA on " + ", ".join(t.removesuffix("_proj") for t in v)),
    ("boundaries", lambda v: "boundaries " + ", ".join(map(str, v))),
)


def _setting(config: dict[str, Any], key: str) -> Any:
    value = config.get(key)
    return None if value == "even split" else value  # older files wrote None for the even split


def row_label(config: dict[str, Any], base: dict[str, Any], arm: str) -> str:
    changed = [say(_setting(config, key)) for key, say in VARIED if _setting(config, key) != _setting(base, key)]
    return f"{'; '.join(changed)}: {arm}" if changed else arm


def _at(curves: list[dict[str, Any]], step: int) -> float | None:
    values = [c["label_accuracy"][c["step"].index(step)] for c in curves if step in c["step"]]
    return mean(values) if values else None


def format_summary(reports: list[dict[str, Any]]) -> str:
    if not reports:
        raise ValueError("a quality summary needs at least one result file")
    base = reports[0]["config"]
    steps = sorted({s for r in reports for arm in r["results"].values() for c in arm["curves"] for s in c["step"]})
    rows = []
    for r in reports:
        for arm, res in r["results"].items():
            curves = res["curves"]
            cells = [_at(curves, s) for s in steps]
            rows.append([row_label(r["config"], base, arm), *("—" if v is None else f"{v:.2f}" for v in cells),
                         f"{mean(c['nll'][-1] for c in curves):.2f}",
                         joined([x["label_accuracy"] for x in curves[0]["final_per_chunk"]], sep=" / ")])
    sizes = sorted({r["config"]["eval_size"] for r in reports})
    return "\n".join([
        f"label accuracy on {' or '.join(map(str, sizes))} eval examples, by optimizer step (the mean over an "
        "arm's seeds; — = not evaluated at that step)",
        markdown_table(["arm", *(f"step {s}" for s in steps), "NLL at the end",
                        "label acc. per chunk at the end (first seed)"], rows),
    ])
