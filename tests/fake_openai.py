"""A loopback OpenAI-compatible endpoint for tests and benchmarks (127.0.0.1 only).

It serves GET /v1/models and POST /v1/chat/completions over HTTP/1.1 keep-alive, answers in
microseconds, and can inject faults: 429 with Retry-After, 500, 400, slow answers (timeouts),
truncated answers (finish_reason "length") and unparseable text. It records every request.

For NumGen it is also an Images API (POST /v1/images/generations) that draws exactly n shapes
for "An image with n ...", as b64_json or as a url it serves (GET /v1/files/...), and a vision
model: a chat request with an image answers how many shapes it drew in that image (it knows its
own drawings by their pixels). Faults: `ImageReply` (429, 500, a slow body, malformed base64, a
content-policy refusal, a wrong size) and `Reply` for the vision answers.

In a test: `with FakeOpenAI() as server: ... server.base_url ...` (a thread of the test
process). Standalone: `python -m tests.fake_openai --port-file F [--delay S]` (a process to
kill, or to benchmark against).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODEL_ID = "fake-model"
LITELLM_AUTH_ERROR = (
    "Authentication Error, Invalid proxy server token passed. Received API Key = sk-...key, "
    "Key Hash (Token) =e3b0c44298fc. Unable to find token in cache or "
    "`LiteLLM_VerificationTokenTable`"
)


@dataclass
class Reply:
    """What the server does for one request."""

    content: Any = "Answer: 7"
    """The message content (None: JSON null, as some servers send; a list of content parts,
    or any other JSON value, sent as given)."""
    finish_reason: Any = "stop"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    error_message: str = "injected failure"
    choices: list[Any] | None = None
    """When set, the body's `choices` as given (e.g. [] for a body with no answer)."""
    raw_body: str | None = None
    """When set, the body is this text served as text/html (a proxy's error page)."""
    reasoning: str | None = None
    """A reasoning model's reasoning, sent in the message's `reasoning_field`."""
    reasoning_field: str = "reasoning_content"
    reasoning_tokens: int | None = None
    """Reported in the usage's `completion_tokens_details` when set."""


