"""A run on disk: its directory and the runs root, the metrics record, atomic files, trained weights, the
encoded-data cache and loss curves."""
