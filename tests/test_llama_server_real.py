"""The real llama-server tier (`make test-llama-server`): llama.cpp's own `llama-server`, built by `make llama-server`.

Servers are started from command lines, with `--api-key` and `--metrics`, on SmolLM2-135M-Instruct (the model the
embedded server uses), and driven on a local SPEED-Bench-format file of this test's own prompts: `run --api-key`,
a tiny `tune --base-cmd/--spec-cmd`, the `llamacpp:spec_decode_*_total` counters, every llama.cpp command line
that `tune` prints and the docs show, and `bench --config` with three pairs whose SpeedBench tables must equal the
reference client's compare byte for byte. No server process may outlive a test.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.analysis import LLAMACPP_DRAFT_MODEL_TYPES, llamacpp_flags
from bench.cli import main
from bench.engines import LlamaCpp
from bench.records import load_run
from bench.server import CommandServer, default_model_path

pytestmark = pytest.mark.llama_server

ROOT = Path(__file__).resolve().parents[1]
API_KEY = "tier-secret-8d51197e"
KEY_ENV = "SPEEDBENCH_TIER_API_KEY"
CATEGORIES = "coding,summarization"
TEMPLATE_KWARGS = '{"enable_thinking": false}'
# Our own prompts, in SPEED-Bench's row shape; answers that reuse the prompt give the n-gram drafters work.
ROWS = (
    {"question_id": "tier-code-1", "category": "coding", "turns": [
        "Add type hints and a one-line docstring to this Python function, keeping every name:\n\n"
        "def total(values):\n    result = 0\n    for value in values:\n        result += value\n    return result\n"]},
    {"question_id": "tier-sum-1", "category": "summarization", "turns": [
        "Copy this list back, one item a line, then add one more fruit: apples, bananas, cherries, dates, figs, "
        "grapes, lemons, mangoes, oranges, pears."]},
)
DRAFT_MODEL_OPTIONS = {"-md", "--spec-draft-model", "--model-draft"}
SPECIAL_DRAFTERS = tuple(kind for kind in LLAMACPP_DRAFT_MODEL_TYPES if kind != "draft-simple")
"""Spec types that need a drafter made for them (EAGLE3 heads, MTP, DFlash, DSpark): none is at hand here."""


@pytest.fixture(scope="module")
def binary() -> Path:
    """The llama-server `make llama-server` built (its path in $LLAMA_SERVER), or skip (fail under CI)."""
    value = os.environ.get("LLAMA_SERVER", "")
    if value and Path(value).is_file() and os.access(value, os.X_OK):
        return Path(value)
    reason = "no llama-server binary: `make test-llama-server` builds one (needs cmake, ninja and a C++ compiler)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def model() -> Path:
    """SmolLM2-135M-Instruct's GGUF, as the embedded server uses it."""
    return default_model_path()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local SPEED-Bench-format file of this test's prompts."""
    path = tmp_path_factory.mktemp("dataset") / "speed_bench_rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    return path


def server_processes(binary: Path) -> set[int]:
    """Pids of live processes running this llama-server binary."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0]
            except OSError:
                continue
            if argv0 == bytes(binary):
                found.add(int(entry.name))
    return found


@pytest.fixture
def no_server_left(binary: Path) -> Iterator[None]:
    """Fail the test if a llama-server it started is still running after it."""
    before = server_processes(binary)
    yield
    left = server_processes(binary) - before
    assert not left, f"llama-server processes left running: {sorted(left)}"


def command(binary: Path, model: Path, *flags: str, key: bool = True) -> str:
    """A llama-server command template (`{port}` filled by speedbench) on the model, one thread, with /metrics."""
    words = [str(binary), "-m", str(model), "--port", "{port}", "--host", "127.0.0.1", "--metrics",
             "-t", "1", "-c", "2048", *flags]
    if key:
        words += ["--api-key", API_KEY]
    return shlex.join(words).replace("'{port}'", "{port}").replace("'{draft_max}'", "{draft_max}")


def started(template: str, log: Path, **values: object) -> CommandServer:
    """A CommandServer started from the template (stopped by the caller)."""
    server = CommandServer(template, log, ready_timeout=120.0, **values)
    server.start()
    return server


def get(url: str, key: str | None = API_KEY) -> str:
    """A GET's body, with the bearer key."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


