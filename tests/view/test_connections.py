"""numerate.view.connections: the bounds `numerate view` keeps on its connections, over a real
asyncio server whose inner protocol records what it is given (the viewer's own process:
tests/view/test_view.py)."""

import asyncio
import socket
import time
from typing import ClassVar

import pytest

from numerate.view.connections import BUSY, NO_BODY, guarded

HEAD = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
BIG = 1024 * 1024
SMALL_BUFFER = 8192  # the kernel's, at both ends: an unread answer stays in the server's own


class Recorder(asyncio.Protocol):
    """uvicorn's part: keeps what it is given, answers nothing."""

    made: ClassVar[list["Recorder"]] = []

    def __init__(self, *args, **kwargs):
        self.given = (args, kwargs)
        self.data = b""
        self.connected = self.lost = False
        Recorder.made.append(self)

    def connection_made(self, transport):
        self.connected = True
        self.transport = transport
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)

    def data_received(self, data):
        self.data += data
        if data.startswith(b"GET /big "):  # an answer of 1 MiB
            self.transport.write(b"x" * BIG)

    def connection_lost(self, exc):
        self.lost = True


async def closed(reader, timeout=5.0) -> bytes:
    """What `reader`'s connection was sent before the server closed it (TimeoutError if it is
    not closed within `timeout` seconds)."""
    return await asyncio.wait_for(reader.read(), timeout)


def serving(most=8, head_seconds=0.3, send_seconds=30):
    """A server on a free port of 127.0.0.1 with the guarded Recorder, and the lines it said."""
    said: list[str] = []
    Recorder.made = []
    factory = guarded(Recorder, most, said.append, head_seconds, send_seconds)

    async def start():
        server = await asyncio.get_running_loop().create_server(
            lambda: factory("config", state="state"), "127.0.0.1", 0
        )
        return server, server.sockets[0].getsockname()[1]

    return start, said


@pytest.mark.parametrize(
    "chunks",
    [
        [b""],  # opened, and nothing sent
        [b"GET / HTTP/1.1\r\n"],  # a request line, and never its headers
        [HEAD, b"GET /run HTTP/1.1\r\nHost:"],  # a whole request, then part of the next
    ],
    ids=["silent", "slow-head", "slow-second-head"],
)
def test_a_head_that_does_not_come_whole_in_time_closes_the_connection(chunks):
    start, said = serving()

    async def scenario():
        server, port = await start()
        async with server:
            slow_reader, slow = await asyncio.open_connection("127.0.0.1", port)
            whole_reader, whole = await asyncio.open_connection("127.0.0.1", port)
            for chunk in chunks:
                slow.write(chunk)
            whole.write(HEAD[:10])
            await asyncio.sleep(0.05)  # a scenario: the rest of the head comes a little later,
            whole.write(HEAD[10:-2])  # with its blank line split between two writes
            await whole.drain()
            await asyncio.sleep(0.05)
            whole.write(HEAD[-2:])
            assert await closed(slow_reader) == b""  # closed by the bound, nothing said
            assert not whole_reader.at_eof()  # opened with it, its head came: still open
            whole.close()
            await whole.wait_closed()

    asyncio.run(scenario())
    slow, whole = [made for made in Recorder.made if made.connected]
    assert slow.data == b"".join(chunks) and slow.lost  # uvicorn's part saw all, and the end
    assert whole.data == HEAD and whole.given == (("config",), {"state": "state"})
    assert said == []


def test_a_head_sent_a_byte_at_a_time_is_not_given_more_time_for_each():
    start, said = serving(head_seconds=0.3)

    async def scenario():
        server, port = await start()
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)

            async def trickle():
                for byte in HEAD[:-1]:  # 36 bytes, one each 0.05 s: 1.8 s in all
                    writer.write(bytes([byte]))
                    await asyncio.sleep(0.05)  # a scenario: the slow client

            trickling = asyncio.create_task(trickle())
            try:
                assert await closed(reader, timeout=1.2) == b""
            finally:
                trickling.cancel()

    asyncio.run(scenario())
    assert said == []


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n\r\n\r\n",
        b"GET / HTTP/1.1\nhost: a\ntransfer-encoding: chunked\n\n",
        b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /run HTTP/1.1\r\ncontent-length:7\r\n\r\n",
    ],
    ids=["content-length", "chunked-lf-only", "second-request"],
)
def test_a_request_that_announces_a_body_is_answered_400_at_once(request_bytes):
    """A review: a body trickled for ever, each piece a blank line, was taken for heads, each
    of which put the deadline off (the viewer serves GET and HEAD: no request has a body)."""
    start, _ = serving(head_seconds=30)

    async def scenario():
        server, port = await start()
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request_bytes)
            return await closed(reader, timeout=5)  # long before the deadline

    assert asyncio.run(scenario()) == NO_BODY
    assert NO_BODY.startswith(b"HTTP/1.1 400 ") and b"has no body" in NO_BODY
    (refused,) = [made for made in Recorder.made if made.connected]
    assert refused.data == b"" and refused.lost  # uvicorn's part never had the request


