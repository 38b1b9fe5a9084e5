"""The one HTTP client both Grafana APIs speak through: bounded, retrying, and careful with what it prints.

Every request is bounded: a total deadline (connect, headers and body, enforced by shutting
the socket), a body cap that holds for every body read, redirects included, and TLS settings
the environment cannot override. Connection errors and 5xx are retried with exponential
backoff. Whatever the server says reaches a message only through llmdash.redact, so a token
or password it echoes (in any encoding) and any terminal escape sequence are never shown.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3

from llmdash import redact
from llmdash.deadline import Deadline, watched_session, watching
from llmdash.delivery.backend import GrafanaError
from llmdash.delivery.credentials import Connection

MAX_BODY_BYTES = 16 * 1024 * 1024      # dashboards are ~100 KB; anything near this is not Grafana
CHUNK_BYTES = 64 * 1024


class DeadlineExceeded(Exception):
    """The whole request (connect, headers, body) did not finish within `Connection.deadline`."""


class BodyTooLarge(Exception):
    """An answer (or a redirect on the way to it) grew past MAX_BODY_BYTES."""


def _read_body(response: requests.Response, started: float, deadline: float, clock) -> None:
    """Read the streamed body into `response` (so .json()/.text work), bounded in time and size."""
    chunks, size = [], 0
    for chunk in response.iter_content(CHUNK_BYTES):
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            response.close()
            raise BodyTooLarge
        if clock() - started > deadline:
            response.close()
            raise DeadlineExceeded
        chunks.append(chunk)
    response._content = b"".join(chunks)        # what requests itself stores after reading a body


@dataclass(frozen=True)
class Reply:
    """One request's final answer; `lost` says why an earlier attempt of it got no usable answer
    (a 5xx, a reset), "" when the first attempt answered. A write whose first attempt was lost
    may have been applied, and its retry may meet that write."""

    response: requests.Response
    lost: str = ""


class Transport:
    """Requests to one Grafana (`Connection`), and the readers that turn its answers into safe values."""

    def __init__(self, connection: Connection, session: requests.Session | None = None,
                 sleep=time.sleep, clock=time.monotonic):
        self.connection = connection
        self._session = session or requests.Session()
        self._session.headers.update({"Accept": "application/json", "Content-Type": "application/json",
                                      "User-Agent": "llmdash"})
        if connection.authorization:
            self._session.headers["Authorization"] = connection.authorization
        # trust_env would let REQUESTS_CA_BUNDLE replace --ca-cert/--insecure and ~/.netrc replace the
        # token; resolve_connection already weighed the CA variables, and proxies are taken here.
        self._session.trust_env = False
        self._session.proxies = requests.utils.get_environ_proxies(connection.url)
        watched_session(self._session)
        self._sleep = sleep
        self._clock = clock
        parts = urlsplit(connection.url)
        self.where = f"{parts.scheme}://{parts.netloc}"     # no userinfo: resolve_connection refuses it

    # -- sending

    def request(self, method: str, path: str, body: Any = None, *, idempotent: bool = True) -> requests.Response:
        return self.send(method, path, body, idempotent=idempotent).response

    def send(self, method: str, path: str, body: Any = None, *, idempotent: bool = True) -> Reply:
        """Send one request, retrying connection errors and 5xx with exponential backoff.

        Each attempt must finish (connect, headers, body of at most MAX_BODY_BYTES) within
        `deadline`; one that does not is not retried. A write whose answer timed out is not
        retried: it may have been applied, and a second attempt would turn a success into a
        confusing version-mismatch. A write retried after a 5xx or a reset may still meet its own
        first attempt; `Reply.lost` tells the caller that happened.
        """
        started = self._clock()
        attempt = 0
        lost = ""
        while True:
            failure: str
            try:
                response = self._attempt(method, path, body)
            except requests.exceptions.SSLError:
                raise GrafanaError(self._tls_message()) from None
            except BodyTooLarge:
                raise GrafanaError(f"Grafana at {self.where} answered {method} {path} with more than "
                                   f"{MAX_BODY_BYTES // 2**20} MiB; refusing to read further") from None
            except DeadlineExceeded:
                raise GrafanaError(self._deadline_message(method, path, idempotent)) from None
            except requests.exceptions.ConnectTimeout:
                failure = f"timed out connecting to Grafana at {self.where} after {self.connection.connect_timeout:g}s"
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as exc:
                # urllib3 reports a body that stalls mid-read as a ConnectionError "Read timed out".
                if isinstance(exc, requests.exceptions.ReadTimeout) or "timed out" in str(exc):
                    failure = self._read_timeout_message(method, path)
                    if not idempotent:
                        raise GrafanaError(failure + "; it may or may not have been applied") from None
                else:
                    failure = f"cannot reach Grafana at {self.where} (connection refused, reset or host unknown)"
            except requests.exceptions.RequestException as exc:
                raise GrafanaError(f"request to Grafana at {self.where} failed ({type(exc).__name__})") from None
            else:
                if response.status_code < 500:
                    return Reply(response, lost)
                failure = f"Grafana answered {response.status_code} to {method} {path}: {self.message(response)}"
            lost = self.connection.scrub(failure)
            attempt += 1
            pause = self.connection.backoff_base * 2 ** (attempt - 1)
            if attempt > self.connection.retries or self._clock() - started + pause > self.connection.retry_budget:
                raise GrafanaError(f"{lost} (gave up after {attempt} attempts)")
            self._sleep(pause)

    def _attempt(self, method: str, path: str, body: Any) -> requests.Response:
        """One request and its whole body, within the deadline; raises DeadlineExceeded past it.

        The body is read by a response hook, which requests runs on every response, the
        redirects it follows included: otherwise it would read a redirect's body whole
        (and without end, from a hostile server) before following it.
        """
        started = time.monotonic()
        deadline = Deadline(self.connection.deadline)

        def read_body(response: requests.Response, **_) -> requests.Response:
            _read_body(response, started, self.connection.deadline, time.monotonic)
            return response

        try:
            with watching(deadline):
                response = self._session.request(
                    method, self.connection.url + path, json=body, stream=True, verify=self.connection.verify,
                    timeout=(self.connection.connect_timeout, self.connection.read_timeout),
                    hooks={"response": read_body},
                )
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError, ValueError):
            if deadline.expired:
                raise DeadlineExceeded from None
            raise
        finally:
            deadline.cancel()
        if deadline.expired:
            raise DeadlineExceeded
        return response

    def _deadline_message(self, method: str, path: str, idempotent: bool) -> str:
        applied = "" if idempotent else "; it may or may not have been applied"
        return (f"Grafana at {self.where} did not finish answering {method} {path} within the "
                f"{self.connection.deadline:g}s deadline (--deadline){applied}")

    def _tls_message(self) -> str:
        verify = self.connection.verify
        if verify is False:
            return f"TLS handshake with {self.where} failed (verification was off); is it an https URL of a Grafana?"
        if isinstance(verify, str):
            return (f"TLS verification failed for {self.where} with CA bundle {verify}; "
                    "check that it signs Grafana's certificate")
        return (f"TLS verification failed for {self.where}; pass --ca-cert with your CA bundle "
                "(or --insecure to skip verification)")

    def _read_timeout_message(self, method: str, path: str) -> str:
        return f"Grafana at {self.where} did not answer {method} {path} within {self.connection.read_timeout:g}s"

    # -- reading answers

    def message(self, response: requests.Response) -> str:
        """The error text of an answer (its `message`, else its body), scrubbed, on one line."""
        try:
            payload = response.json()
            text = payload.get("message") if isinstance(payload, dict) else None
        except ValueError:
            text = None
        return redact.safe_line(text or response.text or response.reason or "", self.connection.secrets)

    def fail(self, response: requests.Response, what: str) -> GrafanaError:
        """One readable line for an error status; never includes request headers."""
        code, message = response.status_code, self.message(response)
        if code == 401:
            return GrafanaError(f"Grafana rejected the credentials (401 {message or 'Unauthorized'}) while {what}; "
                                "check GRAFANA_TOKEN / --token-file or GRAFANA_USER/GRAFANA_PASSWORD")
        if code == 403:
            return GrafanaError(f"Grafana denied access (403 {message}) while {what}; the service account needs the "
                                "Editor role on the target folder")
        return GrafanaError(f"Grafana answered {code} ({message}) while {what}")

    def json(self, response: requests.Response, what: str) -> dict:
        """The answer's JSON object; anything else (not JSON, a list, a number) is a protocol error."""
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise GrafanaError(f"{self.where} did not answer JSON while {what}; is GRAFANA_URL a Grafana?")
        return payload

    def integer(self, value: Any, what: str) -> int:
        """A count or version from Grafana; anything but an integer (or its digits) is a protocol error."""
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 19:
            return int(value)
        raise GrafanaError(f"Grafana at {self.where} answered a {type(value).__name__} where the {what} "
                           "should be an integer; is GRAFANA_URL a Grafana?")

    def text(self, value: Any, limit: int = redact.MESSAGE_CHARS) -> str:
        """A name, uid or version from Grafana, safe to print; non-strings count as missing."""
        return redact.safe_line(value, self.connection.secrets, limit) if isinstance(value, str) else ""
