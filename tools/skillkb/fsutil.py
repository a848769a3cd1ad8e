"""File-system helpers: safe reading, atomic deterministic writing, folder digests."""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

MAX_TEXT_BYTES = 1_048_576  # no single text file in an entry needs more than 1 MiB


@dataclass(frozen=True)
class TextProblem:
    code: str
    message: str
    fix: str


def read_text(path: Path, max_bytes: int = MAX_TEXT_BYTES) -> tuple[str | None, TextProblem | None]:
    """Read a UTF-8 text file, refusing what the library cannot safely store or render."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        return None, TextProblem("file-unreadable", f"cannot read file: {exc.strerror}", "check the path exists")
    if size > max_bytes:
        return None, TextProblem(
            "file-too-large",
            f"file is {size} bytes, over the {max_bytes}-byte limit",
            "move deep dives into references/*.md and keep SKILL.md short",
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, TextProblem("file-unreadable", f"cannot read file: {exc.strerror}", "make it a readable file")
    if not data.strip():
        return None, TextProblem("file-empty", "file is empty", "write the required content or remove the file")
    if data.startswith(b"\xef\xbb\xbf"):
        return None, TextProblem("file-bom", "file starts with a UTF-8 byte-order mark", "save it as UTF-8 without BOM")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return None, TextProblem(
            "file-not-utf8", f"file is not valid UTF-8 (byte {exc.start}, line {line})", "re-encode the file as UTF-8"
        )
    if "\x00" in text:
        return None, TextProblem("file-binary", "file contains NUL bytes", "store only text files in an entry")
    return text, None


def escapes_root(path: Path, root: Path) -> bool:
    """True when ``path`` (following symlinks) resolves outside ``root``."""
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return True
    return False


def atomic_write(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` atomically; return False (and leave the file alone) when unchanged."""
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def folder_files(folder: Path) -> list[Path]:
    """Regular files under ``folder``, sorted by relative POSIX path; hidden files and caches skipped."""
    files = [
        p
        for p in folder.rglob("*")
        if p.is_file()
        and not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(folder).parts)
    ]
    return sorted(files, key=lambda p: p.relative_to(folder).as_posix())


def folder_digest(folder: Path) -> str:
    """sha256 over the folder's files sorted by relative path, feeding each path then its bytes."""
    digest = hashlib.sha256()
    for file in folder_files(folder):
        digest.update(file.relative_to(folder).as_posix().encode("utf-8"))
        digest.update(file.read_bytes())
    return "sha256:" + digest.hexdigest()
