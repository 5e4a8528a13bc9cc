"""What trains a chunk, and a run's set-up: the stage worker's forward / local step / backward, the
single-process reference trainer, the run's set-up and its preflight (everything checked before anything
exists), measured layer costs and `--boundaries auto`, evaluation, determinism and the thread policy."""
