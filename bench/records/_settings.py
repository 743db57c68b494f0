"""A run's settings, declared once: each one's default, help text, lower limit and place in the run's identity.

`RunConfig` (the runner) takes its defaults from here, the command line its defaults and help texts, a run's
identity (`RunIdentity`: resume and comparability checks) the settings marked as part of it, and `RecordedSettings`
reads a recorded `config` through the declared kinds. A setting's `identity` says how a difference counts:
`error` (two runs are not comparable), `warning` (shown beside a comparison), `resume` (differs on purpose
between compared arms: checked on resume only), None (not part of what a run measures).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from bench._errors import BenchError
from bench._types import JsonMapping, JsonValue

SettingValue: TypeAlias = "JsonValue | Mapping[str, JsonValue]"
"""A run setting's value: a number, text, flag or None, or a mapping (request fields, tags, headers)."""

ERROR = "error"
WARNING = "warning"
RESUME_ONLY = "resume"

DEFAULT_TIMEOUT_S = 600.0
"""Per-request timeout in seconds (`--timeout`)."""
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""Largest response body read and stored per request (`--max-response-bytes`)."""
MAX_IN_FLIGHT = 65_536
"""Most requests in flight (`--concurrency`, `--max-concurrency`, `--workers`): one connection each, and one
machine has one loopback port range of about this many."""
MAX_OUTPUT_TOKENS = 1 << 24
"""Largest `--osl` (max_tokens): beyond any model's context."""
MAX_COUNT = 1_000_000
"""Largest `--repeat`, `--warmup` and `--retries`: a count past it would hold the run's jobs or waits for ever."""
MAX_RESPONSE_BYTES = 1 << 30
"""Largest `--max-response-bytes` (1 GiB): a body is held in memory whole."""
_LARGEST = 1e15
"""A recorded number beyond +-this is no number a run was asked for (a hand-edited file): read as absent, as
the run metadata reads its numbers."""
SEED_HELP = ("seeds: --arrival-seed draws the open loop's arrival schedule, --order-seed the order in which "
             "compared arms take their turns (default: 0 each)")
"""The one help text of the two seeds."""


@dataclass(frozen=True)
class Setting:
    """One setting of a run: its `config` key, kind, default, help text, lower limit and identity membership."""

    key: str
    kind: str
    """int, float, text, bool, mapping or list: how a recorded value is read back."""
    default: SettingValue
    help: str
    identity: str | None = None
    minimum: float | None = None
    """The smallest value allowed (None: no limit); `above` makes it an exclusive one."""
    above: bool = False
    maximum: float | None = None
    """The largest value allowed (None: no limit): past it a run would exhaust ports, memory or the clock."""

    @property
    def flag(self) -> str:
        """The command-line option: `--max-response-bytes`."""
        return "--" + self.key.replace("_", "-")

    def read(self, value: JsonValue | JsonMapping, missing: SettingValue = None) -> SettingValue:
        """A recorded value read as this setting's kind; `missing` when it is absent or of another kind."""
        if self.kind in ("int", "float"):
            if isinstance(value, bool) or not isinstance(value, int | float) or not -_LARGEST < value < _LARGEST:
                return missing  # NaN fails the comparison too
            return int(value) if self.kind == "int" else float(value)
        if self.kind == "text":
            return value if isinstance(value, str) and value else missing
        if self.kind == "bool":
            return value is True if isinstance(value, bool) else missing
        if self.kind == "mapping":
            return dict(value) if isinstance(value, Mapping) else missing
        return value if value is not None else missing

    def check(self, value: SettingValue) -> None:
        """Refuse a value outside the limits with a one-line BenchError (`--osl must be >= 1 (got 0)`)."""
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            return
        shown = (f"{value:g}" if isinstance(value, float) or abs(value) < 10**15
                 else f"an integer of {len(str(abs(value)))} digits")
        if self.minimum is not None and (value < self.minimum or (self.above and value == self.minimum)):
            raise BenchError(f"{self.flag} must be {'>' if self.above else '>='} {self.minimum:g} (got {shown})")
        if self.maximum is not None and value > self.maximum:
            raise BenchError(f"{self.flag} must be <= {self.maximum:,.0f} (got {shown})")


