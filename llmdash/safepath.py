"""The one check every name llmdash did not choose goes through before it becomes a path on disk.

Names arrive from git (`git ls-tree` of a revision a branch author controls: a tree object made with
`git hash-object --literally` can hold an entry whose name climbs out with `..` or starts with `/`) and from an output
directory's manifest (a file anyone can edit). Such a name is accepted only as a relative path of plain
components: no empty, `.` or `..` component, not absolute, no NUL, each component at most NAME_MAX bytes
and the whole at most MAX_NAME_BYTES. Joined onto its directory it must then still lie inside that
directory once every symlink on the way is resolved. A refusal is one line naming the entry, exit 2.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from llmdash.errors import EXIT_USAGE, LlmdashError

NAME_MAX = 255          # bytes in one path component (Linux NAME_MAX; a longer one is ENAMETOOLONG)
MAX_NAME_BYTES = 1024   # bytes in a whole relative name (well under PATH_MAX, 4096)


def problem(name: str) -> str | None:
    """Why `name` is not a relative path of plain components within the bounds, or None."""
    if not isinstance(name, str) or not name:
        return "is empty"
    if "\0" in name:
        return "holds a NUL byte"
    try:
        size = len(name.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return "is not a file name"
    if size > MAX_NAME_BYTES:
        return f"is longer than {MAX_NAME_BYTES} bytes"
    if name.startswith("/"):
        return "is absolute"
    for part in name.split("/"):
        if part in ("", ".", ".."):
            return "has an empty, '.' or '..' component"
        if len(part.encode("utf-8", "surrogateescape")) > NAME_MAX:
            return f"has a component longer than {NAME_MAX} bytes"
    return None


def shown(name: object) -> str:
    """A name as it goes into an error line: repr-escaped and cut, so it cannot split or flood the line."""
    text = repr(name)
    return text if len(text) <= 100 else text[:97] + "..."


def relative(name: str, what: str) -> PurePosixPath:
    """`name` as a relative path of plain components; else one line naming `what` (the entry) and why, exit 2."""
    why = problem(name)
    if why is not None:
        raise LlmdashError(f"{what} {shown(name)} {why}; refusing to write it", EXIT_USAGE)
    return PurePosixPath(name)


def inside(directory: Path, name: str, what: str) -> Path:
    """`directory / name`, once `name` is a plain relative path and the result, every symlink on the way
    resolved, still lies in `directory`; else one line naming `what` and the entry, exit 2."""
    rel = relative(name, what)
    target = Path(directory).joinpath(*rel.parts)
    top = os.path.realpath(directory)
    if os.path.commonpath([top, os.path.realpath(target)]) != top:
        raise LlmdashError(f"{what} {shown(name)} resolves outside {shown(os.fspath(directory))}; "
                           "refusing to write it", EXIT_USAGE)
    return target
