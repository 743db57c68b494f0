"""Adversarial round 5, the servers' side: tune's servers and resume, its templates, URLs, workers and the probe."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp import web

from bench import BenchError
from bench.records import load_run, read_journal
from tests.fakeserver import FakeServer, FakeState
from tests.test_adversarial import _dataset, _main, _one_line_error

# ---------------------------------------------------------------- 12. a malformed URL


@pytest.mark.parametrize("args", [
    ["run", "--url", "http://[::1:8080", "--osl", "4", "--output", "{tmp}/r.json", "--dataset", "{data}"],
    ["run", "--url", "http://127.0.0.1:1,http://[::1", "--output", "{tmp}/r.json", "--dataset", "{data}"],
    ["bench", "--base-url", "http://[::1:8080", "--spec-url", "http://127.0.0.1:1", "--results-dir", "{tmp}/r"],
    ["tune", "--base-url", "http://[::1:8080", "--spec-cmd", f"{sys.executable} {{port}} {{draft_max}}",
     "--dataset", "{data}", "--results-dir", "{tmp}/r"],
])
def test_an_ipv6_bracket_left_open_is_one_line(args: list[str], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    data = _dataset(tmp_path, 2)
    code, _, err = _main(capsys, *(arg.replace("{tmp}", str(tmp_path)).replace("{data}", str(data))
                                   for arg in args))
    assert code == 2 and "Invalid IPv6 URL" in err, err
    _one_line_error(err)
    assert not (tmp_path / "r").exists() and not (tmp_path / "r.json").exists()


# ---------------------------------------------------------------- 15. the URL probe


class _MinimalServer(FakeServer):
    """A gateway: no GET /v1/models, and a completion request without messages is a plain-text 400."""

    async def _models(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=404, text="no such route")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("messages") and not body.get("prompt"):
            return web.Response(status=400, text="messages: field required")
        return await super()._chat(request)


@pytest.mark.parametrize("stream", [True, False])
def test_a_server_without_a_model_list_whose_completions_work_is_warned_about_and_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stream: bool
) -> None:
    server = _MinimalServer(FakeState())
    server.start()
    try:
        code, out, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 2)),
                               "--osl", "4", "--output", str(tmp_path / "r.json"),
                               *(["--stream"] if stream else []))
    finally:
        server.stop()
    assert code == 0, out + err
    assert "lists no models (GET /models answered HTTP 404)" in out + err and "going on" in out + err
    run = load_run(tmp_path / "r.json")
    assert len(run.results) == 2 and not run.failed_samples


# ---------------------------------------------------------------- 3. tune's templates and options

SECRET = "sk-abcdef1234567890"


@pytest.mark.parametrize("template", [
    "srv {port} {port[0]}", "srv {port} {draft_max.real}", "srv {port} {port.__class__}", "srv {port} {port!r}",
    "srv {port} {port:>8}", "srv {port} {}", "srv {port} {0}", "srv {port} {nope}", "srv {port} {", "srv {port} }",
    "srv {port} 'unclosed",
])
def test_a_placeholder_that_is_not_a_bare_known_name_is_refused_in_one_line(
    template: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _main(capsys, "tune", "--base-cmd", template, "--spec-cmd", "x {port} {draft_max}",
                         "--results-dir", str(tmp_path / "r"))
    assert code == 2 and "server command" in err, err
    _one_line_error(err)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("template", [
    f"srv {{port}} --api-key {{{SECRET}}}", f"srv {{port}} --api-key={{{SECRET}}}",
    f"srv {{port}} --api-key sk-{{{SECRET[3:]}}}", f"srv --token {{port}}{{{SECRET}}}",
    f"srv {{port}} --api-key {{{SECRET}[0]}}", f"srv {{port}} --api-key {{port.{SECRET}}}",
])
def test_a_secret_inside_a_brace_token_is_masked_in_the_refusal(
    template: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _main(capsys, "tune", "--base-cmd", template, "--spec-cmd", "x {port} {draft_max}",
                           "--results-dir", str(tmp_path / "r"))
    assert code == 2 and "server command" in err, err
    _one_line_error(err)
    assert SECRET[3:11] not in out + err, err


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1", "1e300"])
def test_ready_timeout_must_be_finite_and_positive(value: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(capsys, "tune", "--base-cmd", "x {port}", "--spec-cmd", "x {port} {draft_max}",
                         "--ready-timeout", value, "--results-dir", str(tmp_path / "r"))
    assert code == 2 and "--ready-timeout" in err, err
    assert len([line for line in err.splitlines() if line.strip()]) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "r").exists()


_FAILING = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"error": "out of memory"}'
        self.send_response(500); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_a_server_whose_every_completion_fails_ends_tune_in_one_line(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "failing.py"
    script.write_text(_FAILING)
    command = f"{sys.executable} {script} {{port}}"
    code, out, err = _main(capsys, "tune", "--base-cmd", command, "--spec-cmd", command + " {draft_max}",
                           "--draft-max", "2", "--dataset", str(_dataset(tmp_path, 2)), "--limit", "1",
                           "--osl", "4", "--results-dir", str(tmp_path / "r"), "--quiet")
    assert code != 0 and "Traceback" not in out + err, out + err
    _one_line_error(err)
    assert "no sample succeeded on both servers" in err and "HTTP 500" in err, err


# ---------------------------------------------------------------- 13. workers of a killed parent, mid-request


def test_workers_whose_parent_is_killed_mid_request_exit_within_5_s(fake_server: FakeServer, fake_state: FakeState,
                                                                     tmp_path: Path) -> None:
    from tests.test_workers import _running, _start

    fake_state.delay_s = 0.05
    process = _start(fake_server, tmp_path)
    fake_state.delay_s = 6.0  # longer than a stop's grace period: every request from now on is in flight
    sent = len(fake_state.requests)
    deadline = time.monotonic() + 10
    while len(fake_state.requests) < sent + 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    workers = [int(pid) for pid in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()]
    assert len(workers) == 2
    os.kill(process.pid, signal.SIGKILL)
    killed = time.monotonic()
    process.communicate(timeout=60)
    while any(map(_running, workers)) and time.monotonic() < killed + 30:
        time.sleep(0.02)
    assert time.monotonic() - killed < 5.0, f"workers took {time.monotonic() - killed:.2f} s to exit"
    kept = [read_journal(path)[1] for path in tmp_path.glob(".workers-*/worker-*/run.json.jsonl")]
    assert sum(len(results) for results in kept) > 0  # what the workers finished is kept in their journals


# ---------------------------------------------------------------- 2. tune --resume

FAKE = Path(__file__).with_name("fake_truth.py")
ROOT = Path(__file__).resolve().parents[1]


def _tune_dataset(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    rows = [{"question_id": f"{category}-{index}", "category": category,
             "turns": [f"[cat={category}] question number {index} about {category}"]}
            for category in ("code", "chat") for index in range(6)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _tune_args(tmp_path: Path, *extra: str, delay: float = 0.0, osl: str = "64") -> list[str]:
    base = f"{sys.executable} {FAKE} --port {{port}} --delay {delay}"
    return ["tune", "--base-cmd", base, "--spec-cmd", base + " --draft-max {draft_max}", "--draft-max", "2",
            "--dataset", str(_tune_dataset(tmp_path)), "--limit", "6", "--osl", osl, "--quiet", *extra]


def _interrupted_tune(tmp_path: Path, signum: int = signal.SIGINT) -> Path:
    """A tune stopped by `signum` once its first configuration has journalled samples; its folder."""
    process = subprocess.Popen([sys.executable, "-m", "bench", *_tune_args(tmp_path, "--results-dir",
                                                                            str(tmp_path / "r"), delay=0.3)],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            journals = list((tmp_path / "r").glob("*/c1/draft_max-2/*.jsonl"))
            if len(journals) == 2 and all(len(path.read_text().splitlines()) >= 2 for path in journals):
                break
            time.sleep(0.05)
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, out + err
    (folder,) = (tmp_path / "r").iterdir()
    return folder


def test_an_interrupted_configuration_of_command_servers_resumes(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    folder = _interrupted_tune(tmp_path)
    code, out, err = _main(capsys, *_tune_args(tmp_path, "--resume", str(folder), delay=0.3))
    assert code == 0, out + err
    run = load_run(folder / "c1" / "draft_max-2" / "draft_max-2.json")
    assert len(run.results) == run.selected_samples == 12 and not run.info.interrupted


@pytest.mark.parametrize("server", ["embedded llamacpp", "command srv --port {port}"])
def test_a_server_started_here_is_resumed_on_a_new_port_and_its_other_settings_refused(server: str) -> None:
    from bench.records import refuse_resume
    from bench.runner import RunConfig

    def recorded(url: str, osl: int = 128, **tags: str) -> dict:
        return dict(RunConfig(url=url, osl=osl, tags={"mode": "ngram-mod", "server": server, "model": "m.gguf",
                                                       **tags}).recorded())

    refuse_resume("x.json", recorded("http://127.0.0.1:40001"), recorded("http://127.0.0.1:40002"))
    for other in (recorded("http://127.0.0.1:40002", osl=64), recorded("http://127.0.0.1:40002", model="o.gguf"),
                  recorded("http://127.0.0.1:40002", server="command other {port}")):
        with pytest.raises(BenchError, match=r"x\.json: cannot resume"):
            refuse_resume("x.json", recorded("http://127.0.0.1:40001"), other)
    external = {"mode": "ngram-mod"}  # a server given by URL is identified by its URL
    with pytest.raises(BenchError, match="url was"):
        refuse_resume("x.json", dict(RunConfig(url="http://127.0.0.1:40001", tags=external).recorded()),
                      dict(RunConfig(url="http://127.0.0.1:40002", tags=external).recorded()))


@pytest.fixture(scope="module")
def finished_tune(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("finished")
    from bench.cli import main

    assert main([*_tune_args(tmp_path), "--results-dir", str(tmp_path / "r")]) == 0
    (folder,) = (tmp_path / "r").iterdir()
    return folder


@pytest.mark.parametrize(("change", "said"), [
    (["--osl", "32"], "osl"),
    (["--category", "code"], "category"),
    (["--spec-cmd", f"{sys.executable} {FAKE} --port {{port}} --delay 0.0 --draft-max {{draft_max}} --ignored x"],
     "tags"),
])
def test_resuming_with_other_settings_is_refused_in_one_line(finished_tune: Path, change: list[str], said: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    args = _tune_args(finished_tune.parent.parent)
    for flag, value in zip(change[::2], change[1::2], strict=True):
        args += [flag, value]
    before = (finished_tune / "tune.json").read_text()
    code, _, err = _main(capsys, *args, "--resume", str(finished_tune))
    assert code == 2 and "cannot resume" in err and said in err, err
    _one_line_error(err)
    assert (finished_tune / "tune.json").read_text() == before


def test_resuming_over_an_edited_prompt_set_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(capsys, *_tune_args(tmp_path), "--results-dir", str(tmp_path / "r"))[0] == 0
    (folder,) = (tmp_path / "r").iterdir()
    args = _tune_args(tmp_path)  # rewrites the dataset: then edit one prompt
    data = tmp_path / "prompts.jsonl"
    data.write_text(data.read_text().replace("question number 3 about code", "question number 3 about cobol"))
    code, _, err = _main(capsys, *args, "--resume", str(folder))
    assert code == 2 and "cannot resume" in err and "prompts" in err, err
    _one_line_error(err)


def test_a_speculative_run_file_replaced_by_its_baseline_is_refused(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(capsys, *_tune_args(tmp_path), "--results-dir", str(tmp_path / "r"))[0] == 0
    (folder,) = (tmp_path / "r").iterdir()
    where = folder / "c1" / "draft_max-2"
    shutil.copy(where / "baseline.json", where / "draft_max-2.json")
    (folder / "tune.json").unlink()
    code, _, err = _main(capsys, *_tune_args(tmp_path), "--resume", str(folder))
    assert code == 2 and "cannot resume" in err, err
    _one_line_error(err)
    assert not (folder / "tune.json").exists()


# ---------------------------------------------------------------- 1. tune's servers never outlive it

_SERVING = """
import os, sys, time
port, marker, how = int(sys.argv[1]), sys.argv[2], sys.argv[3]
sys.argv[:] = [sys.argv[0], "--port", str(port), *sys.argv[4:]]
print("starting with --api-key {secret}", flush=True)
if how == "setsid":  # the server proper leaves the process group (and session) tune started it in
    if os.fork():
        while True:
            time.sleep(1)
    os.setsid()
