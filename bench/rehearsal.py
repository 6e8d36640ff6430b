"""`python -m bench.rehearsal [--out DIR] [--tokens N] [--kill-worker] [--dry-run]` (`make rehearsal`):
the paper's study rehearsed end to end on a CPU (studies/paper/rehearsal.yaml; docs/rehearsal.md).

Every stage runs as a user would run it, each a command of the project:

1. data: Shakespeare (a corpus the project ships) cut into documents, written as a local parquet
   folder in the hub's layout (`data/train-0000N-of-0000M.parquet`); a Llama-2-style
   tokenizer.json trained on it (trainers.data.llama_style); `python -m trainers.prepare hf`
   makes the token shards (EOS after each document, as the paper's data);
2. tasks: two local lm-eval tasks written from held-out text: `rehearsal_choice`, a zero-shot
   4-way multiple choice (which line follows), and `rehearsal_retrieval`, in the shape of the
   paper's retrieval tasks (SWDE, SQuAD completion): a long context holding `key: value` records,
   the value of one key generated with the KV cache, scored by lm-eval's `exact_match`;
3. the study: `python -m sweeps.launch studies/paper/rehearsal.yaml` with the shards and tasks
   (six designs, bf16-true, chunked loss, `micro_batch: auto` under a 0.05 GiB budget, activation
   checkpointing, 2 gloo workers on Ray, checkpoints, evals, fronts and verdicts in MLflow);
   with `--kill-worker`, one data-parallel worker of a running trial is killed with SIGKILL after
   its first checkpoint, and the launch is run again (what happens is recorded);
4. gates: `python -m gates RUN_ID` on the SATFormer run (gate statistics, token categories).

Writes `<out>/summary.json` (the stages' outputs and wall-clock seconds) and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from trainers.data import llama_style
from trainers.data.corpora import load_corpus

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "studies" / "paper" / "rehearsal.yaml"
VOCAB = 1024
DOC_CHARS = 2000  # a document: consecutive paragraphs up to about this many characters
CHOICE_YAML = """task: rehearsal_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: {folder}/choice.jsonl
output_type: multiple_choice
test_split: test
doc_to_text: "{{{{context}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
target_delimiter: "\\n"
metric_list:
  - metric: acc
    higher_is_better: true
"""
RETRIEVAL_YAML = """task: rehearsal_retrieval
dataset_path: json
dataset_kwargs:
  data_files:
    test: {folder}/retrieval.jsonl
output_type: generate_until
test_split: test
doc_to_text: "{{{{context}}}}"
doc_to_target: value
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 8
metric_list:
  - metric: exact_match
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: true
    regexes_to_ignore: [" "]
