"""A training job's lifecycle: preflight, start, progress, stop and end, one interface over both runtimes
(the pipeline's coordinator and the single-process reference)."""
