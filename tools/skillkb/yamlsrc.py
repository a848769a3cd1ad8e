"""YAML parsing that keeps line numbers, so diagnostics can point at the offending line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

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


def parse_yaml(text: str, line_offset: int = 0) -> ParsedYaml:
    try:
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
        for key_node, value_node in node.value:
            key = key_node.value
            parsed.lines[(*path, key)] = key_node.start_mark.line + 1 + offset
            _walk(value_node, (*path, key), parsed, offset)
    elif isinstance(node, yaml.SequenceNode):
        if node.flow_style:
            parsed.flow_paths.append(path)
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), parsed, offset)
    elif isinstance(node, yaml.ScalarNode) and node.style is None:
        parsed.plain_scalars[path] = node.value
