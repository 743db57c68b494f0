"""Adversarial round 5, the servers' side: tune's servers and resume, its templates, URLs, workers and the probe."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from aiohttp import web

from bench.records import load_run
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
