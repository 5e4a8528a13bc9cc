"""ZeroLock: pipeline-parallel LLM fine-tuning without update locking."""

__version__ = "0.1.0"
