"""Generic helpers for the project's typed dataclass configs.

They work on any dataclass, nested or not (a top-level config with fields ``model``,
``train``, ... each a dataclass), and check values against the field annotations:
``int``, ``float``, ``bool``, ``str``, ``pathlib.Path``, ``Optional[X]`` / ``X | None``,
``Literal[...]``, ``tuple[X, ...]``, ``tuple[X, Y]``, ``list[X]``, ``dict[str, X]`` and
nested dataclasses.

- :func:`config_to_dict` gives plain JSON-ready data (tuples become lists).
- :func:`config_from_dict` rebuilds the dataclass, rejecting unknown keys and values of
  the wrong type; absent keys take the field's default.
- :func:`apply_overrides` applies ``--set key=value`` overrides such as
  ``"train.lr_factor=2.0"``, parsing the text by the field's type; :func:`parse_override`
  is its one reading of a ``key=value`` text, for whoever else needs the keys.

Every error is a ``ValueError`` naming the dotted key, what was expected and what was given;
the value given is quoted by :func:`shown`, which keeps it short whatever its size.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import reprlib
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

__all__ = ["apply_overrides", "config_from_dict", "config_to_dict", "parse_override", "shown"]

ConfigType = TypeVar("ConfigType")

_TRUE_WORDS = ("true", "yes", "on", "1")
_FALSE_WORDS = ("false", "no", "off", "0")
_NONE_WORDS = ("none", "null")


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
    text = _SHOWN.repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[: SHOWN_CHARACTERS - 3] + "..."


def _is_dataclass_type(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def _init_fields(cls: type) -> list[dataclasses.Field]:
    # Fields with init=False are derived in __post_init__, so they are neither written
    # nor accepted back.
    return [field for field in dataclasses.fields(cls) if field.init]


def _field_types(cls: type) -> dict[str, Any]:
    # get_type_hints resolves string annotations (``from __future__ import annotations``).
    return typing.get_type_hints(cls)


def _describe(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _is_union(origin: Any) -> bool:
    return origin is typing.Union or origin is types.UnionType


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


def _from_mapping(cls: type, data: Any, prefix: str) -> Any:
    where = prefix.rstrip(".") or "config"
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a mapping for {cls.__name__}, got {type(data).__name__}")
    fields = {field.name: field for field in _init_fields(cls)}
    unknown = [key for key in data if key not in fields]
    if unknown:
        name = unknown[0] if isinstance(unknown[0], str) and len(unknown[0]) <= 80 else shown(unknown[0])
        raise ValueError(f"{prefix}{name}: unknown key for {cls.__name__}; expected one of {sorted(fields)}")
    hints = _field_types(cls)
    arguments: dict[str, Any] = {}
    for name, field in fields.items():
        key = prefix + name
        if name not in data:
            no_default = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
            if no_default:
                raise ValueError(f"{key}: required key is missing for {cls.__name__}")
            continue
        arguments[name] = _convert_data(data[name], hints[name], key)
    return cls(**arguments)


def _convert_data(value: Any, annotation: Any, key: str) -> Any:
    """Check (and normalise) a value read from JSON-like data against ``annotation``."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if annotation is Any:
        return value
    if _is_dataclass_type(annotation):
        return _from_mapping(annotation, value, prefix=key + ".")
    if _is_union(origin):
        if value is None and type(None) in arguments:
            return None
        for option in arguments:
            if option is type(None):
                continue
            try:
                return _convert_data(value, option, key)
            except ValueError:
                continue
        raise ValueError(f"{key}: expected {_describe(annotation)}, got {shown(value)}")
    if origin is typing.Literal:
        for choice in arguments:
            if type(value) is type(choice) and value == choice:
                return choice
        raise ValueError(f"{key}: expected one of {list(arguments)}, got {shown(value)}")
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(f"{key}: expected a bool, got {shown(value)}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ValueError(f"{key}: expected an int, got {shown(value)}")
    if annotation is float:
        # JSON writes 1.0 as 1.0, but a hand-written config may say 1; both mean a float.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return _finite(float(value), key, shown(value))
        raise ValueError(f"{key}: expected a float, got {shown(value)}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise ValueError(f"{key}: expected a str, got {shown(value)}")
    if isinstance(annotation, type) and issubclass(annotation, pathlib.PurePath):
        if isinstance(value, (str, pathlib.PurePath)):
            return annotation(value)
        raise ValueError(f"{key}: expected a path string, got {shown(value)}")
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{key}: expected a list for {_describe(annotation)}, got {shown(value)}")
        item_types = _sequence_item_types(annotation, len(value), key)
        items = [
            _convert_data(item, item_type, f"{key}[{index}]")
            for index, (item, item_type) in enumerate(zip(value, item_types))
        ]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ValueError(f"{key}: expected a mapping, got {shown(value)}")
        key_type, value_type = arguments or (Any, Any)
        return {
            _convert_data(item_key, key_type, f"{key}<key>"): _convert_data(item, value_type, f"{key}.{item_key}")
            for item_key, item in value.items()
        }
    raise ValueError(f"{key}: unsupported field type {_describe(annotation)} in a config")


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


def _parse_text(text: str, annotation: Any, key: str) -> Any:
    """Parse the text of a ``key=value`` override by the field's annotation."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    stripped = text.strip()
    if annotation is Any or annotation is str:
        return text
    if _is_dataclass_type(annotation):
        names = [field.name for field in _init_fields(annotation)]
        raise ValueError(
            f"{key}: is a section ({annotation.__name__}), not a value; "
            f"set one of its fields, {[key + '.' + name for name in names]}"
        )
    if _is_union(origin):
        if type(None) in arguments and stripped.lower() in _NONE_WORDS:
            return None
        for option in arguments:
            if option is type(None):
                continue
            try:
                return _parse_text(text, option, key)
            except ValueError:
                continue
        raise ValueError(f"{key}: expected {_describe(annotation)}, got {shown(text)}")
    if origin is typing.Literal:
        for choice in arguments:
            if isinstance(choice, str) and text == choice:
                return choice
            if not isinstance(choice, str) and stripped == str(choice):
                return choice
        raise ValueError(f"{key}: expected one of {list(arguments)}, got {shown(text)}")
    if annotation is bool:
        if stripped.lower() in _TRUE_WORDS:
            return True
        if stripped.lower() in _FALSE_WORDS:
            return False
        raise ValueError(
            f"{key}: expected a bool ({'/'.join(_TRUE_WORDS)} or {'/'.join(_FALSE_WORDS)}), " f"got {shown(text)}"
        )
    if annotation is int:
        try:
            return int(stripped)
        except ValueError:
            raise ValueError(f"{key}: expected an int, got {shown(text)}") from None
    if annotation is float:
        try:
            number = float(stripped)
        except ValueError:
            raise ValueError(f"{key}: expected a float, got {shown(text)}") from None
        return _finite(number, key, shown(text))
    if isinstance(annotation, type) and issubclass(annotation, pathlib.PurePath):
        return annotation(text)
    if origin in (tuple, list):
        # "1,2,3", "[1, 2, 3]" and "(1, 2, 3)" all work; "" and "[]" are empty.
        inner = stripped
        if inner[:1] in "[(" and inner[-1:] in "])":
            inner = inner[1:-1]
        pieces = [piece.strip() for piece in inner.split(",")] if inner.strip() else []
        item_types = _sequence_item_types(annotation, len(pieces), key)
        items = [
            _parse_text(piece, item_type, f"{key}[{index}]")
            for index, (piece, item_type) in enumerate(zip(pieces, item_types))
        ]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            raise ValueError(f"{key}: expected a JSON object, got {shown(text)}") from None
        return _convert_data(value, annotation, key)
    raise ValueError(f"{key}: unsupported field type {_describe(annotation)} for an override")


def apply_overrides(config: ConfigType, overrides: Iterable[str]) -> ConfigType:
    """Return a copy of ``config`` with ``key=value`` overrides applied, in order.

    Keys are dotted paths through nested dataclasses (``"train.lr_factor=2.0"``,
    ``"model.d_model=64"``); the value text is parsed by the field's type (bools accept
    true/false/yes/no/on/off/1/0, Optional fields accept none/null, tuples and lists accept
    ``1,2,3``). The copy is rebuilt with ``dataclasses.replace``, so each dataclass's own
    validation runs again. ``config`` itself is not modified.
    """
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise ValueError(f"config: expected a dataclass instance, got {type(config).__name__}")
    if isinstance(overrides, str):
        raise ValueError(f"overrides: expected a list of 'key=value' strings, got the single string {shown(overrides)}")
    for override in overrides:
        path, text = parse_override(override)
        config = _replace_at(config, list(path), text, prefix="")
    return config


def parse_override(override: str) -> tuple[tuple[str, ...], str]:
    """The dotted key of one ``key=value`` override, as its parts, and the value text.

    Spaces around the key are dropped (``"model.d_model = 64"`` is ``("model", "d_model")``
    and ``" 64"``, whose number parses); the value text is kept as given, since a str field
    takes it whole.
    """
    if not isinstance(override, str) or "=" not in override:
        raise ValueError(f"overrides: expected 'key=value', got {shown(override)}")
    key, text = override.split("=", 1)
    key = key.strip()
    path = tuple(key.split("."))
    if not key or any(not part for part in path):
        raise ValueError(f"overrides: expected a dotted key before '=', got {shown(override)}")
    return path, text


def _replace_at(config: Any, path: list[str], text: str, prefix: str) -> Any:
    name, rest = path[0], path[1:]
    key = prefix + name
    cls = type(config)
    fields = {field.name for field in _init_fields(cls)}
    if name not in fields:
        raise ValueError(
            f"{key}: unknown key for {cls.__name__}; expected one of " f"{sorted(prefix + field for field in fields)}"
        )
    current = getattr(config, name)
    if rest:
        if not dataclasses.is_dataclass(current):
            raise ValueError(
                f"{key}: is a value of type {_describe(_field_types(cls)[name])}, not a "
                f"section, so it has no key {'.'.join(rest)!r}"
            )
        new_value = _replace_at(current, rest, text, prefix=key + ".")
    else:
        new_value = _parse_text(text, _field_types(cls)[name], key)
    try:
        return dataclasses.replace(config, **{name: new_value})
    except ValueError as error:
        if rest:
            raise
        # The dataclass's own validation (__post_init__) rejected the parsed value; a message
        # that names the key already is clear as it is.
        if str(error).startswith(f"{key}:"):
            raise ValueError(str(error)) from error
        raise ValueError(f"{key}: the value {shown(text)} was rejected: {error}") from error
