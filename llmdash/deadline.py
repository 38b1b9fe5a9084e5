"""One deadline over a run of HTTP requests, enforced by shutting their sockets.

A read timeout restarts with every byte, so a server trickling a byte every few seconds would hold a
request forever. A `Deadline` keeps the sockets its requests open (or reuse); when it passes, a timer
shuts them, which wakes a blocked connect or read. Publish (one deadline per request) and doctor (one per
run) both mount `WatchedAdapter` on their `requests.Session` and run requests inside `watching(deadline)`.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager

import requests
import urllib3


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


_current = threading.local()      # .deadline: the Deadline of the requests this thread is making


@contextmanager
def watching(deadline: Deadline):
    """Requests made by this thread inside the block hand their sockets to `deadline`."""
    _current.deadline = deadline
    try:
        yield deadline
    finally:
        _current.deadline = None


def _watch(sock) -> None:
    deadline = getattr(_current, "deadline", None)
    if deadline is not None and sock is not None:
        deadline.watch(sock)


class _WatchedConnection:
    """Hands each socket it opens, or reuses from the pool, to the current deadline."""

    def _new_conn(self):
        sock = super()._new_conn()
        _watch(sock)
        return sock

    def request(self, *args, **kwargs):
        _watch(self.sock)                        # None on a new connection: _new_conn hands it over
        return super().request(*args, **kwargs)


class _HTTPConnection(_WatchedConnection, urllib3.connection.HTTPConnection):
    pass


class _HTTPSConnection(_WatchedConnection, urllib3.connection.HTTPSConnection):
    pass


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_WATCHED_POOLS = {"http": _HTTPPool, "https": _HTTPSPool}


class WatchedAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter whose connections a deadline can shut (through an HTTP(S) proxy too)."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _WATCHED_POOLS

    def proxy_manager_for(self, proxy, **kwargs):
        manager = super().proxy_manager_for(proxy, **kwargs)
        if proxy.lower().startswith("http"):     # SOCKS pools have their own connection classes
            manager.pool_classes_by_scheme = _WATCHED_POOLS
        return manager


def watched_session(session: requests.Session) -> requests.Session:
    """`session` with every HTTP(S) connection watched."""
    for prefix in ("http://", "https://"):
        session.mount(prefix, WatchedAdapter())
    return session
