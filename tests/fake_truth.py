"""A llama.cpp-shaped server whose speculative truth is known: a chain drafter, per-category acceptance, a step
cost rising with the draft length and the load. Run as a command (`tune --base-cmd/--spec-cmd` start it):

    python tests/fake_truth.py --port P [--draft-max K] [--concurrency C] [--truth JSON]

The truth JSON: {"alpha": {category: P(next draft token accepted)}, "a": step cost intercept, "b": cost per drafted
token at concurrency 1, "load": exponent of the concurrency in b, "sigma": lognormal timing noise, "tokens": output
tokens per request}. A request's category is the `[cat=NAME]` tag in its first user turn. Each step drafts K
tokens and accepts a chain: P(at least i accepted) = alpha^i (capped at K); the step costs (a + b K C^load) baseline
tokens' time. `predicted_ms` reports the simulated generation time (no sleeping): speedbench's decode rates read it.
`true_speedup` gives the expected per-request speedup of a configuration, for tests.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import re
from typing import Any

DEFAULT_TRUTH: dict[str, Any] = {"alpha": {"code": 0.85, "math": 0.7, "chat": 0.1}, "a": 1.0, "b": 0.1, "load": 1.0,
                                 "sigma": 0.02, "tokens": 512}
BASE_TOKEN_MS = 10.0
_TAG = re.compile(r"\[cat=([A-Za-z0-9_-]+)\]")


def true_speedup(truth: dict[str, Any], category: str, draft_max: int, concurrency: int = 1) -> float:
    """The expected decode speedup of draft length K at concurrency C in a category (1.0 for K = 0)."""
    if draft_max == 0:
        return 1.0
    alpha = truth["alpha"][category]
    length = (1.0 - alpha ** (draft_max + 1)) / (1.0 - alpha)
    return length / step_cost(truth, draft_max, concurrency)


def step_cost(truth: dict[str, Any], draft_max: int, concurrency: int) -> float:
    """A verification step's time over a baseline token's: a + b K C^load."""
    return truth["a"] + truth["b"] * draft_max * concurrency ** truth["load"]


def _rng(*parts: Any) -> random.Random:
    return random.Random(int(hashlib.sha256(repr(parts).encode()).hexdigest()[:16], 16))


class Drafter:
    """The server's state: its configuration, the truth and the cumulative /metrics counters."""

    def __init__(self, truth: dict[str, Any], draft_max: int, concurrency: int) -> None:
        """A server with draft length `draft_max` (0: the baseline) at `concurrency` slots."""
        self.truth, self.draft_max, self.concurrency = truth, draft_max, concurrency
        self.drafts = self.draft_tokens = self.accepted = self.predicted = 0
        self.positions = [0] * max(draft_max, 1)

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """One chat completion: simulated steps, counters moved, timings reported."""
        messages = body.get("messages") or [{"content": ""}]
        prompt = str(messages[0].get("content", ""))
        match = _TAG.search(prompt)
        category = match.group(1) if match else next(iter(self.truth["alpha"]))
        tokens = min(int(body.get("max_tokens") or self.truth["tokens"]), int(self.truth["tokens"]))
        noise = _rng(prompt, self.draft_max, "time")
        sigma = float(self.truth["sigma"])
        base_ms = tokens * BASE_TOKEN_MS * math.exp(noise.gauss(0.0, sigma))
        timings: dict[str, Any] = {"cache_n": 0, "prompt_n": len(prompt.split()), "prompt_ms": 1.0,
                                   "prompt_per_second": 1000.0, "predicted_n": tokens}
        if self.draft_max == 0:
            predicted_ms = base_ms
        else:
            alpha = self.truth["alpha"][category]
            draws = _rng(prompt, self.draft_max, "accept")
            made = steps = accepted_total = 0
            while made < tokens:
                accepted = 0
                while accepted < self.draft_max and draws.random() < alpha:
                    accepted += 1
                for position in range(accepted):
                    self.positions[position] += 1
                steps += 1
                accepted_total += accepted
                made += accepted + 1
            tokens = made
            timings["predicted_n"] = tokens
            predicted_ms = (steps * step_cost(self.truth, self.draft_max, self.concurrency) * BASE_TOKEN_MS
                            * math.exp(noise.gauss(0.0, sigma)))
            self.drafts += steps
            self.draft_tokens += steps * self.draft_max
            self.accepted += accepted_total
            timings.update(draft_n=steps * self.draft_max, draft_n_accepted=accepted_total)
        self.predicted += tokens
        timings.update(predicted_ms=predicted_ms, predicted_per_token_ms=predicted_ms / tokens,
                       predicted_per_second=tokens * 1000.0 / predicted_ms)
        return {"id": "truth", "object": "chat.completion", "model": "truth",
                "choices": [{"index": 0, "finish_reason": "length",
                             "message": {"role": "assistant", "content": f"answer {category} " * 4}}],
                "usage": {"prompt_tokens": timings["prompt_n"], "completion_tokens": tokens,
                          "total_tokens": timings["prompt_n"] + tokens},
                "timings": timings}

    def metrics(self) -> str:
        """Prometheus text with llama.cpp's counter names."""
        prefix = "llamacpp:"
        lines = [f"{prefix}tokens_predicted_total {self.predicted}"]
        if self.draft_max:
            lines += [f"{prefix}spec_decode_num_drafts_total {self.drafts}",
                      f"{prefix}spec_decode_num_draft_tokens_total {self.draft_tokens}",
                      f"{prefix}spec_decode_num_accepted_tokens_total {self.accepted}"]
            lines += [f'{prefix}spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {count}'
                      for i, count in enumerate(self.positions)]
        return "\n".join(lines) + "\n"


def main() -> None:
    """Serve until killed."""
    from aiohttp import web

    parser = argparse.ArgumentParser(description="a llama.cpp-shaped server with a known speculative truth")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--draft-max", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--truth", default=json.dumps(DEFAULT_TRUTH))
    parser.add_argument("--ignored", default=None, help="accepted and ignored (a server deaf to a setting)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each completion waits before answering")
    args = parser.parse_args()
    drafter = Drafter(json.loads(args.truth), args.draft_max, args.concurrency)

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(args.delay)
        return web.json_response(drafter.answer(body))

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=drafter.metrics())

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "truth", "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
