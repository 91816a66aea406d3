"""The mask experiments' report: a hand-built result formats to exactly the expected table."""

from __future__ import annotations

from transformer_lab.lab.mask_report import format_lab_result
from transformer_lab.lab.mask_results import Comparison, GuardCheck, LabResult


def _failing_result() -> LabResult:
    return LabResult(
        name="example",
        claim="two runs agree",
        setup="a model; a batch",
        comparisons=[
            Comparison("a long quantity name", difference=1.5e-3, tolerance=1e-5, expect_equal=True),
            Comparison("q", difference=0.0, tolerance=1e-5, expect_equal=False),
            Comparison("changed", difference=2.0, tolerance=1e-5, expect_equal=False),
        ],
        guards=[GuardCheck("a wrong shape", None), GuardCheck("a wrong dtype", "mask must be bool")],
        notes=["first note", "second note"],
    )


def test_a_failing_result_formats_every_row_guard_and_note() -> None:
    expected = "\n".join(
        [
            "lab example: two runs agree",
            "setup: a model; a batch",
            "",
            "quantity              expect  max |diff|  tolerance  holds",
            "--------------------  ------  ----------  ---------  -----",
            "a long quantity name  equal       0.0015      1e-05  NO",
            "q                     differ           0      1e-05  NO",
            "changed               differ           2      1e-05  yes",
            "guard: a wrong shape: NOT refused",
            "guard: a wrong dtype: refused: mask must be bool",
            "",
            "note: first note",
            "note: second note",
            "",
            "claim does NOT hold",
        ]
    )
    result = _failing_result()
    assert format_lab_result(result) == expected


def test_short_quantities_keep_the_header_width_and_no_notes_means_no_note_block() -> None:
    result = LabResult("tiny", "c", "s", [Comparison("x", 3.14159e-7, 0.0, True)])
    assert format_lab_result(result) == "\n".join(
        [
            "lab tiny: c",
            "setup: s",
            "",
            "quantity  expect  max |diff|  tolerance  holds",
            "--------  ------  ----------  ---------  -----",
            "x         equal     3.14e-07      0e+00  NO",
            "",
            "claim does NOT hold",
        ]
    )
