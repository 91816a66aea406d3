"""`CarveError`: a validation carve refused, in words that a command can say in the user's own names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class CarveError(ValueError):
    """A carve of validation out of the training data refused, naming the data settings that steer it.

    ``str(error)`` names each setting as the data config's key (``data.valid_files``), as the
    Python API sets it; :meth:`phrased` names each as ``name_of(field)`` says, so that a
    command can name the validation files ``--valid`` only where its user gave ``--train``.
    ``settings`` are the data config's field names the template's fields stand for;
    ``values`` the other fields it quotes.
    """

    def __init__(self, template: str, settings: tuple[str, ...], **values: object) -> None:
        self.template, self.settings, self.values = template, settings, values
        super().__init__(self.phrased(lambda field: f"data.{field}"))

    def phrased(self, name_of: Callable[[str], str]) -> str:
        """The message with each setting named ``name_of(field)`` (``"valid_files"`` -> ``"--valid"``)."""
        return self.template.format(**{field: name_of(field) for field in self.settings}, **self.values)

    def __reduce__(self) -> tuple[Any, ...]:
        # Copied or sent to another process whole, not as its message alone.
        return (_carve_error, (self.template, self.settings, self.values))


def _carve_error(template: str, settings: tuple[str, ...], values: dict[str, object]) -> CarveError:
    return CarveError(template, settings, **values)
