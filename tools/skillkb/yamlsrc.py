"""YAML parsing that keeps line numbers, so diagnostics can point at the offending line.

Entry files are plain data: anchors and aliases are refused (an alias bomb would expand exponentially
in any walk of the parsed data), nesting is bounded (deeper input would exhaust the recursion of the
constructor), and a key written twice in one mapping is an error (YAML readers silently keep the last).

The text is parsed once: one pass over the event stream refuses anchors, aliases and deep nesting as
they come and builds the node tree itself (iteratively, so no input can recurse), and the data is
constructed from those nodes. libyaml's C parser is used when PyYAML was built with it: the pure-Python
parser takes seconds on a large flow list, and this runs on every validate and cold search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

MAX_DEPTH = 32  # entry.yaml needs 5 levels; frontmatter 2
DEPTH_MESSAGE = f"YAML nests deeper than {MAX_DEPTH} levels; entry files are shallow data"
# The C loader when PyYAML has libyaml; both give the same events, marks and data.
LOADER: type = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader

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


class _Frame:
    """A collection being composed: its node and, in a mapping, the key still waiting for its value."""

    def __init__(self, node: yaml.CollectionNode):
        self.node = node
        self.key: yaml.Node | None = None

    def add(self, child: yaml.Node) -> None:
        if isinstance(self.node, yaml.SequenceNode):
            self.node.value.append(child)
        elif self.key is None:
            self.key = child
        else:
            self.node.value.append((self.key, child))
            self.key = None


def _tag(loader: Any, kind: type, event: yaml.NodeEvent) -> str:
    """The event's tag, resolved as PyYAML's composer does when it is implicit."""
    tag = getattr(event, "tag", None)
    if tag is None or tag == "!":
        value = event.value if isinstance(event, yaml.ScalarEvent) else None
        return loader.resolve(kind, value, event.implicit)
    return tag


def _compose(loader: Any, line_offset: int) -> yaml.Node | None:
    """The single document's node tree, refusing anchors, aliases and deep nesting on the way."""
    root: yaml.Node | None = None
    stack: list[_Frame] = []
    documents = 0
    while not loader.check_event(yaml.StreamEndEvent):
        event = loader.get_event()
        line = event.start_mark.line + 1 + line_offset
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise YamlProblem("YAML does not parse: expected a single document, found a second '---'", line)
            continue
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise YamlProblem(
                "YAML anchors and aliases (&name, *name) are not allowed in entry files; write the value out", line
            )
        node: yaml.Node
        if isinstance(event, yaml.ScalarEvent):
            tag = _tag(loader, yaml.ScalarNode, event)
            node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style or None)
        elif isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                raise YamlProblem(DEPTH_MESSAGE, line)
            kind = yaml.SequenceNode if isinstance(event, yaml.SequenceStartEvent) else yaml.MappingNode
            node = kind(_tag(loader, kind, event), [], event.start_mark, None, flow_style=event.flow_style)
            stack.append(_Frame(node))
            continue
        elif isinstance(event, yaml.CollectionEndEvent):
            node = stack.pop().node
            node.end_mark = event.end_mark
        else:  # stream start, document end
            continue
        if stack:
            stack[-1].add(node)
        else:
            root = node
    return root


def parse_yaml(text: str, line_offset: int = 0) -> ParsedYaml:
    loader = LOADER(text)
    try:
        node = _compose(loader, line_offset)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 + line_offset if mark else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if "nesting depth" in problem:  # libyaml's own bound (1,000 flow levels), met while scanning ahead
            raise YamlProblem(DEPTH_MESSAGE, line) from None
        raise YamlProblem(f"YAML does not parse: {problem}", line) from None
    finally:
        loader.dispose()
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
