"""`numerate view`'s web server: Starlette (already installed with Prefect, as are uvicorn and
Jinja2), server-rendered pages, no JavaScript framework, nothing fetched from the internet.

Read-only in every sense: each request opens the results database like every other reader
(numerate.store.reader: read-only, no file outside it reachable) and closes it before
answering, so sweeps keep writing while pages are read; the only files served besides the
pages are NumGen images the database records (pages.image_problem); only GET and HEAD are
routed (any other method is 405); there is no form that changes anything.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from numerate.kernel.confined import LeadsOutside
from numerate.kernel.errors import (
    ConfigError,
    field_path,
    first_line,
    fixed,
    is_a_stop,
    printable,
    shorten,
)
from numerate.kernel.files import slug
from numerate.kernel.inputs import has_control_character
from numerate.store import browse
from numerate.store.reader import Reader
from numerate.store.schema import DatabaseFault
from numerate.view import pages

__all__ = ["create_app", "problem_page", "templates"]

HERE = Path(__file__).parent


def templates() -> jinja2.Environment:
    """The page templates, every value escaped unless marked safe (an answer is untrusted
    text), and shown: a control character of a value, a bidi control (a U+202E turned a
    cell's text round) or a line separator is written as its escape (`\\x1b`, `\\u202e`), as
    a terminal shows it; line breaks and tabs stay. A form's value, sent back as it is, is
    only escaped (`| forceescape`: the filter it keeps is the one asked for)."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_shown,
    )
    environment.filters["fmt"] = _fmt
    environment.filters["percent"] = _percent
    environment.globals.update(
        css=(HERE / "static" / "view.css").read_text(),
        script=(HERE / "static" / "view.js").read_text(),
        slug=pages.slug,
    )
    return environment


def _shown(value: Any) -> Any:
    """A value as a page shows it (`templates`); markup the page made itself as it is."""
    if isinstance(value, str) and not hasattr(value, "__html__"):  # markup: its own
        return printable(value, keep="\n\r\t")
    return value


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return fixed(value, digits)
    return str(value)


def _percent(value: float | None) -> str:
    """A share as a percentage with one decimal; a dash when there is none (nothing scored)."""
    return "–" if value is None else f"{100 * value:.1f}%"


def _number(request: Request, name: str) -> int:
    """A page number from the query (1 when absent); ConfigError (400) for anything but a
    whole number from 1 (`page=abc` and `page=-1` showed page 1)."""
    raw = request.query_params.get(name)
    if raw is None:
        return 1
    value = _whole(raw.strip(), name)
    if value < 1:
        raise ConfigError(f"{name} {raw!r}: pages start at 1")
    return value


Build = Callable[[Reader, Request, pages.Links], dict[str, Any]]
"""What a page shows, read from the database for a request."""


def _runs(reader: Reader, q: Request, links: pages.Links) -> dict[str, Any]:
    given = (_text(q, "sweep"), _text(q, "status"), _text(q, "q"))
    return pages.runs(reader, links, _number(q, "page"), *given)


def _run(reader: Reader, q: Request, links: pages.Links) -> dict[str, Any]:
    return pages.run(reader, links, q.path_params["run_id"])


def _manifold(reader: Reader, q: Request, links: pages.Links) -> dict[str, Any]:
    return pages.manifold(reader, links, q.path_params["run_id"], q.path_params["manifold"])


def _cases(reader: Reader, q: Request, links: pages.Links) -> dict[str, Any]:
    run_id, name = q.path_params["run_id"], q.path_params["manifold"]
    return pages.cases(reader, links, run_id, name, _filter(q))


def _case(reader: Reader, q: Request, links: pages.Links) -> dict[str, Any]:
    run_id, model = q.path_params["run_id"], _text(q, "model")
    return pages.case(reader, links, run_id, model, _text(q, "id"))


