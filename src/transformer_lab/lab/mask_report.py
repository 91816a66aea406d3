"""The mask experiments' results as text: the table that ``transformer-lab lab`` prints.

The experiments (:mod:`~transformer_lab.lab.mask_experiments`) only measure; everything
about how a :class:`~transformer_lab.lab.mask_results.LabResult` reads on a terminal, and
in the tables of ``docs/masks.md`` written from that output, is decided here.
"""

from __future__ import annotations

from transformer_lab.lab.mask_results import Comparison, GuardCheck, LabResult

__all__ = ["format_lab_result"]

_QUANTITY_HEADER = "quantity"


def format_lab_result(result: LabResult) -> str:
    """The claim, the setup, one line per comparison and guard, the notes, then the verdict.

    The quantity column is as wide as the longest quantity (or its header); the lines are
    joined with ``\\n`` and the text has no trailing newline (the CLI's ``print`` adds it).
    """
    width = max([len(row.quantity) for row in result.comparisons] + [len(_QUANTITY_HEADER)])
    lines = [f"lab {result.name}: {result.claim}", f"setup: {result.setup}", ""]
    lines.append(f"{_QUANTITY_HEADER:<{width}}  {'expect':<6}  {'max |diff|':>10}  {'tolerance':>9}  holds")
    lines.append(f"{'-' * width}  {'-' * 6}  {'-' * 10}  {'-' * 9}  -----")
    lines.extend(_comparison_line(row, width) for row in result.comparisons)
    lines.extend(_guard_line(guard) for guard in result.guards)
    if result.notes:
        lines.append("")
        lines.extend(f"note: {note}" for note in result.notes)
    lines.append("")
    lines.append("claim holds" if result.holds else "claim does NOT hold")
    return "\n".join(lines)


def _comparison_line(row: Comparison, width: int) -> str:
    # Three significant digits tell 0 from float noise from a real change; a tolerance is
    # a round number (1e-05), so one digit shows it.
    expect = "equal" if row.expect_equal else "differ"
    return (
        f"{row.quantity:<{width}}  {expect:<6}  {row.difference:>10.3g}  {row.tolerance:>9.0e}  "
        f"{'yes' if row.holds else 'NO'}"
    )


def _guard_line(guard: GuardCheck) -> str:
    outcome = f"refused: {guard.error}" if guard.error is not None else "NOT refused"
    return f"guard: {guard.description}: {outcome}"
