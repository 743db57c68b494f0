"""Child-process entry point that runs the embedded llama.cpp server (see bench.server._embedded).

Run as ``python -P path/to/_child.py CONFIG_JSON READY_FILE``. It loads the model, binds
the HTTP server, writes the listening URL to READY_FILE and serves until it receives SIGTERM or
SIGINT (graceful stop), or exits at once when its stdin reaches EOF (the parent closed the pipe or
died), when it gets re-parented, or (PR_SET_PDEATHSIG) when the spawning parent thread exits.
Only the standard library and xllamacpp are used; nothing is printed on stdout on purpose.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    import xllamacpp

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INIT_FAILED = 3

_SPEC_TYPES = {
    "ngram-mod": "COMMON_SPECULATIVE_TYPE_NGRAM_MOD",
    "ngram-simple": "COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE",
    "draft": "COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE",
}


def _log(message: str) -> None:
    """Write one line to stderr (captured by the parent in the log file)."""
    sys.stderr.write(f"speedbench-child: {message}\n")
    sys.stderr.flush()


class ChildConfig(TypedDict):
    """What the parent sends the child as JSON: the server's settings, where to listen and whom to watch."""

    mode: str
    """`baseline` or a speculative mode of `_SPEC_TYPES`."""
    model_path: str
    draft_model_path: str | None
    n_threads: int
    ctx_size: int
    n_parallel: int
    draft_max: int
    seed: int
    host: str
    port: int
    """0: the OS picks a free port."""
    parent_pid: int
    pdeathsig: bool
    """Whether to ask the kernel to kill the child when the spawning thread exits (only from the main thread)."""
    chat_template: str | None
    """A Jinja chat template replacing the model's (None: the model's own)."""
    reasoning_format: str | None
    """`deepseek` (thoughts in `reasoning_content`), `none`, `auto`; None: the server's default."""


def build_params(cfg: ChildConfig) -> xllamacpp.CommonParams:
    """Turn the JSON config sent by the parent into an xllamacpp CommonParams."""
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = cfg["model_path"]
    p.hostnames = [cfg["host"]]
    p.port = int(cfg["port"])  # 0 -> the OS picks a free port, read back via listening_address
    p.endpoint_metrics = True
    p.endpoint_props = True
    p.endpoint_slots = True
    p.slot_save_path = os.getcwd()  # the server's work folder: enables POST /slots/N?action=erase (and save/restore)
    p.ui = False
    p.n_ctx = int(cfg["ctx_size"])
    p.n_parallel = int(cfg["n_parallel"])
    p.n_gpu_layers = 0
    p.cpuparams.n_threads = int(cfg["n_threads"])
    p.cpuparams_batch.n_threads = int(cfg["n_threads"])
    p.sampling.seed = int(cfg["seed"])
    if cfg.get("chat_template"):
        p.use_jinja = True
        p.chat_template = cfg["chat_template"]
    if cfg.get("reasoning_format"):
        p.reasoning_format = getattr(xllamacpp.common_reasoning_format,
                                     f"COMMON_REASONING_FORMAT_{str(cfg['reasoning_format']).upper()}")

    mode = cfg["mode"]
    n_max = int(cfg["draft_max"])
    spec = p.speculative
    if mode != "baseline":
        spec.types = [getattr(xllamacpp.common_speculative_type, _SPEC_TYPES[mode])]
    if mode == "ngram-mod":
        mod = spec.ngram_mod
        mod.n_max = n_max
        mod.n_min = min(int(mod.n_min), n_max)  # default n_min (48) > n_max would never draft
    elif mode == "ngram-simple":
        simple = spec.ngram_simple
        simple.size_m = n_max  # m-gram size == number of drafted tokens
    elif mode == "draft":
        draft = spec.draft
        draft.mparams.path = cfg["draft_model_path"]
        draft.n_max = n_max  # only the draft model uses draft.n_max; ngram types have their own
        draft.n_min = 0
        draft.n_gpu_layers = 0
        draft.cpuparams.n_threads = int(cfg["n_threads"])
        draft.cpuparams_batch.n_threads = int(cfg["n_threads"])
    return p


def _set_pdeathsig() -> None:
    """Ask the kernel to SIGKILL this process when the thread that spawned it exits (Linux only).

    Needed because xllamacpp holds the GIL while loading the model, so the Python watchdog
    threads below cannot react until the load is over.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        if libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0) != 0:
            _log(f"prctl(PR_SET_PDEATHSIG) failed: errno {ctypes.get_errno()}")
    except (OSError, AttributeError) as exc:  # not Linux / no libc symbol
        _log(f"prctl(PR_SET_PDEATHSIG) unavailable: {exc}")


def _orphan_exit(parent: int, workdir: str) -> None:
    """Exit now; if the parent is gone, first delete the work dir it can no longer clean up."""
    if os.getppid() != parent:
        shutil.rmtree(workdir, ignore_errors=True)
    os._exit(EXIT_OK)


def _watch_stdin(parent: int, workdir: str) -> None:
    """Exit at once when stdin reaches EOF, i.e. the parent closed its pipe end or died."""
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    time.sleep(0.05)  # let a dying parent get reaped so getppid() reflects it
    _orphan_exit(parent, workdir)


def _watch_parent(parent: int, workdir: str) -> None:
    """Exit at once when this process gets re-parented (the original parent died)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    _orphan_exit(parent, workdir)


def main(argv: list[str]) -> int:
    """Load the model, serve until told to stop, return the exit code."""
    if len(argv) != 3:
        _log("usage: _child.py CONFIG_JSON READY_FILE")
        return EXIT_USAGE
    cfg: ChildConfig = json.loads(argv[1])
    ready_file = argv[2]
    parent = int(cfg.get("parent_pid", os.getppid()))
    if cfg.get("pdeathsig"):
        _set_pdeathsig()
    if os.getppid() != parent:  # the parent died before the watchdogs were in place
        return EXIT_OK
    stop = threading.Event()

    # Until the server object exists, SIGTERM keeps its default action (die at once).
    workdir = os.path.dirname(os.path.abspath(ready_file))
    for target in (_watch_stdin, _watch_parent):
        threading.Thread(target=target, args=(parent, workdir), daemon=True).start()

    import xllamacpp

    try:
        server = xllamacpp.Server(build_params(cfg))
    except Exception as exc:  # xllamacpp raises RuntimeError on bad params / bind failure
        _log(f"failed to start server: {type(exc).__name__}: {exc}")
        return EXIT_INIT_FAILED

    def _on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    url = str(server.listening_address)
    tmp = ready_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"url": url, "pid": os.getpid()}, fh)
    os.replace(tmp, ready_file)
    _log(f"ready on {url}")

    while not stop.wait(3600):
        pass
    _log("stopping")
    del server  # ~Server stops the HTTP listener and the main loop
    _log("stopped")
    return EXIT_OK


if __name__ == "__main__":
    sys.stdout.flush()
    code = main(sys.argv)
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown of the native extension's threads