@pytest.mark.parametrize(
    "head",
    [
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
        b"GET / HTTP/1.1\nHost: a\n\n",  # line feeds alone end a head for h11 too
        b"HEAD / HTTP/1.1\r\nX-Content-Length: 5\r\n\r\nGET / HTTP/1.1\r\n\r\n",
    ],
    ids=["length-0", "lf-only", "two-heads"],
)
def test_heads_without_a_body_are_let_through_and_not_timed_out(head):
    start, _ = serving(head_seconds=0.3)

    async def scenario():
        server, port = await start()
        async with server:
            silent_reader, _ = await asyncio.open_connection("127.0.0.1", port)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head)
            await writer.drain()
            assert await closed(silent_reader) == b""  # opened with it, closed by the deadline
            assert not reader.at_eof()
            writer.close()

    asyncio.run(scenario())
    silent, through = [made for made in Recorder.made if made.connected]
    assert through.data == head and silent.data == b""


def test_an_answer_no_one_reads_closes_its_connection_and_one_read_slowly_does_not():
    """A review: a client that asked and never read its answers held its connection for good
    (uvicorn waits for the transport's buffer to drain, with no time limit)."""
    start, _ = serving(head_seconds=30, send_seconds=0.5)

    async def connect(port):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
        sock.connect(("127.0.0.1", port))
        sock.setblocking(False)
        return await asyncio.open_connection(sock=sock)

    async def scenario():
        server, port = await start()
        async with server:
            _, unread = await connect(port)
            unread.write(b"GET /big HTTP/1.1\r\n\r\n")
            read_reader, read = await connect(port)
            read.write(b"GET /big HTTP/1.1\r\n\r\n")
            got = 0
            while got < BIG:  # what came, every 0.05 s: longer than 0.5 s in all
                got += len(await asyncio.wait_for(read_reader.read(64 * 1024), 5))
                await asyncio.sleep(0.05)  # a scenario: the slow reader
            unread_one, read_one = Recorder.made
            assert not read_one.lost  # served whole, though slower than the bound in all
            while not unread_one.lost:
                await asyncio.sleep(0.05)  # closed by the bound (the test's timeout else)
            return got

    started = time.monotonic()
    assert asyncio.run(asyncio.wait_for(scenario(), 30)) == BIG
    assert time.monotonic() - started > 1  # the reader was slower than the bound, in all


def test_a_connection_closed_with_an_answer_unread_is_not_kept_for_it():
    """A review: a deadline's close() waits for what is buffered to be sent, and a client that
    never reads held the closing connection for good."""
    start, _ = serving(head_seconds=0.2, send_seconds=0.5)

    async def scenario():
        server, port = await start()
        async with server:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
            sock.connect(("127.0.0.1", port))
            sock.setblocking(False)
            _, writer = await asyncio.open_connection(sock=sock)
            writer.write(b"GET /big HTTP/1.1\r\n\r\nGET /")  # and never the rest, nor reads
            while not Recorder.made or not Recorder.made[0].lost:
                await asyncio.sleep(0.05)  # let go (the test's timeout else)

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_past_the_most_connections_a_new_one_is_answered_503_and_said_once():
    start, said = serving(most=2, head_seconds=30)

    async def scenario():
        server, port = await start()
        async with server:
            kept = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
            for _, writer in kept:
                writer.write(b"G")  # the two open connections are uvicorn's
                await writer.drain()
            turned_away = []
            for _ in range(3):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                turned_away.append(await closed(reader))
                writer.close()
            _, first = kept[0]
            first.close()
            await first.wait_closed()
            while len([made for made in Recorder.made if made.lost]) < 1:
                await asyncio.sleep(0.01)  # the server saw it close
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(HEAD)
            await writer.drain()
            with pytest.raises(TimeoutError):  # let in again: kept open, not answered 503
                await closed(reader, timeout=0.3)
            again_reader, again = await asyncio.open_connection("127.0.0.1", port)
            turned_away.append(await closed(again_reader))
            for _, open_writer in [kept[1], (reader, writer), (again_reader, again)]:
                open_writer.close()
            return turned_away

    turned_away = asyncio.run(scenario())
    assert turned_away == [BUSY] * 4
    assert BUSY.startswith(b"HTTP/1.1 503 ") and BUSY.endswith(b"try again shortly\n")
    header, body = BUSY.split(b"\r\n\r\n")
    assert f"Content-Length: {len(body)}".encode() in header
    connected = [made for made in Recorder.made if made.connected]
    assert len(connected) == 3  # the connections turned away never reached uvicorn's part
    line = (
        "2 connections are open; new ones are answered 503 until some close (a client that "
        "opens many and sends slowly?)"
    )
    assert said == [line]  # once, though full twice: at most once a minute (a review: a line
    # each time it filled again, hundreds in seconds from a client cycling one connection)


def test_out_of_open_files_is_said_in_one_line_and_other_errors_as_asyncio_says_them(caplog):
    """asyncio logged a traceback each time an accept failed for want of files (once a second
    under a stream of connections); the viewer's handler says it in one line, at most once a
    minute, and leaves every other error to the loop's own handler."""
    import errno
    import logging

    from numerate.view.connections import out_of_files

    said: list[str] = []
    loop = asyncio.new_event_loop()
    try:
        loop.set_exception_handler(out_of_files(said.append))
        for number in (errno.EMFILE, errno.ENFILE, errno.EMFILE):
            loop.call_exception_handler({
                "message": "socket.accept() out of system resource",
                "exception": OSError(number, "Too many open files"),
            })  # fmt: skip
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            loop.call_exception_handler({"message": "something else", "exception": OSError(5, "")})
            loop.call_exception_handler({"message": "no exception at all"})
    finally:
        loop.close()
    assert len(said) == 1 and said[0].startswith("this process may open no more files (ulimit -n: ")
    assert [record.getMessage() for record in caplog.records] == [
        "something else",
        "no exception at all",
    ]
