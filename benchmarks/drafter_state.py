"""What state each embedded llama.cpp drafter keeps across requests, and what clears it (docs/traffic.md).

Run: .venv/bin/python benchmarks/drafter_state.py [MODE ...]   (default: ngram-mod ngram-simple draft baseline)
Per mode, one embedded server with 2 slots (SmolLM2-135M, temperature 0, 64 tokens): the same prompt three
times, another prompt, the first again on the other slot, after erasing every slot, with the prompt cache on
(twice), and after a restart. Prints draft_n / draft_n_accepted / cache_n per request.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from typing import Any

from bench.server import EmbeddedServer, ServerConfig

LIST_PROMPT = ("Repeat this list exactly, one item per line: apples, bread, candles, dates, eggs, figs, grapes, "
               "honey, ink, jam, kale, lemons, milk, nuts, oats, pears.")
OTHER_PROMPT = "Write three sentences about the history of the bicycle."


def _post(url: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, {"error": exc.read().decode(errors="replace")[:120]}


def _ask(url: str, prompt: str, *, slot: int = 0, cache_prompt: bool = False) -> str:
    _, data = _post(url, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": prompt}], "max_tokens": 64, "temperature": 0,
        "cache_prompt": cache_prompt, "id_slot": slot})
    timings = data.get("timings", {})
    return f"drafted {timings.get('draft_n', 0):3d}  accepted {timings.get('draft_n_accepted', 0):3d}  " \
           f"cache_n {timings.get('cache_n', 0):3d}"


def probe(mode: str) -> None:
    """Print what one mode's drafter and prompt cache keep across requests."""
    server = EmbeddedServer(ServerConfig(mode=mode, n_parallel=2, ctx_size=2048))
    with server:
        url = server.url
        for repeat in range(3):
            print(f"{mode:12s} list prompt, repeat {repeat}, slot 0      {_ask(url, LIST_PROMPT)}")
        print(f"{mode:12s} other prompt, slot 0               {_ask(url, OTHER_PROMPT)}")
        print(f"{mode:12s} list prompt, slot 1                {_ask(url, LIST_PROMPT, slot=1)}")
        erased = [_post(url, f"/slots/{slot}?action=erase", {})[0] for slot in (0, 1)]
        print(f"{mode:12s} list prompt after erase {erased}    {_ask(url, LIST_PROMPT)}")
        for turn in range(2):
            print(f"{mode:12s} list prompt, cache_prompt on, #{turn}   {_ask(url, LIST_PROMPT, cache_prompt=True)}")
        server.restart()
        print(f"{mode:12s} list prompt after restart          {_ask(server.url, LIST_PROMPT)}")


if __name__ == "__main__":
    for name in sys.argv[1:] or ["ngram-mod", "ngram-simple", "draft", "baseline"]:
        probe(name)