"""


def documents(text: str) -> list[str]:
    """Paragraphs (blank-line separated) gathered into documents of about DOC_CHARS characters."""
    docs, buf = [], []
    for para in (p.strip() for p in text.split("\n\n")):
        if not para:
            continue
        buf.append(para)
        if sum(len(p) for p in buf) >= DOC_CHARS:
            docs.append("\n\n".join(buf))
            buf = []
    if buf:
        docs.append("\n\n".join(buf))
    return docs


def write_dataset(docs: list[str], folder: Path, files: int = 4) -> Path:
    """A local parquet folder in the hub's layout."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "data").mkdir(parents=True, exist_ok=True)
    step = -(-len(docs) // files)
    for i in range(files):
        table = pa.table(
            {
                "text": docs[i * step : (i + 1) * step],
                "id": list(range(i * step, min(len(docs), (i + 1) * step))),
            }
        )
        pq.write_table(table, folder / "data" / f"train-{i:05d}-of-{files:05d}.parquet")
    return folder


def write_tasks(lines: list[str], folder: Path, items: int = 24) -> Path:
    """The two local tasks from held-out lines (see the module docstring)."""
    rng = random.Random(0)
    folder.mkdir(parents=True, exist_ok=True)
    lines = [line.strip() for line in lines if len(line.strip()) > 20]
    choice = []
    for k in range(items):
        i = rng.randrange(len(lines) - 1)
        wrong = rng.sample([j for j in range(len(lines)) if j != i + 1], 3)
        options = [lines[i + 1], *(lines[j] for j in wrong)]
        order = rng.sample(range(4), 4)
        choice.append({"id": k, "context": lines[i], "choices": [options[o] for o in order],
                       "answer": order.index(0)})  # fmt: skip
    words = sorted({w.strip(",.;:!?'").lower() for line in lines for w in line.split() if w.isalpha()})
    retrieval = []
    for k in range(items):
        keys = rng.sample(words, 8)
        values = rng.sample(words, 8)
        passage = " ".join(rng.sample(lines, 6))  # text around the records: a long context
        records = "\n".join(f"{key}: {value}" for key, value in zip(keys, values, strict=True))
        q = rng.randrange(8)
        retrieval.append({"id": k, "context": f"{passage}\n{records}\n{passage}\n{keys[q]}:",
                          "value": values[q]})  # fmt: skip
    for name, rows in (("choice", choice), ("retrieval", retrieval)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "rehearsal_choice.yaml").write_text(CHOICE_YAML.format(folder=folder))
    (folder / "rehearsal_retrieval.yaml").write_text(RETRIEVAL_YAML.format(folder=folder))
    return folder


def command_env() -> dict:
    """The commands run in the output folder (MLflow's artifacts land in its mlruns/), with this
    checkout's packages first on the path."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


def run(argv: list[str], log: Path, **kw) -> subprocess.CompletedProcess:
    """A project command in a subprocess, in the folder of `log` (its output also in `log`)."""
    print("$ " + shlex.join(argv), flush=True)
    with open(log, "a") as f:
        f.write("$ " + shlex.join(argv) + "\n")
        f.flush()
        folder = log.parent
        return subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, cwd=folder, env=command_env(), **kw)


def prepare_data(out: Path, tokens: int, log: Path) -> dict:
    text = load_corpus("shakespeare", None, None).decode("utf-8", errors="replace")
    docs = documents(text)
    held_out = docs[-40:]  # the tasks' text: never in the dataset
    docs = docs[:-40]
    write_dataset(docs, out / "dataset")
    tokenizer = llama_style.write(
        (line for d in docs for line in d.splitlines()), VOCAB, out / "tokenizer.json"
    )
    shards = out / "shards"
    argv = [sys.executable, "-m", "trainers.prepare", "hf", str(out / "dataset"),
            "--tokenizer", str(tokenizer), "--tokens", str(tokens), "--val-fraction", "0.05", "--seed", "42",
            "--out", str(shards)]  # fmt: skip
    if run(argv, log).returncode != 0:
        raise SystemExit(f"prepare hf failed: {log}")
    tasks = write_tasks([line for d in held_out for line in d.splitlines()], out / "tasks")
    return {"documents": len(docs), "shards": str(shards), "tasks": str(tasks), "tokenizer": str(tokenizer),
            "meta": json.loads((shards / "meta.json").read_text())}  # fmt: skip


def launch_argv(out: Path, data: dict, dry_run: bool = False) -> list[str]:
    argv = [sys.executable, "-m", "sweeps.launch", str(STUDY),
            "--set", f"trial.data.path={data['shards']}", "--set", f"evals.include_path={data['tasks']}",
            # the head as wide as the tokenizer (preset small's is Llama 2's 32000): a wider one trains
            # rows no id reaches and generates ids the tokenizer cannot decode
            "--set", f"trial.model.vocab_size={data['meta']['vocab_size']}",
            "--set", f"output.dir={out / 'results'}",
            "--set", f"output.mlflow_uri=sqlite:///{out / 'mlflow.db'}"]  # fmt: skip
    return [*argv, "--dry-run"] if dry_run else argv


def rank_pids(parent: int) -> list[int]:
    """Process ids of the data-parallel workers under `parent`, by /proc: Ray Train's workers
    (`ray::RayTrainWorker...`, under the launch's own Ray) or the local backend's spawned ones."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        worker = cmd.startswith("ray::RayTrainWorker") or ("multiprocessing" in cmd and "spawn" in cmd)
        if worker and descends_from(int(entry.name), parent):
            found.append(int(entry.name))
    return sorted(found)


def descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
    return False


def launch_killing_a_worker(argv: list[str], out: Path, log: Path) -> dict:
    """The launch, with one data-parallel worker killed by SIGKILL once a trial has written its
    first checkpoint; returns what was killed and when."""
    print("$ " + shlex.join(argv) + "   (one worker killed after the first checkpoint)", flush=True)
    with open(log, "a") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=out, env=command_env())
        killed: dict = {}
        checkpoints = out / "results" / "paper_rehearsal" / "checkpoints"
        while proc.poll() is None:
            time.sleep(1)
            if killed or not any(checkpoints.glob("*/*.ckpt")):
                continue
            pids = rank_pids(proc.pid)
            if len(pids) >= 2:
                os.kill(pids[-1], signal.SIGKILL)
                ckpts = sorted(p.name for p in checkpoints.glob("*/*.ckpt"))
                killed = {"pid": pids[-1], "workers": pids, "checkpoints": ckpts, "at_s": time.time()}
                print(
                    f"killed worker {pids[-1]} (of {pids}) with SIGKILL; checkpoints then: {ckpts}",
                    flush=True,
                )
        killed["exit"] = proc.returncode
    return killed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.rehearsal", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="results/rehearsal", help="folder of everything it writes")
    p.add_argument("--tokens", type=int, default=600_000, help="tokens prepare hf writes")
    p.add_argument("--kill-worker", action="store_true", help="SIGKILL one worker mid-trial, then relaunch")
    p.add_argument("--dry-run", action="store_true", help="prepare, then the launch's dry run only")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    out = Path(args.out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "rehearsal.log"
    summary: dict = {"stages": {}}
    began = time.time()
    data = prepare_data(out, args.tokens, log)
    summary["data"] = data
    summary["stages"]["data_s"] = round(time.time() - began, 1)
    if args.dry_run:
        return run(launch_argv(out, data, dry_run=True), log).returncode
    t = time.time()
    if args.kill_worker:
        summary["killed"] = launch_killing_a_worker(launch_argv(out, data), out, log)
        summary["first_launch_exit"] = summary["killed"]["exit"]
    summary["launch_exit"] = run(launch_argv(out, data), log).returncode
    summary["stages"]["study_s"] = round(time.time() - t, 1)
    if summary["launch_exit"] == 2:  # the study could not run (its reasons are in the log): stop here
        print(f"rehearsal: the launch refused the study (exit 2); see {log}", file=sys.stderr)
        return 2
    t = time.time()
    summary["gates"] = gate_analysis(out, log)
    summary["stages"]["gates_s"] = round(time.time() - t, 1)
    summary["stages"]["total_s"] = round(time.time() - began, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(json.dumps(summary["stages"]), f"\nsummary in {out / 'summary.json'}, log in {log}")
    return 0 if summary["launch_exit"] == 0 and summary["gates"].get("exit") == 0 else 1


def gate_analysis(out: Path, log: Path) -> dict:
    """`python -m gates` on the SATFormer run (the design with gates)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("paper_rehearsal")
    runs = client.search_runs([experiment.experiment_id], "params.`model.residual` = 'satformer'")
    finished = [r for r in runs if r.info.status == "FINISHED"]
    if not finished:
        return {"exit": None, "why": "no finished SATFormer run"}
    run_id = finished[0].info.run_id
    folder = out / "gates"
    argv = [sys.executable, "-m", "gates", run_id, "--tracking-uri", f"sqlite:///{out / 'mlflow.db'}",
            "--out", str(folder), "--tokens", "8192"]  # fmt: skip
    code = run(argv, log).returncode
    summary = (
        json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").is_file() else None
    )
    return {"exit": code, "run_id": run_id, "folder": str(folder), "summary": summary}


if __name__ == "__main__":
    sys.exit(main())
