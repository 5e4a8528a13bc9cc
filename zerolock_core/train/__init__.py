"""What trains a chunk: the stage worker's forward / local step / backward, the single-process reference
trainer, a run's set-up, evaluation, determinism and the thread policy."""
