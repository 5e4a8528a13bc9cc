"""One stage's model load in a fresh process, for `zerolock bench stage-rss`; prints JSON.

Usage: python -m benchmarks.common.stage_rss_worker CONFIG_JSON STAGE partial|full
`floor` is the resident memory once Python, torch, transformers, peft, the tokenizer and the data
are in (what every stage pays before any weight); `loaded` right after the build; `rss` once every
weight of the chunk has been touched (as the first forward does: memory-mapped weights are read
only then); `peak` the high-water mark.
"""
from __future__ import annotations

import gc
import json
import sys

from zerolock_core.telemetry.process_memory import proc_status_bytes


def _status(field: str) -> int:
    value = proc_status_bytes(field)
    if value is None:
        raise RuntimeError(f"no {field} in /proc/self/status (this benchmark needs Linux)")
    return value


def main() -> None:
    cfg_json, stage, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    import peft.tuners.lora  # noqa: F401  (everything a stage imports, before the weights)
    import torch
    import transformers.masking_utils  # noqa: F401
    import transformers.models.llama.modeling_llama  # noqa: F401

    from zerolock_core import data
    from zerolock_core.config.run_config import RunConfig
    from zerolock_core.models.loading import load_tokenizer
    from zerolock_core.train.run_setup import DATA_SEED, build_run_setup

    torch.set_num_threads(1)
    cfg = RunConfig.from_dict(json.loads(cfg_json))
    data.load_data(cfg.data, seed=DATA_SEED)
    load_tokenizer(cfg.model.model)
    floor = _status("VmRSS")
    if mode == "partial":
        setup = build_run_setup(cfg, stage=stage)
        chunk = setup.chunks[0]
    else:  # what stages did before: load everything, keep one chunk
        setup = build_run_setup(cfg)
        chunk = setup.chunks[stage]
        setup.chunks = [chunk]
    gc.collect()
    loaded = _status("VmRSS")
    with torch.no_grad():  # touch every weight, as the first forward will: memory-mapped pages come in
        for p in chunk.parameters():
            p.sum()
    params = sum(p.numel() * p.element_size() for p in chunk.parameters())
    print(json.dumps({"floor_rss": floor, "loaded_rss": loaded, "rss": _status("VmRSS"), "peak_rss": _status("VmHWM"),
                      "chunk_param_bytes": params, "layers": list(chunk.layer_range)}))


if __name__ == "__main__":
    main()
