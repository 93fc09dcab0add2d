"""The output check of the docs' example runner (fences.output_mismatch): what a page may leave out, and what not."""

from __future__ import annotations

from fences import output_mismatch

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


def test_a_page_may_leave_lines_out_and_abridge_with_an_ellipsis() -> None:
    # Given a page that shows the first row, an ellipsis for the rest, and the verdict line
    shown = "wait.p50  0.001222 ...  pass\n...\ncheck passed: 3 of 3 quantities within tolerance\n"
    # Then it matches
    assert output_mismatch(shown, PRINTED) is None


def test_a_changed_column_or_figure_is_found() -> None:
    # Given a page that shows an old header and another figure
    old_header = PRINTED.replace("tolerance       verdict", "verdict")
    # Then each is a mismatch naming the line
    assert "quantity" in (output_mismatch(old_header, PRINTED) or "")
    assert output_mismatch(PRINTED.replace("49.57", "49.58"), PRINTED) is not None


def test_lines_must_come_in_order() -> None:
    shown = "throughput 49.6 49.57 0.999 ±3% pass\nwait.p50 0.001222 0.0007056 0.577 ±10% or 0.02 s pass\n"
    assert output_mismatch(shown, PRINTED) is not None


def test_any_numbers_checks_the_words_and_shape_only() -> None:
    # Given another run's figures
    other = PRINTED.replace("0.02792", "0.0311").replace("49.57", "48.9")
    # Then the numbers-free check passes, and a changed word still fails it
    assert output_mismatch(PRINTED, other, any_numbers=True) is None
    assert output_mismatch(PRINTED, other.replace("pass\n\n", "fail\n\n"), any_numbers=True) is not None
