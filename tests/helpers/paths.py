"""Where things are, for tests anywhere under tests/: the repository, its example tasks, the test fixtures.

A test module imports these instead of counting `Path(__file__).parents`, so it can move to another directory."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root."""
TESTS = ROOT / "tests"
EXAMPLES = ROOT / "examples" / "tasks"
"""The example tasks (examples/tasks/<name>)."""
FIXTURES = TESTS / "fixtures"
LOGS = FIXTURES / "logs"
"""Run logs of the trajectory formats (mini-swe-agent, SWE-agent, LangChain, our run log), and bad ones."""
AGENT_LOGS = FIXTURES / "agent_logs"
"""Session logs of the coding agents people run by hand (Claude Code, Codex CLI, OpenHands, Aider)."""
DRIVERS = TESTS / "drivers"
"""Scripts the tests run in a process of their own."""
SERVED = TESTS / "graphs" / "served"
"""The graphs the Studio tests have `langgraph dev` serve."""
