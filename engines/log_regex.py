"""Log patterns compiled as mtail will run them: RE2 syntax and semantics, as in Go's `regexp`.

Why: mtail compiles each pattern with Go's regexp (RE2). Python's `re` accepts what RE2 refuses
(lookaround, backreferences, possessive and atomic groups, conditionals), so a pattern checked with
`re` passed the build and mtail refused the program; and `re` backtracks, so a catalog's example
line checked against a pathological pattern took seconds on every command. google-re2 (the RE2
library itself) compiles exactly RE2's syntax and matches in time linear in the line.

RE2 has two constructs the Go regexp of Debian's mtail (Go 1.19) lacks: `\\C` and `(?<name>...)`;
those are refused here too.
"""

from __future__ import annotations

import functools

import re2


class PatternError(ValueError):
    """The pattern is not one mtail can compile; the message says why, in one line."""


@functools.cache
def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False   # RE2 would also print each refusal to stderr
    return options


def compile_pattern(pattern: str):
    """`pattern` compiled by RE2 (`.groupindex`, `.search(line)` as in `re`), or PatternError."""
    try:
        compiled = re2.compile(pattern, options=_options())
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(f"not an RE2 regular expression, as mtail needs: {reason}") from None
    lacking = _missing_in_go(pattern)
    if lacking:
        raise PatternError(f"mtail's Go regexp has no {lacking}")
    return compiled


def _missing_in_go(pattern: str) -> str | None:
    """The first construct RE2 accepts and Go 1.19's regexp does not, outside character classes."""
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            if pattern[i + 1:i + 2] == "C":
                return "\\C (any byte)"
            i += 2
            continue
        if in_class:
            if pattern.startswith("[:", i):          # [[:alpha:]]: a named class inside a class
                end = pattern.find(":]", i + 2)
                i = end + 2 if end >= 0 else i + 1
                continue
            in_class = char != "]"
        elif char == "[":
            in_class = True
            i += 2 if pattern[i + 1:i + 2] == "^" else 1
            if pattern[i:i + 1] == "]":                # a leading ] is a literal member
                i += 1
            continue
        elif pattern.startswith("(?<", i):
            return "(?<name>...) group: write (?P<name>...)"
        i += 1
    return None