@dataclass
class ImageReply:
    """What the Images API does for one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    error_message: str = "injected failure"
    error_code: str = "injected"
    b64: str | None = None
    """When set, `b64_json` is this text (malformed base64, say)."""
    size: int | None = None
    """When set, the image is this many pixels wide and high, whatever was asked."""
    as_url: bool = False
    """Answer with a `url` (served by this endpoint) instead of `b64_json`."""
    trickle_s: float = 0.0
    """Send the headers at once and the body over this many seconds (a slow body)."""

    @classmethod
    def refusal(cls) -> ImageReply:
        return cls(400, error_message="Your request was rejected by the safety system",
                   error_code="content_policy_violation")  # fmt: skip


TRICKLE = "x-fake-trickle-s"
"""A header the fake reads (and does not send): send the body slowly over these seconds."""


def drawn_count(prompt: str) -> int:
    """The n of "An image with n ..." (a number in digits)."""
    return int(re.search(r"\d+", prompt).group())  # type: ignore[union-attr]


def pixels_key(image: Any) -> str:
    """What identifies a drawing by its pixels (a PNG re-encoded keeps them)."""
    return hashlib.sha256(image.convert("RGB").tobytes()).hexdigest()


def prompt_of(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, list):  # a vision request: its text part
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content


def image_of(body: dict[str, Any]) -> Any:
    """The image of a vision request (a PIL image), or None."""
    import base64
    import io

    from PIL import Image

    content = body["messages"][-1]["content"]
    if not isinstance(content, list):
        return None
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            url = part["image_url"]["url"]
            return Image.open(io.BytesIO(base64.b64decode(url.partition(",")[2])))
    return None


def hashed_answer(body: dict[str, Any]) -> Reply:
    """Default behaviour: a deterministic answer that depends on the prompt."""
    digest = hashlib.sha256(prompt_of(body).encode()).digest()
    return Reply(content=f"Let me think.\nAnswer: {digest[0] % 10}")


class FakeOpenAI:
    """The endpoint. `responder(body) -> Reply` decides each answer; swap it at any time
    (`image_responder(body) -> ImageReply` each image; a chat request with an image is
    answered by `vision(body) -> Reply`)."""

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Reply] = hashed_answer,
        api_key: str | None = None,
        model_id: str = MODEL_ID,
    ) -> None:
        self.responder = responder
        self.image_responder: Callable[[dict[str, Any]], ImageReply] = lambda body: ImageReply()
        self.vision: Callable[[dict[str, Any]], Reply] = self.count_drawn
        self.image_requests: list[dict[str, Any]] = []
        self.vision_requests = 0
        self.drawn: dict[str, int] = {}
        """Each drawing's pixels -> its number of shapes."""
        self.files: dict[str, bytes] = {}
        self.api_key = api_key
        self.model_id = model_id
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.port = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.models_status = 200
        """What GET /models answers (LiteLLM without a database answers 400, transformers
        serve 500)."""
        self.wrong_key = {route: (401, "Incorrect API key provided", "invalid_api_key")
                          for route in ("models", "chat")}  # fmt: skip
        """What each route ("models", "chat") answers a wrong key: status, message, type."""
        self.fixed_image: bytes | None = None
        """When set, every image request gets these bytes unparsed and unrecorded (one drawing,
        whatever was asked): for benchmarks."""
        self.fixed_reply: bytes | None = None
        """When set, every chat request gets these bytes unparsed and unrecorded: the cheapest
        possible endpoint, for benchmarks."""

    def mimic_litellm(self, chat_refusal: str = LITELLM_AUTH_ERROR) -> None:
        """Answer like a LiteLLM proxy without a database (measured with 1.106): GET /models
        answers 400 "No connected db.", and a wrong key gets HTTP 400, not 401 (the chat
        endpoint says `chat_refusal`)."""
        self.models_status = 400
        self.wrong_key = {"models": (400, "No connected db.", "no_db_connection"),
                          "chat": (400, chat_refusal, "auth_error")}  # fmt: skip

    def count_drawn(self, body: dict[str, Any]) -> Reply:
        """The vision model: the number of shapes of one of its own drawings, else of dark
        shapes on white (connected regions, counted by scipy: not numerate's blob counter)."""
        import numpy as np
        from scipy import ndimage

        image = image_of(body)
        if image is None:
            return Reply(content="I cannot tell.")
        n = self.drawn.get(pixels_key(image))
        if n is None:
            dark = np.asarray(image.convert("L")) < 200  # anti-aliased edges: 8-connected
            n = ndimage.label(dark, structure=np.ones((3, 3)))[1]
        return Reply(content=f"I count them.\nAnswer: {n}")

    def draw(self, request: dict[str, Any], reply: ImageReply) -> dict[str, Any]:
        """An Images API answer: exactly n shapes, drawn from the request's seed."""
        import base64
        import io

        from numerate.numgen.synthetic import draw_stimulus

        n = drawn_count(request["prompt"])
        width = int(str(request.get("size", "256x256")).partition("x")[0] or 256)
        image = draw_stimulus(n, int(request.get("seed", 0)), reply.size or width)
        with self._lock:
            self.drawn[pixels_key(image)] = n
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        if reply.as_url:
            name = f"{hashlib.sha256(buffer.getvalue()).hexdigest()[:16]}.png"
            self.files[name] = buffer.getvalue()
            return {"created": 0, "data": [{"url": f"{self.base_url}/files/{name}"}]}
        encoded = reply.b64 if reply.b64 is not None else base64.b64encode(buffer.getvalue())
        text = encoded if isinstance(encoded, str) else encoded.decode()
        return {"created": 0, "data": [{"b64_json": text, "revised_prompt": request["prompt"]}]}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def prompts(self) -> list[str]:
        with self._lock:
            return [prompt_of(b) for b in self.requests]

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                if self.fixed_image is not None and path.endswith("/images/generations"):
                    writer.write(self.fixed_image)
                    continue
                if self.fixed_reply is not None and method == "POST":
                    writer.write(self.fixed_reply)
                    continue
                status, payload, extra = await self._route(method, path, headers, body)
                is_raw = isinstance(payload, str | bytes)
                data = (payload if isinstance(payload, bytes) else payload.encode() if is_raw
                        else json.dumps(payload).encode())  # fmt: skip
                response_headers = {
                    "Content-Type": "text/html" if is_raw else "application/json",
                    "Content-Length": str(len(data)),
                    **extra,
                }
                trickle = float(response_headers.pop(TRICKLE, 0))
                head_out = f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n" + "".join(
                    f"{k}: {v}\r\n" for k, v in response_headers.items()
                )
                writer.write(head_out.encode() + b"\r\n" + (b"" if trickle else data))
                await writer.drain()
                for start in range(0, len(data) if trickle else 0, max(1, len(data) // 10)):
                    await asyncio.sleep(trickle / 10)  # a slow body: a tenth at a time
                    writer.write(data[start : start + max(1, len(data) // 10)])
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            writer.close()
            self._connections.discard(task)

    async def _route(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, Any] | str, dict[str, str]]:
        authorization = headers.get("authorization", "")
        with self._lock:
            self.authorizations.append(authorization)
        is_listing = method == "GET" and path.rstrip("/").endswith("/models")
        if self.api_key is not None and authorization != f"Bearer {self.api_key}":
            status, message, kind = self.wrong_key["models" if is_listing else "chat"]
            return status, _error(message, kind), {}
        if is_listing:
            if self.models_status != 200:
                return self.models_status, _error("No connected db.", "no_db_connection"), {}
            return 200, {"object": "list", "data": [{"id": self.model_id, "object": "model"}]}, {}
        if method == "GET" and "/files/" in path:
            found = self.files.get(path.rsplit("/", 1)[-1])
            return (200, found, {}) if found else (404, _error("no file", "not_found"), {})
        if method == "POST" and path.rstrip("/").endswith("/images/generations"):
            return await self._image(json.loads(body))
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            return 404, _error(f"no route {method} {path}", "not_found"), {}
        request = json.loads(body)
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if image_of(request) is not None:
                with self._lock:
                    self.vision_requests += 1
                reply = self.vision(request)
            else:
                reply = self.responder(request)
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
        finally:
            with self._lock:
                self.in_flight -= 1
        if reply.status != 200:
            return reply.status, _error(reply.error_message, "injected"), reply.headers
        if reply.raw_body is not None:
            return 200, reply.raw_body, reply.headers
        words = len(reply.content.split()) if isinstance(reply.content, str) else 0
        choices = reply.choices
        if choices is None:
            message = {"role": "assistant", "content": reply.content}
            if reply.reasoning is not None:
                message[reply.reasoning_field] = reply.reasoning
            choices = [{"index": 0, "message": message, "finish_reason": reply.finish_reason}]
        details = {} if reply.reasoning_tokens is None else {
            "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens}
        }  # fmt: skip
        return (
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model", self.model_id),
                "choices": choices,
                "usage": {
                    "prompt_tokens": len(prompt_of(request).split()),
                    "completion_tokens": words,
                    "total_tokens": len(prompt_of(request).split()) + words,
                    **details,
                },
            },
            reply.headers,
        )

    async def _image(self, request: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        with self._lock:
            self.image_requests.append(request)
        reply = self.image_responder(request)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.status != 200:
            return reply.status, _error(reply.error_message, reply.error_code), reply.headers
        headers = {**reply.headers, **({TRICKLE: str(reply.trickle_s)} if reply.trickle_s else {})}
        return 200, await asyncio.to_thread(self.draw, request, reply), headers

    # ------------------------------------------------------------------ lifecycle

    async def serve(self, port: int = 0) -> asyncio.Server:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        return self._server

    def __enter__(self) -> FakeOpenAI:
        started = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.serve())
            started.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-openai", daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("fake OpenAI server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        loop, server = self._loop, self._server
        if loop is None or server is None:
            return

        async def stop() -> None:
            server.close()
            for connection in list(self._connections):
                connection.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread:
            self._thread.join(10)
        loop.close()


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            429: "Too Many Requests", 500: "Internal Server Error"}  # fmt: skip


def _error(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": code, "code": code}}


def spawn(workdir: Path, *options: str) -> tuple[subprocess.Popen[bytes], str]:
    """The endpoint as its own process (options as for `main`); returns it and its base URL."""
    port_file = workdir / "port"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_openai", "--port-file", str(port_file), *options],
        cwd=Path(__file__).resolve().parent.parent,
    )
    deadline = time.monotonic() + 20
    while not (port_file.exists() and port_file.read_text()):
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("fake OpenAI endpoint did not start")
        time.sleep(0.05)
    return process, f"http://127.0.0.1:{port_file.read_text()}/v1"


def fixed_reply() -> bytes:
    """A complete HTTP response to a chat request, ready to send."""
    payload = json.dumps(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": MODEL_ID,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Answer: 7"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 2, "total_tokens": 52},
        }
    ).encode()
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


