"""Generic helpers for the project's typed dataclass configs, and the one merge of a run's settings.

They work on any dataclass, nested or not, and check values against the field annotations
(``int``, ``float``, ``bool``, ``str``, ``pathlib.Path``, ``X | None``, ``Literal[...]``,
``tuple``, ``list``, ``dict[str, X]``, nested dataclasses) by one ladder, :func:`_convert`,
which reads JSON-like data and ``--set`` texts alike.

- :func:`config_to_dict` gives plain JSON-ready data; :func:`config_from_dict` rebuilds the
  dataclass, rejecting unknown keys and wrong types (absent keys take their defaults).
- A run's sources (preset, fine-tuning schedule, YAML file, flags, ``--set key=value``)
  each become :class:`Setting` s (key, value, origin); :func:`merge_settings` lays them
  over each other once, a later one winning, and checks the result once.
- :func:`apply_overrides` applies ``--set`` texts; :func:`parse_override` reads one.
- :func:`core_number` reads a number as YAML 1.2's core schema spells it, for a ``--set``
  text and a ``--config`` file's plain scalar alike (``010`` is ten; ``1:04``, ``0b1`` and
  ``1_000``, YAML 1.1's other forms, are text).

Every error is a ``ValueError`` naming the dotted key, what was expected and what was
given, quoted short by :func:`shown`.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import pathlib
import re
import reprlib
import sys
import types
import typing
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from transformer_lab import strict_json
from transformer_lab.shortened import shortened

__all__ = [
    "PRESET",
    "TOO_SMALL_FOR_A_FLOAT",
    "Setting",
    "apply_overrides",
    "config_from_dict",
    "config_to_dict",
    "core_number",
    "reads_as_zero",
    "merge_settings",
    "override_settings",
    "parse_override",
    "settings_of",
    "shown",
]

ConfigType = TypeVar("ConfigType")

_TRUE_WORDS = ("true", "yes", "on", "1")
_FALSE_WORDS = ("false", "no", "off", "0")
_NONE_WORDS = ("none", "null")
# The unquoted words a YAML file's boolean was written as (YAML 1.1's, which the file reader keeps).
_YAML_BOOLEAN_WORDS = {True: "yes, on or true", False: "no, off or false"}
# YAML 1.2's core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution): the spellings of
# an int and of a float. YAML 1.1's octal 010, base-60 1:04, binary and underscores are text.
CORE_INT = re.compile(r"(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)\Z")
CORE_FLOAT = re.compile(
    r"(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\Z"
)
# Python's own spellings of the floats that are no number, which a --set text may use.
_PYTHON_NONFINITE = ("inf", "infinity", "nan")
# The origin of the values a merge starts from; every other origin is a change to them.
PRESET = "preset"


# A value quoted in a message: a few items per level, a few levels, short strings. The value
# may be a file's whole list, or an alias tree that stands for gigabytes once written out.
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 3
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = _SHOWN.maxfrozenset = 6
_SHOWN.maxstring = _SHOWN.maxother = 80
_SHOWN.maxlong = 40
SHOWN_CHARACTERS = 160


def shown(value: Any) -> str:
    """``repr(value)`` cut to at most :data:`SHOWN_CHARACTERS` characters, never built whole first."""
    return shortened(_SHOWN.repr(value), SHOWN_CHARACTERS)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One source's value for a dotted key (``"model.d_model"``; a section's takes a mapping of its fields).

    ``origin`` names the source in messages (``"--set"``, ``"--config run.yaml"``, :data:`PRESET`);
    ``text`` marks a ``--set`` value, still the text typed, which the field's type parses.
    """

    key: str
    value: Any
    origin: str
    text: bool = False

    def error(self, message: str) -> ValueError:
        """``message`` naming this setting's source; a ``--set`` text's message leads with the key typed."""
        return ValueError(message if self.text else f"{self.origin}: {message}")


