"""A trial's tokenizer as the files `AutoTokenizer.from_pretrained(DIR)` reads.

The byte tokenizer becomes a tokenizer.json of 256 tokens, token id b for byte b: GPT-2's
byte-level alphabet (each byte one printable character), a BPE model with no merges, the
byte-level pre-tokenizer without its regex split (nothing to split: no merges) and decoder. A BPE
trial's own tokenizer.json is written as it is. Neither has special tokens: tokenizer_config
names the token of id 0 as the padding token (a batch's padding is masked, so any id serves, and
one of the vocabulary's keeps the ids within the model's embedding; without one lm-eval's
`--model hf` adds a token the model has no row for), the token contexts start with (the one
before every document in training) as BOS, added by the post-processor, and the line break's token
as EOS. lm-eval's `--model hf` also stops generation at its EOS, which
`python -m evals` does not (docs/interop.md)."""

from __future__ import annotations

import json
from pathlib import Path


def byte_tokenizer_json() -> str:
    """tokenizer.json text of the 256-id byte tokenizer (id b <-> byte b)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = _bytes_to_unicode()
    vocab = {alphabet[b]: b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return tok.to_str()


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map of the 256 bytes onto printable characters (the byte-level
    pre-tokenizer's alphabet): printable Latin-1 bytes map to themselves, the rest to 256 + n."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def write_tokenizer(folder: Path, tokenizer_json: str, start=None, max_length: int = 2048) -> None:
    """tokenizer.json and tokenizer_config.json; `start` (`trainers.data.tokenizer.ContextStart`):
    the token every context starts with, as `python -m evals` starts them (the one before every
    document in training): the post-processor adds it and it is the BOS, so a transformers
    tokenizer's default `add_special_tokens=True` (and lm-eval's `--model hf`) starts there too."""
    from tokenizers import Tokenizer, processors

    tok = Tokenizer.from_str(tokenizer_json)
    bos = None
    if start is not None:
        bos = tok.id_to_token(start.id)
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, start.id)]
        )
    (folder / "tokenizer.json").write_text(tok.to_str())
    newline = tok.encode("\n", add_special_tokens=False).ids
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "pad_token": tok.id_to_token(0),
        "bos_token": bos,
        "eos_token": tok.id_to_token(newline[0]) if len(newline) == 1 else None,
        "model_max_length": max_length,
        "clean_up_tokenization_spaces": False,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
