"""The doctor's HTTP GETs, bounded: every answer in size, all of them together in time.

A read timeout restarts with every byte, so a server trickling a byte every few seconds would
hold the doctor forever. One deadline (`--deadline`) covers every request of a run (connecting,
headers and bodies): when it passes, a timer shuts the sockets in flight, which wakes a blocked
read. Each answer is streamed and dropped as soon as it outgrows its cap. A failure of the server
or the network is one `LlmdashError` line with exit code 3, naming the URL without credentials.
"""

from __future__ import annotations

from urllib.parse import urljoin

import requests
import urllib3

from llmdash.deadline import Deadline, watched_session, watching
from llmdash.errors import EXIT_REMOTE, LlmdashError

TIMEOUT_S = 10.0         # connect, and each read
CHUNK_BYTES = 64 * 1024
MAX_REDIRECTS = 5


class AnswerTooLarge(Exception):
    """An answer outgrew the cap its caller set; the caller says what the cap is for."""


class Client:
    """GETs within one Deadline; `close` when done (it stops the timer)."""

    def __init__(self, deadline_s: float):
        self.deadline = Deadline(deadline_s)
        self.session = watched_session(requests.Session())

    def get(self, url: str, shown: str, limit: int, params: dict | None = None,
            accept: str = "*/*") -> tuple[int, bytearray]:
        """(status, body) of GET `url`; `shown` names it in errors; AnswerTooLarge past `limit` bytes."""
        try:
            with watching(self.deadline):
                status, body = self._follow(url, shown, limit, params, accept)
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            if self.deadline.expired:
                raise self._late(shown) from None
            raise LlmdashError(f"{shown}: unreachable ({exc.__class__.__name__})", EXIT_REMOTE) from None
        if self.deadline.expired:       # a body without a length, cut short by the shutdown, ends like a whole one
            raise self._late(shown)
        return status, body

    def _follow(self, url: str, shown: str, limit: int, params: dict | None, accept: str) -> tuple[int, bytearray]:
        """The answer at the end of at most MAX_REDIRECTS redirects."""
        for _ in range(MAX_REDIRECTS + 1):
            if self.deadline.expired:
                raise self._late(shown)
            status, body, url = self._once(url, params, limit, accept)
            if url is None:
                return status, body
            params = None
        raise LlmdashError(f"{shown}: more than {MAX_REDIRECTS} redirects", EXIT_REMOTE)

    def _once(self, url: str, params: dict | None, limit: int, accept: str) -> tuple[int, bytearray, str | None]:
        """One GET: (status, body, None), or for a redirect (status, b"", where to), its body unread:
        requests would read a redirect's whole body, however long, before following it."""
        timeout = max(min(TIMEOUT_S, self.deadline.remaining()), 0.001)
        with self.session.get(url, params=params, timeout=timeout, stream=True, allow_redirects=False,
                              headers={"Accept": accept}) as response:
            if response.is_redirect:
                return response.status_code, bytearray(), urljoin(response.url, response.headers["location"])
            body = bytearray()
            for chunk in response.iter_content(CHUNK_BYTES):
                body += chunk
                if len(body) > limit:
                    raise AnswerTooLarge
            return response.status_code, body, None

    def _late(self, shown: str) -> LlmdashError:
        return LlmdashError(f"{shown}: no complete answer within the {self.deadline.seconds:g}s deadline "
                            "(--deadline)", EXIT_REMOTE)

    def close(self) -> None:
        self.deadline.cancel()
        self.session.close()
