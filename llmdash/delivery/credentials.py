"""Where to reach Grafana and as whom: the `Connection`, merged from flags, environment and config.

Secrets (token, password) live only in `Connection`, whose repr hides them. They come from a
file or the environment, never from a command-line value, so they stay out of shell history
and `ps` output.
"""

from __future__ import annotations

import base64
import math
import os
import select
import time
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlsplit

from llmdash import redact
from llmdash.errors import EXIT_USAGE, LlmdashError

MAX_TOKEN_FILE_BYTES = 64 * 1024
TOKEN_FILE_WAIT = 5.0       # seconds a pipe given as --token-file may take to deliver its token
CA_BUNDLE_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
URL_SHAPE = "https://grafana.example.com[/sub-path]"


@dataclass(frozen=True)
class Connection:
    """Everything needed to reach one Grafana; `token`/`password` never appear in repr."""

    url: str
    token: str | None = field(default=None, repr=False)
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    verify: bool | str = True          # False = --insecure, str = CA bundle path
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    deadline: float = 60.0             # seconds for one whole request: connect, headers and body
    retries: int = 3                   # extra attempts after the first one
    retry_budget: float = 30.0         # seconds; no retry starts after this
    backoff_base: float = 0.5          # first pause; doubles per retry

    @property
    def secrets(self) -> tuple[str, ...]:
        pair = f"{self.user}:{self.password}" if self.user and self.password else None
        return tuple(s for s in (self.token, self.password, pair) if s)

    @property
    def authorization(self) -> str | None:
        """The Authorization header; basic auth is UTF-8 encoded (requests would insist on Latin-1)."""
        if self.token:
            return f"Bearer {self.token}"
        if self.user:
            return "Basic " + base64.b64encode(f"{self.user}:{self.password or ''}".encode()).decode()
        return None

    def scrub(self, text: str) -> str:
        """`text` with every secret, in every encoding a server might echo it in, replaced by ***."""
        return redact.scrub(text, self.secrets)


def resolve_connection(
    settings: Any,
    env: Mapping[str, str],
    *,
    url: str | None = None,
    token_file: str | None = None,
    ca_cert: str | None = None,
    insecure: bool = False,
    connect_timeout: float | None = None,
    read_timeout: float | None = None,
    deadline: float | None = None,
    retries: int | None = None,
    backoff_base: float | None = None,
) -> Connection:
    """Merge config (`GrafanaSettings`), environment and flags; flags win, then env, then config.

    TLS: --insecure or --ca-cert, then grafana.verify_tls/ca_cert, then
    REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE, then the system CAs; the choice is final (the
    transport ignores the environment).
    """
    chosen_url = url or env.get("GRAFANA_URL") or getattr(settings, "url", None)
    if not chosen_url:
        raise LlmdashError("no Grafana URL: set GRAFANA_URL, grafana.url in the config, or --url", EXIT_USAGE)
    _check_url(chosen_url)

    token = user = password = None
    if token_file:
        token = _read_token_file(token_file)
    elif env.get("GRAFANA_TOKEN", "").strip():
        token = env["GRAFANA_TOKEN"].strip()
        _check_token(token, "GRAFANA_TOKEN")
    elif env.get("GRAFANA_USER") or env.get("GRAFANA_PASSWORD"):
        user, password = env.get("GRAFANA_USER"), env.get("GRAFANA_PASSWORD")
        if not (user and password):
            raise LlmdashError("GRAFANA_USER and GRAFANA_PASSWORD must be set together", EXIT_USAGE)
    else:
        raise LlmdashError(
            "no Grafana credentials: set GRAFANA_TOKEN (service-account token), pass --token-file, "
            "or set GRAFANA_USER and GRAFANA_PASSWORD",
            EXIT_USAGE,
        )

    ca = ca_cert or getattr(settings, "ca_cert", None)
    if insecure and ca_cert:
        raise LlmdashError("--insecure and --ca-cert contradict each other; pass one", EXIT_USAGE)
    env_ca = next((env[name] for name in CA_BUNDLE_VARIABLES if env.get(name)), None)
    if insecure:
        verify: bool | str = False
    elif ca:
        if not os.path.isfile(ca):
            raise LlmdashError(f"CA certificate {ca} does not exist", EXIT_USAGE)
        verify = ca
    elif not getattr(settings, "verify_tls", True):
        verify = False
    elif env_ca:
        if not os.path.exists(env_ca):
            raise LlmdashError(f"CA bundle {env_ca} (from REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE) does not exist",
                               EXIT_USAGE)
        verify = env_ca
    else:
        verify = True

    def seconds(name: str, value: float | None, default: float) -> float:
        chosen = float(default if value is None else value)
        if not (math.isfinite(chosen) and chosen > 0):
            raise LlmdashError(f"{name} must be positive and finite (seconds), got {chosen:g}", EXIT_USAGE)
        return chosen

    backoff = Connection.backoff_base if backoff_base is None else float(backoff_base)
    if not (math.isfinite(backoff) and backoff >= 0):
        raise LlmdashError(f"--retry-backoff must be a finite number of seconds, got {backoff:g}", EXIT_USAGE)
    return Connection(
        url=chosen_url.rstrip("/"),
        token=token,
        user=user,
        password=password,
        verify=verify,
        connect_timeout=seconds("--connect-timeout / grafana.connect_timeout", connect_timeout,
                                getattr(settings, "connect_timeout", Connection.connect_timeout)),
        read_timeout=seconds("--read-timeout / grafana.read_timeout", read_timeout,
                             getattr(settings, "read_timeout", Connection.read_timeout)),
        deadline=seconds("--deadline / grafana.deadline", deadline,
                         getattr(settings, "deadline", Connection.deadline)),
        retries=Connection.retries if retries is None else max(0, retries),
        backoff_base=backoff,
    )