@pytest.fixture(scope="module")
def keyed_server(binary: Path, model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CommandServer]:
    """One speculative llama-server with --api-key for the tests that only talk to it: SmolLM2 drafting for itself
    (draft-simple), so every step drafts and the counters move (ngram-mod needs 24-token repeats to draft at all)."""
    template = command(binary, model, *shlex.split(llamacpp_flags("draft", 4).replace("DRAFT.gguf", str(model))))
    server = started(template, tmp_path_factory.mktemp("keyed") / "server.log")
    yield server
    server.stop()
    assert not server.is_running()


def test_run_with_the_api_key_works_and_without_it_fails_in_one_line(
        keyed_server: CommandServer, dataset: Path, tmp_path: Path, capsys) -> None:
    output = tmp_path / "spec.json"
    assert main(["run", "--url", keyed_server.url, "--api-key", API_KEY, "--dataset", str(dataset),
                 "--category", CATEGORIES, "--limit", "1", "--osl", "48", "--chat-template-kwargs", TEMPLATE_KWARGS,
                 "--output", str(output), "--quiet"]) == 0
    run = load_run(output)
    assert run.meta["engine"] == "llamacpp"
    assert len(run.results) == len(ROWS) and all(result.ok for result in run.results)
    assert run.meta["acceptance"]["drafts"] > 0  # the `_total` counters' deltas over the run
    assert run.meta["acceptance"]["accepted"] > 0
    capsys.readouterr()
    refused = tmp_path / "refused.json"
    code = main(["run", "--url", keyed_server.url, "--dataset", str(dataset), "--category", CATEGORIES,
                 "--limit", "1", "--osl", "16", "--output", str(refused), "--quiet"])
    captured = capsys.readouterr()
    assert code != 0
    lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "HTTP 401" in lines[0] and "--api-key, or $OPENAI_API_KEY" in lines[0]
    assert API_KEY not in captured.out + captured.err and not refused.exists()


