"""A comparison job: the run settings, the two servers compared (each a URL, a command or embedded) and what the
comparison itself takes; `bench`, and each pair of `bench --config`, hold one."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from bench._constants import DEFAULT_THRESHOLD
from bench._errors import BenchError
from bench.prompts import PromptSet, load_prompts
from bench.runner import RUN_SETTING_NAMES, RunSettings

EMBEDDED_ENGINES = ("llamacpp", "vllm")
"""The engines a comparison can embed (`--engine auto` embeds llama.cpp)."""


@dataclass(frozen=True)
class ServerSide:
    """One side of a comparison: a running server's URL, a command that starts one, or neither (embedded)."""

    url: str | None = None
    command: str | None = None
    """A command template with `{port}` (and `{draft_max}`, `{api_key}`), started fresh per workload."""

    @property
    def embedded(self) -> bool:
        """Whether speedbench starts its embedded server for this side."""
        return self.url is None and self.command is None


@dataclass(frozen=True)
class ServerSettings:
    """How the servers speedbench starts are started: the speculative mode, the GGUFs, threads, a draft length,
    how long a command's server has to become ready."""

    spec: str = "ngram-mod"
    model: str | None = None
    """The GGUF the embedded server serves (`--server-model`; default: SmolLM2-135M)."""
    draft: str | None = None
    threads: int = 1
    draft_max: int | None = None
    """Fills `{draft_max}` of a speculative command (None: a command may not use it)."""
    ready_timeout: float = 120.0


@dataclass(frozen=True)
class ComparisonJob:
    """The run settings, both servers and the comparison's own fields: one baseline-against-speculative job."""

    settings: RunSettings = field(default_factory=RunSettings)
    base: ServerSide = field(default_factory=ServerSide)
    spec: ServerSide = field(default_factory=ServerSide)
    server: ServerSettings = field(default_factory=ServerSettings)
    results_dir: str = "results"
    label: str | None = None
    resume: str | None = None
    threshold: float = DEFAULT_THRESHOLD
    order_seed: int = 0
    """Seeds the order in which the arms take their turns."""
    workers: int | None = None
    """Client processes, each sending both arms' requests for its slice of the samples (None: auto)."""
    block_size: int | None = None
    """Requests per A/B block of an open-loop comparison (None: about 5 s of arrivals, 4-30 requests)."""
    slo: str | None = None
    """SLO targets (`ttft=0.5,e2e=20`): adds paired attainment and goodput."""
    until_decided: bool = False

    @classmethod
    def build(cls, **values: Any) -> ComparisonJob:
        """A job from flat names: run settings, `base_url`/`base_cmd`/`spec_url`/`spec_cmd`, the server settings
        (`server_model`, `spec`, `draft`, `threads`, `draft_max`, `ready_timeout`) and the job's own fields."""
        settings = RunSettings.from_values({key: values.pop(key) for key in list(values) if key in RUN_SETTING_NAMES})
        base = ServerSide(values.pop("base_url", None), values.pop("base_cmd", None))
        spec = ServerSide(values.pop("spec_url", None), values.pop("spec_cmd", None))
        server_values = {"model": values.pop("server_model", None)}
        for name in ("spec", "draft", "threads", "draft_max", "ready_timeout"):
            if name in values:
                server_values[name] = values.pop(name)
        return cls(settings=settings, base=base, spec=spec, server=ServerSettings(**server_values), **values)

    @property
    def embedded_engine(self) -> str:
        """The engine of the servers speedbench embeds: `--engine`, llama.cpp for `auto`."""
        return "llamacpp" if self.settings.engine == "auto" else self.settings.engine

    @property
    def slots(self) -> int:
        """Server slots: the cap of an open loop, else the concurrency."""
        return self.settings.max_concurrency or self.settings.concurrency

    def sides(self) -> tuple[tuple[str, ServerSide, str], ...]:
        """(side name, its server, its mode) for the baseline and the speculative side."""
        return (("baseline", self.base, "baseline"), ("speculative", self.spec, self.server.spec))

    def check_sides(self) -> None:
        """Refuse a side given both a URL and a command, and an engine that cannot be embedded where needed."""
        for name, side, _ in self.sides():
            flag = "base" if name == "baseline" else "spec"
            if side.url is not None and side.command is not None:
                raise BenchError(f"--{flag}-url and --{flag}-cmd both give the {name} server: give one")
        if any(side.embedded for _, side, _ in self.sides()) and self.embedded_engine not in EMBEDDED_ENGINES:
            raise BenchError(f"--engine {self.settings.engine}: speedbench embeds only "
                             f"{', '.join(EMBEDDED_ENGINES)} (give --base-url/--spec-url or --base-cmd/--spec-cmd)")


def job_field_names() -> set[str]:
    """The flat names `ComparisonJob.build` takes."""
    own = {item.name for item in fields(ComparisonJob)} - {"settings", "base", "spec", "server"}
    return (set(RUN_SETTING_NAMES) | own | {"base_url", "base_cmd", "spec_url", "spec_cmd", "server_model", "spec",
                                            "draft", "threads", "draft_max", "ready_timeout"})



def settings_prompts(settings: RunSettings, *, bench: str | None = None, limit: int | None = None) -> PromptSet:
    """The prompt set the run settings name: dataset, revision, prompt set, categories, limit (`bench` and `limit`
    given win)."""
    bench = settings.bench if bench is None else bench
    limit = settings.limit if limit is None else limit
    if settings.revision is None:
        return load_prompts(settings.dataset, bench=bench, category=settings.category, limit=limit)
    return load_prompts(settings.dataset, bench=bench, category=settings.category, limit=limit,
                        revision=settings.revision)


def most_rounds(settings: RunSettings, prompts: PromptSet) -> int:
    """How many rounds of one sample per category sampling until decided may run: `--limit`, else the largest
    category's sample count."""
    if settings.limit is not None:
        return settings.limit
    sizes: dict[str, int] = {}
    for sample in prompts.samples:
        sizes[sample.category] = sizes.get(sample.category, 0) + 1
    return max(sizes.values(), default=1)
