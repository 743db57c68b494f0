"""Convert a llama-architecture GGUF to a Hugging Face folder vLLM can serve (run with the `.venv-vllm` python).

Run as ``python -P _vllm_convert.py GGUF OUT_DIR``. transformers loads the GGUF (dequantized) but refuses
to `save_pretrained` a model loaded that way, so a fresh model is built from its config without the
`quantization_config`, given the loaded weights, tied, and saved in bfloat16 with the tokenizer. The
folder is written next to OUT_DIR and renamed into place, so a half-written folder is never used.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path


def convert(gguf: Path, out_dir: Path) -> None:
    """Write the Hugging Face folder for `gguf` at `out_dir` (replaced atomically)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, torch_dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    fresh.load_state_dict(loaded.state_dict(), strict=False)
    fresh.tie_weights()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", suffix=".part", dir=out_dir.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp creates 0700
        fresh.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str]) -> int:
    """Entry point: GGUF and output folder from the command line; exit 2 on bad usage."""
    if len(argv) != 3:
        sys.stderr.write("usage: _vllm_convert.py GGUF OUT_DIR\n")
        return 2
    convert(Path(argv[1]), Path(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
