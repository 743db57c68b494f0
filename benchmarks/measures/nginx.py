"""The static loopback server of `make perf`: one nginx, and the floor client that times round trips to it.

nginx (Debian's package, installed when missing) is started from a generated config in a temp dir on free
127.0.0.1 ports. It answers POST /v1/chat/completions with a fixed llama.cpp-shaped JSON body (`return 200`),
GET /metrics with llama.cpp-shaped Prometheus text, and POST /sse/v1/chat/completions with a pre-generated
llama.cpp chat stream kept in a static file served as `text/event-stream` (`error_page 405 =200 $uri` turns
the POST into a static GET). nginx rather than a Python responder for the stream too: a Python server would
share the 2 cores with the client under test and its own per-chunk cost would be counted as the client's.
One server block logs nothing (throughput runs); a second one logs `$msec` per request, to time the
start-up of a `speedbench run` subprocess to its first request.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from measures.common import OSL, accepts, free_port, log


def llama_json() -> str:
    """A fixed llama.cpp /v1/chat/completions answer (64 tokens, with timings and draft counts)."""
    text = " ".join(f"word{index}" for index in range(OSL))
    body = {
        "choices": [{"finish_reason": "length", "index": 0, "message": {"role": "assistant", "content": text}}],
        "created": 1767225600,
        "model": "gemma-3-270m-it-Q4_K_M.gguf",
        "system_fingerprint": "b11434-static",
        "object": "chat.completion",
        "usage": {"completion_tokens": OSL, "prompt_tokens": 24, "total_tokens": OSL + 24},
        "id": "chatcmpl-perfstatic",
        "timings": {
            "cache_n": 0, "prompt_n": 24, "prompt_ms": 9.5, "prompt_per_token_ms": 0.396,
            "prompt_per_second": 2526.3, "predicted_n": OSL, "predicted_ms": 512.0,
            "predicted_per_token_ms": 8.0, "predicted_per_second": 125.0, "draft_n": 48, "draft_n_accepted": 36,
        },
    }
    return json.dumps(body, separators=(",", ":"))


def llama_sse(chunks: int) -> str:
    """A pre-generated llama.cpp chat stream: `chunks` one-token deltas, a finish chunk, usage+timings, [DONE]."""
    head = '{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"'
    tail = '"}}],"created":1767225600,"id":"chatcmpl-perfsse","model":"gemma","object":"chat.completion.chunk"}'
    lines = ['data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],'
             '"created":1767225600,"id":"chatcmpl-perfsse","model":"gemma","object":"chat.completion.chunk"}']
    lines.extend(f"data: {head} tok{index}{tail}" for index in range(chunks))
    lines.append('data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1767225600,'
                 '"id":"chatcmpl-perfsse","model":"gemma","object":"chat.completion.chunk"}')
    final = {
        "choices": [], "created": 1767225600, "id": "chatcmpl-perfsse", "model": "gemma",
        "object": "chat.completion.chunk",
        "usage": {"completion_tokens": chunks, "prompt_tokens": 24, "total_tokens": chunks + 24},
        "timings": {"prompt_n": 24, "prompt_ms": 9.5, "prompt_per_second": 2526.3, "predicted_n": chunks,
                    "predicted_ms": chunks * 8.0, "predicted_per_second": 125.0},
    }
    lines.append("data: " + json.dumps(final, separators=(",", ":")))
    lines.append("data: [DONE]")
    return "\n\n".join(lines) + "\n\n"


METRICS_TEXT = (
    "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n"
    "# TYPE llamacpp:prompt_tokens_total counter\n"
    "llamacpp:prompt_tokens_total 2400\n"
    "# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.\n"
    "# TYPE llamacpp:tokens_predicted_total counter\n"
    "llamacpp:tokens_predicted_total 6400\n"
    "# HELP llamacpp:requests_processing Number of requests processing.\n"
    "# TYPE llamacpp:requests_processing gauge\n"
    "llamacpp:requests_processing 0\n"
)


def nginx_binary() -> str:
    """The nginx executable, installed from Debian's packages when missing (apt-get update only on failure)."""
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if found:
        return found
    log("nginx missing: apt-get install -y nginx")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "nginx"]
    if subprocess.run(install, env=env, capture_output=True, timeout=300, check=False).returncode != 0:
        log("install failed: apt-get update, then install again")
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=300, check=False)
        subprocess.run(install, env=env, capture_output=True, timeout=300, check=True)
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if not found:
        raise RuntimeError("nginx is not available after apt-get install")
    return found


