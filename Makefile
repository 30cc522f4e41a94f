# Two entry points (see README): `make demo` and `make test`. Everything installs into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# The CPU build of torch (a local wheel on the development machines); GPU workers bring
# their own torch and triton (see docs/deploying.md).
TORCH_SPEC ?= torch==2.13.0

.PHONY: install demo test test-fast test-durations typecheck browser lint audit screenshots

# uv (a wheel from PyPI) installs the same packages as pip would, about 6 times faster
# (12-15 s against 95 s here), with pip's settings on this machine handed over by
# scripts/uv_args.py; where uv cannot be had or fails, pip does the install.
UV_VERSION ?= 0.13.9
$(STAMP): pyproject.toml Makefile scripts/uv_args.py
	$(PYTHON) -m venv $(VENV)
	if $(PY) -m pip install -q "uv==$(UV_VERSION)" && $(VENV)/bin/uv pip install -q \
	    --python $(PY) $$($(PY) scripts/uv_args.py) "$(TORCH_SPEC)" -e '.[evaluator,dev]'; then :; \
	else echo "uv could not install the packages: installing with pip"; \
	  $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q "$(TORCH_SPEC)" && \
	  $(PY) -m pip install -q -e '.[evaluator,dev]'; fi
	touch $(STAMP)

install: $(STAMP)

# Debian's chromium for the browser tests (Playwright drives it; it never downloads one).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# Install, migrate, load the suite, evaluate the example bundles, then serve the site with a
# worker at http://127.0.0.1:8000/ (SQLite and the filesystem broker: no server needed).
demo: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_suite
	$(PY) manage.py seed_demo
	$(PY) manage.py rundev

# Every page at 1280 and 390 px into docs/screenshots/ (with an index), from a throwaway
# site seeded as `make demo` seeds it (about 10 minutes, half of it seed_demo; see
# scripts/screenshots.py; SCREENSHOTS_ARGS="--only submission,board" for some pages).
screenshots: install browser
	$(PY) scripts/screenshots.py $(SCREENSHOTS_ARGS)

# The whole suite on PYTEST_WORKERS processes (pytest-xdist; each on its own test slot, from
# ATREX_TEST_SLOT up; a test module, and the tests of one shared worker stack, stay on one
# process). PYTEST_WORKERS=0 runs it in this process alone. pytest runs with bytecode writes
# on even where PYTHONDONTWRITEBYTECODE is set: otherwise every run, every xdist worker and
# every process a test starts compiles the project again, and pytest re-rewrites the asserts
# of ~520 modules (its plugins' whole packages, schemathesis and hypothesis among them):
# about 11 s of CPU per pytest process here. The caches are git-ignored __pycache__ folders.
PYTEST_WORKERS ?= 2
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest
test: install browser typecheck
	$(VENV)/bin/ruff check .
	$(PY) scripts/bandit_check.py
	# A model changed without its migration fails here (nothing is written).
	$(PY) manage.py makemigrations --check --dry-run
	$(PYTEST) -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The inner loop's subset (docs/testing.md): no browser, no GPU, nothing marked slow (no
# real worker process, no full evaluation).
test-fast: install
	$(PYTEST) -n $(PYTEST_WORKERS) --dist loadgroup -m "not slow and not browser and not gpu" -q $(PYTEST_ARGS)

# Refresh tests/durations.json, the order in which the scheduler sends the test files (the
# longest first; docs/testing.md): the whole suite, each test's wall and CPU time written
# to .venv/test-costs.json (`--test-costs`), then summed per file or GROUP_FILES group.
test-durations: install
	$(PYTEST) -n $(PYTEST_WORKERS) --dist loadgroup -q --test-costs=$(VENV)/test-costs.json $(PYTEST_ARGS)
	$(PY) -c "from tests.conftest import write_durations; write_durations('$(VENV)/test-costs.json')"

# mypy over the service and selector layers (which files: [tool.mypy] in pyproject.toml).
typecheck: install
	$(PY) -m mypy

lint: install
	$(VENV)/bin/ruff check .

# Known vulnerabilities in the installed packages (pip-audit, over the network to PyPI).
# Fails only on a vulnerability not explained in security/pip-audit-accepted.toml; an
# unreachable service only warns (see docs/security.md).
audit: install
	$(PY) scripts/pip_audit_check.py
