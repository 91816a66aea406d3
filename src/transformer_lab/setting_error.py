"""`SettingError`: a keyword argument out of range, which the API raises and a front end rephrases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class SettingError(ValueError):
    """A keyword argument out of range, in a message that a front end can say in its own names.

    ``str(error)`` names the settings as the keyword arguments (``beam``); :meth:`phrased`
    names each as a front end spells it (the command line's ``--beam``), so that its user
    reads the option they typed. ``settings`` are the keyword arguments the message names,
    the one at fault first; ``values`` the numbers it quotes.
    """

    def __init__(self, template: str, settings: tuple[str, ...], **values: object) -> None:
        self.template = template  # str.format fields: each setting's name ({beam}) and each of values
        self.settings = settings
        self.values = values
        super().__init__(self.phrased(str))

    def phrased(self, name_of: Callable[[str], str]) -> str:
        """The message with each setting named ``name_of(setting)``, e.g. ``lambda name: "--" + name``."""
        return self.template.format(**{setting: name_of(setting) for setting in self.settings}, **self.values)

    def __reduce__(self) -> tuple[Any, ...]:
        # Copied or sent to another process whole, not as its message alone.
        return (_setting_error, (self.template, self.settings, self.values))


def _setting_error(template: str, settings: tuple[str, ...], values: dict[str, object]) -> SettingError:
    return SettingError(template, settings, **values)
