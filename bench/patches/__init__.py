"""Patch files for `bench.training_equivalence --before-patch/--after-patch`: each runs in the
training subprocess before the run (run name `__patch__`) and monkeypatches the tree under test."""
