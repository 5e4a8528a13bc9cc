"""Studies of a trained or training model: readability through the head at every depth, gradient
alignment with backprop, what each stage holds in memory."""