elif how == "orphan":  # ... from a parent that exits at once, so it is nobody's child (a daemon's double fork)
    if os.fork():
        while True:
            time.sleep(1)
    if os.fork():
        os._exit(0)
    os.setsid()
elif how == "never":
    time.sleep(600)
elif how == "late" and "2" in sys.argv:  # the second configuration's servers take a while to start
    time.sleep(3)
sys.path.insert(0, {tests!r})
import fake_truth
fake_truth.main()
"""


def _serving(tmp_path: Path, how: str, marker: str) -> str:
    script = tmp_path / f"serving-{how}.py"
    script.write_text(_SERVING.format(secret=SECRET, tests=str(Path(__file__).parent)))
    return f"{sys.executable} {script} {{port}} {marker} {how}"


def _alive(marker: str) -> list[str]:
    """Command lines of live processes other than this one that mention `marker`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text and cmdline.parent.name != str(os.getpid()):
            found.append(text)
    return found


def _wait_gone(marker: str, within_s: float) -> list[str]:
    deadline = time.monotonic() + within_s
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _alive(marker)


def _tune_process(tmp_path: Path, base: str, spec: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bench", "tune", "--base-cmd", base, "--spec-cmd", spec, "--dataset",
         str(_tune_dataset(tmp_path)), "--limit", "6", "--osl", "64", "--results-dir", str(tmp_path / "r"),
         "--quiet", *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for(condition: Callable[[], bool], within_s: float = 60) -> None:
    deadline = time.monotonic() + within_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_after_tunes_first_comparison_ends_it_and_its_servers(tmp_path: Path, signum: int) -> None:
    marker = f"late-stop-{secrets.token_hex(4)}"
    base = _serving(tmp_path, "late", marker)
    process = _tune_process(tmp_path, base, base + " --draft-max {draft_max}", "--draft-max", "1,2", "--full-grid")
    try:  # stopped while the second configuration's servers start, between two comparisons
        _wait_for(lambda: bool(list((tmp_path / "r").glob("*/c1/draft_max-2/spec.log"))))
        time.sleep(0.5)
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, (process.returncode, out, err)
    assert "interrupted" in out + err
    assert _wait_gone(marker, 5.0) == []


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGHUP])
def test_command_servers_end_when_tune_is_killed_or_hung_up(tmp_path: Path, signum: int) -> None:
    marker = f"killed-tune-{secrets.token_hex(4)}"
    base = f"{sys.executable} {FAKE} --port {{port}} --delay 0.3 --ignored {marker}"
    process = _tune_process(tmp_path, base, base + " --draft-max {draft_max}", "--draft-max", "2")
    try:
        _wait_for(lambda: bool(list((tmp_path / "r").glob("*/c1/draft_max-2/*.jsonl"))))
        assert len([line for line in _alive(marker) if " -m bench tune " not in line]) == 2  # both servers
        process.send_signal(signum)
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert _wait_gone(marker, 5.0) == []


