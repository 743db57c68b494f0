"""Run configuration: the settings of one run, their validation and the server URL checks."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING
from urllib.parse import urlparse, urlsplit

from bench._errors import BenchError
from bench._redact import SENSITIVE_HEADER, key_secrets, masked_by_key, redact, redact_url, url_secrets
from bench._types import JsonMapping, JsonObject, JsonValue
from bench.engines import ENGINE_NAMES
from bench.records import REASONING_SETTINGS, SettingValue, check_limits, default
from bench.runner._arrivals import ARRIVAL_PROCESSES
from bench.runner._limits import checked_number
from bench.runner._loops import choose_loop
from bench.runner._settings import RunSettings

if TYPE_CHECKING:
    from bench.server import ServerRequest

ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/models")
"""Endpoint paths that `--url` may carry by mistake; the base URL is what precedes them."""
RESERVED_FIELDS = ("messages", "prompt", "stream", "stream_options", "max_tokens", "max_completion_tokens", "n")
"""Request fields the harness owns: `--extra-inputs` cannot set them (nor `model` when --model is given)."""


def normalize_base_url(url: str) -> str:
    """`localhost:8080` or `http://host:8080/v1/` -> `http://host:8080/v1` (scheme and /v1 optional)."""
    url = url.strip().rstrip("/")
    if not url:
        raise BenchError("--url cannot be empty")
    if "://" not in url:
        url = "http://" + url
    try:
        parsed = urlparse(url)
        parsed.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise BenchError(f"invalid --url {redact_url(url)}: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise BenchError(f"invalid --url: {redact_url(url)}")
    if parsed.query or parsed.fragment:
        raise BenchError(f"invalid --url {redact_url(url)}: give the server's base URL, without ?query or #fragment")
    path = parsed.path.rstrip("/")
    for endpoint in ENDPOINT_SUFFIXES:  # a full endpoint URL was given: keep its base
        if path.endswith(endpoint):
            path = path[: -len(endpoint)]
            break
    if not path.endswith("/v1"):
        path = path + "/v1"
    return f"{parsed.scheme}://{parsed.netloc}{path}"


def server_root(base_url: str) -> str:
    """The server root (for /metrics, /props) of a `.../v1` base URL."""
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


@dataclass(frozen=True)
class RunConfig(RunSettings):
    """Everything that defines a run: the run settings plus its endpoint and run-only fields; all but the secrets
    are written to the run file.

    Each field's default, help text, lower limit and identity membership are declared once, in
    `bench.records`' settings (`setting(key)`); the secrets and the client's event loop are not recorded.
    """

    url: str = default("url")
    label: str | None = default("label")
    per_sample_metrics: bool = default("per_sample_metrics")
    tags: Mapping[str, str] = field(default_factory=lambda: default("tags"))
    trace: str | None = default("trace")
    workers: int = default("workers")
    workers_auto: str | None = default("workers_auto")
    loop: str | None = None

    @classmethod
    def from_settings(cls, settings: RunSettings, **own: SettingValue) -> RunConfig:
        """A run's config from the run settings and its own fields (`url`, `label`, `tags`, ...)."""
        return cls.from_values(settings.values(), **own)

    def settings(self) -> RunSettings:
        """The run settings this config holds."""
        return RunSettings.from_values(RunSettings.values(self))

    @property
    def open_loop(self) -> bool:
        """Whether requests arrive on a schedule (a rate or a trace) instead of from a closed loop."""
        return self.request_rate is not None or self.trace is not None

    def validate(self) -> None:
        """Refuse impossible settings with a one-line BenchError."""
        check_limits({key: value for key, value in vars(self).items() if key not in ("workers", "timeout")})
        checked_number("--timeout", self.timeout)
        if self.engine not in ENGINE_NAMES:
            raise BenchError(f"unknown --engine {self.engine!r}; available: {', '.join(ENGINE_NAMES)}")
        if self.api not in ("chat", "completions"):
            raise BenchError(f"unknown --api {self.api!r}; available: chat, completions")
        if self.reasoning not in REASONING_SETTINGS:
            raise BenchError(f"unknown --reasoning {self.reasoning!r}; available: {', '.join(REASONING_SETTINGS)}")
        self._validate_workers()
        choose_loop(self.loop)
        owned = [key for key in self.extra_inputs if key in RESERVED_FIELDS or (key == "model" and self.model)]
        if owned:
            raise BenchError(
                f"--extra-inputs cannot set {', '.join(sorted(owned))}: the harness sets "
                "(use --osl for max_tokens, --stream, --api, --model)"
            )
        for url in self.urls():  # before anything else parses them
            normalize_base_url(url)
        self._validate_open_loop()
        self._validate_headers()

    def _validate_workers(self) -> None:
        """Each worker needs a request in flight: at most --concurrency workers (an open loop: its cap, if any)."""
        if self.open_loop:
            if self.workers < 1 or (self.max_concurrency is not None and self.workers > self.max_concurrency):
                raise BenchError(f"--workers must be between 1 and --max-concurrency ({self.max_concurrency}); "
                                 f"got {self.workers}")
        elif self.workers < 1 or self.workers > self.concurrency:
            raise BenchError(f"--workers must be between 1 and --concurrency ({self.concurrency}); got {self.workers}")

    def _validate_open_loop(self) -> None:
        """Refuse open-loop settings that cannot go together or mean nothing without a schedule."""
        if self.request_rate is not None and self.trace is not None:
            raise BenchError("--request-rate and --trace both set the arrivals: give one")
        if self.request_rate is not None:
            checked_number("--request-rate", self.request_rate)
        if self.arrival not in ARRIVAL_PROCESSES:
            raise BenchError(f"unknown --arrival {self.arrival!r}; available: {', '.join(ARRIVAL_PROCESSES)}")
        checked_number("--burstiness", self.burstiness)
        if not self.open_loop and (self.max_concurrency is not None or self.burstiness != 1.0
                                   or self.arrival != "poisson"):
            raise BenchError("--arrival, --burstiness and --max-concurrency shape an open loop: "
                             "give --request-rate or --trace")
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise BenchError("--burstiness is the gamma shape: use it with --arrival gamma (poisson is burstiness 1)")

    def _validate_headers(self) -> None:
        """Refuse header names/values and keys that would break (or smuggle into) the HTTP request."""
        for name, value in self.headers.items():
            if not name or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
                raise BenchError(f"--header name {redact(name)!r} is not a valid HTTP header name")
            if any((ord(char) < 32 and char != "\t") or ord(char) == 127 for char in value):
                raise BenchError(f"--header {name}: the value contains a line break or control character")
        if self.api_key is not None and any(ord(char) < 32 or ord(char) == 127 for char in self.api_key):
            raise BenchError("--api-key (or $OPENAI_API_KEY) contains a line break or control character")
        with_userinfo = [url for url in self.urls() if "@" in urlsplit(url if "://" in url else "http://" + url).netloc]
        has_auth = self.api_key or any(name.lower() == "authorization" for name in self.headers)
        if with_userinfo and has_auth:
            raise BenchError(
                "--url carries credentials (user:password@) and --api-key or an Authorization header is given; "
                "use one of them"
            )

    def secrets(self) -> list[str]:
        """Every secret of the config (API key, URL passwords, sensitive header values), for redaction."""
        found: list[str] = [self.api_key or ""]
        for url in self.urls():
            found += url_secrets(url)
        for name, value in self.headers.items():
            if SENSITIVE_HEADER.match(name):
                found.append(value)
                found.append(value.split(None, 1)[-1])  # the token of "Bearer <token>"
        found += key_secrets(self.extra_inputs) + key_secrets(self.chat_template_kwargs or {})
        return [value for value in found if value]

    def request_headers(self) -> dict[str, str]:
        """HTTP headers of every request: `--header`s and the bearer token."""
        headers = dict(self.headers)
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def urls(self) -> list[str]:
        """The server URLs (a comma-separated `--url` spreads requests round-robin)."""
        return [part.strip() for part in self.url.split(",") if part.strip()] or [self.url]

    def recorded(self) -> JsonObject:
        """The config as written to the run file: the reference's keys plus speedbench's, no secrets."""
        data: JsonObject = asdict(self)
        data.pop("api_key")
        data.pop("loop")  # the client's environment, recorded under `machine.event_loop`
        data["url"] = redact_url(self.url)
        data["headers"] = list[JsonValue](sorted(self.headers))
        data["extra_inputs"] = masked_by_key(dict(self.extra_inputs))
        data["tags"] = dict(self.tags)
        if self.chat_template_kwargs is not None:
            data["chat_template_kwargs"] = masked_by_key(dict(self.chat_template_kwargs))
        return data


@dataclass(frozen=True)
class Arm:
    """One arm of a run: its name, its endpoint and settings, the request overrides, the server to start, its file."""

    name: str
    config: RunConfig
    """The endpoint (`url`) and every setting of the arm's requests."""
    output: str | os.PathLike[str] | None = None
    overrides: JsonMapping = field(default_factory=dict)
    """Request fields this arm sends on top of `config.extra_inputs` (a draft length, say)."""
    server: ServerRequest | None = None
    """An embedded server to start for this arm: its URL replaces `config.url` and its state is `restart`."""
    server_state: str | None = None
    """How the server's state was set before the run (recorded on every result)."""

    def settings(self) -> RunConfig:
        """The arm's run settings with its request overrides applied."""
        if not self.overrides:
            return self.config
        return replace(self.config, extra_inputs={**self.config.extra_inputs, **self.overrides})
