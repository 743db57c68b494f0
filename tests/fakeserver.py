"""A small loopback server that answers like llama.cpp (or other engines), with exact timings and injected faults."""

from __future__ import annotations

import asyncio
import json
import math
import random
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class FakeState:
    """What the fake server does and what it saw."""

    engine: str = "llamacpp"
    drafting: bool = False
    fault: Callable[[int, dict[str, Any]], str | None] = lambda index, body: None
    decode_tps: float = 50.0
    delay_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    extra_metrics: str = ""
    on_metrics: Callable[[FakeState], None] | None = None
    tokenized: int = 0
    reasoning: str | None = None
    schedule: DriftSchedule | None = None
    speed: float = 1.0
    load_speed: Callable[[int], float] | None = None
    """With a schedule: the speed factor as a function of the requests in flight (speculation that stops paying)."""
    in_flight: int = 0
    transform: Callable[[str], str] | None = None
    margin: Callable[[int], float] = lambda position: 3.0
    capacity: int | None = None
    """Server slots: requests beyond this many wait inside the server, first come first served."""
    service_s: Callable[[int], float] | None = None
    """Exact seconds request number i occupies a slot (known service times; with `capacity`, a known queue)."""
    gap_service_s: Callable[[float], float] | None = None
    """Exact seconds a request takes as a function of the gap since the previous request arrived (a server that
    slows down under load: speculation that stops paying at a known arrival rate)."""
    last_arrival: float | None = None
    conversation_s: dict[str, float] = field(default_factory=dict)
    remembers: bool = False
    """A drafter that memorises: a prompt seen before drafts and accepts far more (llama.cpp's ngram-mod)."""
    seen: set[str] = field(default_factory=set)
    _slots: asyncio.Semaphore | None = None


@dataclass
class DriftSchedule:
    """A machine shared by fake servers: per-token delay that changes by `factor` after `switch_after` requests.

    Every chat request to any server sharing the schedule advances it; each server divides the delay by its own
    `speed` (its true speed). Per-request lognormal jitter (`jitter` sigma) is seeded, so runs are reproducible.
    """

    token_delay_s: float = 0.003
    switch_after: int = 10**9
    factor: float = 1.6
    jitter: float = 0.0
    seed: int = 0
    served: int = 0
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def next_delay(self) -> float:
        """The per-token delay of the next request on this machine."""
        delay = self.token_delay_s * (self.factor if self.served >= self.switch_after else 1.0)
        self.served += 1
        return delay * (math.exp(self._rng.gauss(0.0, self.jitter)) if self.jitter else 1.0)


def reply_text(body: dict[str, Any]) -> str:
    """A deterministic reply derived from the last user turn."""
    messages = body.get("messages") or [{"content": body.get("prompt", "")}]
    last = messages[-1]["content"]
    return f"Answer to: {last[:40]}"


def _logprobs(state: FakeState, text: str) -> dict[str, Any]:
    """OpenAI chat-shaped top-2 log-probabilities, one token per word; the margin at position i is state.margin(i)."""
    words = text.split(" ")
    content = []
    for position, word in enumerate(words):
        token = word if position == 0 else " " + word
        margin = state.margin(position)
        top = [{"token": token, "bytes": list(token.encode()), "logprob": -0.1},
               {"token": " other", "bytes": list(b" other"), "logprob": -0.1 - margin}]
        content.append({"token": token, "bytes": list(token.encode()), "logprob": -0.1, "top_logprobs": top})
    return {"content": content}


def completion(state: FakeState, body: dict[str, Any], token_delay_s: float | None = None) -> dict[str, Any]:
    """A non-streaming response in the state's engine shape (timings from `token_delay_s` when given)."""
    text = reply_text(body)
    if state.transform is not None:
        text = state.transform(text)
    prompt_n = sum(len(m["content"].split()) for m in body.get("messages", [])) or 1
    predicted_n = min(int(body.get("max_tokens", 16)), len(text.split()) + 4)
    data: dict[str, Any] = {
        "id": "cmpl-1",
        "object": "chat.completion",
        "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, **(
            {"reasoning_content": state.reasoning} if state.reasoning else {})}, "finish_reason": "length",
            **({"logprobs": _logprobs(state, text)} if body.get("logprobs") else {})}],
        "usage": {"prompt_tokens": prompt_n, "completion_tokens": predicted_n, "total_tokens": prompt_n + predicted_n},
    }
    drafted = 4 * predicted_n if state.drafting else 0
    accepted = 3 * predicted_n if state.drafting else 0
    if state.drafting and state.remembers:
        prompt = json.dumps(body.get("messages") or body.get("prompt"))
        if prompt not in state.seen:
            state.seen.add(prompt)
            accepted = predicted_n // 4
    if state.drafting:
        state.drafts += predicted_n
        state.draft_tokens += drafted
        state.accepted += accepted
    if state.engine == "llamacpp":
        timings = {
            "cache_n": 0,
            "prompt_n": prompt_n,
            "prompt_ms": prompt_n * 2.0,
            "prompt_per_token_ms": 2.0,
            "prompt_per_second": 500.0,
            "predicted_n": predicted_n,
            "predicted_ms": predicted_n * 1000.0 / state.decode_tps,
            "predicted_per_token_ms": 1000.0 / state.decode_tps,
            "predicted_per_second": state.decode_tps,
        }
        if state.drafting:
            timings["draft_n"] = drafted
            timings["draft_n_accepted"] = accepted
        if token_delay_s is not None:  # llama.cpp's definitions: t_gen spans n - 1 tokens after the first
            timings["predicted_ms"] = predicted_n * token_delay_s * 1000.0
            timings["predicted_per_second"] = (predicted_n - 1) / (predicted_n * token_delay_s)
        data["timings"] = timings
    elif state.engine == "vllm" and state.drafting:
        data["metrics"] = {
            "speculative_decoding": {
                "num_spec_steps": predicted_n,
                "num_draft_tokens": drafted,
                "num_accepted_draft_tokens": accepted,
                "mean_acceptance_length": 1 + accepted / predicted_n,
                "draft_acceptance_rate": accepted / drafted,
            }
        }
    elif state.engine == "sglang" and state.drafting and body.get("return_spec_tokens_details"):
        data["sglext"] = {
            "spec_tokens_details": {
                "spec_verify_ct": predicted_n,
                "spec_num_proposed_drafts": drafted,
                "spec_num_correct_drafts": accepted,
                "spec_accept_length": 1 + accepted / predicted_n,
                "spec_accept_rate": accepted / drafted,
            }
        }
    return data


