"""Scaling ladders: fit how each design's loss falls with size and data, predict it at larger
scales with bootstrap intervals, and say where two designs cross.

Modules: `table` (the rows, read from a CSV), `law` (the laws and the robust objective), `fitting`
(identifiability, the fits, shared exponents), `intervals` (the paired bootstrap), `predict`
(verdicts, crossover, backtest), `outputs` (files and plots), `of_study` (the Ladder of a study's
trials and its report at the end of a launch), `pipeline` (`fit_and_predict(ladder, out_dir, ...)`
runs all of it). A study's `scaling:` section and the paper's targets are study data
(`sweeps.study.ladder`, `sweeps.study.targets`); the CLI is `python -m sweeps.scaling`.

Which N. The fits take N = non-embedding parameters: every parameter except the vocabulary tables
(the token embedding, and the output head when it is not tied to it), as Kaplan et al. 2020 count
it. Three reasons, in order: (1) a CPU ladder here is byte-level (256 symbols) while the paper's
targets use a 32,000-token vocabulary, so a total count would put 25-65M parameters of lookup
table into the targets that no rung ever varied; the non-embedding count means the same model
capacity at both ends; (2) at ladder sizes the tables' share changes with width (a byte table is
256 x d_model), which bends a law in total N (Kaplan's figure 6; Pearce and Song 2024 trace the
Kaplan/Chinchilla exponent gap to this choice); (3) C = 6 N D then counts the FLOPs of the
matrices that do the work. Chinchilla (Hoffmann et al. 2022) counts total parameters; its
published ladder fits here too, with whatever column is given (`--params`). Designs add their
own parameters (a SATFormer gate: under 0.1% at the paper's scales) and each rung counts them;
targets are counted on the baseline model (`targets.non_embedding_params`).
"""
