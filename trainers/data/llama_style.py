"""A Llama-2-style tokenizer.json trained offline on local text: the kind the paper's runs use.

SentencePiece-style BPE as Hugging Face's `tokenizers` writes Llama 2's: special tokens `<unk>
<s> </s>` (ids 0-2), the 256 byte-fallback pieces `<0x00>`..`<0xFF>` (ids 3-258: a character
the merges never saw is spelled in UTF-8 bytes), then the learned pieces; a Metaspace
pre-tokenizer and decoder (`▁` for a space, prepended to a text's first word: prepend_scheme
first); a TemplateProcessing post-processor that puts `<s>` before every encoded text (which the
project's one tokenizer rule never runs: trainers.data.tokenizer). For tests and the rehearsal
(studies/paper/rehearsal.yaml), where no hub is reachable.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

SPECIAL = ("<unk>", "<s>", "</s>")
BYTES = tuple(f"<0x{b:02X}>" for b in range(256))


def build(texts: Iterable[str], vocab_size: int, limit_alphabet: int = 100):
    """A `tokenizers.Tokenizer` of `vocab_size` ids at most (fewer when the text runs out of
    merges): trained on `texts` with at most `limit_alphabet` initial characters (the rest are
    spelled in byte-fallback pieces, as SentencePiece's character coverage does)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    learned_size = vocab_size - len(BYTES)
    if learned_size <= len(SPECIAL):
        raise ValueError(f"vocab_size {vocab_size}: allowed: more than {len(SPECIAL) + len(BYTES)}")
    metaspace = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    draft = Tokenizer(models.BPE(unk_token="<unk>"))
    draft.pre_tokenizer = metaspace
    trainer = trainers.BpeTrainer(
        vocab_size=learned_size, special_tokens=list(SPECIAL), limit_alphabet=limit_alphabet,
        show_progress=False,
    )  # fmt: skip
    draft.train_from_iterator(texts, trainer=trainer)
    model = json.loads(draft.to_str())["model"]
    learned = [p for p, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1]) if p not in SPECIAL]
    vocab = {p: i for i, p in enumerate([*SPECIAL, *BYTES, *(p for p in learned if p not in BYTES)])}
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tok = Tokenizer(
        models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True)
    )
    tok.add_special_tokens(list(SPECIAL))
    tok.pre_tokenizer = metaspace
    tok.decoder = decoders.Sequence(
        [
            decoders.Metaspace(replacement="\u2581", prepend_scheme="first"),
            decoders.ByteFallback(),
            decoders.Fuse(),
        ]
    )
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", vocab["<s>"])]
    )
    return tok


def write(texts: Iterable[str], vocab_size: int, path: Path) -> Path:
    """`build`, saved as a tokenizer.json at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(build(texts, vocab_size).to_str().encode())
    return path
