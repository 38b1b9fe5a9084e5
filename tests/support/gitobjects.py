"""Git objects no porcelain command makes: a tree whose entry name holds `/` or `..`, written with
`git hash-object --literally` (git's own tree format: `<mode> <name>\\0<20-byte id>` per entry), and a commit
of it on a branch. What a branch author can push, and what `git ls-tree` then hands over as a name."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=True,
                          env={**os.environ, **GIT_ENV})
    return done.stdout.decode().strip()


def blob(repo: Path, content: bytes) -> str:
    return _git(repo, "hash-object", "-w", "--stdin", stdin=content)


def literal_tree(repo: Path, entries: list[tuple[str, str, str]]) -> str:
    """A tree object of `entries` (mode, name, object id) exactly as given: names are not checked."""
    raw = b"".join(f"{mode} {name}".encode() + b"\0" + bytes.fromhex(oid) for mode, name, oid in entries)
    return _git(repo, "hash-object", "--literally", "-t", "tree", "-w", "--stdin", stdin=raw)


def tree_entries(repo: Path, treeish: str) -> list[tuple[str, str, str]]:
    """(mode, name, id) of the entries of `treeish` (one level)."""
    listing = _git(repo, "ls-tree", "-z", treeish)
    entries = []
    for item in filter(None, listing.split("\0")):
        meta, _, name = item.partition("\t")
        mode, _, oid = meta.split()
        entries.append((mode, name, oid))
    return entries


def replace_folder(repo: Path, base: str, folder: str, extra: list[tuple[str, str, str]]) -> str:
    """The tree of `base` with `extra` entries added to its `folder` (a path of one or more components),
    every tree above rebuilt with `git mktree`; returns the new top tree's id."""
    parts = folder.split("/")
    inner = literal_tree(repo, tree_entries(repo, f"{base}:{folder}") + extra)
    for depth in range(len(parts) - 1, -1, -1):
        above = "/".join(parts[:depth])
        entries = [e for e in tree_entries(repo, f"{base}:{above}") if e[1] != parts[depth]]
        entries.append(("040000", parts[depth], inner))
        listing = "".join(f"{mode} {'tree' if mode == '040000' else 'blob'} {oid}\t{name}\n"
                          for mode, name, oid in entries)
        inner = _git(repo, "mktree", stdin=listing.encode())
    return inner


def commit_tree_on(repo: Path, branch: str, tree: str, parent: str = "HEAD") -> str:
    commit = _git(repo, "commit-tree", tree, "-p", parent, "-m", "evil names")
    _git(repo, "update-ref", f"refs/heads/{branch}", commit)
    return commit
