"""What a mask experiment measured: comparisons, guard checks and the verdict, as plain data.

:mod:`~transformer_lab.lab.mask_experiments` computes these results and
:mod:`~transformer_lab.lab.mask_report` turns them into the text the CLI prints; this
module holds only the types the two share, so that either can change without the other;
it imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Comparison", "GuardCheck", "LabResult"]


@dataclass(frozen=True)
class Comparison:
    """One measured quantity: the largest absolute difference between two runs.

    ``expect_equal=True`` means the claim says the two runs agree (holds when
    ``difference <= tolerance``); ``False`` means the claim says they differ (holds when
    ``difference > tolerance``).
    """

    quantity: str
    difference: float
    tolerance: float
    expect_equal: bool

    @property
    def holds(self) -> bool:
        if self.expect_equal:
            return self.difference <= self.tolerance
        return self.difference > self.tolerance


@dataclass(frozen=True)
class GuardCheck:
    """A mistake that a check of this package must refuse; ``error`` is its message, or None."""

    description: str
    error: str | None

    @property
    def holds(self) -> bool:
        return self.error is not None


@dataclass
class LabResult:
    """What one experiment measured.

    :func:`~transformer_lab.lab.mask_report.format_lab_result` gives the text the CLI prints.
    """

    name: str
    claim: str
    setup: str  # the model and the batch, in words
    comparisons: list[Comparison]
    guards: list[GuardCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        """Whether every comparison and every guard came out as the claim says."""
        return all(row.holds for row in self.comparisons) and all(guard.holds for guard in self.guards)
