# speedbench: `make bench` runs a real comparison, `make test` runs the tests. Each sets up .venv if needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

LIMIT  ?= 2
OSL    ?= 64
SPEC   ?= ngram-mod
MODEL  ?=
DRAFT  ?=
BASE_URL ?=
SPEC_URL ?=
THREADS ?= 1

.PHONY: install test test-fast bench report perf lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	@# the byte-parity tests need llama.cpp's own compare script; under CI=true a failed fetch fails the run
	$(BIN)/python benchmarks/perf.py --setup-reference || [ "$$CI" != "true" ]
	$(BIN)/ruff check bench tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/pytest -q

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not e2e"

bench: $(STAMP)
	$(BIN)/speedbench bench --limit $(LIMIT) --osl $(OSL) --spec $(SPEC) --threads $(THREADS) \
		$(if $(MODEL),--model $(MODEL)) $(if $(DRAFT),--draft $(DRAFT)) \
		$(if $(BASE_URL),--base-url $(BASE_URL)) $(if $(SPEC_URL),--spec-url $(SPEC_URL))

report: $(STAMP)
	$(BIN)/speedbench report --latest results

perf: $(STAMP)
	$(BIN)/python benchmarks/perf.py $(PERF_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check bench tests benchmarks
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