def _check_url(url: str) -> None:
    """Refuse a URL the HTTP stack would choke on later with a traceback: an unclosed IPv6 bracket,
    a bad port, an empty or over-long host label (`a..b`), or credentials in it."""
    try:
        parts = urlsplit(url)
        parts.port                                   # raises on a port out of range or not a number
        host = parts.hostname or ""
        if ":" not in host:                          # an IPv6 literal has no labels
            host.encode("idna")                      # what the resolver does; raises on an empty label
    except (ValueError, UnicodeError):
        # Not quoted: in a URL this broken, no pattern can tell where a password would end.
        raise LlmdashError(f"Grafana URL is malformed (host or port; an empty label as in a..b, an unclosed "
                           f"[ or a port past 65535); it must look like {URL_SHAPE}", EXIT_USAGE) from None
    if parts.scheme not in ("http", "https") or not host:
        raise LlmdashError(f"Grafana URL must look like {URL_SHAPE}", EXIT_USAGE)
    if parts.username or parts.password:
        raise LlmdashError(
            "Grafana URL must not contain credentials; "
            "use GRAFANA_TOKEN, --token-file or GRAFANA_USER/GRAFANA_PASSWORD",
            EXIT_USAGE,
        )


def _read_token_file(path: str) -> str:
    """The token in `path`: UTF-8, one header-safe word.

    At most 64 KiB is read, so /dev/zero cannot exhaust memory, and the file is opened without
    blocking, so a FIFO nobody writes to ends in an error instead of a hang; a pipe that does have
    a writer (`--token-file <(vault read ...)`) gets TOKEN_FILE_WAIT seconds to deliver.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise LlmdashError(f"cannot read --token-file {path}: {exc.strerror}", EXIT_USAGE) from None
    try:
        data = _read_at_most(fd, path, MAX_TOKEN_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise LlmdashError(f"--token-file {path} is larger than 64 KiB; it should hold one token", EXIT_USAGE)
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise LlmdashError(f"--token-file {path} is not UTF-8 text", EXIT_USAGE) from None
    if not token:
        raise LlmdashError(f"--token-file {path} is empty (a pipe with no writer reads as empty)", EXIT_USAGE)
    _check_token(token, f"--token-file {path}")
    return token


def _read_at_most(fd: int, path: str, limit: int) -> bytes:
    """Up to `limit` bytes from a non-blocking `fd`, until end of file, within TOKEN_FILE_WAIT."""
    chunks, size, until = [], 0, time.monotonic() + TOKEN_FILE_WAIT
    while size < limit:
        try:
            chunk = os.read(fd, limit - size)
        except BlockingIOError:                      # a pipe whose writer has not written (yet)
            left = until - time.monotonic()
            if left <= 0:
                raise LlmdashError(f"--token-file {path} sent no token within {TOKEN_FILE_WAIT:g}s; "
                                   "is it a pipe nobody writes to?", EXIT_USAGE) from None
            select.select([fd], [], [], left)
            continue
        except OSError as exc:
            raise LlmdashError(f"cannot read --token-file {path}: {exc.strerror}", EXIT_USAGE) from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _check_token(token: str, source: str) -> None:
    """A token travels in an HTTP header: printable ASCII without spaces (never echo it)."""
    if not (token.isascii() and token.isprintable()) or any(c.isspace() for c in token):
        raise LlmdashError(f"the token in {source} contains characters an HTTP header cannot carry "
                           "(non-ASCII, control characters or spaces); check that the file holds only the token",
                           EXIT_USAGE)
