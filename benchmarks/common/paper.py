"""The paper's E1 figures (copied from the review's tables, listed in docs/TARGETS.md), to print
beside ours. Reductions are ZeroLock vs each
baseline as (ZeroLock − baseline) / baseline; throughput gains as ZeroLock / baseline − 1."""

from __future__ import annotations

SOURCE = "paper E1: TinyLlama 1.1B, 3 chunks on 3 L40 GPUs, LoRA r=4, AG News, seq 128, b=8, m=4"

MEMORY_VS = {  # Fig. 4
    "mean_peak": {"gpipe": -0.478, "1f1b": -0.147, "pipedream": -0.146},
    "max_peak": {"gpipe": -0.553, "1f1b": -0.266, "pipedream": -0.265},
    "activation": {"gpipe": -0.754, "1f1b": -0.408, "pipedream": -0.488},
}
THROUGHPUT_VS = {"gpipe": 0.558, "1f1b": 0.628, "pipedream": 0.049}  # at b=8, m=4
OOM_AT_BATCH = {"gpipe": 10, "1f1b": 20, "pipedream": 20, "zerolock": 28}  # m=4 (first b that failed)
DIRECTIONS = {
    "geometry": "as b/m grows, GPipe's memory grows sharply, ZeroLock's slowly (Fig. 5)",
    "throughput": "ZeroLock's advantage grows with stages, 2 -> 4 (Fig. 6a)",
    "links": "ZeroLock's advantage grows as the link slows: local -> wifi -> mobile -> constrained (Fig. 6b)",
    "quality": "ZeroLock tracks BP; alpha = 0.5 gives lower NLL than alpha = 1 (Fig. 3). The authors' notes "
               "(TinyLlama-1.1B, AG News, 3 chunks): BP 0.836, local CE only (alpha = 1) 0.832-0.836, terminal "
               "chunk only 0.805, base model 0.336; the KL term does not reliably beat CE only",
}
