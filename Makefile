# Two entry points (see README): `make demo` and `make test`. Everything installs into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# The CPU build of torch (a local wheel on the development machines); GPU workers bring
# their own torch and triton (see docs/deploying.md).
TORCH_SPEC ?= torch==2.13.0

.PHONY: install demo test test-fast test-durations checks typecheck browser lint bandit audit screenshots

# Every step writes bytecode caches, even where PYTHONDONTWRITEBYTECODE is set (as here):
# otherwise every Python process of a run (the checks, each pytest process, every process a
# test starts) compiles again what it imports; on a fresh clone the first one to import a
# module writes its cache for all the others. A Django process of this site pays about 6.5 s
# of CPU compiling without them (`manage.py makemigrations`: 9.4 s cold, 2.8 s warm), and
# pytest re-rewrites the asserts of ~520 modules (its plugins' whole packages, schemathesis
# and hypothesis among them): about 11 s of CPU per pytest process. The caches are
# git-ignored __pycache__ folders.
unexport PYTHONDONTWRITEBYTECODE

# torch's idle OpenMP threads sleep rather than spin (the evaluator passes this on to its
# children): the demo's worker, its evaluations and the tests' two processes share a few
# cores, and a spinning thread spends the CPU another process is waiting for. On this 2-core
# machine the whole suite took 390 s of pytest with it against 447 s without, back to back
# (results/ci-timings.md, session 25).
OMP_WAIT_POLICY ?= PASSIVE
export OMP_WAIT_POLICY

# uv (a wheel from PyPI) installs the same packages as pip would, about 6 times faster
# (12-15 s against 95 s here), with pip's settings on this machine handed over by
# scripts/uv_args.py; where uv cannot be had or fails, pip does the install. The venv's
# files are hard links into uv's cache where they can be (uv copies them where not): its
# default here copies 2.4 GB, 9.2 s of the install against 2.8 s (nothing edits an
# installed package's files in place).
UV_VERSION ?= 0.13.9
$(STAMP): pyproject.toml Makefile scripts/uv_args.py
	$(PYTHON) -m venv $(VENV)
	if $(PY) -m pip install -q "uv==$(UV_VERSION)" && $(VENV)/bin/uv pip install -q \
	    --link-mode hardlink --python $(PY) $$($(PY) scripts/uv_args.py) "$(TORCH_SPEC)" -e '.[evaluator,dev]'; then :; \
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
# process). PYTEST_WORKERS=0 runs it in this process alone. The checks first (a model
# changed without its migration fails in pytest: tests/test_migrations_complete.py).
PYTEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest
test: install browser checks
	$(PYTEST) -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# ruff, mypy and bandit side by side: each is one process on one core (about 16 s of CPU in
# all with mypy's cache empty, as on a fresh clone; bandit the longest, about 10 s), so on two
# idle cores they end about when bandit does. Each one's output is printed in one piece.
checks: install
	$(MAKE) --no-print-directory -j 3 --output-sync=target lint typecheck bandit

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

# Security findings in the site's code, each explained or failing (docs/security.md).
bandit: install
	$(PY) scripts/bandit_check.py

# Known vulnerabilities in the installed packages (pip-audit, over the network to PyPI).
# Fails only on a vulnerability not explained in security/pip-audit-accepted.toml; an
# unreachable service only warns (see docs/security.md).
audit: install
	$(PY) scripts/pip_audit_check.py