def _is_dataclass_type(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def _init_fields(cls: type) -> list[dataclasses.Field]:
    # Fields with init=False are derived in __post_init__, so they are neither written
    # nor accepted back.
    return [field for field in dataclasses.fields(cls) if field.init]


@functools.cache  # a merge asks once per key; resolving string annotations is the slow part
def _field_types(cls: type) -> dict[str, Any]:
    """The annotations of ``cls``'s init fields, by name, string annotations resolved (do not modify)."""
    hints = typing.get_type_hints(cls)
    return {field.name: hints[field.name] for field in _init_fields(cls)}


def _describe(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def config_to_dict(config: Any) -> dict[str, Any]:
    """Turn a (nested) dataclass into plain dicts, lists, strings and numbers for JSON."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise ValueError(f"config: expected a dataclass instance, got {type(config).__name__}")
    return _to_plain(config)


def _to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _to_plain(getattr(value, field.name)) for field in _init_fields(type(value))}
    if isinstance(value, (list, tuple)):
        return [_to_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _to_plain(item) for key, item in value.items()}
    if isinstance(value, pathlib.PurePath):
        return str(value)
    return value


def config_from_dict(cls: type[ConfigType], data: Mapping[str, Any]) -> ConfigType:
    """Build dataclass ``cls`` from ``data`` (as written by :func:`config_to_dict`).

    Unknown keys, values of the wrong type and missing required fields are ``ValueError``s
    naming the dotted key. Keys absent from ``data`` take the field's default, so configs
    written before a field was added still load.
    """
    if not _is_dataclass_type(cls):
        raise ValueError(f"cls: expected a dataclass type, got {cls!r}")
    return _from_mapping(cls, data, prefix="")


def _unknown_key(cls: type, name: Any, prefix: str) -> str:
    shown_name = name if isinstance(name, str) and len(name) <= 80 else shown(name)
    known = sorted(_field_types(cls))
    message = f"{prefix}{shown_name}: unknown key for {cls.__name__}; expected one of {known}"
    return message + _foreign_character(name, known) if isinstance(name, str) else message


def _foreign_character(name: str, known: list[str]) -> str:
    """Where ``name`` holds a character no key has, that character named, with the key it may stand for.

    A key copied from a web page or a document may hold an invisible one (a zero-width space) or a
    letter of another script that looks like a Latin one; printed as it is, the unknown key looks
    like one of the keys the message lists.
    """
    for index, character in enumerate(name):
        if not (character.isascii() and (character.isalnum() or character == "_")):
            break
    else:
        return ""
    described = f"U+{ord(character):04X} {unicodedata.name(character, 'a character without a name')}"
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    meant = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"; {name!r} holds {described} at character {index + 1}, and a key is only ASCII letters, digits and _"
        f"{meant}"
    )


def _from_mapping(cls: type, data: Any, prefix: str) -> Any:
    where = prefix.rstrip(".") or "config"
    if not isinstance(data, Mapping):
        keys = ", ".join(list(_field_types(cls))[:3])
        given = "nothing" if data is None else shown(data)
        raise ValueError(f"{where}: expected a mapping of its keys (such as {keys}), got {given}")
    hints = _field_types(cls)
    unknown = [key for key in data if key not in hints]
    if unknown:
        raise ValueError(_unknown_key(cls, unknown[0], prefix))
    for field in _init_fields(cls):
        if field.name not in data and field.default is field.default_factory is dataclasses.MISSING:
            raise ValueError(f"{prefix}{field.name}: required key is missing for {cls.__name__}")
    arguments = {name: _convert(data[name], hint, prefix + name) for name, hint in hints.items() if name in data}
    try:
        return cls(**arguments)
    except ValueError as error:
        rejection = _rejection(data, error)
        if rejection is error:
            raise
        raise rejection from error


def _rejection(data: Mapping[str, Any], error: ValueError) -> ValueError:
    """A section's own validation error, on the change it names (else the latest change) and that change's origin."""
    message = str(error)
    changes = [value for value in data.values() if isinstance(value, Setting) and value.origin != PRESET]
    if not changes:
        return error
    named = [change for change in changes if message.startswith((change.key + ":", change.key.split(".")[-1] + ":"))]
    change = (named or changes)[-1]
    if message.startswith(f"{change.key}:"):  # a message that names the key already is clear as it is
        return change.error(message)
    field = change.key.split(".")[-1]
    if message.startswith(f"{field}:"):  # the field's own check: said once, under the whole key
        return change.error(f"{change.key}{message[len(field) :]}")
    return change.error(f"{change.key}: the value {shown(change.value)} was rejected: {message}")


def _convert(value: Any, annotation: Any, key: str, text: bool = False) -> Any:
    """``value`` checked (and normalised) against ``annotation``: JSON-like data, or with ``text`` a ``--set`` text."""
    if isinstance(value, Setting):
        try:
            return _convert(value.value, annotation, key, value.text)
        except ValueError as error:
            raise value.error(str(error)) from None
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return value
    if _is_dataclass_type(annotation) and not text:
        return _from_mapping(annotation, value, prefix=key + ".")
    if _is_dataclass_type(annotation):
        names = [key + "." + field.name for field in _init_fields(annotation)]
        raise ValueError(f"{key}: is a section ({annotation.__name__}), not a value; set one of its fields, {names}")
    if origin is typing.Union or origin is types.UnionType:
        return _union(value, annotation, key, text)
    if origin is typing.Literal:
        return _literal(value, annotation, key, text)
    if origin in (tuple, list):
        return _sequence(value, annotation, key, text)
    if origin is dict:
        return _mapping(value, annotation, key, text)
    return _scalar(value, annotation, key, text)


def _union(value: Any, annotation: Any, key: str, text: bool) -> Any:
    options = typing.get_args(annotation)
    none_given = value is None or (text and value.strip().lower() in _NONE_WORDS)
    if none_given and type(None) in options:
        return None
    for option in [option for option in options if option is not type(None)]:
        try:
            return _convert(value, option, key, text)
        except ValueError:
            continue
    raise ValueError(f"{key}: expected {_describe(annotation)}, got {_given(value, annotation)}")


def _literal(value: Any, annotation: Any, key: str, text: bool) -> Any:
    choices = typing.get_args(annotation)
    for choice in choices:
        if type(value) is type(choice) and value == choice:
            return choice
        # A typed number or bool choice matches its spelling (Literal[1, 2] takes "2").
        if text and not isinstance(choice, str) and value.strip() == str(choice):
            return choice
    raise ValueError(f"{key}: expected one of {list(choices)}, got {_given(value, annotation)}")


def _sequence(value: Any, annotation: Any, key: str, text: bool) -> Any:
    listed = _json_list(value) if text else None
    if listed is not None:
        # '["a,b.de", "a,b.en"]': JSON's quotes read as quotes, not kept in the names, and a comma inside one;
        # each item still the text its type parses, as "1,2" gives it.
        given = [item if isinstance(item, str) else json.dumps(item) for item in listed]
    elif text:
        # "1,2,3", "[1, 2, 3]" and "(1, 2, 3)" all work; "" and "[]" are empty.
        inner = value.strip()
        if inner[:1] in "[(" and inner[-1:] in "])":
            inner = inner[1:-1]
        given = [piece.strip() for piece in inner.split(",")] if inner.strip() else []
    elif isinstance(value, (list, tuple)):
        given = list(value)
    else:
        raise ValueError(f"{key}: expected a list for {_describe(annotation)}, got {shown(value)}")
    item_types = _sequence_item_types(annotation, len(given), key)
    items = [
        _convert(item, item_type, f"{key}[{index}]", text)
        for index, (item, item_type) in enumerate(zip(given, item_types))
    ]
    return tuple(items) if typing.get_origin(annotation) is tuple else items


def _json_list(text: str) -> list[Any] | None:
    """``text`` as the JSON list it is written as, or None where it is none (``[a, b]``, ``1,2``)."""
    if not text.strip().startswith("["):
        return None
    try:
        parsed = strict_json.loads(text)
    except (json.JSONDecodeError, strict_json.DuplicateKeyError):
        return None
    return parsed if isinstance(parsed, list) else None


def _mapping(value: Any, annotation: Any, key: str, text: bool) -> Any:
    if text:
        try:
            value = strict_json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"{key}: expected a JSON object, got {shown(value)}") from None
        except strict_json.DuplicateKeyError as error:
            raise ValueError(f"{key}: {error}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"{key}: expected a mapping, got {shown(value)}")
    key_type, value_type = typing.get_args(annotation) or (Any, Any)
    return {
        _convert(item_key, key_type, f"{key}<key>"): _convert(item, value_type, f"{key}.{item_key}")
        for item_key, item in value.items()
    }


def _scalar(value: Any, annotation: Any, key: str, text: bool) -> Any:
    given = _given(value, annotation)
    if isinstance(annotation, type) and issubclass(annotation, pathlib.PurePath):
        if isinstance(value, (str, pathlib.PurePath)):
            return annotation(value)
        raise ValueError(f"{key}: expected a path string, got {given}")
    if annotation not in (bool, int, float, str):
        raise ValueError(f"{key}: unsupported field type {_describe(annotation)} in a config")
    typed = _read_text(value, annotation) if text else value
    # JSON writes 1.0 as 1.0, but a hand-written config may say 1; both mean a float.
    if annotation is float and type(typed) is int:
        # An int past a float's range (1 and 400 zeros) is no finite float either: refused below, not an OverflowError.
        typed = float(typed) if abs(typed) <= sys.float_info.max else math.inf if typed > 0 else -math.inf
    if text and annotation is float and typed == 0.0 and reads_as_zero(str(value)):
        raise ValueError(f"{key}: {TOO_SMALL_FOR_A_FLOAT}, got {given}, which reads as 0")
    if type(typed) is annotation:  # the exact type: a bool is no int
        return _finite(typed, key, given) if annotation is float else typed
    words = f" ({'/'.join(_TRUE_WORDS)} or {'/'.join(_FALSE_WORDS)})" if text and annotation is bool else ""
    raise ValueError(f"{key}: expected {'an' if annotation is int else 'a'} {annotation.__name__}{words}, got {given}")


def _given(value: Any, annotation: Any) -> str:
    """``value`` quoted for a message; a boolean where text was expected says how YAML made one of a word."""
    if type(value) is bool and _expects_text(annotation):
        # `source_language: no` (Norwegian) reads as False: the word itself is gone by now.
        return f"the boolean {value} (an unquoted {_YAML_BOOLEAN_WORDS[value]} in YAML; quote it to mean the text)"
    if value is None:
        # From a file: YAML's `key:` with nothing after it, or a null; "None" is a word of neither file.
        return "null (no value; `key:` with nothing after it reads as null in YAML)"
    return shown(value)


def _expects_text(annotation: Any) -> bool:
    """Whether ``annotation`` takes text: a str, a path, a Literal of strings, or a union with one of them."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return all(isinstance(choice, str) for choice in typing.get_args(annotation))
    if origin is typing.Union or origin is types.UnionType:
        return any(_expects_text(option) for option in typing.get_args(annotation))
    return annotation is str or (isinstance(annotation, type) and issubclass(annotation, pathlib.PurePath))


TOO_SMALL_FOR_A_FLOAT = "expected a number a float can hold (0, or at least about 5e-324 in size)"


def reads_as_zero(text: str) -> bool:
    """Whether the number ``text`` spells is not 0 but too small for a float (1e-400), which reads it as 0."""
    return re.search(r"[1-9]", text.lower().split("e")[0]) is not None


def core_number(text: str) -> int | float | None:
    """The int or float ``text`` spells in YAML 1.2's core schema, else None.

    ``"010"`` is 10, ``"0o17"`` 15, ``"0x1F"`` 31, ``"1e-3"`` and ``".5"`` floats, ``".inf"``
    and ``".nan"`` the floats that are no number; ``"1:04"``, ``"0b101"``, ``"1_000"`` and
    digits of other scripts are None. An int of more digits than Python converts is a ``ValueError``.
    """
    if CORE_INT.match(text):
        base = {"0o": 8, "0x": 16}.get(text[:2], 10)
        return int(text[2:] if base != 10 else text, base)
    if CORE_FLOAT.match(text):
        lowered = text.lower()
        return float(lowered.replace(".inf", "inf").replace(".nan", "nan"))
    return None


def _read_text(text: str, annotation: type) -> Any:
    """A ``--set`` text as the bool, int or float it spells (None where it spells none); a str stays the text.

    Numbers read as a ``--config`` file's do (:func:`core_number`), so the two agree.
    """
    word = text.strip()
    if annotation is bool:
        return True if word.lower() in _TRUE_WORDS else False if word.lower() in _FALSE_WORDS else None
    if annotation not in (int, float):
        return text
    try:
        number = core_number(word)
    except ValueError:  # more digits than Python converts
        return None
    if number is None and annotation is float and word.lower().lstrip("+-") in _PYTHON_NONFINITE:
        return float(word)  # refused by name as not finite, rather than as no float
    return number


def _finite(number: float, key: str, given: str) -> float:
    # A config is saved as strict JSON, which has no NaN or infinity; refuse them up front
    # rather than after hours of training, when the first checkpoint is written.
    if not math.isfinite(number):
        raise ValueError(f"{key}: expected a finite float, got {given}")
    return number


def _sequence_item_types(annotation: Any, length: int, key: str) -> list[Any]:
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if not arguments:
        return [Any] * length
    if origin is list or (len(arguments) == 2 and arguments[1] is Ellipsis):
        return [arguments[0]] * length
    if length != len(arguments):
        raise ValueError(f"{key}: expected {len(arguments)} items for {_describe(annotation)}, got {length}")
    return list(arguments)


def settings_of(config: Any, origin: str = PRESET) -> list[Setting]:
    """The values of the dataclass ``config`` (or the mapping of sections) as settings from ``origin``."""
    values = config if isinstance(config, Mapping) else config_to_dict(config)
    return [Setting(str(key), value, origin) for key, value in values.items()]


def override_settings(overrides: Iterable[str], origin: str = "--set") -> list[Setting]:
    """``key=value`` texts (``--set``) as settings whose text the field's type parses."""
    if isinstance(overrides, str):
        raise ValueError(f"{origin}: expected a list of 'key=value' strings, got the single string {shown(overrides)}")
    parsed = (parse_override(override, origin) for override in overrides)
    return [Setting(".".join(path), text, origin, text=True) for path, text in parsed]


def merge_settings(cls: type[ConfigType], settings: Iterable[Setting]) -> tuple[ConfigType, dict[str, Setting]]:
    """The config ``cls`` that ``settings`` make, laid over each other in order (a later one wins), checked once.

    Every value is checked against its field's type, a replaced one too. Returns the config
    and, by dotted key, the winner of each key that an origin other than :data:`PRESET` set
    (for later checks, such as fine-tuning's, to name).
    """
    nested: dict[str, Any] = {}
    winners: dict[str, Setting] = {}
    for setting in settings:
        for leaf in _leaves(cls, setting):
            replaced = winners.get(leaf.key)
            if replaced is not None:
                # A bad value is refused even where a later source replaces it (a file wrong is wrong).
                _convert(replaced, _annotation_at(cls, replaced), replaced.key)
            _place(nested, leaf)
            winners[leaf.key] = leaf
    return config_from_dict(cls, nested), {key: change for key, change in winners.items() if change.origin != PRESET}


def leaf_settings(cls: type, settings: Iterable[Setting]) -> list[Setting]:
    """``settings`` as one setting a field of ``cls`` (a section's mapping split into its fields), each key checked."""
    return [leaf for setting in settings for leaf in _leaves(cls, setting)]


def _leaves(cls: type, setting: Setting) -> list[Setting]:
    """The settings of single fields that ``setting`` stands for: its key checked, a section's mapping split."""
    annotation = _annotation_at(cls, setting)
    if not _is_dataclass_type(annotation) or setting.text or not isinstance(setting.value, Mapping):
        return [setting]  # a value where a section belongs is refused by the check, as from data
    split = [Setting(f"{setting.key}.{name}", value, setting.origin) for name, value in setting.value.items()]
    return [leaf for part in split for leaf in _leaves(cls, part)]


# A field's metadata key: what sets the field from the data (a vocabulary's size), which no setting may change.
DERIVED = "derived"


def derived_by(cls: type, key: str) -> str | None:
    """What sets the field ``key`` of ``cls`` from the data (its ``DERIVED`` metadata), or None for a setting."""
    *sections, name = key.split(".")
    parent = _annotation_at(cls, Setting(".".join(sections), None, "")) if sections else cls
    field = next((field for field in dataclasses.fields(parent) if field.name == name), None)
    return None if field is None else field.metadata.get(DERIVED)


def _annotation_at(cls: type, setting: Setting) -> Any:
    """The annotation of ``setting``'s dotted key in ``cls``; an unknown key or a key inside a value is refused."""
    parts = setting.key.split(".")
    annotation: Any = cls
    for depth, name in enumerate(parts):
        prefix = ".".join(parts[:depth]) + "." if depth else ""
        if not _is_dataclass_type(annotation):
            raise setting.error(
                f"{prefix.rstrip('.')}: is a value of type {_describe(annotation)}, not a section, "
                f"so it has no key {'.'.join(parts[depth:])!r}"
            )
        fields = _field_types(annotation)
        if name not in fields:
            raise setting.error(_unknown_key(annotation, name, prefix))
        annotation = fields[name]
    return annotation


def _place(nested: dict[str, Any], setting: Setting) -> None:
    """Put ``setting`` at its key in ``nested``, last in its section (``_rejection`` takes the latest change)."""
    *sections, name = setting.key.split(".")
    for section in sections:
        inner = nested.setdefault(section, {})
        if not isinstance(inner, dict):
            return  # a value given for the section, which the check refuses whatever is laid over it
        nested = inner
    nested.pop(name, None)
    nested[name] = setting


def apply_overrides(config: ConfigType, overrides: Iterable[str]) -> ConfigType:
    """A copy of ``config`` with ``key=value`` overrides (``"train.lr_factor=2.0"``) applied, a later one winning.

    Texts parse by the field's type (bools true/false/yes/no/on/off/1/0, Optional none/null,
    tuples and lists ``1,2,3``); each dataclass validates again. ``config`` is not modified.
    """
    if not _is_dataclass_type(type(config)):
        raise ValueError(f"config: expected a dataclass instance, got {type(config).__name__}")
    return merge_settings(type(config), [*settings_of(config), *override_settings(overrides, "overrides")])[0]


def parse_override(override: str, origin: str = "overrides") -> tuple[tuple[str, ...], str]:
    """The dotted key of one ``key=value`` override, as its parts, and the value text.

    Spaces around the key are dropped (``"model.d_model = 64"`` is ``("model", "d_model")``
    and ``" 64"``, whose number parses); the value text is kept as given, since a str field
    takes it whole. ``origin`` names the overrides in errors (``"--set"`` on the command line).
    """
    if not isinstance(override, str) or "=" not in override:
        raise ValueError(f"{origin}: expected 'key=value', got {shown(override)}")
    key, text = override.split("=", 1)
    key = key.strip()
    path = tuple(key.split("."))
    if not key or any(not part for part in path):
        raise ValueError(f"{origin}: expected a dotted key before '=', got {shown(override)}")
    return path, text
