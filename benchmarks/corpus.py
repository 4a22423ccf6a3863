"""A deterministic synthetic memory pool for the retrieval benchmark.

Insights, workflows and summaries across six domains, assembled from templates with varied vocabulary
(artifacts, symptoms, actions, tools, reasons per domain, plus cross-domain meta-knowledge). The same seed
always gives the same memories and queries, so their embeddings can be cached between runs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from mtl_graph.memory.base import Memory, Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.formats.summary import SummaryMemory
from mtl_graph.memory.formats.workflow import WorkflowMemory

GENERATOR_VERSION = 1

DOMAINS: dict[str, dict[str, list[str]]] = {
    "swe-bench": {
        "artifacts": [
            "the failing regression test", "a Django model field", "the ORM query builder", "a deprecated keyword argument",
            "the public API of the module", "a private helper function", "the settings loader", "a pytest fixture",
            "the URL routing table", "a database migration", "the serializer class", "an abstract base class",
            "the error message format", "a type annotation", "the default argument value", "a circular import",
            "the logging configuration", "an inherited method override", "a context manager", "the plugin registry",
            "the form validation code", "a unicode handling branch", "the caching decorator", "a signal handler",
            "the template rendering engine", "the admin changelist view",
        ],
        "symptoms": [
            "raises a TypeError on None input", "returns stale cached values", "breaks backwards compatibility",
            "swallows an exception silently", "produces a wrong repr", "fails only on Windows paths",
            "leaks a file handle", "mutates its input list", "ignores a keyword argument", "loses timezone information",
            "compares floats with equality", "orders results non-deterministically", "crashes on empty input",
            "emits a misleading deprecation warning", "double-escapes HTML", "rounds half values the wrong way",
            "skips validation for nested objects", "reads the wrong environment variable", "hangs on a recursive call",
            "truncates long identifiers",
        ],
        "actions": [
            "reproduce the bug with a minimal script", "read every call site before editing", "run the narrow test file first",
            "search the repository for similar code paths", "check git blame for the original intent",
            "add a regression test that fails before the fix", "keep the public signature unchanged",
            "run the full test module after the edit", "inspect the traceback from the bottom frame",
            "compare behaviour against the documented contract", "grep for the symbol across the package",
            "read the contributing guide for test commands", "patch the smallest function that owns the bug",
            "check subclasses that override the method", "revert unrelated formatting changes",
            "verify the fix on both old and new code paths", "look for an existing utility before writing one",
            "print intermediate values in a scratch script", "run the linters the project configures",
            "diff the change before submitting",
        ],
        "tools": ["pytest -x -q", "git diff", "grep -rn", "python -m pdb", "git log -p", "tox -e py311", "ruff check",
                  "python -c", "git stash", "pip install -e ."],
    },
    "terminal-bench": {
        "artifacts": [
            "a systemd service unit", "the nginx configuration", "a cron job", "the shell startup file", "a tar archive",
            "a broken symbolic link", "the PATH variable", "a log rotation policy", "the firewall rules", "a git submodule",
            "a Python virtual environment", "a Makefile target", "the SSH configuration", "a Docker build context",
            "an expired TLS certificate", "a locale setting", "a background process", "a named pipe", "the hosts file",
            "a compressed log file", "the package manager cache", "a file permission mask", "a mounted volume",
            "an environment file", "a shell script with bashisms", "the sudoers entry",
        ],
        "symptoms": [
            "fails with permission denied", "works interactively but not from cron", "runs out of disk space",
            "prints nothing and exits with status one", "uses the wrong interpreter", "leaves zombie processes",
            "cannot resolve a hostname", "hangs waiting for input", "corrupts files with CRLF line endings",
            "picks up a stale binary", "binds to the wrong port", "fills the terminal with escape codes",
            "loses environment variables under sudo", "fails only in a non-login shell", "times out on slow networks",
            "overwrites the output file", "expands a glob unexpectedly", "misreads file names with spaces",
            "depends on the current directory", "returns success even when a step failed",
        ],
        "actions": [
            "check the exit status of every command", "quote every variable expansion", "use absolute paths in scripts",
            "inspect the process list before killing anything", "read the service logs with journalctl",
            "test the command in a clean shell", "set -euo pipefail at the top of the script",
            "verify file ownership and mode with stat", "dry-run destructive commands first",
            "write output to a temporary file and move it atomically", "check free disk space before large copies",
            "confirm which binary runs with command -v", "read the man page for the exact flag",
            "list open ports before starting a server", "back up configuration files before editing",
            "validate the configuration with the tool's own checker", "reproduce the environment of the failing job",
            "tail the log while triggering the failure", "use find with -print0 and xargs -0",
            "check the expected output format exactly",
        ],
        "tools": ["journalctl -u", "ls -la", "stat", "ss -ltnp", "df -h", "strace -f", "find . -name", "xargs -0",
                  "nginx -t", "shellcheck"],
    },
    "livecodebench": {
        "artifacts": [
            "a dynamic programming table", "the binary search bounds", "a priority queue", "the graph adjacency list",
            "a sliding window", "the modular arithmetic", "a recursive backtracking search", "a union-find structure",
            "the prefix sum array", "a segment tree", "the input parser", "a two-pointer scan", "a memoized recursion",
            "the sorting comparator", "an interval merge", "a bit manipulation trick", "the breadth-first search queue",
            "a topological order", "the output formatter", "a hash map of counts", "a monotonic stack",
            "a shortest path relaxation", "the greedy choice", "a matrix exponentiation", "a string hashing scheme",
            "a Fenwick tree",
        ],
        "symptoms": [
            "exceeds the time limit on large inputs", "overflows on the maximum constraint", "is off by one at the boundary",
            "fails when the input is empty", "prints extra whitespace", "hits the recursion limit",
            "returns a wrong answer on duplicates", "misreads multiple test cases", "uses too much memory",
            "loops forever on a cycle", "mishandles negative numbers", "sorts with an unstable key",
            "forgets the modulo before subtraction", "double counts pairs", "misses the single element case",
            "reads input line by line too slowly", "assumes the graph is connected", "confuses zero and one indexing",
            "rounds a floating point answer", "breaks ties in the wrong order",
        ],
        "actions": [
            "check the constraints before choosing an algorithm", "test the smallest and largest cases",
            "write a brute force to compare against", "trace the example by hand", "read all input at once",
            "use an iterative version instead of deep recursion", "apply the modulo after every operation",
            "state the loop invariant before coding", "generate random tests and diff the outputs",
            "print exactly the required format", "estimate the complexity against the limits",
            "handle the empty and single element inputs first", "use sys.stdin for fast reading",
            "prove the greedy choice with an exchange argument", "cache subproblem results",
            "sort once and reuse the order", "avoid floating point when integers suffice",
            "reset global state between test cases", "simplify the recurrence before implementing",
            "verify against every sample before submitting",
        ],
        "tools": ["python3 solution.py < sample.txt", "diff", "time", "a random test generator", "assert statements",
                  "functools.lru_cache", "heapq", "bisect", "collections.Counter", "sys.setrecursionlimit"],
    },
    "mle-bench": {
        "artifacts": [
            "the training loop", "a validation split", "the feature pipeline", "a learning rate schedule",
            "the submission file", "a gradient boosting model", "the tokenizer vocabulary", "a data loader",
            "the class imbalance", "a cross-validation fold", "the evaluation metric", "an image augmentation",
            "a categorical encoding", "the random seed", "a pretrained checkpoint", "the label column",
            "a missing value imputation", "the early stopping rule", "a batch size", "the test-time preprocessing",
            "an ensemble of models", "a target leakage source", "the GPU memory budget", "a time-series split",
            "the sample submission format", "a hyperparameter search",
        ],
        "symptoms": [
            "scores well locally but badly on the leaderboard", "diverges after a few epochs", "leaks the target",
            "runs out of memory", "writes predictions in the wrong order", "overfits the small validation set",
            "uses a different preprocessing at test time", "is not reproducible between runs",
            "produces NaN losses", "misses rows in the submission", "trains far too slowly",
            "evaluates with the wrong metric", "shuffles a time series", "drops rare classes",
            "mixes up probability and label outputs", "ignores sample weights", "saves the wrong checkpoint",
            "normalizes with statistics from the test set", "crashes on unseen categories",
            "silently casts integers to floats",
        ],
        "actions": [
            "build a simple baseline first", "check the submission format against the sample file",
            "fix the random seeds everywhere", "validate with the competition metric", "inspect a few raw examples",
            "fit preprocessing only on the training folds", "log the validation score every epoch",
            "compare train and validation distributions", "start with a small subset to debug quickly",
            "save predictions with the id column", "check for duplicated rows across splits",
            "monitor memory use while loading data", "keep a table of experiments and scores",
            "reduce the learning rate when the loss spikes", "use stratified folds for imbalanced labels",
            "assert the number of rows before writing", "plot the learning curves", "ensemble only validated models",
            "time each stage of the pipeline", "re-run the notebook top to bottom",
        ],
        "tools": ["pandas", "scikit-learn", "LightGBM", "PyTorch", "numpy", "a validation notebook", "matplotlib",
                  "nvidia-smi", "joblib", "a metrics script"],
    },
    "web-dev": {
        "artifacts": [
            "a React component", "the REST endpoint", "a CSS grid layout", "the authentication middleware",
            "a form submission handler", "the session cookie", "a GraphQL resolver", "the client-side router",
            "a websocket connection", "the state management store", "an API response schema", "a CORS policy",
            "the build configuration", "a server-side rendered page", "a pagination cursor", "the error boundary",
            "a rate limiter", "an accessibility label", "the service worker cache", "a date picker widget",
            "the JSON serializer", "a file upload endpoint", "an OAuth callback", "the content security policy",
            "a database connection pool", "an HTTP retry policy",
        ],
        "symptoms": [
            "renders twice on every update", "returns a 500 on malformed JSON", "breaks on mobile screens",
            "leaks memory on navigation", "accepts invalid input", "logs users out randomly",
            "shows stale data after saving", "blocks the main thread", "sends credentials to the wrong origin",
            "fails the preflight request", "loses the scroll position", "double submits the form",
            "returns the wrong status code", "breaks keyboard navigation", "caches private responses",
            "times out under load", "mixes server and client time zones", "exposes internal error details",
            "paginates with duplicate items", "retries non-idempotent requests",
        ],
        "actions": [
            "check the network tab for the actual request", "validate input at the API boundary",
            "write an integration test against the endpoint", "read the framework's upgrade notes",
            "reproduce the issue in a fresh browser profile", "keep the response schema stable",
            "log the request id with every error", "test with keyboard only", "add a loading and an error state",
            "debounce expensive handlers", "use the framework's built-in escaping", "return precise status codes",
            "check the response headers", "profile the render with the dev tools", "make handlers idempotent",
            "store secrets outside the repository", "test on a narrow viewport", "pin the dependency versions",
            "run the end-to-end suite before merging", "check the server logs for the failing request",
        ],
        "tools": ["curl -i", "the browser dev tools", "npm test", "playwright", "jest", "httpie", "lighthouse",
                  "eslint", "the framework's test client", "a mock server"],
    },
    "data-eng": {
        "artifacts": [
            "a SQL join", "the ETL job", "a CSV export", "a window function", "the schema migration", "a parquet file",
            "an aggregation query", "the deduplication step", "a slowly changing dimension", "the job scheduler",
            "a foreign key constraint", "an index on the lookup column", "the incremental load", "a JSON column",
            "a timestamp conversion", "the data quality check", "a partitioned table", "the staging area",
            "a message queue consumer", "an upsert statement", "a materialized view", "the null handling",
            "a currency conversion", "the report totals", "a backfill script", "a decimal column",
        ],
        "symptoms": [
            "duplicates rows after a retry", "drops rows with null keys", "runs for hours on a full scan",
            "produces totals that do not match", "breaks on a schema change", "loads the same file twice",
            "converts time zones inconsistently", "locks the table during business hours", "loses precision on money",
            "misparses quoted commas", "orders rows differently each run", "fails on a late-arriving record",
            "silently truncates strings", "double counts after a join fan-out", "reads the header as data",
            "skips the last partition", "writes partial output on failure", "mixes up encodings",
            "deadlocks under concurrent writes", "returns an empty result on the boundary date",
        ],
        "actions": [
            "count rows before and after every step", "check the join keys for duplicates",
            "run the query with EXPLAIN first", "make the load idempotent", "validate totals against the source",
            "store timestamps in UTC", "use decimal types for money", "test with a small sample file",
            "write to a staging table and swap", "check for nulls in key columns", "parse CSV with a real parser",
            "add a unique constraint to catch duplicates", "log the number of rejected records",
            "wrap the load in a transaction", "compare schemas before loading", "backfill one partition first",
            "sort explicitly before exporting", "keep the raw input for replay", "assert the output schema",
            "verify the report against a hand-computed example",
        ],
        "tools": ["EXPLAIN ANALYZE", "sqlite3", "psql", "csvkit", "pandas", "dbt test", "great_expectations",
                  "COUNT(*)", "a checksum", "duckdb"],
    },
}

META = [
    "inspect before editing and verify after", "read the task statement twice", "respect the required output format",
    "treat memories as hints to verify, not facts", "run the tests that the task provides",
    "avoid editing files the task did not mention", "stop and re-plan after two failed attempts",
    "prefer the smallest change that passes", "check assumptions against the real environment",
    "keep interfaces unchanged unless asked", "confirm the fix with a fresh run", "write down what was tried",
]

REASONS = [
    "otherwise the fix looks right but breaks a hidden test", "because the grader checks the exact output",
    "since the first guess is usually the symptom, not the cause", "so the change stays reviewable",
    "because similar-looking tasks often differ in semantics", "otherwise a later step fails far from the cause",
    "because silent failures are the hardest to spot", "which saves several wasted iterations",
    "since the environment differs from the local machine", "because the obvious approach timed out before",
    "otherwise verification gives false confidence", "because the spec was stricter than it first seemed",
]

OPENERS = ["When", "If", "Whenever", "In tasks where", "Once you notice that"]
TITLE_VERBS = ["Check", "Guard", "Verify", "Fix", "Watch", "Test", "Inspect", "Handle", "Stabilize", "Debug", "Audit",
               "Protect"]
GOAL_VERBS = ["Repair", "Diagnose", "Fix", "Make reliable", "Track down why", "Stop", "Prevent", "Harden"]
TASK_VERBS = ["fix", "repair", "rewrite", "extend", "debug", "speed up", "clean up", "make robust"]
MODELS = ["gpt-5-mini", "claude-sonnet-4", "qwen3-coder", "deepseek-v3"]
PLANS = [
    "First I will {a1} to see where {art} {sym}. Then I will {a2}, make the change, and {a3}.",
    "The task is about {art} that {sym}. My plan: {a1}; {a2}; finally {a3} with {tool}.",
    "I need to find out why {art} {sym}. I will {a1}, then {a2}, and confirm with {tool}.",
    "Plan: {a1}. Next {a2}. The risk is that {art} {sym} again, so I will {a3}.",
]


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


@dataclass
class Query:
    text: str
    type: str
    exclude_domain: str


def _sources(rng: random.Random, domain: str, n: int) -> list[Provenance]:
    sources = [Provenance(domain=domain, source_task_id=f"{domain}-{n}", task_model=rng.choice(MODELS))]
    if rng.random() < 0.1:  # a merged near-duplicate: a second source from another domain
        other = rng.choice([d for d in DOMAINS if d != domain])
        sources.append(Provenance(domain=other, source_task_id=f"{other}-x{n}", task_model=rng.choice(MODELS)))
    return sources


def _one(rng: random.Random, n: int) -> Memory:
    domain = rng.choice(list(DOMAINS))
    v = DOMAINS[domain]
    art, sym = rng.choice(v["artifacts"]), rng.choice(v["symptoms"])
    a1, a2, a3 = rng.sample(v["actions"], 3)
    tool, meta, reason = rng.choice(v["tools"]), rng.choice(META), rng.choice(REASONS)
    outcome = "success" if rng.random() < 0.7 else "failure"
    sources = _sources(rng, domain, n)
    kind = rng.random()
    if kind < 0.4:
        noun = art.split(" ", 1)[1] if art.startswith(("a ", "an ", "the ")) else art
        title = f"{rng.choice(TITLE_VERBS)} {noun} {rng.choice(['early', 'first', 'carefully', 'explicitly', 'twice', 'before submitting', 'with a test', 'in isolation'])}"
        description = f"{rng.choice(OPENERS)} {art} {sym}, {a1} and {a2}."
        if outcome == "failure":
            content = f"Do not assume {art} is fine; the run failed because nobody would {a3}. {_cap(meta)}."
        else:
            content = f"{_cap(a1)}, then {a3} using {tool}, {reason}. {_cap(meta)}."
        return InsightMemory(title=title, description=description, content=content, outcome=outcome, sources=sources)
    if kind < 0.7:
        goal = f"{rng.choice(GOAL_VERBS)} {art} that {sym}, {rng.choice(['in a large codebase', 'under a deadline', 'with little logging', 'after an upgrade', 'in a fresh environment', 'with flaky tests', 'on a shared machine', 'with unclear requirements'])}"
        actions = [_cap(a1), f"Use {tool} to {a2}", _cap(a3), _cap(meta)][: rng.randint(2, 4)]
        return WorkflowMemory(goal=goal, actions=actions, outcome=outcome, sources=sources)
    task = (f"The task asked to {rng.choice(TASK_VERBS)} {art}, which {sym}. "
            f"{rng.choice(['The repository had', 'The environment had', 'The starting state had', 'The instructions mentioned'])} "
            f"{rng.choice(v['artifacts'])} {rng.choice(['as well', 'too', 'in the same area', 'nearby'])}.")
    experience = (f"The agent used {tool} and tried to {a1}. "
                  f"{'It passed after it chose to ' + a2 if outcome == 'success' else 'It failed because it did not ' + a2}; "
                  f"{reason}.")
    return SummaryMemory(task_summary=task, experience_summary=experience, outcome=outcome, sources=sources)


def memories(n: int, seed: int = 7, offset: int = 0) -> list[Memory]:
    """n memories with distinct retrieval keys; `offset` draws another stream (for write tests)."""
    rng = random.Random(f"{seed}:{offset}")
    out: list[Memory] = []
    seen: set[str] = set()
    i = 0
    while len(out) < n:
        m = _one(rng, offset + i)
        i += 1
        key = f"{m.type}:{m.key_text()}"
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def queries(n: int, seed: int = 11) -> list[Query]:
    """HyDE-style plans, each searched with a type filter and its own domain held out."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        domain = rng.choice(list(DOMAINS))
        v = DOMAINS[domain]
        a1, a2, a3 = rng.sample(v["actions"], 3)
        text = rng.choice(PLANS).format(a1=a1, a2=a2, a3=a3, art=rng.choice(v["artifacts"]),
                                        sym=rng.choice(v["symptoms"]), tool=rng.choice(v["tools"]))
        out.append(Query(text, rng.choice(["insight", "workflow", "summary"]), domain))
    return out
