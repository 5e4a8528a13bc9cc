"""How a record or a message names a path: never by the server's absolute path.

What a run writes for its readers (metrics.json, config.json, an export's zerolock_export.json and
README) and the messages a dashboard client may read name a path relative to a folder it lies in — the
run directory, an export — and a run by its directory's name. Only a path that lies in none of them is
shown as the caller gave it: the command line's own words, typed on the server itself.
"""
from __future__ import annotations

import os
import re
from pathlib import Path


def shown_path(path: str | Path, *, within: tuple[str | Path | None, ...] = ()) -> str:
    """`path` relative to the first folder of `within` that holds it ("." for the folder itself; None
    entries are skipped), else as given."""
    p = Path(path)
    for root in within:
        if root is None:
            continue
        try:
            inside = Path(os.path.abspath(p)).relative_to(os.path.abspath(root))
        except ValueError:
            continue
        return inside.as_posix() or "."
    return str(p)


def scrub(text: str, folder: str | Path, *, name: str | None = None) -> str:
    """`text` with every mention of `folder`'s absolute path made relative to it (a file in it: `final/x`;
    the folder itself: its `name`, by default its last part). Tracebacks and OS errors name files by
    their absolute paths: a record keeps what they say without where the server keeps its runs."""
    name = name if name is not None else Path(folder).name
    for absolute in sorted({os.path.abspath(folder), os.path.realpath(folder)}, key=len, reverse=True):
        text = re.sub(re.escape(absolute) + r"(?:/+|(?![\w.~-]))",
                      lambda m: "" if m.group(0).endswith("/") else name, text)
    return text
