"""What every view shares (the dashboard, benchmarks' figures, notebooks): colours, names and redraw pace."""
