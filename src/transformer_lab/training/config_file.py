"""A run's configuration as a YAML file: the same keys as ``--set``, nested by section.

    # run.yaml
    model:
      d_model: 128
      num_encoder_layers: 2
    train:
      max_steps: 2000
      precision: auto
    data:
      train_files: [corpus.de, corpus.en]

``transformer-lab train translation --config run.yaml`` starts from the task's preset,
applies the file, then any ``--set`` (which wins). ``transformer-lab config translation``
prints a preset in this form to start from. The file is checked as strictly as a
checkpoint's ``config.json``: an unknown key or a value of the wrong type is one error
naming the file and the key; a file that is not YAML names its line.

YAML is read within bounds (:func:`load_bounded_yaml`, also the model card's reader): at
most 1 MiB of text, nested at most 32 levels, and at most 100,000 values with every alias
(``*name``) counted as the whole value it repeats. A few hundred bytes of nested aliases
otherwise stand for gigabytes of values (and the message quoting one took them all), and
100,000 nested brackets overflowed the parser's recursion.

Numbers are read as YAML 1.2's core schema spells them, as ``--set`` reads them
(:func:`~transformer_lab.training.config_io.core_number`): ``010`` is ten, ``0o10`` eight,
``1e-3`` a float, and ``1:04`` text (PyYAML's YAML 1.1 read them as 8, a base-60 64 and text).
Booleans and null keep PyYAML's words (``no`` is False; a str field given one says to quote it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from transformer_lab.data.parallel_text import utf8_text
from transformer_lab.training.config_io import (
    CORE_FLOAT,
    CORE_INT,
    TOO_SMALL_FOR_A_FLOAT,
    Setting,
    config_to_dict,
    core_number,
    reads_as_zero,
    settings_of,
)

__all__ = [
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_VALUES",
    "config_file_settings",
    "config_to_yaml",
    "dump_yaml",
    "load_bounded_yaml",
    "load_bounded_yaml_text",
    "read_bounded_text",
]

# A run's config is a few hundred bytes, a model card's front matter a few kilobytes.
MAX_YAML_BYTES = 1 << 20
# A config is three levels deep (section, key, list); Python's recursion ends near 1,000.
MAX_YAML_DEPTH = 32
# Values (scalars, lists, mappings) with every alias counted as what it repeats.
MAX_YAML_VALUES = 100_000


class _YamlBoundError(ValueError):
    """A bound of :func:`load_bounded_yaml` exceeded, at ``line`` (1-based) when known."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"