def chat(url: str, prompt: str, max_tokens: int) -> None:
    """One chat completion at temperature 0, with the bearer key."""
    body = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                       "temperature": 0}).encode()
    request = urllib.request.Request(url + "/v1/chat/completions", data=body, method="POST", headers={
        "Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        assert response.status == 200


def test_the_counters_this_server_exports_end_in_total_and_are_read(keyed_server: CommandServer) -> None:
    chat(keyed_server.url, ROWS[1]["turns"][0], max_tokens=64)
    text = get(keyed_server.url + "/metrics")
    names = set(re.findall(r"^(llamacpp:spec_decode_\w+?)(?:\{|\s)", text, flags=re.MULTILINE))
    assert {"llamacpp:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_draft_tokens_total",
            "llamacpp:spec_decode_num_accepted_tokens_total"} <= names
    assert all(name.endswith("_total") for name in names)
    counters = LlamaCpp().acceptance_counters(text)
    assert counters is not None and counters["drafts"] > 0 and counters["per_position"]
    exported = {name: float(value) for name, value in re.findall(
        r"^llamacpp:(spec_decode_num_\w+_total) (\S+)$", text, flags=re.MULTILINE)}
    assert counters["drafts"] == exported["spec_decode_num_drafts_total"]
    assert counters["draft_tokens"] == exported["spec_decode_num_draft_tokens_total"]
    assert counters["accepted"] == exported["spec_decode_num_accepted_tokens_total"]


@pytest.mark.parametrize("mode", ["ngram-mod", "ngram-simple", "draft"])
def test_every_llamacpp_flag_line_tune_prints_starts_a_server(binary: Path, model: Path, mode: str,
                                                              tmp_path: Path, no_server_left) -> None:
    flags = shlex.split(llamacpp_flags(mode, 4).replace("DRAFT.gguf", str(model)))
    server = started(command(binary, model, *flags), tmp_path / "server.log")
    try:
        assert server.is_running()
        assert "llamacpp:spec_decode_num_drafts_total" in get(server.url + "/metrics")
    finally:
        server.stop()


def test_tune_on_llama_server_command_lines(binary: Path, model: Path, dataset: Path, tmp_path: Path,
                                            no_server_left) -> None:
    base = command(binary, model, key=False)
    spec = command(binary, model, "--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "{draft_max}", key=False)
    assert main(["tune", "--base-cmd", base, "--spec-cmd", spec, "--draft-max", "2,8", "--dataset", str(dataset),
                 "--category", CATEGORIES, "--limit", "1", "--osl", "32", "--results-dir", str(tmp_path),
                 "--quiet"]) == 0
    folder = next(tmp_path.glob("*-tune-ngram-mod"))
    assert json.loads((folder / "tune.json").read_text())["configs"]
    for k in (2, 8):
        assert (folder / "c1" / f"draft_max-{k}" / "spec.log").is_file()
        run = load_run(folder / "c1" / f"draft_max-{k}" / f"draft_max-{k}.json")
        assert all(result.ok for result in run.results)
    printed = next(line for line in (folder / "tune.txt").read_text().splitlines()
                   if line.startswith("llama.cpp flags"))
    flags = printed.split(": ", 1)[1]
    if flags.startswith("--"):  # a pick: its flags must start a server too
        server = started(command(binary, model, *shlex.split(flags), key=False), tmp_path / "pick.log")
        server.stop()


def doc_commands() -> list[tuple[str, str]]:
    """(file, command) for every llama-server command line in the README, docs/ and examples/."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*"))]
    found = []
    for path in files:
        text = re.sub(r"\\\n\s*", " ", path.read_text(encoding="utf-8"))  # shell line continuations
        for match in re.finditer(r"(?<![\w/.-])llama-server((?:[ \t]+[^\s'\"`\]\[|#();]+)+)", text):
            found.append((path.relative_to(ROOT).as_posix(), "llama-server" + match.group(1)))
    return found


def runnable(template: str, binary: Path, model: Path) -> str:
    """A doc's command made to run here: our binary and model, a port of ours, placeholders filled."""
    words = shlex.split(template)
    out = [str(binary)]
    skip = False
    for index, word in enumerate(words[1:], start=1):
        if skip:
            skip = False
            continue
        if word == "--port":
            out += ["--port", "{port}"]
            skip = index + 1 < len(words)
        elif word.endswith(".gguf"):
            out.append(str(model))
        else:
            out.append(word.replace("{draft_max}", "4").replace("{concurrency}", "1").replace("{api_key}", API_KEY))
    if "--port" not in out:
        out += ["--port", "{port}"]
    return shlex.join(out).replace("'{port}'", "{port}")


def test_the_docs_llama_server_commands_start_a_server(binary: Path, model: Path, tmp_path: Path,
                                                       no_server_left) -> None:
    commands = doc_commands()
    assert {"README.md", "docs/tuning.md", "docs/engines.md"} <= {file for file, _ in commands}, commands
    help_text = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60).stdout
    for index, (file, template) in enumerate(commands):
        words = shlex.split(template)
        for word in words:
            if word.startswith("--") and "=" not in word:
                assert re.search(rf"(?:^|[\s,]){re.escape(word)}(?:[\s,]|$)", help_text), (file, word)
                line = next(line for line in help_text.splitlines() if re.search(rf"{re.escape(word)}\b", line))
                assert "has been removed" not in line, (file, word)
        if any(kind in words for kind in SPECIAL_DRAFTERS) or {"-hf", "--hf-repo"} & set(words):
            continue  # needs a drafter or a download not at hand: its flags were checked against --help above
        server = started(runnable(template, binary, model), tmp_path / f"doc-{index}.log")
        try:
            if DRAFT_MODEL_OPTIONS & set(words):  # a draft model given must be used: one request drafts
                chat(server.url, "Name three colours.", max_tokens=16)
                assert LlamaCpp().acceptance_counters(get(server.url + "/metrics"))["drafts"] > 0, (file, template)
        finally:
            server.stop()


def _pair_tables(report: str) -> list[str]:
    """The fenced SpeedBench tables of a report, in order."""
    return re.findall(r"^(`{3,})\n(Comparison: baseline=.*?)^\1$", report, flags=re.MULTILINE | re.DOTALL)


def test_bench_config_three_pairs_tables_equal_the_reference(binary: Path, model: Path, dataset: Path,
                                                             tmp_path: Path, reference_compare, monkeypatch,
                                                             no_server_left) -> None:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    base = command(binary, model)
    pairs = {
        "ngram-mod-4": command(binary, model, "--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "4"),
        "ngram-mod-16": command(binary, model, "--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "16"),
        "ngram-simple": command(binary, model, "--spec-type", "ngram-simple"),
    }
    lines = [f"dataset = {json.dumps(str(dataset))}", f'category = "{CATEGORIES}"', "limit = 1", "osl = 48",
             f'api_key_env = "{KEY_ENV}"', f"chat_template_kwargs = {json.dumps(TEMPLATE_KWARGS)}",
             f"results_dir = {json.dumps(str(tmp_path / 'results'))}", 'label = "three-pairs"']
    for name, spec in pairs.items():
        lines += ["", "[[pair]]", f'name = "{name}"', f"base_cmd = {json.dumps(base)}",
                  f"spec_cmd = {json.dumps(spec)}"]
    config = tmp_path / "pairs.toml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["bench", "--config", str(config), "--quiet"]) == 0
    folder = next((tmp_path / "results").glob("*-three-pairs"))
    report = (folder / "report.md").read_text(encoding="utf-8")
    assert API_KEY not in report
    tables = [table for _, table in _pair_tables(report)]
    assert len(tables) == len(pairs), report
    for name, table in zip(pairs, tables, strict=True):
        assert name in report
        baseline, speculative = re.match(r"Comparison: baseline=(\S+) speculative=(\S+)\n", table).groups()
        where = next(place for place in (folder / name, folder) if (place / baseline).is_file())
        theirs = reference_compare(["--baseline", baseline, "--speculative", speculative], where)
        assert theirs.returncode == 0, theirs.stderr
        assert table == theirs.stdout, name
        for log in (folder / name).rglob("*.log"):
            assert API_KEY not in log.read_text(errors="replace"), log


def test_bench_with_the_api_key_on_two_running_servers_decides_interleaved(
        binary: Path, model: Path, dataset: Path, tmp_path: Path, no_server_left) -> None:
    base = started(command(binary, model), tmp_path / "baseline.log")
    spec = started(command(binary, model, "--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "8"),
                   tmp_path / "spec.log")
    try:
        args = ["bench", "--base-url", base.url, "--spec-url", spec.url, "--dataset", str(dataset), "--category",
                CATEGORIES, "--limit", "1", "--osl", "48", "--chat-template-kwargs", TEMPLATE_KWARGS,
                "--results-dir", str(tmp_path / "results"), "--quiet"]
        assert main([*args, "--label", "keyed", "--api-key", API_KEY]) == 0
        assert main([*args, "--label", "unkeyed"]) != 0  # the same without the key: refused
    finally:
        base.stop()
        spec.stop()
    folder = next((tmp_path / "results").glob("*-keyed"))
    runs = [load_run(path) for path in sorted(folder.rglob("*.json")) if path.parent.name != "plots"
            and "results" in json.loads(path.read_text()) and path.name != "comparison.json"]
    assert runs and all(result.ok for run in runs for result in run.results)
    assert any(run.meta.get("interleaved") for run in runs)


def test_bench_from_server_commands_leaves_no_process(binary: Path, model: Path, dataset: Path, tmp_path: Path,
                                                      monkeypatch, no_server_left) -> None:
    assert main(["bench", "--base-cmd", command(binary, model), "--spec-cmd",
                 command(binary, model, "--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "8"),
                 "--api-key", API_KEY, "--dataset", str(dataset), "--category", CATEGORIES, "--limit", "1",
                 "--osl", "48", "--results-dir", str(tmp_path / "results"), "--quiet"]) == 0
    logs = sorted(path.name for path in (tmp_path / "results").rglob("*.log"))
    assert "baseline.log" in logs and "spec.log" in logs
