# One verb per job. Every target creates the virtualenv it needs from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run demo test docs lint typecheck unit servers browser promtool docker image bench \
	fuzz atheris \
	load clean

$(STAMP): pyproject.toml
	@echo "strictcall: first run: creating $(VENV) and installing strictcall with its dev tools (about a minute)..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)
	@echo "strictcall: installed; the commands are in $(BIN) (or run: . $(VENV)/bin/activate)"

install: $(STAMP)

## run: the notes service on the embedded default (SQLite), with demo notes and tokens
run: $(STAMP)
	$(BIN)/strictcall serve --demo

demo: $(STAMP)
	$(BIN)/strictcall demo

## test: lint, type checks and the whole test suite (the TypeScript MCP client test installs
## tests/ts's npm packages with `npm ci` when they are missing; it needs node and npm)
test: lint typecheck unit docs

## docs: the documentation site from docs/ (mkdocs.yml), built strictly into build/site,
## offline (the `docs` extra installed here once, when missing)
docs: $(STAMP)
	$(BIN)/python -c "import mkdocs, material, mkdocstrings" 2>/dev/null \
		|| $(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --quiet

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench reliability
	$(BIN)/ruff format --check src tests examples bench reliability
	$(BIN)/strictcall lint src

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) browser promtool docker servers
	$(BIN)/pytest --cov --cov-report=term

## servers: the real MCP servers the tests run behind federate: the npm ones (`npm ci` in
## tests/upstreams) and the PyPI ones in a venv of their own (tests/upstreams/.venv-servers, pinned
## in servers-requirements.txt); quick when they are there
servers: $(STAMP)
	$(BIN)/python tests/servers_setup.py

## browser: Debian's chromium for the operator page's test (apt-get, when root and missing)
browser: $(STAMP)
	$(BIN)/python tests/browser.py

## promtool: Debian's prometheus for promtool, which checks /metrics and the alert rules
promtool: $(STAMP)
	$(BIN)/python tests/promtool.py

## docker: Debian's docker.io and debootstrap for the container image's test (apt-get, when
## root and missing), and its daemon started when none answers
docker: $(STAMP)
	$(BIN)/python tests/container_setup.py

## image: the container image (Dockerfile) as $(IMAGE). The wheels are made here first, so the
## build itself needs no network; BASE defaults to the official slim Python of .venv's version
VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= strictcall:$(VERSION)
BASE ?= python:$(shell $(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')-slim
## The image holds the extras its documented features need: serve, proxy and federate
## (server), PostgreSQL (postgres), /metrics (metrics), shared quotas in Redis (quotas) and an
## identity provider's tokens (oauth). No base and no registry: the message names the local one.
## async-timeout: redis needs it on a Python before 3.11.3 (the Debian base's), this one may not
IMAGE_EXTRAS = server,postgres,metrics,quotas,oauth
image: $(STAMP)
	$(BIN)/python tests/container_setup.py --check-base $(BASE)
	rm -rf build
	$(BIN)/python -m pip wheel --quiet --disable-pip-version-check --wheel-dir build/image/wheels \
		'.[$(IMAGE_EXTRAS)]' 'async-timeout>=4.0.3'
	docker build --network none --tag $(IMAGE) --build-arg BASE=$(BASE) \
		--build-arg VERSION=$(VERSION) --build-arg EXTRAS=$(IMAGE_EXTRAS) \
		--build-arg "REVISION=$$(git rev-parse HEAD 2>/dev/null)" \
		--build-arg "SOURCE=$$(git remote get-url origin 2>/dev/null | sed 's#//[^/@]*@#//#')" .
	docker image prune --force --filter label=strictcall.stage=install >/dev/null
	@docker image inspect --format '{{.Size}}' $(IMAGE) \
		| awk '{printf "strictcall: built $(IMAGE), %.0f MB\n", $$1 / 1e6}'

## bench: the side-by-side benchmark (peers installed into bench/.venv-peers; granian, for the
## server comparison, from the `bench` extra; ContextForge into bench/.venv-contextforge);
## about 40 minutes, 20 of them the two memory runs. The last step writes bench/RESULTS.md
## again with the proxy's and the federation's figures (their *-results.json) copied in;
## bench/capacity.py writes bench/CAPACITY.md (calls per core per path, for docs/capacity.md)
bench: $(STAMP)
	$(BIN)/python -c "import granian" 2>/dev/null || $(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/run.py
	command -v npm >/dev/null && test ! -d tests/upstreams/node_modules && (cd tests/upstreams && npm ci --silent) || true
	$(BIN)/python bench/proxy_overhead.py
	$(BIN)/python bench/federation.py
	$(BIN)/python bench/federation_memory.py
	$(BIN)/python bench/instances.py
	$(BIN)/python bench/capacity.py
	$(BIN)/python bench/run.py --render-only

## fuzz: the long fuzzing harness; N inputs in all, split across the five targets, run on
## every core, resumable (make fuzz N=1000000; stopped, the same command continues)
N ?= 100000
fuzz: $(STAMP)
	$(BIN)/python reliability/fuzz.py --total $(N) --json fuzz-report.json

## atheris: coverage-guided fuzzing of the strict intake and the schema describer, both at
## once, ATHERIS_SECONDS each (needs the `fuzz` extra: atheris)
ATHERIS_SECONDS ?= 120
atheris: $(STAMP)
	$(BIN)/python -c "import atheris" 2>/dev/null || $(BIN)/python -m pip install --quiet -e '.[fuzz]'
	$(BIN)/python reliability/atheris_fuzz.py intake -max_total_time=$(ATHERIS_SECONDS) \
		-dict=reliability/atheris.dict -print_final_stats=1 > atheris-intake.log 2>&1 & \
	$(BIN)/python reliability/atheris_fuzz.py describer -max_total_time=$(ATHERIS_SECONDS) \
		-dict=reliability/atheris.dict -print_final_stats=1 > atheris-describer.log 2>&1; \
	status=$$?; wait $$! ; status2=$$?; \
	grep -H -E 'DONE|executed_units|Test unit written' atheris-intake.log atheris-describer.log; \
	test $$status -eq 0 -a $$status2 -eq 0

## load: 64 connections for 60 s against a real server, with a mix of calls
load: $(STAMP)
	$(BIN)/python reliability/load.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .coverage tests/ts/node_modules