SETTINGS: tuple[Setting, ...] = (
    Setting("bench", "text", "qualitative",
            "prompt set: qualitative or grounded (shipped), throughput_1k, ... (SPEED-Bench configs)", ERROR),
    Setting("dataset", "text", "categories",
            "'categories' (shipped), 'speed-bench' (hub), or a local .jsonl/.json/.parquet file", ERROR),
    Setting("osl", "int", 4096, "output sequence length, sent as max_tokens", ERROR, minimum=1,
            maximum=MAX_OUTPUT_TOKENS),
    Setting("concurrency", "int", 1, "requests in flight", ERROR, minimum=1, maximum=MAX_IN_FLIGHT),
    Setting("api", "text", "chat", "endpoint to call", ERROR),
    Setting("request_rate", "float", None,
            "open loop: requests arrive at R per second on a seeded schedule (default: closed loop)", ERROR),
    Setting("arrival", "text", "poisson", "arrival process of --request-rate (default: poisson)", ERROR),
    Setting("burstiness", "float", 1.0,
            "gamma shape with --arrival gamma: < 1 burstier, > 1 more regular (default: 1)", ERROR),
    Setting("max_concurrency", "int", None,
            "open loop: at most N requests in flight; a due request waits for a slot and its latency counts from "
            "its arrival (default: no cap)", ERROR, minimum=1, maximum=MAX_IN_FLIGHT),
    Setting("trace", "text", None, 'replay arrivals from JSONL lines {"offset_s": 0.5, "prompt_id": "id"} '
            "(prompt_id optional) (default: none)", ERROR),
    Setting("arrival_seed", "int", 0, SEED_HELP, WARNING),
    Setting("extra_inputs", "mapping", {"temperature": 0}, "extra request fields (JSON object)", WARNING),
    Setting("chat_template_kwargs", "mapping", None,
            "JSON object passed through as chat_template_kwargs, e.g. reasoning switches (default: none sent)",
            WARNING),
    Setting("reasoning", "text", "auto",
            "thinking of reasoning models: on, off, or auto (nothing sent: the server's default)", RESUME_ONLY),
    Setting("category", "text", "all", "'all' or a comma-separated list of categories", WARNING),
    Setting("limit", "int", None, "at most this many samples per category (default: every sample)", WARNING,
            minimum=1),
    Setting("repeat", "int", 1, "send every sample N times, interleaved", WARNING, minimum=1, maximum=MAX_COUNT),
    Setting("revision", "text", None, "hub dataset revision (default: the pinned one)", WARNING),
    Setting("stream", "bool", False, "stream responses: TTFT, ITL, client decode t/s", WARNING),
    Setting("warmup", "int", 0, "untimed requests sent first", WARNING, minimum=0, maximum=MAX_COUNT),
    Setting("logprobs", "bool", False,
            "ask for top-2 log-probabilities per token (near-tie margins for the lossless check)", WARNING),
    Setting("retries", "int", 0, "retry transport errors and 429s N times", WARNING, minimum=0, maximum=MAX_COUNT),
    Setting("timeout", "float", DEFAULT_TIMEOUT_S, "per-request timeout in seconds", WARNING, minimum=0, above=True),
    Setting("max_response_bytes", "int", DEFAULT_MAX_RESPONSE_BYTES,
            "largest response body read and stored per request (default 4 MiB); a larger one fails as too_large",
            WARNING, minimum=1024, maximum=MAX_RESPONSE_BYTES),
    Setting("url", "text", "localhost:8080",
            "server URL (default: localhost:8080); scheme and /v1 optional; repeat it to spread requests "
            "round-robin", RESUME_ONLY),
    Setting("model", "text", None, "model field sent in each request (default: none sent; the server picks)",
            RESUME_ONLY),
    Setting("engine", "text", "auto", "auto, llamacpp, vllm, sglang, trtllm or openai", RESUME_ONLY),
    Setting("tags", "mapping", {}, "what the pipeline records about the arm's server", RESUME_ONLY),
    Setting("label", "text", None, "a name for the run (default: none)"),
    Setting("per_sample_metrics", "bool", True, "read /metrics around each sample at concurrency 1"),
    Setting("workers", "int", 1, "client processes sharing the run", minimum=1, maximum=MAX_IN_FLIGHT),
    Setting("workers_auto", "text", None, "why --workers auto chose the count"),
    Setting("headers", "list", {}, "extra HTTP header K:V, repeatable (default: none); only their names are recorded"),
)
"""Every setting of a run; those with an identity in the order their differences are reported."""

_BY_KEY = {setting.key: setting for setting in SETTINGS}


def setting(key: str) -> Setting:
    """The declared setting `key`."""
    return _BY_KEY[key]


def default(key: str) -> Any:
    """The declared default of `key` (a fresh copy of a mapping): a value of the key's kind, so `Any` (the runner's
    dataclass field that takes it declares the kind)."""
    value = _BY_KEY[key].default
    return dict(value) if isinstance(value, Mapping) else value


IDENTITY: tuple[Setting, ...] = tuple(item for item in SETTINGS if item.identity is not None)
"""The settings of a run's identity, in the order differences are reported."""
COMPARED_AS_ERROR = tuple(item.key for item in IDENTITY if item.identity == ERROR)
"""Settings whose difference makes two runs not comparable."""
COMPARED_AS_WARNING = tuple(item.key for item in IDENTITY if item.identity == WARNING)
"""Settings whose difference between two compared runs is shown."""


def check_limits(values: Mapping[str, SettingValue]) -> None:
    """Refuse any declared setting under its lower limit, in declaration order."""
    for item in SETTINGS:
        if item.key in values:
            item.check(values[item.key])
