"""Loading exports in a process that cannot import this project.

`python -I -S`: no PYTHONPATH, no user site, and no site-packages .pth files, so neither the
worktree nor the editable install's finder (a .pth hook that maps `arch` to the checkout) is on
the path; the venv's site-packages are appended by hand, which brings torch and transformers
and nothing of the project. The child refuses to start if `arch` or `trainers` is importable, and
fails if loading put any project module in sys.modules."""

import site
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import importlib.util, sys
sys.path.extend(sys.argv[3:])
PROJECT = ("arch", "trainers", "evals", "gates", "sweeps")
visible = [m for m in PROJECT if importlib.util.find_spec(m) is not None]
assert not visible, f"the project is importable here: {visible}"
import torch
from transformers import AutoModelForCausalLM

jobs = torch.load(sys.argv[1])
results = {}
for name, job in jobs.items():
    model = AutoModelForCausalLM.from_pretrained(job["folder"], trust_remote_code=True).eval()
    with torch.no_grad():
        logits = model(job["tokens"]).logits
    new = model.generate(
        job["prompt_ids"], attention_mask=job["prompt_mask"], max_new_tokens=job["max_new_tokens"],
        do_sample=False, pad_token_id=0,
    )
    results[name] = {"logits": logits, "generated": new[:, job["prompt_ids"].shape[1]:]}
leaked = sorted({m.split(".")[0] for m in sys.modules} & set(PROJECT))
assert not leaked, f"loading imported the project: {leaked}"
torch.save(results, sys.argv[2])
"""


def run_fresh(jobs: dict, work: Path) -> dict:
    """Loads every job's export in a fresh process; returns {name: {logits, generated}}.
    A job: folder, tokens [B, T], prompt_ids [B, P] left-padded with 0, prompt_mask, max_new_tokens."""
    import torch

    work.mkdir(parents=True, exist_ok=True)
    (work / "child.py").write_text(CHILD)
    torch.save(jobs, work / "jobs.pt")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "HF_HUB_OFFLINE": "1",
           "HF_MODULES_CACHE": str(work / "modules"), "OMP_NUM_THREADS": "1"}  # fmt: skip
    cmd = [sys.executable, "-I", "-S", str(work / "child.py"), str(work / "jobs.pt"), str(work / "out.pt")]
    done = subprocess.run([*cmd, *site.getsitepackages()], cwd=work, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    return torch.load(work / "out.pt")
