"""The multi-process pipeline runtime: one OS process per stage over torch.distributed."""
