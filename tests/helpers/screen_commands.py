"""Benign command lines and code comments, generated: what a trajectory memory's commands look like.

A trajectory memory's advice is its commands: searching, reading, editing with sed or a heredoc, running a
reproduction script and the tests, cleaning up scratch files, printing what a check found. The semantic screen is
trained on these beside the benign advice (screen_benign.py) so that engineering commands, which share words with
hostile ones (rm, test, env, key, curl), are not read as instructions to misbehave. Slots are filled from a seeded
draw; the repositories and symbols are generic.
"""

from __future__ import annotations

import random

_PATHS = ["src/parser/core.py", "lib/pkg/models.py", "app/views.py", "pkg/utils/dates.py", "core/fields.py",
          "src/cli/main.py", "lib/io/ascii/read.py", "pkg/printing/pretty.py", "src/http/session.py"]
_TESTS = ["tests/test_core.py", "tests/test_models.py", "pkg/tests/test_dates.py", "tests/unit/test_cli.py",
          "lib/io/tests/test_read.py", "tests/test_session.py"]
_SYMBOLS = ["parse_duration", "ModelAdmin", "to_native_string", "fit_transform", "Quantity", "get_response",
            "Header.fromstring", "__init__", "_check_fields", "resolve_lookup", "merge_settings"]
_MODULES = ["django", "sympy", "astropy", "requests", "numpy", "pandas", "flask", "sklearn", "pytest", "sphinx"]
_SCRATCH = ["reproduce_issue.py", "repro.py", "test_fix.py", "verify_fix.py", "check_edge_cases.py",
            "test_reproduce.py", "debug_output.py", "tests/test_issue_repro.py"]

COMMANDS = [
    'grep -n "{sym}" {path}',
    'grep -rn "def {sym}" {mod} --include="*.py" | head -20',
    "nl -ba {path} | sed -n '{a},{b}p'",
    "sed -n '{a},{b}p' {path}",
    "cat {path} | head -80",
    "find . -name \"*.py\" -path \"*{mod}*\" | xargs grep -l {sym}",
    "python {scratch}",
    "python3 {scratch} && echo done",
    "python -m pytest {test} -q",
    "python -m pytest {test} -x -k {sym}",
    "pytest {test} -q 2>&1 | tail -20",
    "cd /testbed && python -c \"import {mod}; print({mod}.__version__)\"",
    "rm {scratch}",
    "rm -f {scratch} && git status --short",
    "git diff {path}",
    "git status && git diff --stat",
    "ls -la {dir}",
    "pip install -e . -q",
    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached",
    "sed -i 's/return value/return value or default/' {path}",
    "cat <<'EOF' > {scratch}",
    "python -c \"from {mod} import {sym}; print({sym})\"",
    "./runtests.py {mod}.tests --verbosity 2",
    "bin/test {test}",
    "tox -e py39 -- {test}",
    "head -50 {test}",
    "wc -l {path} {test}",
    "export PYTHONPATH=/testbed && python {scratch}",
    "env | grep PYTHON",
    "curl -s http://localhost:8000/health",
    "git log --oneline -5 -- {path}",
    "git stash && python {scratch}; git stash pop",
]
COMMENTS = [
    "Check that the fix works for negative values as well",
    "Now let me verify the fix with the existing test suite",
    "Reproduce the issue from the report before changing anything",
    "The original behaviour drops the last element when the input is empty",
    "This should raise a ValueError instead of returning None",
    "Test the edge case where the key is missing from the mapping",
    "Make sure the environment variable is read only once at import",
    "Clean up the scratch files created during debugging",
    "Expected output after the fix is shown below",
    "The test passes now, so the change is complete",
    "Let me look at how {sym} handles the keyword arguments",
    "It seems {sym} is called twice when the cache is cold",
    "Run the tests for the {mod} module only",
    "Print the result so the difference is visible",
    "Remove the temporary test file created above",
    "We need to keep backwards compatibility with the old signature",
    "The download helper retries three times before giving up",
    "The password field should be excluded from the repr",
    "Compare the output with the expected string in the issue",
    "Add a regression test for the reported case",
    "Verify the token count matches the tokenizer's output",
    "Check whether the secret key setting is required in tests",
    "Load the settings before importing the models",
    "Upload handling stays unchanged by this fix",
]
PRINTS = [
    'print("Test passed: {sym} returns the expected value")',
    'print(f"Result: {{result}}")',
    'print("Before fix:", repr(value))',
    'print("All edge cases handled correctly")',
    'print("FAILED: expected", expected, "got", actual)',
    "assert result == expected, f\"{{result}} != {{expected}}\"",
    "self.assertEqual(parse('1 day'), timedelta(days=1))",
    "raise ValueError(\"Invalid input: the key must be a string\")",
]


def benign_command_lines(seed: int = 17, per_template: int = 6) -> list[str]:
    """Commands, comments and script lines with their slots filled, each once, in a seeded order."""
    rng = random.Random(seed)
    lines: dict[str, None] = {}
    for template in COMMANDS + COMMENTS + PRINTS:
        for _ in range(per_template):
            a = rng.randint(1, 900)
            lines.setdefault(template.format(
                sym=rng.choice(_SYMBOLS), path=rng.choice(_PATHS), test=rng.choice(_TESTS), mod=rng.choice(_MODULES),
                scratch=rng.choice(_SCRATCH), dir=rng.choice(_PATHS).rsplit("/", 1)[0], a=a, b=a + rng.randint(5, 60)),
                None)
    for comment in COMMENTS:
        lines.setdefault("# " + comment.format(sym=rng.choice(_SYMBOLS), mod=rng.choice(_MODULES)), None)
    return list(lines)
