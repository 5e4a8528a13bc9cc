"""What every benchmark command shares: flags and settings, the runner, measured and predicted
runs, probes, the paper's figures, tables, plots and image export, and the worker processes."""
