"""How the doctor quotes what it was given or told: URLs without credentials, text through redact.

Every URL the doctor prints goes through `url`, and every piece of server or file text (a page's
line, a label value, an API error) through `text`, with the credentials of the URL it came from
as the secrets to scrub. `text` hands redact a bounded window of a long input: redact's patterns
take time that grows faster than the text (a 40 000-character line takes seconds), and a line of
a hostile page can be megabytes.
"""

from __future__ import annotations

from urllib.parse import unquote

from llmdash import redact

URL_CHARS = 120
TOKEN_CHARS = 64     # room beyond the shown text for a credential-shaped string cut by the window


def secrets_of(url: str) -> tuple[str, ...]:
    """The user and password in `url` (as typed and percent-decoded, alone and as user:password),
    read without a URL parser, which refuses some of the malformed URLs this must also scrub."""
    authority = url.partition("://")[2]
    for end in "/?#":
        authority = authority.partition(end)[0]
    userinfo, at, _ = authority.rpartition("@")
    if not at:
        return ()
    user, _, password = userinfo.partition(":")
    forms = {userinfo, user, password, unquote(userinfo), unquote(user), unquote(password)}
    return tuple(sorted(form for form in forms if form))


def text(value: str, secrets: tuple[str, ...] = (), limit: int = redact.MESSAGE_CHARS) -> str:
    """`redact.safe_line(value, secrets, limit)`, computed on the shortest prefix of `value` whose
    redacted form runs past what is shown, so no secret cut by the prefix's end is shown in part."""
    margin = TOKEN_CHARS + max((len(form) for secret in secrets for form in redact.encodings(secret)), default=0)
    size = 4 * (limit + margin)
    while size < len(value):
        line = redact.safe_line(value[:size], secrets, limit + margin)
        if len(line) == limit + margin:        # cut there: the prefix's end lies beyond what is shown
            return line[:limit - 1] + "…"
        size *= 4
    return redact.safe_line(value, secrets, limit)


def url(value: str) -> str:
    """`value` fit to print: no user or password, no credential-shaped query, no raw escapes."""
    return text(redact.url_without_credentials(value), secrets_of(value), URL_CHARS)
