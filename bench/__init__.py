"""Benchmarks: cost of every residual design, and cost of the sweep orchestrator. Not tests."""
