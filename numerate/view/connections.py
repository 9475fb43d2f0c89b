"""Bounds on the connections `numerate view` keeps: how many are open at once, and how long a
request's head (its line and headers) may take to arrive.

uvicorn keeps a connection that never finishes its request for as long as the client likes,
and accepts every connection: enough of them (a slow or hostile client) use up the process's
open files, after which the viewer answers no one and asyncio logs a traceback for every
connection it fails to accept. `guarded` wraps uvicorn's protocol, through the asyncio.Protocol
interface alone (uvicorn's `http=` setting takes a protocol class):
- past `most` open connections, a new one is answered 503 and closed at once (said in one
  line, at most once a minute);
- a connection whose request head has not arrived whole `head_seconds` after it opened (or, for
  a later request on it, after that request's first byte) is closed, as nginx's
  `client_header_timeout` does. Between requests, uvicorn's own keep-alive timeout closes an
  idle connection;
- a connection whose answer waits for the client to read it (the transport's buffer full) and
  none of which was taken in `send_seconds` is closed, as nginx's `send_timeout` does: uvicorn
  waits for a client that never reads for ever;
- a request that announces a body (`Transfer-Encoding`, or a `Content-Length` other than 0) is
  answered 400 and its connection closed: the viewer serves GET and HEAD only
  (numerate.view.app), and so whatever follows a head's blank line is the next request's head
  (a body trickled for ever, each piece with a blank line in it, held its connection past the
  deadline). Heads end where h11's do (a blank line, `\r` optional).
"""

import asyncio
import errno
import re
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HEAD_SECONDS = 10.0
"""How long a request's line and headers may take to arrive."""

MOST_CONNECTIONS = 256
"""At most this many connections open at once (fewer where the process may open fewer files:
`most_connections`)."""

SEND_SECONDS = 60.0
"""How long an answer may wait for the client to read any of it."""

SAY_EVERY_S = 60.0
"""The bound being reached is said at most once in this many seconds."""

END_OF_HEAD = re.compile(rb"\n\r?\n")
"""Where a request's head ends (h11's own rule)."""

MOST_HEAD_BYTES = 64 * 1024
"""A head longer than this is no request (h11 refuses one over 16 KiB already)."""

BODY_HEADER = re.compile(rb"^(transfer-encoding[ \t]*:|content-length[ \t]*:(?![ \t]*0*[ \t]*$))",
                         re.IGNORECASE | re.MULTILINE)  # fmt: skip
"""A header line announcing a request body."""


