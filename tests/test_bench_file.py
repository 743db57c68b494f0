"""`bench --config FILE.toml`: the file read and checked in one place (every fault one line naming the key and the
pair, exit 2, before any server starts), the command line over the file over the defaults, and a run of two pairs
started from their commands with a key, resumed, and reported once."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.cli import build_parser, main
from bench.commands import COMMANDS, read_pairs
from bench.records import load_run, read_pairs_file

ROOT = Path(__file__).resolve().parents[1]
add_arguments, pipeline_config = COMMANDS["bench"].add_arguments, COMMANDS["bench"].pipeline_config
KEY = "pairs-secret-5f0c2a91"
ENV = "SPEEDBENCH_TEST_PAIRS_KEY"


def fake_command(*flags: str) -> str:
    """The fake server started as a command on `{port}`, refusing requests without `{api_key}`."""
    return shlex.join([sys.executable, str(ROOT / "tests" / "fake_command.py"), "--port", "{port}", "--api-key",
                       "{api_key}", *flags]).replace("'{port}'", "{port}").replace("'{api_key}'", "{api_key}")


def write_file(tmp_path: Path, top: str, *pairs: str) -> Path:
    """A config file of `top`-level lines and `[[pair]]` bodies."""
    path = tmp_path / "pairs.toml"
    path.write_text(top + "".join(f"\n[[pair]]\n{body}\n" for body in pairs), encoding="utf-8")
    return path


def parse(argv: list[str]):
    """`bench`'s parsed options."""
    return build_parser().parse_args(["bench", *argv])


PAIR = 'name = "a"\nbase_url = "http://127.0.0.1:1"\nspec_url = "http://127.0.0.1:2"'