def _core_number_resolvers() -> dict[Any, list[tuple[str, Any]]]:
    """PyYAML's plain-scalar resolvers less its YAML 1.1 numbers, which YAML 1.2's core schema replaces."""
    return {
        first: [(tag, pattern) for tag, pattern in resolvers if tag not in (_INT_TAG, _FLOAT_TAG)]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


def _construct_core_number(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | float:
    """A number node (plain, or tagged ``!!int`` / ``!!float``) read by :func:`core_number`."""
    text = loader.construct_scalar(node)
    number = core_number(str(text))
    if number == 0.0 and reads_as_zero(str(text)):
        # 1e-400 reads as 0, a value nobody typed: a dropout would become 0 without a word.
        raise yaml.constructor.ConstructorError(
            None, None, f"{TOO_SMALL_FOR_A_FLOAT}, got {text!r}, which reads as 0", node.start_mark
        )
    if number is None or (node.tag == _INT_TAG and not isinstance(number, int)):
        kind = "an int" if node.tag == _INT_TAG else "a float"
        raise yaml.constructor.ConstructorError(
            None, None, f"expected {kind} as YAML 1.2 spells it, got {text!r}", node.start_mark
        )
    return float(number) if node.tag == _FLOAT_TAG else number


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses nesting deeper than :data:`MAX_YAML_DEPTH` as it composes.

    The composer recurses once per level, so the depth must be counted there, before
    Python's own recursion limit is reached.
    """

    yaml_implicit_resolvers = _core_number_resolvers()

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                line = self.peek_event().start_mark.line + 1
                raise _YamlBoundError(f"expected values nested at most {MAX_YAML_DEPTH} levels deep, got deeper", line)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


# The int first: the float's pattern also matches "10".
_BoundedLoader.add_implicit_resolver(_INT_TAG, CORE_INT, list("-+0123456789"))
_BoundedLoader.add_implicit_resolver(_FLOAT_TAG, CORE_FLOAT, list("-+.0123456789"))
_BoundedLoader.add_constructor(_INT_TAG, _construct_core_number)
_BoundedLoader.add_constructor(_FLOAT_TAG, _construct_core_number)


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper that also quotes a string YAML 1.2 reads as a number ("1e-3", "0o17").

    Its YAML 1.1 quoting stays, so any YAML reader takes the text back as text.
    """


_Dumper.add_implicit_resolver(_INT_TAG, CORE_INT, list("-+0123456789"))
_Dumper.add_implicit_resolver(_FLOAT_TAG, CORE_FLOAT, list("-+.0123456789"))


def dump_yaml(data: Any) -> str:
    """``data`` as YAML text that :func:`load_bounded_yaml_text` (and YAML 1.1 readers) read back the same."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def _check_expanded_size(root: yaml.Node) -> None:
    """Refuse a node graph whose aliases expand past :data:`MAX_YAML_VALUES` values or :data:`MAX_YAML_DEPTH` levels.

    An alias is the same node object as its anchor, so each node's expanded size and
    depth are counted once and reused: the cost follows the text, not the expansion.
    """
    sizes: dict[int, tuple[int, int]] = {}
    open_nodes: set[int] = set()

    def measure(node: yaml.Node) -> tuple[int, int]:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if id(node) in open_nodes:
            raise _YamlBoundError(
                "expected no alias inside the value it names, got one that repeats itself", node.start_mark.line + 1
            )
        open_nodes.add(id(node))
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
            _check_keys_once(node)
        count, depth = 1, 1
        for child in children:
            child_count, child_depth = measure(child)
            count += child_count
            depth = max(depth, child_depth + 1)
            if count > MAX_YAML_VALUES or depth > MAX_YAML_DEPTH:
                line = node.start_mark.line + 1
                if depth > MAX_YAML_DEPTH:
                    raise _YamlBoundError(
                        f"expected values nested at most {MAX_YAML_DEPTH} levels deep (aliases expanded), got deeper",
                        line,
                    )
                raise _YamlBoundError(f"expected at most {MAX_YAML_VALUES:,} values (aliases expanded), got more", line)
        open_nodes.discard(id(node))
        sizes[id(node)] = (count, depth)
        return count, depth

    measure(root)


def _check_keys_once(mapping: yaml.MappingNode) -> None:
    """Refuse a key given twice in one mapping: PyYAML keeps the last, and the first would be dropped unsaid."""
    first_lines: dict[str, int] = {}
    merged_at: int | None = None
    for key, value in mapping.value:
        line = key.start_mark.line + 1
        if isinstance(key, yaml.ScalarNode) and key.tag == "tag:yaml.org,2002:merge":
            if merged_at is not None:  # PyYAML merges both, the later's keys winning without a word
                raise _YamlBoundError(
                    f"expected one merge key '<<' in a mapping (several mappings as a list: '<<: [*a, *b]'), "
                    f"got another (first at line {merged_at})",
                    line,
                )
            merged_at = line
            _check_merged_keys_once(value, line)
            continue
        if not isinstance(key, yaml.ScalarNode):
            continue
        first = first_lines.get(key.value)
        if first is not None:
            raise _YamlBoundError(
                f"expected each key once in a mapping, got {key.value!r} again (first at line {first})", line
            )
        first_lines[key.value] = line


def _check_merged_keys_once(merged: yaml.Node, line: int) -> None:
    """Refuse a key that two mappings of one merge list give: YAML says the first wins, PyYAML keeps the last."""
    if not isinstance(merged, yaml.SequenceNode):
        return
    given: dict[str, int] = {}
    for number, source in enumerate(merged.value, start=1):
        if not isinstance(source, yaml.MappingNode):
            continue  # PyYAML refuses it itself, naming the node
        for key, _ in source.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            if given.setdefault(key.value, number) != number:  # a key twice in one mapping is _check_keys_once's
                raise _YamlBoundError(
                    f"expected the mappings of a merge list to give each key once, got {key.value!r} in mapping "
                    f"{given[key.value]} and mapping {number}; set it in the mapping itself to choose",
                    line,
                )


def load_bounded_yaml(path: str | os.PathLike[str]) -> Any:
    """What the YAML file ``path`` holds, read as :func:`yaml.safe_load` would, within the module's bounds.

    A file over :data:`MAX_YAML_BYTES`, nested deeper than :data:`MAX_YAML_DEPTH`, holding more
    than :data:`MAX_YAML_VALUES` values once its aliases are expanded, with a key repeated in a
    mapping, not UTF-8, or not YAML is a ``ValueError`` naming the file (and the line where one is known).
    """
    path = Path(path)
    return load_bounded_yaml_text(read_bounded_text(path, MAX_YAML_BYTES, "a YAML file"), str(path))


def read_bounded_text(path: Path, max_bytes: int, what: str) -> str:
    """The UTF-8 text of ``path``, read no further than ``max_bytes`` + 1 bytes.

    A longer file or invalid UTF-8 is a ``ValueError`` naming the file; ``what`` names the
    kind of file expected ("a YAML file").
    """
    with path.open("rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{path}: expected {what} of at most {max_bytes:,} bytes, got a larger one")
    return utf8_text(data, str(path))  # bad bytes named as every other text file's: line and byte column


def load_bounded_yaml_text(text: str, where: str) -> Any:
    """:func:`load_bounded_yaml` of text already read; ``where`` names it in errors (a file, or a file's part)."""
    if len(text) > MAX_YAML_BYTES:
        raise ValueError(f"{where}: expected YAML of at most {MAX_YAML_BYTES:,} characters, got {len(text):,}")
    try:
        # The reader checks the characters as it is made: a control character is refused here.
        loader = _BoundedLoader(text)
    except yaml.reader.ReaderError as error:
        line = text[: error.position].count("\n") + 1
        raise ValueError(
            f"{where}: line {line}: expected YAML, got the character {chr(error.character)!r} "
            f"(U+{error.character:04X}), which YAML does not allow"
        ) from None
    try:
        node = loader.get_single_node()
        if loader.yaml_version is not None and loader.yaml_version != (1, 2):
            # Read as YAML 1.2, a file that says 1.1 would mean another thing (its 010 is 8, its yes true).
            version = ".".join(str(part) for part in loader.yaml_version)
            lines = enumerate(text.splitlines(), start=1)
            line = next(number for number, text_line in lines if text_line.startswith("%YAML"))
            raise _YamlBoundError(
                f"expected YAML 1.2 (how this file is read: 010 is 10, yes is a string), got a %YAML {version} "
                "directive; remove it, and write the values as YAML 1.2 reads them",
                line,
            )
        if node is None:
            return None
        _check_expanded_size(node)
        return loader.construct_document(node)
    except _YamlBoundError as error:
        at = f"line {error.line}: " if error.line is not None else ""
        raise ValueError(f"{where}: {at}{error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ValueError(f"{where}: {at}expected YAML, got an error: {' '.join(str(problem).split())}") from None
    except ValueError as error:
        # A value the constructor refuses, such as an integer of more digits than Python converts.
        raise ValueError(f"{where}: expected YAML values Python can hold, got one it refuses ({error})") from None
    finally:
        loader.dispose()


def config_file_settings(path: str | os.PathLike[str]) -> list[Setting]:
    """The YAML file's values as settings from ``--config PATH``; a missing or empty file, bad YAML, a list refused."""
    path = Path(path)
    if path.is_dir():  # said as the other file options say it, not as if nothing were there
        raise ValueError(f"--config: expected a YAML file, got {str(path)!r}, which is a folder")
    if not path.exists():  # a pipe (`--config <(...)`, /dev/stdin) exists and is read once, as a file is
        raise FileNotFoundError(f"--config: expected an existing YAML file, got {str(path)!r}")
    content = load_bounded_yaml(path)
    if content is None:  # only comments (or a lone null): a file emptied or the wrong one, never meant as no change
        raise ValueError(f"{path}: expected a mapping of settings (model:, train:, data:, ...), got an empty file")
    if not isinstance(content, Mapping):
        found = type(content).__name__
        raise ValueError(f"{path}: expected sections of keys (model:, train:, data:, ...), got {found}")
    _check_names(content, path, "")
    return settings_of(content, f"--config {path}")


def _check_names(mapping: Mapping[Any, Any], path: Path, section: str) -> None:
    """Refuse a key that is no name (``~:`` is null, ``1:`` an int): it was said as the key "train.None"."""
    for key, value in mapping.items():
        if not isinstance(key, str):
            where = f"under {section}" if section else "at the top"
            raise ValueError(f"{path}: expected keys that are names {where}, got {key!r} ({type(key).__name__})")
        if isinstance(value, Mapping) and section.count(".") < 1:  # the sections and their fields' mappings
            _check_names(value, path, f"{section}.{key}" if section else key)


def config_to_yaml(config: Any) -> str:
    """A config as the YAML text ``--config`` reads (sections in the dataclass's field order)."""
    return dump_yaml(config_to_dict(config))
