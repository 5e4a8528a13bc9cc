"""A training job's lifecycle: start, progress, stop and end, one interface over both runtimes (the
pipeline's coordinator and the single-process reference), and Ctrl-C / SIGTERM as a stop request."""
