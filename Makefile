# The two set-up commands on a fresh machine are `make run` and `make test`;
# both create the virtual environment and install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint protos bench image clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

## run: this host's scores, no cluster needed (local mode, printed once)
run: $(STAMP)
	$(BIN)/accelscore local --once

## test: lint, then the whole test suite
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .

## protos: regenerate the gRPC modules from proto/ (a test checks they match)
protos: $(STAMP)
	$(BIN)/python accelscore/protogen.py

## bench: every benchmark in bench/, one table
bench: $(STAMP)
	$(BIN)/python -m bench

IMAGE ?= accelscore:dev
image:
	docker build -t $(IMAGE) .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
