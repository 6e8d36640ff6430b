"""Token categories that need no downloads, for gate strength by kind of token.

- structural: a token with no letters (whitespace, punctuation, digits);
- functional: a token inside a word from the shipped stop-word list (`stopwords.txt`,
  English function words plus Early Modern English ones for the Shakespeare corpus);
- semantic: every other token inside a word.

A token belongs to the word that its first letter falls in, so byte-level and BPE tokens are
categorised the same way. Pass `stopwords=` to use another list.

A BPE piece (`piece_decoder`) is its vocabulary entry with the tokenizer's word-start marks made
spaces: byte-level BPE's `Ġ` (GPT-2 style), SentencePiece's `▁` (Llama) and `Ċ` a newline, and
byte-fallback pieces (`<0x0A>`) their byte; so the pieces of a sequence, joined, give its words
with their boundaries, and a piece falls in the word its first letter is in (a piece that
continues a word, like `ing`, belongs to that word; a piece with no letter is structural).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from importlib import resources

import torch

CATEGORIES = ("structural", "functional", "semantic")
_WORD = re.compile(r"[A-Za-z']+")


def default_stopwords() -> frozenset[str]:
    text = resources.files("gates").joinpath("stopwords.txt").read_text()
    return frozenset(text.split())


_MARKS = str.maketrans({"\u0120": " ", "\u2581": " ", "\u010a": "\n"})
_BYTE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def piece_decoder(tokenizer) -> Callable[[int], str]:
    """id -> the text of one piece of a `tokenizers.Tokenizer` (see the module docstring)."""

    def decode(token: int) -> str:
        piece = tokenizer.id_to_token(int(token)) or ""
        byte = _BYTE.match(piece)
        if byte:
            return bytes([int(byte.group(1), 16)]).decode("latin-1")
        return piece.translate(_MARKS)

    return decode


def categorize(
    token_ids: Sequence[int], decode_token: Callable[[int], str], stopwords: frozenset[str] | None = None
) -> torch.Tensor:
    """Category index (into CATEGORIES) of every token of one contiguous sequence."""
    stopwords = default_stopwords() if stopwords is None else stopwords
    pieces = [decode_token(int(t)) for t in token_ids]
    text = "".join(pieces)
    word_at = [None] * len(text)  # char offset -> the word covering it
    for m in _WORD.finditer(text):
        for i in range(m.start(), m.end()):
            word_at[i] = m.group().lower().strip("'")
    out = torch.empty(len(pieces), dtype=torch.long)
    offset = 0
    for k, piece in enumerate(pieces):
        first_letter = next((offset + i for i, ch in enumerate(piece) if ch.isalpha()), None)
        if first_letter is None or word_at[first_letter] is None:
            out[k] = 0
        else:
            out[k] = 1 if word_at[first_letter] in stopwords else 2
        offset += len(piece)
    return out


def gate_by_category(gates: dict[int, torch.Tensor], categories: torch.Tensor) -> dict[int, dict[str, float]]:
    """{layer: {category: mean gate over its tokens and heads}}; gates [N, width], categories [N]."""
    out = {}
    for layer, g in gates.items():
        per_token = g.mean(-1)
        out[layer] = {
            name: float(per_token[categories == i].mean()) if (categories == i).any() else float("nan")
            for i, name in enumerate(CATEGORIES)
        }
    return out