def _answer(status: str, text: str) -> bytes:
    """A whole HTTP response of `text`, after which the connection is closed."""
    body = f"numerate view: {text}\n".encode()
    head = (f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n")  # fmt: skip
    return head.encode() + body


NO_BODY = _answer("400 Bad Request", "a request here has no body (GET)")
BUSY = _answer("503 Service Unavailable", "too many connections are open; try again shortly")


def most_connections() -> int:
    """How many connections the viewer keeps open at once: MOST_CONNECTIONS, or an eighth of
    the files this process may open where that is fewer. It is also the most connections
    accepted in one turn of the event loop (uvicorn's `backlog`, which asyncio accepts in one
    go before any is answered, and the kernel's queue of connections not yet accepted). One
    answered 503 is closed three turns after it was accepted (its protocol is made, it is
    answered, its socket is closed: a turn each), and each turn may accept as many again, so
    those kept and those being refused are at most five times this, and stay within the
    files with the process's own (the database, Python's). At a quarter, a stream of
    connections ran a viewer out of files at 64 (asyncio then stops accepting for a second,
    and DuckDB may end the process when it cannot open a file)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MOST_CONNECTIONS
    return max(1, min(MOST_CONNECTIONS, soft // 8))


OUT_OF_FILES = (errno.EMFILE, errno.ENFILE)


def out_of_files(
    say: Callable[[str], None],
) -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    """An event loop's exception handler that says the process is out of open files in one
    line (at most once a minute; asyncio stops accepting for a second at each failed accept,
    and logged a traceback each time) and leaves every other error to the loop's default."""
    said_at: list[float] = []

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if not (isinstance(error, OSError) and error.errno in OUT_OF_FILES):
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if not said_at or now - said_at[0] >= SAY_EVERY_S:
            said_at[:] = [now]
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            say(f"this process may open no more files (ulimit -n: {soft}); new connections "
                "wait until some close")  # fmt: skip

    return handle


@dataclass
class Bounds:
    """What every connection of one viewer shares: its bounds, and how many are open."""

    most: int
    say: Callable[[str], None]
    head_seconds: float
    send_seconds: float
    open: int = 0
    said_at: float | None = None  # time.monotonic() when the bound was last said


class Guarded(asyncio.Protocol):
    """One connection: passes every event on to `inner` (uvicorn's), within `bounds`."""

    def __init__(self, inner: asyncio.Protocol, bounds: Bounds) -> None:
        self.inner = inner
        self.bounds = bounds
        self.transport: asyncio.Transport | None = None
        self.counted = False
        self.deadline: asyncio.TimerHandle | None = None  # for the head
        self.unread: asyncio.TimerHandle | None = None  # for the answer to be read
        self.left = 0  # what the transport held to send when that was last looked at
        self.head = b""  # what has come of the request head not yet whole

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        bounds = self.bounds
        if bounds.open >= bounds.most:
            now = time.monotonic()
            if bounds.said_at is None or now - bounds.said_at >= SAY_EVERY_S:
                bounds.said_at = now
                bounds.say(
                    f"{bounds.most} connections are open; new ones are answered 503 until some "
                    "close (a client that opens many and sends slowly?)"
                )
            transport.write(BUSY)
            transport.close()
            return
        bounds.open += 1
        self.counted = True
        self._wait_for_head()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self.counted:
            return  # answered 503 and closing
        self.head += data
        while end := END_OF_HEAD.search(self.head):
            head, self.head = self.head[: end.start()], self.head[end.end() :]
            self._stop_waiting()  # a head came whole: the request is uvicorn's now
            if BODY_HEADER.search(head.replace(b"\r", b"")):
                self._refuse(NO_BODY)
                return
        if len(self.head) > MOST_HEAD_BYTES:
            self._refuse(b"")  # uvicorn has answered 400 already
            return
        if self.head and self.deadline is None:
            self._wait_for_head()  # the next request's head begins
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.counted else None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.counted:
            return
        self.counted = False
        self._stop_waiting()
        if self.unread is not None:
            self.unread.cancel()
        self.bounds.open -= 1
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.counted:
            if self.unread is None:
                self._wait_for_reading()
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.unread is not None:
            self.unread.cancel()
            self.unread = None
        if self.counted:
            self.inner.resume_writing()

    def _wait_for_head(self) -> None:
        self._stop_waiting()
        loop = asyncio.get_running_loop()
        self.deadline = loop.call_later(self.bounds.head_seconds, self._too_slow)

    def _stop_waiting(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _too_slow(self) -> None:
        self.deadline = None
        if self.transport is not None:
            self.transport.close()

    def _wait_for_reading(self) -> None:
        assert self.transport is not None
        self.left = self.transport.get_write_buffer_size()
        loop = asyncio.get_running_loop()
        self.unread = loop.call_later(self.bounds.send_seconds, self._not_read)

    def _not_read(self) -> None:
        self.unread = None
        if self.transport is None:
            return
        if self.transport.get_write_buffer_size() < self.left:  # closing too (a deadline, a
            # refusal): close() waits for the buffer to be sent
            self._wait_for_reading()  # some was read: the client is slow, not gone
        else:
            self.transport.abort()  # what is buffered will never be read: not waited for

    def _refuse(self, answer: bytes) -> None:
        assert self.transport is not None
        self.transport.write(answer)
        self.transport.close()


def guarded(
    protocol: Callable[..., asyncio.Protocol],
    most: int,
    say: Callable[[str], None],
    head_seconds: float = HEAD_SECONDS,
    send_seconds: float = SEND_SECONDS,
) -> type[asyncio.Protocol]:
    """A protocol class that builds `protocol` with the arguments it is given (uvicorn's) and
    guards it with the bounds above; `say` gets one line when `most` is reached (at most one
    a minute)."""
    bounds = Bounds(most, say, head_seconds, send_seconds)

    class Bounded(Guarded):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(protocol(*args, **kwargs), bounds)

    return Bounded
