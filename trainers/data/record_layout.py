"""How many planted records fit where (trainers.data.records): the sizes the config checks as it
parses, without the data modules (and torch) that plant them."""

from __future__ import annotations

KEY_TOKENS = 3
VALUE_TOKENS = 3
RECORD = KEY_TOKENS + VALUE_TOKENS


def planted_count(fraction: float, rows: int) -> int:
    """Windows of a batch of `rows` that carry records: fraction x rows, rounded half up."""
    return int(fraction * rows + 0.5)


def max_per_window(seq_len: int) -> int:
    """Records (each with its query) that fit a window of `seq_len + 1` tokens, with at least a
    quarter of it left to text."""
    return (seq_len + 1) * 3 // 4 // (2 * RECORD)