def metrics_text(state: FakeState) -> str:
    """Prometheus text for the state's engine."""
    if state.engine == "llamacpp":
        prefix = "llamacpp:spec_decode_"
        lines = [
            f"# TYPE {prefix}num_drafts_total counter",
            f"{prefix}num_drafts_total {state.drafts}",
            f"{prefix}num_draft_tokens_total {state.draft_tokens}",
            f"{prefix}num_accepted_tokens_total {state.accepted}",
            f'{prefix}num_accepted_tokens_per_pos_total{{position="0"}} {state.accepted // 2}',
            f'{prefix}num_accepted_tokens_per_pos_total{{position="1"}} {state.accepted - state.accepted // 2}',
        ]
    elif state.engine == "vllm":
        prefix = "vllm:spec_decode_"
        lines = [
            f'{prefix}num_drafts_total{{model_name="fake"}} {state.drafts}',
            f'{prefix}num_draft_tokens_total{{model_name="fake"}} {state.draft_tokens}',
            f'{prefix}num_accepted_tokens_total{{model_name="fake"}} {state.accepted}',
        ]
    elif state.engine == "sglang":
        lines = ["sglang:spec_accept_length 3.5", "sglang:spec_accept_rate 0.62"]
    elif state.engine == "trtllm":
        lines = ["trtllm:spec_accept_length 2.5", "trtllm:spec_accept_rate 0.5"]
    else:
        return ""
    return "\n".join(lines) + "\n" + state.extra_metrics


