"""A llama.cpp-shaped reasoning server of known truth: thinking then an answer, one streamed chunk per token, the
tokens of one verification step sent together after the step's gap.

Each request thinks `thinking` tokens (`reasoning_content`) then answers `answer` tokens (`content`), cut at
`max_tokens` (thinking first: a small budget leaves the answer empty, finish_reason `length`). Verification steps
accept a seeded number of tokens with mean `steps["t"]` inside thinking and `steps["a"]` inside the answer; each
step takes `step_s` seconds. The truth is recorded per request: tokens and steps per segment, and each segment's
decode span. `chat_template_kwargs.enable_thinking` false turns thinking off; `reasoning_tokens` adds
`usage.completion_tokens_details.reasoning_tokens`; `diverge_at` changes the thinking text from that token on.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakeserver import LoopbackServer


@dataclass
class ThinkingTruth:
    """What the server does, and per request what it did (its truth)."""

    thinking: int = 60
    answer: int = 20
    steps: dict[str, float] = field(default_factory=lambda: {"t": 1.0, "a": 1.0})
    step_s: float = 0.004
    reasoning_tokens: bool = False
    diverge_at: int | None = None
    seed: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    done: list[dict[str, Any]] = field(default_factory=list)
    """Per answered request: tokens and steps per segment ("t", "a")."""

    def step_sizes(self, kind: str, tokens: int, rng: random.Random) -> list[int]:
        """Tokens per step over a segment: 1 + a binomial draw whose mean makes the segment's mean `steps[kind]`."""
        mean = self.steps[kind]
        extra_max = max(0, round(2 * (mean - 1)))
        p = (mean - 1) / extra_max if extra_max else 0.0
        sizes, left = [], tokens
        while left > 0:
            size = min(left, 1 + sum(rng.random() < p for _ in range(extra_max)))
            sizes.append(size)
            left -= size
        return sizes


def _think_on(body: dict[str, Any]) -> bool:
    kwargs = body.get("chat_template_kwargs")
    return not (isinstance(kwargs, dict) and kwargs.get("enable_thinking") is False)


class ThinkingServer(LoopbackServer):
    """The reasoning server on 127.0.0.1 in a background thread."""

    def __init__(self, truth: ThinkingTruth) -> None:
        """A server answering as `truth` says."""
        super().__init__()
        self.truth = truth

    def __enter__(self) -> ThinkingServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def routes(self, app: web.Application) -> None:
        """Chat completions (thinking then answer), metrics, props and tokenize."""
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/props", self._props)
        app.router.add_post("/tokenize", self._tokenize)

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text="llamacpp:prompt_tokens_total 0\n")

    async def _props(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"model_path": "/m/think.gguf", "build_info": "fake-thinking"})

    async def _tokenize(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        return web.json_response({"tokens": list(range(len(body["content"].split())))})

    def _tokens(self, body: dict[str, Any]) -> tuple[list[str], list[str]]:
        """The thinking and answer tokens of a request, cut at max_tokens (thinking first)."""
        prompt = json.dumps(body.get("messages"))
        thinking = [f" t{index}" for index in range(self.truth.thinking if _think_on(body) else 0)]
        if self.truth.diverge_at is not None:
            thinking[self.truth.diverge_at:] = [f" d{index}" for index in range(len(thinking) - self.truth.diverge_at)]
        answer = [f" a{index}-{len(prompt) % 7}" for index in range(self.truth.answer)]
        budget = int(body.get("max_tokens") or 1 << 20)
        return thinking[:budget], answer[:max(0, budget - len(thinking))]

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        truth = self.truth
        truth.requests.append(body)
        rng = random.Random(hash((truth.seed, len(truth.requests))))
        thinking, answer = self._tokens(body)
        steps = [("t", size) for size in truth.step_sizes("t", len(thinking), rng)] + [
            ("a", size) for size in truth.step_sizes("a", len(answer), rng)]
        finish = "stop" if len(answer) == truth.answer else "length"
        n = len(thinking) + len(answer)
        usage: dict[str, Any] = {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n}
        if truth.reasoning_tokens:
            usage["completion_tokens_details"] = {"reasoning_tokens": len(thinking)}
        drafted = sum(size for _, size in steps)  # every step drafts what it accepts plus one
        timings = {"prompt_n": 10, "prompt_ms": 1.0, "predicted_n": n, "predicted_ms": len(steps) * truth.step_s * 1e3,
                   "predicted_per_second": n / (len(steps) * truth.step_s) if steps else None,
                   "draft_n": drafted, "draft_n_accepted": drafted - len(steps)}
        truth.done.append({"t": (len(thinking), sum(kind == "t" for kind, _ in steps)),
                           "a": (len(answer), sum(kind == "a" for kind, _ in steps))})
        if not body.get("stream"):
            await asyncio.sleep(len(steps) * truth.step_s)
            message = {"role": "assistant", "content": "".join(answer), "reasoning_content": "".join(thinking)}
            return web.json_response({"choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                      "usage": usage, "timings": timings, "model": "think"})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        tokens = iter([("reasoning_content", text) for text in thinking] + [("content", text) for text in answer])
        for _, size in steps:
            await asyncio.sleep(truth.step_s)
            payload = b""
            for _ in range(size):
                key, text = next(tokens)
                chunk = {"choices": [{"index": 0, "delta": {key: text}, "finish_reason": None}]}
                payload += f"data: {json.dumps(chunk)}\n\n".encode()
            await response.write(payload)
        final = {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage, "timings": timings}
        await response.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
        await response.write_eof()
        return response