def _compare(reader: Reader, q: Request, links: pages.Links) -> dict[str, Any]:
    if not _text(q, "base") or not _text(q, "new"):
        raise ConfigError("which runs? (compare?base=RUN&new=RUN)")
    given = (_text(q, "base"), _text(q, "new"), _number(q, "lost"), _number(q, "gained"))
    return pages.comparison(reader, links, *given)


def _numgen_runs(reader: Reader, q: Request, links: pages.Links) -> dict[str, Any]:
    return pages.numgen_runs(reader, links)


def _numgen_run(reader: Reader, q: Request, links: pages.Links) -> dict[str, Any]:
    return pages.numgen_run(reader, links, q.path_params["run_id"])


def _numgen_cell(reader: Reader, q: Request, links: pages.Links) -> dict[str, Any]:
    count = _text(q, "count")
    counted = None if count == "none" else _whole(count, "count")
    target = _whole(_text(q, "target"), "target")
    run_id = q.path_params["run_id"]
    return pages.numgen_cell(reader, links, run_id, target, counted, _number(q, "page"))


def _named_runs(reader: Reader, request: Request) -> str | None:
    """The address of the same page for the full ids of the sweep runs it names as the
    commands take them (`/run/latest`, `/compare?base=previous&new=latest`, a prefix), or None
    when it names them by their ids (or names none that exists: the page says so). Asked only
    of a page that found no such run: a page of ids costs no look-up more."""
    path, query = request.url.path, dict(request.query_params)
    moved = False
    run_id = request.path_params.get("run_id")
    if run_id is not None and path.startswith(f"/run/{run_id}"):
        full = pages.named_run(reader, run_id)
        if full is not None:
            rest = path[len(f"/run/{run_id}") :]
            path, moved = f"/run/{quote(full, safe='')}{quote(rest)}", True
    if path == "/compare":
        for side in ("base", "new"):
            full = pages.named_run(reader, query[side]) if query.get(side) else None
            if full is not None:
                query[side], moved = full, True
    if not moved:
        return None
    return path + ("?" + urlencode(query) if query else "")


PAGES: dict[str, tuple[str, Build]] = {
    "/": ("runs.html", _runs),
    "/run/{run_id}": ("run.html", _run),
    "/run/{run_id}/manifold/{manifold}": ("manifold.html", _manifold),
    "/run/{run_id}/cases/{manifold}": ("cases.html", _cases),
    "/run/{run_id}/case": ("case.html", _case),
    "/compare": ("compare.html", _compare),
    "/numgen": ("numgen_runs.html", _numgen_runs),
    "/numgen/{run_id}": ("numgen_run.html", _numgen_run),
    "/numgen/{run_id}/cell": ("numgen_cell.html", _numgen_cell),
}
"""Every page: its address, its template and what it shows."""


def create_app(db: str, hosts: frozenset[str] | None = None) -> Starlette:
    """The viewer of results database `db`; answering only requests whose Host is one of
    `hosts`, when given (a viewer on the loopback: a page elsewhere whose name resolves to
    127.0.0.1, DNS rebinding, gets nothing)."""
    environment = templates()
    links = pages.Links()

    def page(template: str, build: Build) -> Callable[..., Any]:
        async def endpoint(request: Request) -> Response:
            def render() -> tuple[str, int]:
                try:
                    _check_values(request)
                    with _opened(db) as reader:
                        try:
                            context = build(reader, request, links)
                        except LookupError:  # `latest`, a prefix: the page of its run
                            moved = _named_runs(reader, request)
                            if moved is None:
                                raise
                            return moved, 307
                    page = environment.get_template(template)
                    return page.render(db=db, links=links, **context), 200
                except LookupError as error:
                    return _problem(environment, str(error).strip("'\""), 404)
                except ConfigError as error:
                    return _problem(environment, str(error), 400)
                except DatabaseFault as error:  # the database's fault, not the request's
                    said = f"the results database could not answer this page: {error}"
                    return _problem(environment, said, 500)
                except BaseException as error:  # a page that cannot be shown says why, in a
                    if is_a_stop(error):  # line (a polars panic too)
                        raise
                    return _problem(
                        environment, f"could not show this page: {first_line(error)}", 500
                    )

            body, status = await run_in_threadpool(render)
            if status == 307:
                return RedirectResponse(body, status_code=307)
            return HTMLResponse(body, status_code=status)

        return endpoint

    async def no_such_page(request: Request, error: Exception) -> Response:
        """A page the viewer has no route for: the viewer's own page saying so (Starlette's
        was a bare "Not Found")."""
        body, status = _problem(environment, f"no page at {shorten(request.url.path)}", 404)
        return HTMLResponse(body, status_code=status)

    routes = [Route(address, page(*shown)) for address, shown in PAGES.items()]
    routes.append(Route("/numgen/{run_id}/image/{prompt_id}", _file_route(db, _image, "image")))
    routes.append(Route("/run/{run_id}/answer", _file_route(db, _answer, "answer")))
    middleware = [] if hosts is None else [Middleware(KnownHostsOnly, hosts=hosts)]
    return Starlette(routes=routes, middleware=middleware, exception_handlers={404: no_such_page})


