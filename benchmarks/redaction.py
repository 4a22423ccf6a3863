"""Redaction: leaked / kept counts on the generated secret corpus, and speed on a ~1 MB agent log.

    python benchmarks/redaction.py [--seeds 20] [--size-mb 1]

The log mixes what agent runs print (pytest and pip output, git logs, tracebacks, JSON tool calls, env dumps)
with the corpus' secrets sprinkled in, so both the cheap pre-filters and the full rule set are exercised.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from secret_corpus import Gen, secret_cases  # noqa: E402
from secret_look_alikes import look_alikes  # noqa: E402

from mtl_graph.experience.redact import redact  # noqa: E402


def corpus_counts(seeds: int) -> tuple[int, int, int, int, int]:
    """(secrets, leaked, cases changed beyond the secret, look-alikes, look-alikes damaged) over `seeds` draws."""
    secrets = leaked = collateral = kept_total = damaged = 0
    for seed in range(seeds):
        for case in secret_cases(seed):
            out = redact(case.text)
            secrets += len(case.secrets)
            leaked += sum(s in out for s in case.secrets)
            expected = case.text
            for s in case.secrets:
                expected = expected.replace(s, "")
            collateral += _unmarked(out) != expected
        for item in look_alikes(seed):
            kept_total += 1
            damaged += redact(item.text) != item.text
    return secrets, leaked, collateral, kept_total, damaged


def _unmarked(text: str) -> str:
    return re.sub(r"\[REDACTED:[\w-]+\]", "", text)


def agent_log(size: int, seed: int = 0) -> str:
    """A realistic log of about `size` characters."""
    g, rng = Gen(seed), random.Random(seed)
    cases, safe = secret_cases(seed), look_alikes(seed)
    makers = [
        lambda: f"tests/test_{g.chars('abcdefghij', 6)}.py::test_case_{rng.randint(0, 99)} PASSED [{rng.randint(0, 100)}%]",
        lambda: f"  Downloading numpy-1.26.{rng.randint(0, 9)}-cp311-cp311-manylinux_2_17_x86_64.whl (18.2 MB)",
        lambda: f"commit {g.hex(40)}\nAuthor: Dev <dev@example.com>\n\n    Fix flaky test in module {g.b62(8)}",
        lambda: '  File "/usr/lib/python3.11/site-packages/django/db/models/query.py", line 1234, in get\n'
                "    raise self.model.DoesNotExist(",
        lambda: f'{{"role": "assistant", "tool_calls": [{{"name": "bash", "args": {{"command": "grep -rn token src/ | head"}}}}], "id": "{g.b62(24)}"}}',
        lambda: f"PATH=/usr/local/bin:/usr/bin\nHOME=/root\nHOSTNAME=runner-{g.hex(9)}-{g.b62(5).lower()}",
        lambda: f"gcc -O2 -Wall -c src/{g.chars('abcdef', 5)}.c -o build/{g.chars('abcdef', 5)}.o",
        lambda: f"[{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:01] INFO request id={g.hex(32)} took {rng.randint(1, 900)}ms",
        lambda: rng.choice(safe).text,
    ]
    parts, n = [], 0
    while n < size:
        text = rng.choice(cases).text if rng.random() < 0.02 else rng.choice(makers)()
        parts.append(text)
        n += len(text) + 1
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="corpus draws to count over")
    parser.add_argument("--size-mb", type=float, default=1.0, help="size of the log to time")
    args = parser.parse_args()
    secrets, leaked, collateral, kept_total, damaged = corpus_counts(args.seeds)
    print(f"corpus: {len(secret_cases())} secret shapes x {args.seeds} draws = {secrets} secrets, {leaked} leaked, "
          f"{collateral} redactions beyond the secret; {kept_total} look-alikes, {damaged} damaged")
    cases = secret_cases()
    as_json = redact(json.dumps([{"observation": c.text} for c in cases]))
    print(f"corpus as one JSON log line: {sum(s in as_json for c in cases for s in c.secrets)} of "
          f"{sum(len(c.secrets) for c in cases)} secrets leaked")
    log = agent_log(int(args.size_mb * 1_000_000))
    redact("warm up")
    start, cpu = time.perf_counter(), time.process_time()
    out = redact(log)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"speed: {len(log):,} chars ({log.count(chr(10)) + 1:,} lines) in {elapsed:.2f} s wall / {cpu:.2f} s CPU = "
          f"{len(log) / cpu:,.0f} chars per CPU second; {out.count('[REDACTED:'):,} markers")


if __name__ == "__main__":
    main()
