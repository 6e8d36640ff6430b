"""The report as markdown for MLflow (issue 52): whole in summary.md, and as the parent run's
description cut to the rows a reader wants until it fits MLflow's limit on a tag."""

from sweeps.report.analysis import printed_sections
from sweeps.report.fronts import compute
from sweeps.report.outputs import row_name
from sweeps.report.summary import TAG_LIMIT, front_rows, front_tag, markdown, note
from tests.sweeps.report.test_report_at_scale import search_trials

OBJECTIVES = [("val_loss", "minimize"), ("peak_mem_mb", "minimize")]


def search(n: int) -> dict:
    return compute(search_trials(n), OBJECTIVES, "p0", replicates=50)


def test_a_small_study_is_described_whole():
    result = search(6)
    assert note(result, printed_sections, "t") == markdown(result, printed_sections, "t")
    text = markdown(result, printed_sections, "t")
    assert "```text\n" + printed_sections(result)[0] + "\n```" in text  # the printed table, verbatim
    assert all(row_name(r) in text for r in result["points"])


def test_a_search_is_described_by_its_front_and_reference_within_mlflows_limit():
    result = search(400)
    whole, described = markdown(result, printed_sections, "t"), note(result, printed_sections, "t")
    assert len(whole) > TAG_LIMIT >= len(described)
    assert all(row_name(r) in whole for r in result["points"])
    table = described.split("```text\n", 1)[1].split("\n```", 1)[0]  # the first block: the table
    shown = {r["point"] for r in result["points"] if f"  {row_name(r)}  " in table}
    assert "p0" in shown  # the reference
    assert set(result["front"]) <= shown and len(shown) < len(result["points"])
    assert "of 400; every row: `summary.md`" in described


def test_a_description_too_long_even_for_one_row_is_cut_where_a_line_ends():
    result = search(40)
    cut = note(result, printed_sections, "t", limit=600)
    assert len(cut) <= 600 and cut.endswith("the whole text is `summary.md`)")


def test_the_front_tag_names_the_front_likeliest_first_within_the_limit():
    result = search(400)
    names = [row_name(r) for r in front_rows(result)]
    assert len(names) > 1
    assert front_tag(result) == "; ".join(names)
    short = front_tag(result, limit=len(names[0]) + 60)
    assert short.startswith(names[0]) and f"and {len(names) - 1} more" in short