@pytest.mark.parametrize(("top", "pair", "expected"), [
    ("osl = 4096\nlimt = 2\n", PAIR, "unknown key 'limt'"),
    ('osl = "long"\n', PAIR, "key 'osl': expected an integer"),
    ("stream = 1\n", PAIR, "key 'stream': expected true or false"),
    ('api = "grpc"\n', PAIR, "key 'api': expected one of chat, completions"),
    ('api_key = "sk-0123"\n', PAIR, "the file may not hold a key (found 'api_key' there)"),
    ("", 'name = "a"\nbase_url = "http://127.0.0.1:1"', "pair 'a': key 'spec_url' or 'spec_cmd'"),
    ("", PAIR + '\nresults_dir = "x"', "pair 'a': key 'results_dir': is the whole file's"),
    ("", 'name = "../up"\nbase_url = "u"\nspec_url = "v"', "pair 1: key 'name'"),
    ('api_key_env = "SPEEDBENCH_UNSET_9"\n', PAIR, "environment variable 'SPEEDBENCH_UNSET_9' is not set"),
    ("", PAIR + '\nbase_cmd = "srv --port {port}"', "keys 'base_url' and 'base_cmd'"),
    ("", PAIR + "\nosl = 0", "pair 'a': --osl must be >= 1"),
])
def test_a_bad_file_is_one_line_naming_the_key_and_the_pair_before_anything_starts(
        tmp_path: Path, capsys, top: str, pair: str, expected: str) -> None:
    path = write_file(tmp_path, top, pair)
    code = main(["bench", "--config", str(path), "--results-dir", str(tmp_path / "results"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and expected in err, err
    assert not (tmp_path / "results").exists()


def test_two_pairs_of_one_name_are_refused(tmp_path: Path, capsys) -> None:
    path = write_file(tmp_path, "", PAIR, PAIR)
    assert main(["bench", "--config", str(path), "--quiet"]) == 2
    assert "pair 'a': key 'name': two pairs have this name" in capsys.readouterr().err


def test_no_pairs_and_bad_toml_are_refused(tmp_path: Path, capsys) -> None:
    assert main(["bench", "--config", str(write_file(tmp_path, "osl = 8\n"))]) == 2
    assert "no [[pair]] tables" in capsys.readouterr().err
    (tmp_path / "bad.toml").write_text("osl = = 3\n")
    assert main(["bench", "--config", str(tmp_path / "bad.toml")]) == 2
    assert "not valid TOML" in capsys.readouterr().err


def test_the_command_line_overrides_the_pair_which_overrides_the_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(ENV, KEY)
    path = write_file(tmp_path, f'osl = 100\nlimit = 3\ncategory = "qa"\napi_key_env = "{ENV}"\n'
                                'chat_template_kwargs = {enable_thinking = false}\nheader = ["X-Team: bench"]\n',
                      PAIR + "\nosl = 200\nstream = true", 'name = "b"\nbase_url = "u:1"\nspec_url = "v:2"')
    args = parse(["--config", str(path), "--limit", "2", "--osl", "4096"])  # 4096 is the default: still given
    pairs = read_pairs(args, pipeline_config, add_arguments)
    first, second = (pair.config.job.settings for pair in pairs.pairs)
    assert [pair.name for pair in pairs.pairs] == ["a", "b"]
    assert first.osl == second.osl == 4096 and first.limit == second.limit == 2
    assert first.stream and not second.stream
    assert first.category == "qa" and first.api_key == KEY and dict(first.headers) == {"X-Team": "bench"}
    assert first.chat_template_kwargs == {"enable_thinking": False}
    assert pairs.label == "pairs" and pairs.pairs[0].config.job.base.url == "http://127.0.0.1:1"


def test_bench_refuses_a_command_and_a_url_for_one_side(tmp_path: Path, capsys) -> None:
    code = main(["bench", "--base-url", "http://127.0.0.1:1", "--base-cmd", "srv --port {port}", "--spec-url",
                 "http://127.0.0.1:2", "--results-dir", str(tmp_path), "--quiet"])
    assert code == 2
    assert "--base-url and --base-cmd both give the baseline server" in capsys.readouterr().err


def test_a_command_without_its_placeholders_is_refused(tmp_path: Path, capsys) -> None:
    code = main(["bench", "--base-cmd", "srv --port 8080", "--spec-cmd", "srv --port {port}",
                 "--results-dir", str(tmp_path), "--quiet"])
    assert code == 2 and "has no {port}" in capsys.readouterr().err
    code = main(["bench", "--base-cmd", "srv --port {port}", "--spec-cmd", "srv --port {port} -n {draft_max}",
                 "--results-dir", str(tmp_path), "--quiet"])
    assert code == 2 and "draft_max" in capsys.readouterr().err


def _tables(report: str) -> list[str]:
    return [table for _, table in re.findall(r"^(`{3,})\n(Comparison: baseline=.*?)^\1$", report,
                                             flags=re.MULTILINE | re.DOTALL)]


@pytest.mark.e2e
def test_two_pairs_from_commands_with_a_key_one_report_resumable(tmp_path: Path, monkeypatch, capsys,
                                                                 reference_compare) -> None:
    monkeypatch.setenv(ENV, KEY)
    path = write_file(tmp_path, f'category = "qa,math"\nlimit = 2\nosl = 16\napi_key_env = "{ENV}"\n'
                                f'title = "Two drafters"\nlabel = "two"\nresults_dir = "{tmp_path / "results"}"\n'
                                f"base_cmd = {json.dumps(fake_command())}\n",
                      f'name = "first"\nspec_cmd = {json.dumps(fake_command("--drafting"))}',
                      f'name = "second"\nspec_cmd = {json.dumps(fake_command("--drafting"))}\nstream = true')
    assert main(["bench", "--config", str(path), "--quiet"]) == 0
    (folder,) = (tmp_path / "results").glob("*-two")
    assert read_pairs_file(folder).names == ("first", "second")
    report = (folder / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# Two drafters\n") and "| pair | decode speedup" in report
    assert KEY not in report
    tables = _tables(report)
    assert len(tables) == 2
    for name, table in zip(("first", "second"), tables, strict=True):
        baseline, speculative = re.match(r"Comparison: baseline=(\S+) speculative=(\S+)\n", table).groups()
        theirs = reference_compare(["--baseline", baseline, "--speculative", speculative], folder / name)
        assert theirs.returncode == 0, theirs.stderr
        assert table == theirs.stdout
        runs = [load_run(folder / name / f"{arm}.json") for arm in ("baseline", "speculative")]
        assert all(result.ok for run in runs for result in run.results) and len(runs[0].results) == 4
        assert runs[1].meta.get("interleaved")
        for log in ("baseline.log", "spec.log"):
            assert KEY not in (folder / name / log).read_text(errors="replace")
    capsys.readouterr()
    (folder / "report.md").unlink()
    assert main(["bench", "--config", str(path), "--resume", str(folder), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "pair first: already finished" in out and "pair second: already finished" in out
    assert _tables((folder / "report.md").read_text(encoding="utf-8")) == tables
    (folder / "report.md").unlink()
    assert main(["report", "--latest", str(tmp_path / "results")]) == 0
    assert _tables((folder / "report.md").read_text(encoding="utf-8")) == tables


def test_the_example_file_reads_as_three_dspark_pairs_on_speed_bench(monkeypatch) -> None:
    monkeypatch.setenv("LLAMA_API_KEY", KEY)
    pairs = read_pairs(parse(["--config", str(ROOT / "examples" / "dspark-three-pairs.toml")]), pipeline_config,
                       add_arguments)
    assert len(pairs.pairs) == 3 and pairs.label == "dspark-three-pairs"
    for pair in pairs.pairs:
        job = pair.config.job
        assert (job.settings.dataset, job.settings.osl, job.settings.api_key) == ("speed-bench", 4096, KEY)
        assert job.base.command and "--spec-type draft-dspark" in job.spec.command
        assert "{port}" in job.spec.command and "{api_key}" in job.spec.command


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_server_command_that_never_answers_is_one_line_and_exit_2_leaving_no_process(tmp_path: Path,
                                                                                        capsys) -> None:
    marker = f"never-ready-{tmp_path.name}"
    silent = shlex.join([sys.executable, "-c", "import time; time.sleep(60)", marker]) + " {port}"
    code = main(["bench", "--base-cmd", silent, "--spec-cmd", silent, "--ready-timeout", "1", "--limit", "1",
                 "--category", "qa", "--results-dir", str(tmp_path / "results"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "the baseline server: server command did not answer" in err
    assert _processes_with(marker) == []
    assert list((tmp_path / "results").rglob("baseline.log"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_bench_ends_both_command_servers(tmp_path: Path, sig: int) -> None:
    marker = f"sig-{sig}-{tmp_path.name}"
    slow = fake_command("--delay", "0.5")
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "bench", "bench", "--base-cmd", slow, "--spec-cmd", slow, "--api-key", marker,
         "--category", "qa", "--limit", "5", "--osl", "8", "--results-dir", str(tmp_path / "results"), "--quiet"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    for line in process.stdout:
        seen.append(line)
        if "interleaving" in line:
            break
    assert len(_processes_with(marker)) >= 3, seen  # speedbench and its two servers
    process.send_signal(sig)
    rest, _ = process.communicate(timeout=60)
    assert process.returncode == 130, "".join(seen) + rest
    assert "interrupted" in rest
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_with(marker) == []
