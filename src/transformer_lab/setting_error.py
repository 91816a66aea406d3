"""`SettingError`: a keyword argument out of range, which the API raises and a front end rephrases.

Its mechanics, a message template whose setting names a caller fills in, are `PhrasedError`'s,
which `data.carve_error.CarveError` shares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class PhrasedError(ValueError):
    """A message naming settings, that a front end can say in its own names.

    ``str(error)`` names each setting as :meth:`default_name` does; :meth:`phrased` names each
    as a front end spells it. ``settings`` are the names the template's fields stand for, the
    one at fault first; ``values`` the other fields it quotes.
    """

    def __init__(self, template: str, settings: tuple[str, ...], **values: object) -> None:
        self.template = template  # str.format fields: each setting's name ({beam}) and each of values
        self.settings = settings
        self.values = values
        super().__init__(self.phrased(self.default_name))

    @staticmethod
    def default_name(setting: str) -> str:
        """How ``str(error)`` names a setting: as it is."""
        return setting

    def phrased(self, name_of: Callable[[str], str]) -> str:
        """The message with each setting named ``name_of(setting)``, e.g. ``lambda name: "--" + name``."""
        return self.template.format(**{setting: name_of(setting) for setting in self.settings}, **self.values)

    def __reduce__(self) -> tuple[Any, ...]:
        # Copied or sent to another process whole, of its own class, not as its message alone.
        return (_rebuilt, (type(self), self.template, self.settings, self.values))


def _rebuilt(
    cls: type[PhrasedError], template: str, settings: tuple[str, ...], values: dict[str, object]
) -> PhrasedError:
    return cls(template, settings, **values)


class SettingError(PhrasedError):
    """A keyword argument out of range, in a message that a front end can say in its own names.

    ``str(error)`` names the settings as the keyword arguments (``beam``); :meth:`phrased`
    names each as a front end spells it (the command line's ``--beam``), so that its user
    reads the option they typed.
    """
