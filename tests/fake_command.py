"""The fake server as a command a comparison starts (`python tests/fake_command.py --port {port}`): drafting or not,
and refusing requests without the bearer key when given one (as `llama-server --api-key` does)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakeserver import FakeServer, FakeState


class KeyedFakeServer(FakeServer):
    """The fake server on a given port; POSTs without `Authorization: Bearer <key>` get 401 when a key is set."""

    def __init__(self, state: FakeState, port: int, key: str | None) -> None:
        super().__init__(state)
        self.wanted_port, self.key = port, key

    async def _start(self) -> None:
        @web.middleware
        async def keyed(request: web.Request, handler: object) -> web.StreamResponse:
            if self.key and request.method == "POST" and request.headers.get("Authorization") != f"Bearer {self.key}":
                return web.json_response({"error": {"message": "Invalid API Key"}}, status=401)
            return await handler(request)  # type: ignore[operator]

        app = web.Application(middlewares=[keyed])
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._chat)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/props", self._props)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", lambda request: web.json_response({"status": "ok"}))
        app.router.add_post("/tokenize", self._tokenize)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.wanted_port).start()
        self.port = self.wanted_port


def main() -> None:
    """Serve until SIGTERM."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--drafting", action="store_true")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each request waits first")
    args = parser.parse_args()
    server = KeyedFakeServer(FakeState(drafting=args.drafting, delay_s=args.delay), args.port, args.api_key)
    server.start()
    stopped = asyncio.Event()
    loop = asyncio.new_event_loop()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    print(f"fake server on {server.url} key={args.api_key}", flush=True)
    loop.run_until_complete(stopped.wait())
    server.stop()


if __name__ == "__main__":
    main()
