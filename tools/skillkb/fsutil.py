"""File-system helpers: safe reading, atomic deterministic writing, folder digests.

Reading refuses anything but a regular file reached without a symlink (a FIFO would block, a link could
publish a file from outside the library). Writing is atomic, honours the umask, and cleans up the temp
files a killed writer left behind.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

MAX_TEXT_BYTES = 1_048_576  # no single text file in an entry needs more than 1 MiB
BOM = b"\xef\xbb\xbf"
STALE_TEMP_SECONDS = 3600.0  # a temp file this old belongs to no running write


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once at import: os.umask can only be read by setting it, which is not thread-safe later on.
UMASK = _read_umask()


@dataclass(frozen=True)
class TextProblem:
    code: str
    message: str
    fix: str


def not_regular(path: Path) -> TextProblem | None:
    """Why ``path`` is not a plain regular file (a symlink, FIFO, device, folder), or None."""
    try:
        mode = path.lstat().st_mode
    except OSError as exc:
        return TextProblem("file-unreadable", f"cannot read file: {exc.strerror}", "check the path exists")
    if stat.S_ISLNK(mode):
        return TextProblem("symlink", "file is a symlink", "replace the link with the file itself (links are refused)")
    if not stat.S_ISREG(mode):
        return TextProblem("not-regular-file", "not a regular file (a FIFO, device or folder)", "store a plain file")
    return None


def too_large_fix(path: Path) -> str:
    """How to shrink a file that is over its limit, by what the file is for."""
    if path.name == "SKILL.md":
        return "move deep dives into references/*.md and keep SKILL.md short"
    if path.name == "entry.yaml":
        return "entry.yaml is metadata: keep to the fields of docs/authoring.md, with short lists"
    if path.parent.name == "references":
        return f"split {path.name} into smaller reference files"
    return f"shorten {path.name} below the limit"


def read_text(
    path: Path, max_bytes: int = MAX_TEXT_BYTES, normalise: bool = False
) -> tuple[str | None, TextProblem | None]:
    """Read a UTF-8 text file, refusing what the library cannot safely store or render.

    A byte-order mark or CRLF line endings are always a problem; with ``normalise`` the text is returned
    too (mark dropped, line endings made LF) so a caller can check the content as well and report the
    file once, instead of also reporting everything that seems missing from an unread file.
    """
    problem = not_regular(path)
    if problem:
        return None, problem
    size = path.lstat().st_size
    if size > max_bytes:
        return None, TextProblem(
            "file-too-large", f"file is {size} bytes, over the {max_bytes}-byte limit", too_large_fix(path)
        )
    try:
        # O_NOFOLLOW and O_NONBLOCK: a link or FIFO swapped in after the check still cannot be read or block.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        return None, TextProblem("file-unreadable", f"cannot read file: {exc.strerror}", "make it a readable file")
    if not data.strip():
        return None, TextProblem("file-empty", "file is empty", "write the required content or remove the file")
    bom = data.startswith(BOM)
    text, problem = _decode(data, len(BOM) if bom else 0)
    if text is None:
        return None, problem
    problem = _ending_problem(text, bom)
    if problem is None:
        return text, None
    if not normalise or not text.strip():
        return None, problem
    return text.replace("\r\n", "\n").replace("\r", "\n"), problem


def _ending_problem(text: str, bom: bool) -> TextProblem | None:
    """A byte-order mark or carriage returns: text that reads but that tools and diffs mishandle."""
    if bom:
        return TextProblem("file-bom", "file starts with a UTF-8 byte-order mark", "save it as UTF-8 without BOM")
    if "\r" not in text:
        return None
    line = text[: text.index("\r")].count("\n") + 1
    return TextProblem(
        "file-crlf",
        f"file has carriage returns (CRLF / Windows line endings, first on line {line})",
        "save it with LF line endings (e.g. `dos2unix FILE` or your editor's line-ending setting)",
    )


def _decode(data: bytes, start: int) -> tuple[str | None, TextProblem | None]:
    """``data`` from byte ``start`` as UTF-8 text without NUL bytes, or why not."""
    try:
        text = data[start:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = start + exc.start
        line = data[:at].count(b"\n") + 1
        return None, TextProblem(
            "file-not-utf8", f"file is not valid UTF-8 (byte {at}, line {line})", "re-encode the file as UTF-8"
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
    """Write ``data`` to ``path`` atomically; return False (and leave the file alone) when unchanged.

    The file gets the mode a plain ``open()`` would give it (0666 minus the umask), or keeps the mode of
    the file it replaces. Temp files of this target left by a killed writer are removed first.
    """
    if path.is_file() and not path.is_symlink() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    mode = stat.S_IMODE(path.stat().st_mode) if path.is_file() else 0o666 & ~UMASK
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _temp_pattern(path: Path) -> re.Pattern[str]:
    """Temp names this module gives ``path``: ``.NAME.PID.RANDOM.tmp``, and ``.NAME.RANDOM.tmp`` from
    before temp names carried the pid (``RANDOM`` is what ``tempfile.mkstemp`` draws from)."""
    return re.compile(rf"^\.{re.escape(path.name)}\.(?:(?P<pid>\d+)\.)?[a-z0-9_]+\.tmp$")


def remove_stale_temps(path: Path, max_age: float = STALE_TEMP_SECONDS) -> list[Path]:
    """Delete this module's temp files of ``path`` that no writer will finish; return them.

    A temp file is stale when the process named in it no longer runs, or when it is older than
    ``max_age`` seconds whatever its name says (no write takes that long; a pid can be reused, and older
    names carry none). Only regular files whose name fits the pattern for ``path`` are ever touched.
    """
    pattern = _temp_pattern(path)
    cutoff = time.time() - max_age
    removed = []
    for candidate in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        match = pattern.match(candidate.name)
        if match is None:
            continue
        try:
            info = candidate.lstat()
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        dead = match["pid"] is not None and not _pid_alive(int(match["pid"]))
        if dead or info.st_mtime < cutoff:
            with contextlib.suppress(FileNotFoundError):
                candidate.unlink()
                removed.append(candidate)
    return removed


def folder_files(folder: Path) -> list[Path]:
    """Regular files under ``folder`` (never through a symlink), sorted by relative POSIX path;
    hidden files and caches skipped."""
    files = []
    for top, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for name in names:
            path = Path(top) / name
            if not name.startswith(".") and stat.S_ISREG(path.lstat().st_mode):
                files.append(path)
    return sorted(files, key=lambda p: p.relative_to(folder).as_posix())


def symlinks_under(folder: Path) -> list[Path]:
    """Every symlink (to a file or a folder) at or below ``folder``, without following any."""
    if folder.is_symlink():
        return [folder]
    found = []
    for top, dirs, names in os.walk(folder, followlinks=False):
        found += [Path(top) / n for n in [*dirs, *names] if (Path(top) / n).is_symlink()]
    return sorted(found)


def folder_digest(folder: Path) -> str:
    """sha256 over the folder's files sorted by relative path, feeding each path then its bytes."""
    digest = hashlib.sha256()
    for file in folder_files(folder):
        digest.update(file.relative_to(folder).as_posix().encode("utf-8"))
        digest.update(file.read_bytes())
    return "sha256:" + digest.hexdigest()
