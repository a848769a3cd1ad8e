"""YAML parsing that keeps line numbers, so diagnostics can point at the offending line.

Entry files are plain data: anchors and aliases are refused (an alias bomb would expand exponentially
in any walk of the parsed data), nesting is bounded (deeper input would exhaust the recursion of the
composer), and a key written twice in one mapping is an error (YAML readers silently keep the last).
These checks run on the event stream, before anything is composed or expanded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

MAX_DEPTH = 32  # entry.yaml needs 5 levels; frontmatter 2

# Plain scalars that a YAML 1.1 or 1.2 reader turns into a number although they may be meant as a SHA.
NUMBER_SHAPED = re.compile(r"^[+-]?(\d+|\d*\.?\d+[eE][+-]?\d+|\d+[eE]\d*|0x[0-9a-fA-F]+|0o?[0-7]+)$")


@dataclass
class ParsedYaml:
    data: Any
    lines: dict[tuple, int] = field(default_factory=dict)  # path of keys/indexes -> 1-based line
    plain_scalars: dict[tuple, str] = field(default_factory=dict)  # unquoted scalar text by path
    flow_paths: list[tuple] = field(default_factory=list)  # collections written in flow style

    def line_of(self, path: tuple) -> int | None:
        """Line of ``path`` or of its nearest ancestor."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get(())


class YamlProblem(Exception):
    def __init__(self, message: str, line: int | None):
        self.line = line
        super().__init__(message)


def _check_events(text: str, line_offset: int) -> None:
    """Refuse anchors, aliases and deep nesting from the event stream (nothing is expanded here)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        line = event.start_mark.line + 1 + line_offset
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise YamlProblem(
                "YAML anchors and aliases (&name, *name) are not allowed in entry files; write the value out", line
            )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlProblem(f"YAML nests deeper than {MAX_DEPTH} levels; entry files are shallow data", line)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def parse_yaml(text: str, line_offset: int = 0) -> ParsedYaml:
    try:
        _check_events(text, line_offset)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 + line_offset if mark else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YamlProblem(f"YAML does not parse: {problem}", line) from None
    parsed = ParsedYaml(data=data)
    if node is not None:
        _walk(node, (), parsed, line_offset)
    return parsed


def _walk(node: yaml.Node, path: tuple, parsed: ParsedYaml, offset: int) -> None:
    parsed.lines.setdefault(path, node.start_mark.line + 1 + offset)
    if isinstance(node, yaml.MappingNode):
        if node.flow_style:
            parsed.flow_paths.append(path)
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            line = key_node.start_mark.line + 1 + offset
            if key in seen:
                where = ".".join(map(str, (*path, key)))
                raise YamlProblem(f"key '{where}' is written twice (YAML would silently keep the last); keep one", line)
            seen.add(key)
            parsed.lines[(*path, key)] = line
            _walk(value_node, (*path, key), parsed, offset)
    elif isinstance(node, yaml.SequenceNode):
        if node.flow_style:
            parsed.flow_paths.append(path)
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), parsed, offset)
    elif isinstance(node, yaml.ScalarNode) and node.style is None:
        parsed.plain_scalars[path] = node.value
