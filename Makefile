# The two commands: `make book` (build the HTML book) and `make test` (run every test).
# `make lab` opens the book's notebooks in JupyterLab (English and Chinese). For contributors:
# `make unit` (the library's tests alone, no book build, no browser, nothing slow), `make lint`
# (ruff) and `make lab-source` (the chapters' MyST sources in JupyterLab, through Jupytext).
# See README.md.

SHELL := /bin/bash
.DEFAULT_GOAL := book

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
JB     := $(VENV)/bin/jupyter-book

# Re-install only when the requirements change: the stamp's name carries a hash of the files.
BOOK_HASH  := $(shell cat requirements.txt pyproject.toml | sha256sum | cut -c1-12)
TEST_HASH  := $(shell cat requirements.txt requirements-test.txt pyproject.toml \
                | sha256sum | cut -c1-12)
BOOK_STAMP := $(VENV)/.installed-book-$(BOOK_HASH)
TEST_STAMP := $(VENV)/.installed-test-$(TEST_HASH)
# axe-core, the accessibility checker tests/browser/test_browser_a11y.py injects into the built
# pages: an npm devDependency pinned in package.json and package-lock.json, installed by `npm ci`
# into node_modules/ (git-ignored) when the lock file changes. Without npm `make test` says so and
# goes on: that test then skips locally, and fails under CI (CI=1, as .ci/run sets).
AXE := node_modules/axe-core/axe.min.js

# The strict build of both editions (book/editions.py): English in _build/html/en, Chinese in
# _build/html/zh, a landing page _build/html/index.html. Any Sphinx warning is an error (-W),
# missing references are warned (-n, nitpicky), all warnings are reported before failing
# (--keep-going), a cell that raises stops the build. The chapters execute once for both
# editions, two at a time, before Sphinx reads them (book/execute.py), and again only when their
# code or what their kernel used changed; an edition is rebuilt incrementally only from a
# successful build (`make html EDITIONS_ARGS=--all` rebuilds every page, `--execute-all` also
# executes every chapter). tests/conftest.py runs the same script.
EDITIONS_ARGS ?=
# Written only after a successful strict build; tests/conftest.py reuses such a build.
BUILD_OK    := _build/.attnbook-build-ok

# Extra flags for JupyterLab, e.g. `make lab LAB_ARGS="--no-browser --port 8899"`.
LAB_ARGS ?=
# Jupyter refuses to start as root without --allow-root (containers, many cloud notebooks run as
# root); the flag is added only there.
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

# What `make unit` leaves out: tests marked in pyproject.toml as needing the built book, a browser
# or many seconds.
UNIT_MARKERS := not slow and not browser and not book

.PHONY: book test unit lint lab lab-source html clean

book: $(BOOK_STAMP)
	@$(MAKE) --no-print-directory html

test: $(TEST_STAMP) $(AXE)
	@$(MAKE) --no-print-directory html
	$(VPY) -m pytest

# The library's tests alone, without building the book (about 3 minutes on two cores): two
# pytest-xdist workers, each test file on one worker (a module's shared fixtures are built once,
# its tests run in order), one torch/BLAS thread per worker (two workers of two threads each on
# two cores spend a quarter of the time waiting for each other). See CONTRIBUTING.md.
unit: $(TEST_STAMP)
	OMP_NUM_THREADS=1 $(VPY) -m pytest -m "$(UNIT_MARKERS)" -n 2 --dist loadfile

# pyflakes, pycodestyle, bugbear, isort and pydocstyle, configured in pyproject.toml.
lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# JupyterLab on the reader notebooks (book/_ext/attnbook_reader_notebooks.py) in notebooks/: en/
# and zh/, chapters in chapters/. notebooks/ is the reader's own copy (git-ignored; in the source
# archive it comes ready): every file of the build's _build/notebooks/ that it lacks is copied
# in (book/editions.py --reader-copy; the book is built first if there is no build and no copy,
# saying so), none is overwritten, so edits and saved outputs stay. Delete a file, or the
# folder, to get the book's version again. Its application
# settings (jupyter/reader/overrides.json) open the Markdown pages the notebooks link
# (references, API) rendered, and keep JupyterLab's news and update checks quiet.
lab: $(BOOK_STAMP)
	@if [ ! -d _build/notebooks/en ] && [ ! -d notebooks/en ]; then \
	  echo "make lab: no reader notebooks yet, so first the book is built, which makes them" \
	    "(about 10 minutes on two cores, once)"; \
	  $(MAKE) --no-print-directory html; \
	fi
	$(VPY) book/editions.py --reader-copy notebooks
	$(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)/notebooks" \
	  --LabApp.app_settings_dir="$(CURDIR)/jupyter/reader" $(LAB_ROOT) $(LAB_ARGS)

# For authors: JupyterLab on the repository, the chapters' MyST sources opened as notebooks by
# Jupytext (jupyter/source/overrides.json); saving writes the .md file. jupyter/
# jupyter_server_config.py (through JUPYTER_CONFIG_PATH) serves each chapter with the kernel's
# language_info, so that JupyterLab does not mark a chapter modified when it opens.
lab-source: $(BOOK_STAMP)
	JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" \
	  --LabApp.app_settings_dir="$(CURDIR)/jupyter/source" $(LAB_ROOT) $(LAB_ARGS)

# The build alone, without the set-up.
html:
	rm -f $(BUILD_OK)
	$(VPY) book/editions.py $(EDITIONS_ARGS)
	touch $(BUILD_OK)
	@echo "The book: $(CURDIR)/_build/html/index.html"

$(VPY):
	$(PYTHON) -m venv $(VENV)

$(BOOK_STAMP): | $(VPY)
	$(VPY) -m pip install -r requirements.txt
	rm -f $(VENV)/.installed-book-*
	touch $@

$(TEST_STAMP): | $(VPY)
	$(VPY) -m pip install -r requirements-test.txt
	rm -f $(VENV)/.installed-test-* $(VENV)/.installed-book-*
	touch $@ $(BOOK_STAMP)

# npm gives the installed files the tarball's old dates: the stamp is touched after.
$(AXE): package.json package-lock.json
	@if command -v npm >/dev/null; then \
	  npm ci --no-audit --no-fund && touch $@; \
	else \
	  echo "make test: npm not found, so axe-core is not installed: the accessibility test" \
	    "skips (it fails under CI). Install Node.js and npm (Debian: apt-get install npm)."; \
	fi

clean:
	rm -rf _build
