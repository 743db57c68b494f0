"""Metric derivation from a sample's raw facts: per-chunk token counts, per-token gaps, server-side rates."""

from __future__ import annotations

from bench.engines import TurnStats


def chunk_token_counts(
    evidence: list[tuple[str, int] | None], chars: list[int], total: int
) -> tuple[list[int], str | None]:
    """Tokens each content chunk carried and how that was known.

    From the chunks themselves when every content chunk says (per-chunk `usage` deltas, `token_ids` or
    `logprobs` entries: the source is that name); otherwise the response's final token count
    (usage/timings) spread over the chunks in proportion to their characters, at least one each while
    there are enough tokens ("spread"); with no count at all, one token per chunk ("assumed").
    """
    if not chars:
        return [], None
    if all(item is not None for item in evidence):
        kinds = {item[0] for item in evidence if item is not None}
        counts = [max(0, item[1]) for item in evidence if item is not None]
        return counts, "+".join(sorted(kinds))
    if total <= 0:
        return [1] * len(chars), "assumed"
    return _spread(total, chars), "spread"


def _spread(total: int, chars: list[int]) -> list[int]:
    """`total` tokens over chunks in proportion to their characters (largest remainder; >= 1 each if possible)."""
    floor_each = 1 if total >= len(chars) else 0
    rest = total - floor_each * len(chars)
    weight = sum(chars)
    shares = [rest * size / weight for size in chars] if weight else [rest / len(chars)] * len(chars)
    counts = [floor_each + int(share) for share in shares]
    missing = total - sum(counts)
    if missing:
        order = sorted(range(len(chars)), key=lambda index: int(shares[index]) - shares[index])
        for index in order[:missing]:
            counts[index] += 1
    return counts


def per_token_itl(itl: list[float], counts: list[int]) -> list[float]:
    """Each chunk's gap (from the previous token-carrying chunk) spread evenly over the tokens it carried.

    The first chunk's tokens are not in it (they are the time to first token); a chunk that carried no
    token adds its gap to the next one's.
    """
    if len(counts) != len(itl) + 1:
        return []
    if counts.count(1) == len(counts):
        return list(itl)  # a token per chunk: each gap is its token's
    out: list[float] = []
    carried = 0.0
    for gap, tokens in zip(itl, counts[1:], strict=True):
        carried += gap
        if tokens > 0:
            share = carried / tokens
            out.extend([share] * tokens)
            carried = 0.0
    return out


def server_rates(stats: list[TurnStats]) -> tuple[float | None, float | None]:
    """llama.cpp's own definitions over a sample's turns: (decode t/s, prompt t/s).

    Decode: sum over turns of (n - 1) generated tokens over the summed generation time (the first token of each
    turn comes with its prompt evaluation, as in llama.cpp's per-turn `predicted_per_second`). Prompt: the
    uncached prompt tokens (prompt tokens minus `cache_n`) over the summed prompt time. None when a turn lacks
    the server's timings.
    """
    decode = prompt = None
    if all(s.predicted_ms for s in stats):
        decoded = sum(max(0, s.completion_tokens - 1) for s in stats)
        decode = decoded * 1000.0 / sum(s.predicted_ms or 0.0 for s in stats) if decoded else None
    if all(s.prompt_ms for s in stats):
        evaluated = sum(max(0, s.prompt_tokens - (s.cache_n or 0)) for s in stats)
        prompt = evaluated * 1000.0 / sum(s.prompt_ms or 0.0 for s in stats) if evaluated else None
    return decode, prompt
