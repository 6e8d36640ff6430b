"""Lightning training of one trial config (any residual design), with the metrics the fronts need."""
