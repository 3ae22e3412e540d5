# The two set-up commands on a fresh machine are `make run` and `make test`;
# both create the virtual environment and install what they need (scripts/ensure-tools: the Debian
# packages the tests and benchmarks run, when root; otherwise one line saying what to install).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-replay lint protos bench image image-test image-docker clean venv python test-tools bench-tools e2e-build e2e e2e-up e2e-down e2e-realapi

# Python >= 3.11 with venv support, checked before anything is installed.
python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  found=$$($(PYTHON) --version 2>/dev/null) || found="not found"; \
	  echo "accelscore needs Python >= 3.11, $(PYTHON) is $$found: install python3 >= 3.11 (Debian 12: apt-get install python3 python3-venv) or run make PYTHON=/path/to/python3.11" >&2; \
	  exit 1; }
	@PYTHON=$(PYTHON) bash scripts/ensure-tools venv

# What the tests run: prometheus and promtool (Debian package prometheus, tests/metrics), setpriv
# (util-linux, tests/deploy/test_agent_identity.py).
test-tools:
	@bash scripts/ensure-tools prometheus promtool setpriv

# The Debian package the benchmarks run: prometheus-node-exporter (bench/bench_agent.py).
bench-tools:
	@bash scripts/ensure-tools prometheus-node-exporter

# The runtime dependencies at the image's pins (deploy/constraints.txt, which the image installs too): what is
# tested is what ships (tests/deploy/test_image.py checks the venv against the pins).
$(STAMP): pyproject.toml deploy/constraints.txt Makefile | python
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --constraint deploy/constraints.txt -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

## run: this host's scores, no cluster needed (local mode, printed once)
run: $(STAMP)
	$(BIN)/accelscore local --once

## test: lint, then the whole test suite (mypy included: tests/architecture/test_types.py) on TEST_WORKERS processes,
## but the simulator's replay matrices (marker replay: make test-replay)
# Most tests wait on sockets, processes and timers rather than the CPU: on 2 cores 4 workers measured fastest
# (docs/testing.md, "Running the suite"). --dist loadgroup keeps the tests sharing a module or session fixture on
# one worker (tests/conftest.py). No cluster: the tests marked realapi are deselected (pyproject.toml) and the
# kubeconfigs unset, so every test talks to the in-process test server (make e2e runs e2e/realapi-tests).
TEST_WORKERS ?= 4
# what pyproject.toml's addopts deselect (a second -m replaces the first, so it is said again here)
DESELECTED := not gpu and not image and not realapi
# Bytecode is written (and compiled once, on both cores, before the workers start): with PYTHONDONTWRITEBYTECODE set
# every worker and every `accelscore` child process compiled the package again, and each worker re-rewrote the test
# modules' asserts; collection alone took minutes of each worker at load 20.
PYC := env -u PYTHONDONTWRITEBYTECODE
test: python test-tools $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m compileall -q -j 0 accelscore tests >/dev/null
	$(PYC) -u KUBECONFIG -u HUB_KUBECONFIG $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup -m '$(DESELECTED) and not replay'

## test-replay: the simulator's replay matrices (tests/simulator/test_matrix.py, test_dispatcher_policy.py; marked
## replay by tests/conftest.py): every shipped fleet x trace against the oracle, in every order. CPU, not waits.
test-replay: python $(STAMP)
	$(BIN)/python -m compileall -q -j 0 accelscore tests >/dev/null
	$(PYC) -u KUBECONFIG -u HUB_KUBECONFIG $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup -m '$(DESELECTED) and replay' tests/simulator

lint: $(STAMP)
	$(BIN)/ruff check .

## protos: regenerate the gRPC modules from proto/ (a test checks they match)
protos: $(STAMP)
	$(BIN)/python accelscore/protogen.py

## bench: every benchmark in bench/, one table
bench: python bench-tools $(STAMP)
	$(BIN)/python -m bench

## image: the image as an OCI layout in build/image, without Docker (scripts/build-image: mmdebstrap + umoci, as root)
IMAGE ?= accelscore:dev
image: python $(STAMP)
	bash scripts/build-image $(IMAGE)

## image-test: build the image, then run its entrypoint as the manifests run it (tests/image; not in make test)
image-test: image
	$(BIN)/pytest -m image tests/image

## e2e: real Kubernetes, OCM hub and node on loopback; the checks of issue 27; torn down after (e2e/README.md).
## One check alone: make e2e CHECKS=hub (install devices hub faults uninstall); without CHECKS, e2e-realapi first.
## A planted defect (it must FAIL): make e2e PLANT=policy-cel CHECKS=install (python -m e2e run --help lists them)
CHECKS ?=
e2e: e2e-build image $(if $(CHECKS)$(PLANT),,e2e-realapi)
	$(BIN)/python -m e2e run $(if $(PLANT),--plant $(PLANT),) $(CHECKS)

## e2e-realapi: the tests marked realapi or anyapi (e2e/realapi-tests) against the rig's two real apiservers
## (`up --apiservers-only`: etcd, kube-apiserver, kcm, OCM's CRDs on the hub; no accelscore installed), torn down
## after, also on failure or interrupt; the last line counts passed/failed/errors/skipped. It needs only what
## `e2e/build.sh` caches for it (kube-apiserver, kube-controller-manager, kubectl, the CRDs, etcd from Debian).
## REALAPI_ARGS go to pytest (e.g. REALAPI_ARGS='-n 2 tests/dra').
REALAPI_ARGS ?= -n 2 --dist loadgroup
e2e-realapi: $(STAMP)
	bash e2e/build.sh kube-apiserver kube-controller-manager kubectl crds packages
	$(BIN)/python -m e2e realapi $(REALAPI_ARGS)

## e2e-up / e2e-down: the rig without the checks (NODE=0: hub and managed apiservers only, no kubelet)
NODE ?= 1
e2e-up: e2e-build $(STAMP)
	$(BIN)/python -m e2e up $(if $(filter 0,$(NODE)),--no-node,)

e2e-down: $(STAMP)
	$(BIN)/python -m e2e down

## image-docker: the same image from the Dockerfile, for machines with a Docker daemon (not built by CI)
image-docker:
	docker build -t $(IMAGE) .

## e2e-build: the e2e rig's real components from pinned Go modules (Kubernetes, OCM, Kueue, helm, our plugins)
## into $ACCELSCORE_E2E_CACHE (default ~/.cache/accelscore-e2e); reruns only check (e2e/build.sh, docs/e2e.md)
e2e-build:
	bash e2e/build.sh

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
