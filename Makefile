# The two README commands: `make demo` and `make test`. Each does all set-up itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench bench-quick bench-retrieval install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/mtl demo

test: $(STAMP)
	$(PY) -m pytest -q

# The whole system side by side, one table (under 15 min on 2 cores); bench-quick: small sizes (under 2 min).
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[test,bench]"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	nice -n 5 $(PY) benchmarks/system.py --markdown .mtl/bench-last.md --json .mtl/bench-last.json

bench-quick: $(BENCH_STAMP)
	$(PY) benchmarks/system.py --quick

bench-retrieval: $(STAMP)
	$(PY) benchmarks/retrieval.py

clean:
	rm -rf $(VENV) .mtl .pytest_cache