@pytest.mark.parametrize("how", ["setsid", "orphan"])
def test_a_server_that_leaves_its_process_group_is_ended_with_tune(tmp_path: Path, how: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    marker = f"leaves-{how}-{secrets.token_hex(4)}"
    command = _serving(tmp_path, how, marker)
    code, out, err = _main(capsys, "tune", "--base-cmd", command, "--spec-cmd", command + " --draft-max {draft_max}",
                           "--draft-max", "2", "--dataset", str(_tune_dataset(tmp_path)), "--limit", "2",
                           "--osl", "64", "--results-dir", str(tmp_path / "r"), "--quiet")
    assert code == 0, out + err
    assert _wait_gone(marker, 5.0) == []


@pytest.mark.parametrize("how", ["setsid", "orphan"])
def test_a_server_that_leaves_its_process_group_is_ended_when_tune_is_stopped(tmp_path: Path, how: str) -> None:
    marker = f"leaves-stopped-{how}-{secrets.token_hex(4)}"
    command = _serving(tmp_path, how, marker)
    process = _tune_process(tmp_path, command, command + " --draft-max {draft_max}", "--draft-max", "2")
    try:
        _wait_for(lambda: bool(list((tmp_path / "r").glob("*/c1/draft_max-2/*.jsonl"))))
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert _wait_gone(marker, 5.0) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_server_log_is_redacted_when_tune_is_stopped_while_it_starts(tmp_path: Path, signum: int) -> None:
    marker = f"starting-{secrets.token_hex(4)}"
    command = _serving(tmp_path, "never", marker) + f" --api-key {SECRET}"
    process = _tune_process(tmp_path, command, command + " {draft_max}", "--draft-max", "2")
    try:
        _wait_for(lambda: any(SECRET in path.read_text() for path in (tmp_path / "r").glob("*/c1/*/baseline.log")))
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, (process.returncode, out, err)
    (log,) = (tmp_path / "r").glob("*/c1/*/baseline.log")
    assert "starting with --api-key" in log.read_text() and SECRET[3:11] not in log.read_text()
    assert _wait_gone(marker, 5.0) == []