def _quoted(text: str) -> str:
    """Text as a single-quoted nginx config string (no variables, escapes kept literal)."""
    if "$" in text:
        raise ValueError("nginx return text must not contain '$'")
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Nginx:
    """nginx on two free loopback ports: `port` logs nothing, `logged_port` logs `$msec` per request."""

    def __init__(self, workdir: Path, sse_chunks: int) -> None:
        """Prepare (not start) a server rooted in `workdir`."""
        self.dir = workdir
        self.sse_chunks = sse_chunks
        self.port = 0
        self.logged_port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def access_log(self) -> Path:
        """The logged server's access log."""
        return self.dir / "access.log"

    def _write_config(self) -> Path:
        """Write the SSE file, temp dirs and nginx.conf; return the config path."""
        docroot = self.dir / "www"
        (docroot / "sse" / "v1" / "chat").mkdir(parents=True, exist_ok=True)
        (docroot / "sse" / "v1" / "chat" / "completions").write_text(llama_sse(self.sse_chunks), encoding="utf-8")
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.dir / "tmp" / sub).mkdir(parents=True, exist_ok=True)
        locations = f"""
        location = /v1/chat/completions {{ default_type application/json; return 200 {_quoted(llama_json())}; }}
        location = /metrics {{ default_type text/plain; return 200 {_quoted(METRICS_TEXT)}; }}
        location = /sse/metrics {{ default_type text/plain; return 200 {_quoted(METRICS_TEXT)}; }}
        location = /sse/v1/chat/completions {{
            default_type text/event-stream; root {docroot}; error_page 405 =200 $uri;
        }}
        location / {{ return 404; }}
"""
        user = "user root;" if os.geteuid() == 0 else ""
        config = f"""{user}
worker_processes 1;
daemon off;
pid {self.dir / "nginx.pid"};
error_log {self.dir / "error.log"} warn;
events {{ worker_connections 4096; multi_accept on; }}
http {{
    access_log off;
    log_format perf '$msec $request_method $uri $status $request_time';
    client_body_temp_path {self.dir / "tmp/body"};
    proxy_temp_path {self.dir / "tmp/proxy"};
    fastcgi_temp_path {self.dir / "tmp/fastcgi"};
    uwsgi_temp_path {self.dir / "tmp/uwsgi"};
    scgi_temp_path {self.dir / "tmp/scgi"};
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    sendfile on;
    tcp_nodelay on;
    open_file_cache max=16 inactive=600s;
    open_file_cache_valid 600s;
    server {{
        listen 127.0.0.1:{self.port} backlog=4096;
{locations}
    }}
    server {{
        listen 127.0.0.1:{self.logged_port};
        access_log {self.access_log} perf;
{locations}
    }}
}}
"""
        path = self.dir / "nginx.conf"
        path.write_text(config, encoding="utf-8")
        return path

    def start(self) -> None:
        """Start nginx in the foreground (our child) and wait until both ports accept; retried on a port race."""
        binary = nginx_binary()
        for _attempt in range(3):
            self.port, self.logged_port = free_port(), free_port()
            config = self._write_config()
            self.process = subprocess.Popen(
                [binary, "-p", str(self.dir), "-e", str(self.dir / "error.log"), "-c", str(config)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline and self.process.poll() is None:
                if all(accepts(port) for port in (self.port, self.logged_port)):
                    return
                time.sleep(0.02)
            self.stop()
        error = (self.dir / "error.log").read_text(errors="replace")[-800:] if (self.dir / "error.log").exists() else ""
        raise RuntimeError(f"nginx did not start: {error}")

    def stop(self) -> None:
        """Stop nginx (QUIT, then KILL after 5 s)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGQUIT)
        try:
            process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5.0)

    def url(self, *, logged: bool = False, sse: bool = False) -> str:
        """A base URL for speedbench (`http://127.0.0.1:PORT[/sse]/v1`)."""
        port = self.logged_port if logged else self.port
        return f"http://127.0.0.1:{port}{'/sse' if sse else ''}/v1"

    def log_times(self) -> list[tuple[float, str]]:
        """(epoch seconds, "METHOD URI") of every logged request so far."""
        if not self.access_log.exists():
            return []
        entries = []
        for line in self.access_log.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) >= 3:
                entries.append((float(parts[0]), f"{parts[1]} {parts[2]}"))
        return entries


def raw_round_trips(port: int, count: int) -> list[float]:
    """Round-trip times of a minimal blocking keep-alive HTTP client: the server + loopback floor."""
    body = b'{"messages":[{"role":"user","content":"q"}],"max_tokens":64}'
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    times = []
    with socket.create_connection(("127.0.0.1", port), timeout=5.0) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            start = time.perf_counter()
            conn.sendall(request)
            data = b""
            length = -1
            while True:
                data += conn.recv(65536)
                if length < 0 and b"\r\n\r\n" in data:
                    head, _, _ = data.partition(b"\r\n\r\n")
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = len(head) + 4 + int(line.split(b":")[1])
                if 0 <= length <= len(data):
                    break
            times.append(time.perf_counter() - start)
    return times


