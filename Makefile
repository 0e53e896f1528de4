# Fresh machine: `make demo` or `make test` installs everything into .venv first (once).
PYTHON ?= python3.11
VENV   ?= .venv
# The tested torch. On this CPU machine pip takes a wheel from local disk; on a GPU machine
# pip fetches the CUDA build of the same release. A torch already in the venv is kept.
TORCH  ?= torch==2.13.0
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.lmlow-installed
PYTEST_ARGS ?=

.PHONY: install test test-fast demo data-ptb data-pydocs data-sotu data-sotu-domain clean-cache

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml requirements.lock tools/_sdist.py tools/build_glove.py tools/glove_cli.c tools/build_kenlm.py
	@sh tools/apt_deps.sh
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -c requirements.lock -e ".[all]"
	$(PY) tools/build_glove.py
	$(PY) tools/build_kenlm.py
	@touch $@

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: install
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

demo: install
	$(PY) -m lmlow.demo

data-ptb: install
	$(PY) data_scripts/build_ptb.py --out data/ptb

data-pydocs: install
	$(PY) data_scripts/build_pydocs.py --out data

data-sotu: install
	$(PY) data_scripts/build_sotu.py --out data/sotu

data-sotu-domain: install
	$(PY) data_scripts/build_sotu_domain.py --out data/sotu-q

clean-cache:
	rm -rf $${LMLOW_CACHE_DIR:-$$HOME/.cache/lmlow}