class LoopbackServer:
    """An aiohttp app on 127.0.0.1 (a free port) in a background thread; a subclass adds its routes (`routes`)."""

    def __init__(self) -> None:
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def routes(self, app: web.Application) -> None:
        """Add the server's routes to `app`."""
        raise NotImplementedError

    def start(self) -> None:
        """Serve until `stop`."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    async def _start(self) -> None:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        """Stop serving and end the thread."""
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


class FakeServer(LoopbackServer):
    """Runs the fake app on 127.0.0.1 in a background thread."""

    def __init__(self, state: FakeState) -> None:
        super().__init__()
        self.state = state

    def routes(self, app: web.Application) -> None:
        """The OpenAI-compatible and llama.cpp routes the fake serves."""
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._chat)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/props", self._props)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/tokenize", self._tokenize)

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        if self.state.engine == "openai":
            return web.Response(status=404)
        if self.state.on_metrics is not None:
            self.state.on_metrics(self.state)
        return web.Response(text=metrics_text(self.state))

    async def _props(self, request: web.Request) -> web.StreamResponse:
        if self.state.engine != "llamacpp":
            return web.Response(status=404)
        return web.json_response({"model_path": "/models/fake.gguf", "build_info": "fake", "chat_template": "x"})

    async def _tokenize(self, request: web.Request) -> web.StreamResponse:
        if self.state.engine != "llamacpp":
            return web.Response(status=404)
        body = await request.json()
        self.state.tokenized += 1
        return web.json_response({"tokens": list(range(len(body["content"].split())))})

    async def _models(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"object": "list", "data": [{"id": "fake"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        index = len(self.state.requests)
        self.state.requests.append(body)
        self.state.headers.append(dict(request.headers))
        if self.state.delay_s:
            await asyncio.sleep(self.state.delay_s)
        fault = self.state.fault(index, body)
        if fault is not None:
            return await self._fault(request, fault, body)
        if self.state.service_s is not None:
            await self._serve_slot(index)
        if self.state.gap_service_s is not None:  # by the gap between conversations; later turns take as long
            messages = body.get("messages") or [{"content": body.get("prompt", "")}]
            conversation = messages[0]["content"]
            if len(messages) == 1 or conversation not in self.state.conversation_s:
                now = asyncio.get_running_loop().time()
                gap = math.inf if self.state.last_arrival is None else now - self.state.last_arrival
                self.state.last_arrival = now
                self.state.conversation_s[conversation] = self.state.gap_service_s(gap)
            await asyncio.sleep(self.state.conversation_s[conversation])
        token_delay = None
        self.state.in_flight += 1
        try:
            if self.state.schedule is not None:
                speed = self.state.speed
                if self.state.load_speed is not None:
                    await asyncio.sleep(0.005)  # let the requests of a lock-step batch arrive before the load is read
                    speed *= self.state.load_speed(self.state.in_flight)
                token_delay = self.state.schedule.next_delay() / speed
            data = completion(self.state, body, token_delay)
            if token_delay is not None:
                await asyncio.sleep(data["usage"]["completion_tokens"] * token_delay)
        finally:
            self.state.in_flight -= 1
        if not body.get("stream"):
            return web.json_response(data)
        return await self._stream(request, data)

    async def _serve_slot(self, index: int) -> None:
        """Hold one of `capacity` slots (unbounded without it) for the request's known service time."""
        assert self.state.service_s is not None
        if self.state.capacity is None:
            await asyncio.sleep(self.state.service_s(index))
            return
        if self.state._slots is None:
            self.state._slots = asyncio.Semaphore(self.state.capacity)
        async with self.state._slots:
            await asyncio.sleep(self.state.service_s(index))

    async def _stream(self, request: web.Request, data: dict[str, Any], *, done: bool = True) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        words = data["choices"][0]["message"]["content"].split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await asyncio.sleep(0.002)
        final = {k: v for k, v in data.items() if k != "choices"}
        final["choices"] = [{"index": 0, "delta": {}, "finish_reason": "length"}]
        await response.write(f"data: {json.dumps(final)}\n\n".encode())
        if done:
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _fault(self, request: web.Request, fault: str, body: dict[str, Any]) -> web.StreamResponse:
        if fault == "http_500":
            return web.Response(status=500, text="internal error")
        if fault == "echo_auth":  # a server that echoes the request headers in its 401 body
            echoed = {"Authorization": request.headers.get("Authorization", "")}
            return web.Response(status=401, text=f"unauthorized: {json.dumps(echoed)}\nseen header Authorization: "
                                f"{request.headers.get('Authorization', '')}")
        if fault.startswith("bigbody_"):  # bigbody_<bytes>: an answer whose content is that many bytes
            data = completion(self.state, body)
            data["choices"][0]["message"]["content"] = "x" * int(fault[8:])
            return web.json_response(data)
        if fault == "http_400":
            return web.Response(status=400, text="bad request")
        if fault == "http_429":
            return web.Response(status=429, text="slow down", headers={"Retry-After": "0"})
        if fault == "invalid_json":
            return web.Response(text='{"choices": [', content_type="application/json")
        if fault == "huge_int":
            return web.Response(text='{"choices": [], "usage": {"prompt_tokens": ' + "9" * 5000 + "}}",
                                content_type="application/json")
        if fault == "missing_fields":
            return web.json_response({"id": "x", "usage": {}})
        if fault == "nan_timings":
            data = completion(self.state, body)
            text = json.dumps(data).replace('"predicted_per_second": 50.0', '"predicted_per_second": NaN')
            return web.Response(text=text, content_type="application/json")
        if fault == "negative_timings":
            data = completion(self.state, body)
            data["timings"]["predicted_ms"] = -5.0
            return web.json_response(data)
        if fault == "absurd_timings":
            data = completion(self.state, body)
            data["timings"]["predicted_per_second"] = 1e12
            return web.json_response(data)
        if fault == "slow":
            await asyncio.sleep(5)
            return web.json_response(completion(self.state, body))
        if fault == "reset_after_read":
            import socket
            import struct

            await asyncio.sleep(0.2)
            assert request.transport is not None
            sock = request.transport.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST
            request.transport.abort()
            return web.Response(status=500)
        if fault == "disconnect":
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
        if fault == "no_done":
            return await self._stream(request, completion(self.state, body), done=False)
        if fault == "midstream_disconnect":
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            chunk = {"choices": [{"index": 0, "delta": {"content": "partial"}, "finish_reason": None}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            assert request.transport is not None
            request.transport.close()
            return response
        raise AssertionError(f"unknown fault {fault}")


RawHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]


async def read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes]:
    """Read one HTTP/1.1 request: (method, path, headers with lower-case names, body)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return method, path, headers, body


class RawServer:
    """A raw asyncio socket server on 127.0.0.1 in a background thread: `handler` owns each connection."""

    def __init__(self, handler: RawHandler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.port = 0
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def __enter__(self) -> RawServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc_info: object) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


def http_response(status: int, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    """The bytes of a complete HTTP/1.1 response (Connection: close)."""
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