def _opened(db: str) -> Reader:
    """The results database, opened for one request. What keeps it from opening (a file
    damaged, cut short, replaced by a folder, gone) is the database's fault, not the
    request's: DatabaseFault (a page's 500, a file's 503), not Reader.open's ConfigError (a
    command's exit 2, which the viewer answered with 400)."""
    try:
        return Reader.open(db)
    except ConfigError as error:
        raise DatabaseFault(str(error)) from None


File = tuple[bytes | str, str, dict[str, str]] | None
"""A file the viewer serves besides its pages: its content, type and headers (None: none)."""


def _file_route(
    db: str, find: Callable[[Reader, Request], File], what: str
) -> Callable[[Request], Awaitable[Response]]:
    """An endpoint serving the file `find` reads from the database: 404 when there is none,
    403 when it lies behind a link planted in its folder (not followed), 409 for an image
    whose file is no longer the one the run made (pages.ReplacedImage), 400 for a bad
    address, 503 when the database cannot be read; each said in a line."""

    async def endpoint(request: Request) -> Response:
        def look() -> File:
            _check_values(request)
            with _opened(db) as reader:
                return find(reader, request)

        try:
            found = await run_in_threadpool(look)
        except LeadsOutside as refused:  # a link planted among the images: not followed
            return Response(f"not served: {refused}", status_code=403, media_type="text/plain")
        except pages.ReplacedImage as replaced:  # another image than the one counted
            return Response(f"not served: {replaced}", status_code=409, media_type="text/plain")
        except ConfigError as error:
            return Response(str(error), status_code=400, media_type="text/plain")
        except Exception as error:  # the database gone, replaced or busy: said in a line
            return Response(f"cannot show this {what}: {first_line(error)}", status_code=503,
                            media_type="text/plain")  # fmt: skip
        if found is None:
            return Response(f"no such {what}", status_code=404, media_type="text/plain")
        content, kind, headers = found
        return Response(content, media_type=kind, headers=headers)

    return endpoint


def _image(reader: Reader, request: Request) -> File:
    """A NumGen image (or its copy with the detector's boxes, `annotated=1`), read without
    following a link out of the run's images folder."""
    run_id, prompt_id = request.path_params["run_id"], request.path_params["prompt_id"]
    annotated = request.query_params.get("annotated") == "1"
    recorded = browse.numgen_image(reader, run_id, prompt_id, annotated)
    if recorded is None:
        return None
    content = pages.image_bytes(pages.images_folder(reader, run_id), *recorded)
    if content is None:
        return None
    return content, pages.IMAGE_TYPES[Path(recorded[0]).suffix.lower()], {}


