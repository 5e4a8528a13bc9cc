"""The method itself: a model cut into chunks, what crosses a boundary, the local objective, the split
backward of zero-bubble schedules, and where the cuts go (balance.py's exact DP over chunk costs)."""
