"""The doctor's HTTP GETs, bounded: every answer in size, all of them together in time.

A read timeout restarts with every byte, so a server trickling a byte every few seconds would
hold the doctor forever. One deadline (`--deadline`) covers every request of a run (connecting,
headers and bodies): when it passes, a timer shuts the sockets in flight, which wakes a blocked
read. Each answer is streamed and dropped as soon as it outgrows its cap. A failure of the server
or the network is one `LlmdashError` line with exit code 3, naming the URL without credentials.
"""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urljoin

import requests
import urllib3

from llmdash.errors import EXIT_REMOTE, LlmdashError

TIMEOUT_S = 10.0         # connect, and each read
CHUNK_BYTES = 64 * 1024
MAX_REDIRECTS = 5


class AnswerTooLarge(Exception):
    """An answer outgrew the cap its caller set; the caller says what the cap is for."""


class Deadline:
    """The sockets of a run; once `seconds` have passed, every one is shut, and any opened later too."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def remaining(self) -> float:
        return max(self.ends - time.monotonic(), 0.0)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


_current = threading.local()      # .deadline: the Deadline of the run this thread is doing


class _WatchedConnection:
    """Hands every socket it opens to the current run's Deadline."""

    def _new_conn(self):
        sock = super()._new_conn()
        deadline = getattr(_current, "deadline", None)
        if deadline is not None:
            deadline.watch(sock)
        return sock


class _HTTPConnection(_WatchedConnection, urllib3.connection.HTTPConnection):
    pass


class _HTTPSConnection(_WatchedConnection, urllib3.connection.HTTPSConnection):
    pass


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_WATCHED_POOLS = {"http": _HTTPPool, "https": _HTTPSPool}


class _WatchedAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter over the watched connections (through an HTTP(S) proxy too)."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _WATCHED_POOLS

    def proxy_manager_for(self, proxy, **kwargs):
        manager = super().proxy_manager_for(proxy, **kwargs)
        if proxy.lower().startswith("http"):     # SOCKS pools have their own connection classes
            manager.pool_classes_by_scheme = _WATCHED_POOLS
        return manager


class Client:
    """GETs within one Deadline; `close` when done (it stops the timer)."""

    def __init__(self, deadline_s: float):
        self.deadline = Deadline(deadline_s)
        self.session = requests.Session()
        for prefix in ("http://", "https://"):
            self.session.mount(prefix, _WatchedAdapter())

    def get(self, url: str, shown: str, limit: int, params: dict | None = None,
            accept: str = "*/*") -> tuple[int, bytearray]:
        """(status, body) of GET `url`; `shown` names it in errors; AnswerTooLarge past `limit` bytes."""
        _current.deadline = self.deadline
        try:
            for _ in range(MAX_REDIRECTS + 1):
                if self.deadline.expired:
                    raise self._late(shown)
                status, body, url = self._once(url, params, limit, accept)
                if url is None:
                    break
                params = None
            else:
                raise LlmdashError(f"{shown}: more than {MAX_REDIRECTS} redirects", EXIT_REMOTE)
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            if self.deadline.expired:
                raise self._late(shown) from None
            raise LlmdashError(f"{shown}: unreachable ({exc.__class__.__name__})", EXIT_REMOTE) from None
        finally:
            _current.deadline = None
        if self.deadline.expired:       # a body without a length, cut short by the shutdown, ends like a whole one
            raise self._late(shown)
        return status, body

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
