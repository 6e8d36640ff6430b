"""Parsing is pure: every study in studies/ and every trial in trials/ parses without importing
torch, Lightning, lm-eval or liger-kernel (what the machine and the files allow is the launch's
preflight, sweeps.run.preflight, and the trial's, trainers.preflight). In a fresh interpreter, so
that nothing another test imported counts."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("torch", "lightning", "lm_eval", "liger_kernel")
CODE = """
import sys
from pathlib import Path
from arch.configtree import load_yaml
from sweeps.study import load_study
from trainers.config import TrialConfig
for path in sys.argv[1:]:
    if path.startswith("studies/"):
        load_study(path)
    else:
        TrialConfig.from_dict(load_yaml(Path(path).read_text(), path) or {}, path)
print(sorted(m for m in HEAVY if m in sys.modules))
"""


def test_every_study_and_trial_parses_without_torch_lm_eval_or_liger_kernel():
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "studies").rglob("*.yaml"))
    files += sorted(str(p.relative_to(ROOT)) for p in (ROOT / "trials").glob("*.yaml"))
    assert len(files) >= 20  # matched baselines and ladders included: they count parameters unbuilt
    code = CODE.replace("HEAVY", repr(HEAVY))
    out = subprocess.run([sys.executable, "-c", code, *files], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
