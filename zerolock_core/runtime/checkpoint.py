"""The pipeline's per-stage checkpoints: the commit protocol lives in `rundir/checkpoints.py`, a room below
the runtime, so that the reference trainer (train/, below runtime/) writes the same format."""
from ..rundir.checkpoints import MANIFEST, META, TENSORS, Checkpoint, CheckpointStore, capture, restore

__all__ = ["MANIFEST", "META", "TENSORS", "Checkpoint", "CheckpointStore", "capture", "restore"]
