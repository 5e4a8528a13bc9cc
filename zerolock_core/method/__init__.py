"""The method itself: a model cut into chunks, what crosses a boundary, the local objective, the split
backward, and where the cuts go (balance, measured layer costs, `--boundaries auto`)."""
