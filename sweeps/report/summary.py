"""What a person reads first about a launch, in MLflow's own idioms.

The report's printed text (the table, the verdicts and the lines under them) as markdown: whole in
`summary.md` (results/<name>/pareto/ and the parent run's artifacts, at their root), and, cut to
the rows a reader looks for first (`outputs.most_relevant`: references, the front, by p_front)
until it fits MLflow's limit on a tag, as the parent run's description (`mlflow.note.content`,
rendered as markdown on the run's page). The front's points as the parent's `front` tag; its runs
are found with the search `tags.on_front = 'true'` (the children's tags: `analysis`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from sweeps.report.outputs import most_relevant, row_name

NOTE = "mlflow.note.content"  # the run's description in MLflow's UI (markdown)
TAG_LIMIT = 8000  # MLflow's longest tag value (MAX_TAG_VAL_LENGTH); longer ones are refused or cut
FRONT_SEARCH = "tags.on_front = 'true'"
FILE = "summary.md"

Render = Callable[[Mapping], list[str]]  # a result -> the report's printed sections


def markdown(result: Mapping, render: Render, title: str, cap: int | None = None) -> str:
    """The report as markdown: a headline, the front, the printed sections in fixed-width blocks.
    `cap`: at most that many rows in the table and verdicts (None: every row)."""
    rows = result["points"]
    shown = rows
    if cap is not None and len(rows) > cap:
        shown = _with_references(result, most_relevant(rows, cap=cap))
    front = front_rows(result)
    listed = front if cap is None else front[:cap]
    names = ", ".join(f"{row_name(r)} ({r['p_front']:.2f})" for r in listed)
    more = f", and {len(front) - len(listed)} more" if len(listed) < len(front) else ""
    lines = [
        f"### {title}",
        f"**{len(rows)} point(s); front: {len(front)} point(s); hypervolume {result['hypervolume']:.4f}**"
        f" (normalised, ref 1.1). The front's runs: search `{FRONT_SEARCH}`; sort by the metric `p_front`.",
        "",
        f"**Front** (p_front): {names}{more}",
        "",
    ]
    if len(shown) < len(rows):
        lines += [f"The {len(shown)} rows a reader looks for first (references, the front, by p_front) of"
                  f" {len(rows)}; every row: `{FILE}` and `pareto/pareto.csv` among this run's artifacts.",
                  ""]  # fmt: skip
    for section in render({**result, "points": shown}):
        lines += ["```text", section, "```", ""]
    return "\n".join(lines)


def note(result: Mapping, render: Render, title: str, limit: int = TAG_LIMIT) -> str:
    """`markdown` with as many rows as fit in `limit` characters (halving from 40); a text still too
    long (a row or a section alone is longer) is cut where a line ends and says where the rest is."""
    cap = 40
    text = markdown(result, render, title, cap)
    while len(text) > limit and cap > 1:
        cap //= 2
        text = markdown(result, render, title, cap)
    if len(text) <= limit:
        return text
    tail = f"\n```\n(cut at MLflow's {limit:,}-character limit: the whole text is `{FILE}`)"
    head = text[: limit - len(tail)]
    return head[: head.rfind("\n")] + tail


def front_tag(result: Mapping, limit: int = TAG_LIMIT) -> str:
    """The parent's `front` tag: the front's point names, likeliest first, within `limit`."""
    names = [row_name(r) for r in front_rows(result)]
    text = ""
    for i, name in enumerate(names):
        more = f"; and {len(names) - i} more ({FRONT_SEARCH})"
        candidate = f"{text}; {name}" if text else name
        if len(candidate) + len(more) > limit:
            return text + more
        text = candidate
    return text


def front_rows(result: Mapping) -> list[dict]:
    """The front's rows, likeliest (p_front) first."""
    front = set(result["front"])
    return sorted((r for r in result["points"] if r["point"] in front), key=lambda r: -r["p_front"])


def write(result: Mapping, render: Render, title: str, folder: Path) -> Path:
    """`summary.md`: the whole report as markdown, every row."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE
    path.write_text(markdown(result, render, title))
    return path


def _with_references(result: Mapping, rows: list[dict]) -> list[dict]:
    """`rows` and the references they are compared with (the verdicts name them), in the result's order."""
    wanted = {r["point"] for r in rows}
    wanted |= {result.get("references", {}).get(p) for p in wanted} - {None}
    return [r for r in result["points"] if r["point"] in wanted]
