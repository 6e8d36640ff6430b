"""`python -m trainers.export RUN_ID|CKPT --out DIR`: a trained trial as a Hugging Face folder.

The folder loads in a process without this project:

    AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)   # arch's logits
    AutoTokenizer.from_pretrained(DIR, trust_remote_code=True)          # where the trial has text

What is written and why arch travels inside it: trainers/interop/export.py, docs/interop.md.
Exit status 2, before anything is written, when the trial cannot be found or read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainers.data.tokenizer import ByteTokenizer, ContextStart
from trainers.interop.export import write_export
from trainers.interop.tokenizer_files import byte_tokenizer_json
from trainers.mlflow_names import DEFAULT_TRACKING_URI
from trainers.trained import TrialNotFound, load_trial, trial_tokenizer


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m trainers.export", description=__doc__.split("\n\n")[0])
    p.add_argument("target", metavar="RUN_ID|CKPT", help="a trial checkpoint file or an MLflow run id")
    p.add_argument("--out", required=True, help="the folder to write (created; files in it are replaced)")
    p.add_argument("--tracking-uri", default=DEFAULT_TRACKING_URI)
    p.add_argument("--data-root", default=None, help="data cache root, for a BPE trial's tokenizer")
    return p.parse_args(argv)


def tokenizer_json(cfg, data_root) -> tuple[str, ContextStart] | None:
    """The trial's tokenizer as tokenizer.json text, with the token its contexts start with (the
    one before every document in training); None for data without text (MQAR)."""
    try:
        tok = trial_tokenizer(cfg, data_root)
    except ValueError:
        return None
    if isinstance(tok, ByteTokenizer):
        return byte_tokenizer_json(), tok.start
    return tok.tok.to_str(), tok.start  # FastTokenizer: the tokenizers.Tokenizer it wraps


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import safetensors  # noqa: F401  (the interop extra)
    except ImportError:
        print("trainers.export: needs safetensors: pip install -e '.[interop]'", file=sys.stderr)
        return 2
    try:
        cfg, model, run_id = load_trial(args.target, args.tracking_uri)
    except TrialNotFound as err:
        print(f"trainers.export: {err}", file=sys.stderr)
        return 2
    tok = tokenizer_json(cfg, args.data_root)
    out = write_export(model, Path(args.out), tok, source=run_id or str(Path(args.target).resolve()))
    print(f"wrote {out}" + ("" if tok else " (no tokenizer: the trial's data has no text)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
