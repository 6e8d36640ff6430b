"""The recall study's verdicts, judged again from its stored trials by each metric's own test.

    python -m bench.recall_verdicts [--trials docs/verdicts/data/recall_study_trials.csv] [--json out.json]

Reads the per-trial values of studies/recall.yaml as run (reserved_recall_auc, reserved_recall_tokens
with the budget where recall never came, val_loss) and judges every design against the baseline,
paired by seed, with the study's own rule (`verdicts.rule_for`: level, family, margins) and the
fronts' own comparisons (`fronts._comparison`: each metric's test from trainers.metrics): the
study's two objectives plus reserved_recall_tokens, one family. Prints a markdown table: per design
and metric, the difference, its interval, the word, the test that judged it, its p-value and the
seeds that test would need.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from bench.default_odds import table_rows
from sweeps.report.calibrate import RECALL_TRIALS
from sweeps.report.fronts import _comparison
from sweeps.report.verdicts import judge, rule_for
from sweeps.study.load import load_study

STUDY = Path("studies/recall.yaml")
METRICS = (
    ("reserved_recall_auc", "maximize"),
    ("reserved_recall_tokens", "minimize"),
    ("val_loss", "minimize"),
)


def rows_of(path: Path) -> dict[str, dict]:
    """Per design: {"samples": {metric: {seed: value}}, "budget": tokens} as the fronts hold them."""
    trials = table_rows(path)
    budget = max(float(r["emerged_at"]) for r in trials if r["emerged_at"])
    out: dict[str, dict] = {}
    for r in trials:
        row = out.setdefault(r["design"], {"samples": {m: {} for m, _ in METRICS}, "budget": budget})
        seed = int(r["seed"])
        row["samples"]["reserved_recall_auc"][seed] = float(r["auc"])
        row["samples"]["reserved_recall_tokens"][seed] = float(r["emerged_at"]) if r["emerged_at"] else budget
        row["samples"]["val_loss"][seed] = float(r["val_loss"])
    return out


def verdicts(study, rows: dict[str, dict], reference: str = "baseline") -> tuple[list[dict], dict]:
    family = []
    for design, row in rows.items():
        if design == reference:
            continue
        for metric, direction in METRICS:
            c = _comparison(row, rows[reference], metric, direction, frozenset(), "")
            c.pop("row"), c.pop("against")
            family.append({**c, "design": design})
    summary = judge(family, rule_for(study))
    return family, summary


def table(family: list[dict], summary: dict) -> str:
    lines = [
        f"Rule: {summary['rule']}.",
        "",
        "| design | metric | difference | interval | verdict | test | p | seeds to decide |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in family:
        span = f"[{c['lo']:+.4g}, {c['hi']:+.4g}]" if math.isfinite(c["lo"]) else "-"
        needed = c.get("seeds_to_decide")
        needed = "-" if c["verdict"] in ("better", "worse", "equivalent") else (needed or "none found")
        lines.append(
            f"| {c['design']} | {c['metric']} | {c['mean']:+.4g} | {span} | {c['verdict']} | {c['test']} |"
            f" {c['p']:.3g} | {needed} |"
        )
    return "\n".join(lines)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.recall_verdicts", description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=Path, default=RECALL_TRIALS)
    p.add_argument("--study", type=Path, default=STUDY)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    for path in (args.trials, args.study):
        if not path.is_file():
            p.error(f"{path}: no such file")
    family, summary = verdicts(load_study(args.study), rows_of(args.trials))
    print(table(family, summary))
    report = {"summary": summary, "comparisons": family}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str) + "\n")
    return report


if __name__ == "__main__":
    sys.exit(main() and 0)
