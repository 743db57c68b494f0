"""Reasoning models in run files: the thinking/answer split a sample records, and the upgrade to schema 7.

A sample of a reasoning model produces thinking (the server's `reasoning_content`) and an answer (`content`).
Schema 7 records per sample how many tokens each took and how that count was known (`thinking_source`), and,
when streamed, the time to the first answer token, each segment's decode rate and which streamed chunk was
thinking (`chunk_segments`: one letter per token-carrying chunk, `t` thinking, `a` answer). The run's
`config.reasoning` is the thinking switch its requests sent (`on`, `off`, `auto`: nothing sent).
"""

from __future__ import annotations

from bench._types import JsonMapping, JsonObject

THINKING_SCHEMA_VERSION = 7
"""The run-file version that adds the thinking/answer split (renumber here if another bump lands first)."""

REASONING_SETTINGS = ("on", "off", "auto")
"""`--reasoning`: thinking switched on, off, or left to the server (nothing sent)."""

SOURCE_USAGE = "usage"
"""The thinking count is the server's own: `usage.completion_tokens_details.reasoning_tokens`."""
SOURCE_STREAM = "stream"
"""Counted from the stream: the tokens of the chunks that carried thinking."""
SOURCE_TOKENIZE = "tokenize"
"""The thinking text tokenized through the server's tokenize endpoint."""
SOURCE_NONE = "none"
"""The sample has no thinking text: every output token is answer."""
THINKING_SOURCES = (SOURCE_USAGE, SOURCE_STREAM, SOURCE_TOKENIZE, SOURCE_NONE)

THINKING_CHUNK = "t"
ANSWER_CHUNK = "a"



def recorded_reasoning(config: JsonMapping) -> str:
    """A run's thinking switch as recorded (`config.reasoning`); `auto` for a file before schema 7 (none sent)."""
    value = config.get("reasoning")
    return value if isinstance(value, str) and value in REASONING_SETTINGS else "auto"


def upgraded_for_thinking(data: JsonObject) -> JsonObject:
    """A speedbench run file or journal header older than schema 7, readable as one: its requests sent no thinking
    switch (there was none), so its `config.reasoning` is `auto` (a resumed run's identity then matches)."""
    config = data.get("config")
    if isinstance(config, dict) and "reasoning" not in config:
        return {**data, "config": {**config, "reasoning": "auto"}}
    return data
