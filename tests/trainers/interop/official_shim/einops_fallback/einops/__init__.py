"""einops.rearrange for the two patterns the official code uses (when einops is not installed)."""


def rearrange(x, pattern, **sizes):
    pattern = " ".join(pattern.split())
    if pattern == "... (h d) -> ... h d":
        return x.unflatten(-1, (-1, sizes["d"]))
    if pattern == "B T (C L) -> C B T L":
        return x.unflatten(-1, (sizes["C"], -1)).permute(2, 0, 1, 3)
    raise NotImplementedError(f"the einops fallback does not know {pattern!r}")
