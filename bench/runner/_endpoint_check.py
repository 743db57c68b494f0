"""Before a run sends anything: is each URL a reachable HTTP server that speaks the OpenAI API?

`speedbench run` calls `check_endpoints` first, so a closed port, a server that does not speak HTTP and an
HTTP server that is not an LLM server each end the run with one line and exit 2, before a prompt is loaded
or a file is written. An OpenAI-compatible server lists its models at `GET /v1/models`; one that does not is
asked the completion endpoint itself with an empty body: a server that has the route answers (400, 422, even
500), one that does not answers 404, 405 or 501. A server that refuses the empty body in another way (a gateway's
plain-text 400) is asked for one token of a real completion: a working completion is what a run needs, so a 2xx
answer is a warning that the server lists no models, and the run goes on.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, Sequence

import aiohttp

from bench._errors import BenchError
from bench._redact import redact_url
from bench.runner._stop import Stop, signals_to
from bench.runner._transport import Response, Transport, TransportError

CHECK_TIMEOUT_S = 10.0
"""How long one check request may take, connecting included."""
NO_ROUTE = frozenset({404, 405, 501})
"""Statuses that say the server has no such route: not an OpenAI-compatible server."""
AUTH = frozenset({401, 403})
REDIRECTS = frozenset({301, 302, 303, 307, 308})
ONE_TOKEN = {"/chat/completions": {"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1},
             "/completions": {"prompt": "OK", "max_tokens": 1}}
"""The smallest real completion request, by endpoint path: asked only of a server that lists no models."""


def _json_object(body: bytes) -> bool:
    try:
        return isinstance(json.loads(body), dict)
    except ValueError:
        return False


def _cause(exc: TransportError) -> str:
    """The socket-level cause of a failed connect, in a few words (`connection refused`, `name not known`)."""
    cause = exc.__cause__
    error = cause.os_error if isinstance(cause, aiohttp.ClientConnectorError) else cause
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return str(exc).removeprefix("cannot connect: ")


def _failure(base_url: str, exc: TransportError) -> str:
    """One line for a check request that failed below HTTP."""
    where = redact_url(base_url)
    if exc.kind == "connect":
        return f"cannot reach {where}: {_cause(exc)}"
    if exc.kind == "tls":
        return str(exc)
    if exc.kind == "timeout":
        return f"{where} accepted the connection but sent no HTTP answer within {CHECK_TIMEOUT_S:.0f} s"
    cause = exc.__cause__
    if isinstance(cause, aiohttp.ClientResponseError) and cause.status == 400 and "status line" in str(cause.message):
        return f"{where} does not speak HTTP (its first bytes are no HTTP status line): check --url"
    return f"{where} does not answer as an HTTP server ({exc}): check --url"


async def _check_one(transport: Transport, base_url: str, endpoint_path: str) -> tuple[str | None, str | None]:
    """(what is wrong with one base URL (`.../v1`), a warning about it); both None when it answers as an
    OpenAI-compatible server."""
    models_url = base_url + "/models"
    try:
        listed = await transport.get(models_url, timeout=CHECK_TIMEOUT_S)
    except TransportError as exc:
        return _failure(base_url, exc), None
    if listed.status in AUTH:
        return (f"{redact_url(models_url)} refused the request (HTTP {listed.status}): give the server's key with "
                "--api-key, or $OPENAI_API_KEY"), None
    if listed.status == 200 and _json_object(listed.body):
        return None, None
    asked, problem = await _post(transport, base_url, endpoint_path, b"{}")
    if asked is not None and problem is None and not _completes(asked.status) and _no_route(asked):
        asked, problem = await _post(transport, base_url, endpoint_path, json.dumps(ONE_TOKEN[endpoint_path]).encode())
    if asked is None or problem is not None:
        return problem, None
    if _completes(asked.status):
        return None, (f"warning: {redact_url(base_url)} lists no models (GET {models_url.removeprefix(base_url)} "
                      f"answered HTTP {listed.status}) but POST {endpoint_path} answered HTTP {asked.status}: "
                      "going on")
    if _no_route(asked):
        return (f"{redact_url(base_url)} is not an OpenAI-compatible server: GET {models_url.removeprefix(base_url)} "
                f"answered HTTP {listed.status} and POST {endpoint_path} HTTP {asked.status} (check --url: it names "
                "the server's root or its /v1)"), None
    return None, None


def _completes(status: int) -> bool:
    return 200 <= status < 300


def _no_route(asked: Response) -> bool:
    """An answer that says the route is not there: 404, 405, 501, or a refusal that is not JSON."""
    return asked.status in NO_ROUTE or (asked.status < 500 and not _json_object(asked.body))


async def _post(transport: Transport, base_url: str, endpoint_path: str,
                body: bytes) -> tuple[Response | None, str | None]:
    """(the answer to one check POST or None, what is wrong: a failure below HTTP or a redirect)."""
    try:
        asked = await asyncio.wait_for(transport.post(base_url + endpoint_path, body), CHECK_TIMEOUT_S)
    except (TransportError, TimeoutError) as exc:
        error = exc if isinstance(exc, TransportError) else TransportError("timeout", "timed out")
        return None, _failure(base_url, error)
    if asked.status in REDIRECTS:
        location = redact_url(asked.headers.get("Location") or asked.headers.get("location") or "elsewhere")
        return asked, (f"{redact_url(base_url)} redirects POST {endpoint_path} (HTTP {asked.status} to {location}): "
                       "speedbench never follows a redirect (it would carry the request's key to another origin); "
                       "give --url the address the server names")
    return asked, None


def check_endpoints(base_urls: Sequence[str], api: str, headers: Mapping[str, str] | None = None) -> list[str]:
    """Raise a one-line BenchError for the first base URL that is unreachable, not HTTP or not OpenAI-compatible;
    the warnings (a server that lists no models but completes) are returned."""
    path = "/completions" if api == "completions" else "/chat/completions"
    warnings: list[str] = []

    async def each() -> str | None:
        async with Transport(timeout=CHECK_TIMEOUT_S, connections=1, headers=headers, stamped=False) as transport:
            for base in base_urls:
                problem, warning = await _check_one(transport, base, path)
                if problem:
                    return problem
                if warning:
                    warnings.append(warning)
        return None

    async def check() -> str | None:
        stop = Stop()  # Ctrl-C or SIGTERM while a server hangs ends the check at once, as an interrupted run
        with signals_to(stop, threading.current_thread() is threading.main_thread()):
            problem = await stop.guard(each(), None)
        if stop.requested.is_set():
            raise KeyboardInterrupt
        return problem

    problem = asyncio.run(check())
    if problem:
        raise BenchError(problem)
    return warnings
