"""The output check of the docs' example runner (fences.output_mismatch): what a page may leave out, and what not."""

from __future__ import annotations

from pathlib import Path

from fences import Block, blocks, output_mismatch

PRINTED = """\
quantity                      model     engine   ratio  tolerance       verdict
wait.p50                   0.001222  0.0007056   0.577  ±10% or 0.02 s  pass
wait.p95                    0.02792    0.03216   1.152  ±10% or 0.02 s  pass
throughput                     49.6      49.57   0.999  ±3%             pass

check passed: 3 of 3 quantities within tolerance
"""


def test_the_same_output_matches_whatever_the_spacing() -> None:
    # Given the printed table, re-aligned as a page shows it
    shown = PRINTED.replace("0.001222  0.0007056", "0.001222 0.0007056")
    # Then it matches
    assert output_mismatch(shown, PRINTED) is None


def test_a_dropped_row_fails() -> None:
    # Given a page that leaves out one printed row, or the last line, or adds one
    without_row = PRINTED.replace(PRINTED.splitlines()[2] + "\n", "")
    without_verdict = PRINTED.replace("check passed: 3 of 3 quantities within tolerance\n", "")
    # Then each is a mismatch naming the line
    assert "wait.p95" in (output_mismatch(without_row, PRINTED) or "")
    assert "check passed" in (output_mismatch(without_verdict, PRINTED) or "")
    assert output_mismatch(PRINTED + "one more line\n", PRINTED) is not None


def test_an_ellipsis_leaves_lines_out_only_where_the_marker_says() -> None:
    # Given a page that shows the header, an ellipsis for the rows, and the verdict line
    shown = PRINTED.splitlines()[0] + "\n...\ncheck passed: 3 of 3 quantities within tolerance\n"
    # Then it matches with the `...` marker, and not without it
    assert output_mismatch(shown, PRINTED, elides=True) is None
    assert output_mismatch(shown, PRINTED) is not None
    # and an ellipsis stands for at least one line, not for none
    assert output_mismatch("...\n" + PRINTED, PRINTED, elides=True) is not None


def test_a_block_of_only_an_ellipsis_fails() -> None:
    assert output_mismatch("...\n", PRINTED, elides=True) is not None
    assert output_mismatch("\n...\n\n", PRINTED) is not None
    assert output_mismatch("", PRINTED) is not None


def test_a_changed_column_or_figure_is_found() -> None:
    # Given a page that shows an old header and another figure
    old_header = PRINTED.replace("tolerance       verdict", "verdict")
    # Then each is a mismatch naming the line
    assert "quantity" in (output_mismatch(old_header, PRINTED) or "")
    assert output_mismatch(PRINTED.replace("49.57", "49.58"), PRINTED) is not None


def test_lines_must_come_in_order() -> None:
    lines = PRINTED.splitlines()
    swapped = "\n".join([lines[0], lines[2], lines[1], *lines[3:]])
    assert output_mismatch(swapped, PRINTED) is not None


def test_numbers_within_the_stated_tolerance_match_and_others_fail() -> None:
    # Given another run's figures: 0.02792 -> 0.0311 (+11%), 49.57 -> 48.9 (-1.4%)
    other = PRINTED.replace("0.02792", "0.0311").replace("49.57", "48.9")
    # Then a 25% tolerance passes, a 10% one fails naming the figure, and exact fails
    assert output_mismatch(PRINTED, other, rel=0.25) is None
    assert "0.0311" in (output_mismatch(PRINTED, other, rel=0.10) or "")
    assert output_mismatch(PRINTED, other) is not None
    # an absolute tolerance counts too (0.0311 - 0.02792 = 0.0032; 49.57 - 48.9 = 0.67)
    assert output_mismatch(PRINTED, other, abs=1.0) is None
    assert output_mismatch(PRINTED, other, abs=0.5) is not None
    # and a changed word fails whatever the tolerance
    assert output_mismatch(PRINTED, other.replace("pass\n\n", "fail\n\n"), rel=10) is not None


def test_progress_lines_and_blank_lines_are_not_output() -> None:
    printed = "simulate day: 10% after 2.1s\n\n" + PRINTED + "simulate day: 100% after 9.3s\n"
    assert output_mismatch(PRINTED, printed) is None


def test_a_marker_gives_the_tolerance_and_the_ellipsis(tmp_path: Path) -> None:
    page = tmp_path / "page.markdown"
    page.write_text("<!-- test: output rel=0.25 abs=0.01 ... -->\n```text\nx 1\n...\n```\n\n"
                    "<!-- test: output -->\n```text\nx 1\n```\n")
    first, second = blocks(page)
    assert (first.tolerance, first.elides) == ((0.25, 0.01), True)
    assert (second.tolerance, second.elides) == ((0.0, 0.0), False)


def test_a_marker_names_the_exit_codes_a_block_may_end_with() -> None:
    # Given blocks marked with no exit code, one, and either of two
    def codes(marker: str) -> tuple[int, ...]:
        return Block(Path("a-page"), 1, "sh", "qsim compare wrr --check", marker=marker).exit_codes
    # Then each accepts exactly those
    assert codes("") == (0,) and codes("long") == (0,)
    assert codes("exit=2") == (2,) and codes("long exit=1") == (1,)
    assert codes("long exit=0|1") == (0, 1)


def test_a_marker_says_a_timing_check_is_run_again() -> None:
    def again(marker: str) -> bool:
        return Block(Path("a-page"), 1, "sh", "qsim compare planned.toml --check", marker=marker).again

    assert again("long again") and again("again") and again("long again exit=0|1")
    assert not again("") and not again("long") and not again("output rel=0.5")
