"""How much of the default model's answer to each grounded prompt reuses the prompt's own text (categories/README.md).

Run: .venv/bin/python benchmarks/grounded_reuse.py [--osl 128] [--threads 2] [--write-order]
One embedded baseline server (SmolLM2-135M, temperature 0, no speculation), every grounded sample turn by turn.
A turn's reuse is the share of its answer's characters that lie in runs of 60 or more characters also found in
the conversation so far (difflib's matching blocks); a sample's reuse is the smallest of its turns'. Prints one
line per sample. `--write-order` rewrites each `categories/grounded/<category>.jsonl` with its samples ordered
by reuse, highest first (ties keep their order), and numbers their ids by position, so `--limit N` and the
rounds of `--until-decided` take the samples whose answers reuse the input most. The measure needs no
speculation and no timing: only what the model answers.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

from bench.server import EmbeddedServer, ServerConfig

GROUNDED = Path(__file__).resolve().parent.parent / "categories" / "grounded"
MIN_RUN = 60  # characters: a shorter common run is a phrase, not a copied passage


def reuse(context: str, answer: str) -> float:
    """Share of the answer's characters inside runs of MIN_RUN or more characters that the context also holds."""
    matcher = difflib.SequenceMatcher(None, context, answer, autojunk=False)
    copied = sum(block.size for block in matcher.get_matching_blocks() if block.size >= MIN_RUN)
    return copied / max(len(answer), 1)


def _answer(url: str, messages: list[dict[str, str]], osl: int) -> str:
    body = {"messages": messages, "max_tokens": osl, "temperature": 0, "cache_prompt": False}
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return str(json.loads(response.read())["choices"][0]["message"]["content"])


def sample_reuse(url: str, sample: dict[str, Any], osl: int) -> list[float]:
    """Each turn's reuse of the conversation before its answer."""
    messages: list[dict[str, str]] = []
    shares = []
    for turn in sample["turns"]:
        messages.append({"role": "user", "content": turn})
        answer = _answer(url, messages, osl)
        shares.append(reuse("\n".join(message["content"] for message in messages), answer))
        messages.append({"role": "assistant", "content": answer})
    return shares


def write_order(path: Path, lines: list[str]) -> None:
    """Write a category file's rows in the given order, numbering their ids by position."""
    rows = []
    for number, line in enumerate(lines, start=1):
        row = json.loads(line)
        row["question_id"] = f"grounded-{row['category']}-{number:03d}"
        rows.append(json.dumps(row, ensure_ascii=False) + "\n")
    path.write_text("".join(rows), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Measure every grounded sample's reuse; optionally reorder the files by it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--osl", type=int, default=128, help="max_tokens per turn (default: 128, as make bench)")
    parser.add_argument("--threads", type=int, default=2, help="server CPU threads (default: 2)")
    parser.add_argument("--write-order", action="store_true", help="reorder each category file by reuse")
    args = parser.parse_args(argv)
    for flag, value in (("--osl", args.osl), ("--threads", args.threads)):
        if value < 1:
            parser.error(f"{flag} must be >= 1 (got {value})")
    with EmbeddedServer(ServerConfig(mode="baseline", n_threads=args.threads)) as server:
        for path in sorted(GROUNDED.glob("*.jsonl")):
            lines = path.read_text(encoding="utf-8").splitlines()
            scored = []
            for position, line in enumerate(lines):
                sample = json.loads(line)
                shares = sample_reuse(server.url, sample, args.osl)
                print(f"{sample['question_id']:32s} reuse {min(shares):.2f}  turns " +
                      " ".join(f"{share:.2f}" for share in shares), flush=True)
                scored.append((-min(shares), position, line))
            if args.write_order:
                write_order(path, [line for *_, line in sorted(scored)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