def fixed_image(n: int = 7, size: int = 256) -> bytes:
    """A complete HTTP response to an image request (a drawing of n shapes), ready to send."""
    import base64
    import io

    from numerate.numgen.synthetic import draw_stimulus

    buffer = io.BytesIO()
    draw_stimulus(n, 0, size).save(buffer, format="PNG")
    payload = json.dumps(
        {"created": 0, "data": [{"b64_json": base64.b64encode(buffer.getvalue()).decode()}]}
    ).encode()
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


def main() -> None:
    parser = argparse.ArgumentParser(description="Loopback OpenAI-compatible test endpoint")
    parser.add_argument("--port-file", required=True, help="where to write the chosen port")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--log", help="append each request's prompt hash to this file")
    parser.add_argument(
        "--fixed",
        action="store_true",
        help="answer every chat request (and every image request) with one precomputed "
        "response, without reading it (the cheapest endpoint: for throughput benchmarks)",
    )
    args = parser.parse_args()

    log = Path(args.log).open("a", buffering=1) if args.log else None  # noqa: SIM115

    def responder(body: dict[str, Any]) -> Reply:
        reply = hashed_answer(body)
        reply.delay_s = args.delay
        if log:
            log.write(hashlib.sha256(prompt_of(body).encode()).hexdigest()[:16] + "\n")
        return reply

    async def run() -> None:
        server = FakeOpenAI(responder)
        if args.fixed:
            server.fixed_reply = fixed_reply()
            server.fixed_image = fixed_image()
        await server.serve()
        Path(args.port_file).write_text(str(server.port))
        await asyncio.Event().wait()

    asyncio.run(run())


if __name__ == "__main__":
    main()
