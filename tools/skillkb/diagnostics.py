"""Diagnostics: every problem the tools report names the file, the line where known, the field, what is
wrong and how to fix it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from enum import StrEnum


class Severity(StrEnum):
    error = "error"
    warning = "warning"


@dataclass(frozen=True, order=True)
class Diagnostic:
    file: str
    line: int | None
    code: str
    field: str
    message: str
    fix: str
    severity: Severity = Severity.error

    def render(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        field = f" {self.field}:" if self.field else ""
        return f"{where}: {self.severity.value} [{self.code}]{field} {self.message} (fix: {self.fix})"


class SkillkbError(Exception):
    """A user-facing failure carrying diagnostics; the CLI prints them and exits non-zero."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.render() for d in diagnostics))


class UsageError(Exception):
    """A command was called with arguments that cannot work."""


class MissingExtra(Exception):
    """An optional dependency is not installed; the message names the extra that brings it."""

    def __init__(self, what: str, extra: str, module: str):
        self.extra = extra
        super().__init__(
            f"{what} needs the '{extra}' extra ({module} is not installed): .venv/bin/pip install -e '.[{extra}]'"
            + (" (install torch==2.13.0 first, as scripts/setup.sh --all does)" if extra == "dense" else "")
        )


def require(module: str, extra: str, what: str):
    """Import ``module`` or raise ``MissingExtra`` naming the extra to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(what, extra, module) from exc


class GitError(RuntimeError):
    """git failed (missing commit, not a repository, git not installed)."""


def sort_key(d: Diagnostic) -> tuple:
    return (d.file, d.line or 0, d.code, d.field, d.message)


def errors_only(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diagnostics if d.severity == Severity.error]


def to_json(diagnostics: list[Diagnostic]) -> str:
    rows = [asdict(d) for d in sorted(diagnostics, key=sort_key)]
    summary = {"errors": len(errors_only(diagnostics)), "warnings": len(diagnostics) - len(errors_only(diagnostics))}
    return json.dumps({"summary": summary, "diagnostics": rows}, ensure_ascii=False, indent=2) + "\n"