def _answer(reader: Reader, request: Request) -> File:
    """The whole stored text of one answer, as a download (pages show a long one folded)."""
    run_id, model, case_id = (
        request.path_params["run_id"],
        _text(request, "model"),
        _text(request, "id"),
    )
    sample = _whole(_text(request, "sample") or "0", "sample")
    text = browse.answer_text(reader, run_id, model, case_id, sample)
    if text is None:
        return None
    download = {"content-disposition": f'attachment; filename="{slug(case_id)}-{sample}.txt"'}
    return text, "text/plain; charset=utf-8", download


_HOST = re.compile(
    r"(?P<name>\[[0-9a-f:.]+\]|[a-z0-9\-._~!$&'()*+,;=%]*)(?::[0-9]*)?", re.IGNORECASE
)
"""A Host header by RFC 9110's grammar (uri-host [":" port]): an IP literal in brackets, or a
reg-name of unreserved characters, percent-escapes and sub-delimiters; no "@", "/", space."""


def host_name(header: str) -> str | None:
    """The host a Host header names, lower-cased (`[::1]` with its brackets), or None when the
    header is not one (`localhost:80@evil.com`, `[::1]x`, `a b`)."""
    found = _HOST.fullmatch(header)
    return found["name"].lower() if found else None


class KnownHostsOnly:
    """ASGI middleware: a request whose Host header names none of `hosts` (or is no Host
    header by the standard's grammar, or is not exactly one) is answered 400 before any route
    (nor a redirect) sees it."""

    def __init__(self, app: Any, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [value for key, value in scope["headers"] if key == b"host"]
            if len(headers) != 1 or host_name(headers[0].decode("latin-1")) not in self.hosts:
                refused = Response(
                    "numerate view answers only requests to " + ", ".join(sorted(self.hosts)),
                    status_code=400, media_type="text/plain",
                )  # fmt: skip
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


MAX_VALUE = 8192
"""Characters a value of an address holds at most: a grid point's key (its parameters as
JSON, escaped twice over in a link) reaches a few thousand, and a server's request line at
most about 16 KB; a longer value was written back whole into its page (100 KB in the runs
page's search box, in a 404)."""


def _check_values(request: Request) -> None:
    """ConfigError (400) when a value of the address, in its path or its query, holds a
    control character (a NUL was written into the page as it came) or is longer than
    MAX_VALUE characters."""
    given = [*request.path_params.items(), *request.query_params.multi_items()]
    for name, value in ((str(n), str(v).strip()) for n, v in given):
        shown = field_path([name])  # a name is a value too: escaped and cut
        if max(len(name), len(value)) > MAX_VALUE:
            raise ConfigError(f"{shown}: longer than {MAX_VALUE:,} characters, no value's length")
        if has_control_character(value):
            raise ConfigError(f"{shown}: a control character is no part of any value")


def _text(request: Request, name: str) -> str:
    """A query value, stripped (`_check_values` has checked it)."""
    return request.query_params.get(name, "").strip()


def _whole(text: str, name: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 6:
        raise ConfigError(f"{name} {text!r}: give a whole number")
    return int(text)


def _filter(request: Request) -> pages.CaseFilter:
    model = _text(request, "model")
    if not model:
        raise ConfigError("which model's cases? (model=...)")
    return pages.CaseFilter(
        model=model,
        point=_text(request, "point") or None,
        parameter=_text(request, "x") or None,
        level=_text(request, "v") or None,
        outcome=_text(request, "outcome") or None,
        text=_text(request, "q")[:200] or None,
        page=_number(request, "page"),
    )


def _problem(environment: jinja2.Environment, message: str, status: int) -> tuple[str, int]:
    return problem_page(environment, pages.Links(), message, status), status


def problem_page(
    environment: jinja2.Environment, links: pages.Links, message: str, status: int
) -> str:
    """The page shown in place of one that cannot be shown: why, in a line (the server's and
    an export's)."""
    return environment.get_template("problem.html").render(
        message=message, status=status, links=links
    )
