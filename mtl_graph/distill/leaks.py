"""Detects task specifics (paths, identifiers, quoted strings from the run) leaking into abstract memories.

The formats declared `task_free` (insight, workflow; see mtl_graph/memory/formats/) must transfer to other tasks;
a file name or function name from the source run anchors the next agent on the wrong codebase (the research's
main failure mode). The check is lexical and conservative: a token counts only if it appears in the run and looks
specific (a path, a snake_case or camelCase identifier, a quoted string with some structure), and Python builtins
or generic project files (setup.py, pyproject.toml, ...) never count.
"""

from __future__ import annotations

import builtins
import keyword
import re

from mtl_graph.core.trajectory import Trajectory

_PATH = re.compile(r"(?<![\w/.-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]*\w")
_FILE = re.compile(r"\b[\w-]+\.(?:py|pyi|js|mjs|ts|tsx|jsx|go|rs|java|kt|c|h|cc|cpp|hpp|rb|php|cs|swift|scala|"
                   r"toml|ya?ml|json|cfg|ini|md|rst|txt|sh|sql|html|css|csv|lock)\b")
_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_QUOTED = re.compile(r"`([^`\n]{3,80})`|\"([^\"\n]{4,80})\"|'([^'\n]{4,80})'")
_GENERIC_FILES = {
    "setup.py", "setup.cfg", "pyproject.toml", "requirements.txt", "package.json", "package-lock.json",
    "conftest.py", "tox.ini", "pytest.ini", "README.md", "README.rst", "Makefile", "__init__.py", "__main__.py",
    "Cargo.toml", "go.mod", "tsconfig.json", "Dockerfile", "CHANGELOG.md",
}
_GENERIC_PATH_PREFIXES = ("/tmp", "/dev/", "/usr/", "/bin/", "/etc/", "/proc/", "/var/", "./", "../", "http:", "https:")
_GENERIC_WORDS = set(dir(builtins)) | set(keyword.kwlist) | {
    "snake_case", "camelCase", "PascalCase", "__init__", "__main__", "__name__", "__file__", "__dict__", "__slots__",
    "stdout", "stderr", "stdin", "exit_code", "sys_path", "PYTHONPATH",
}


def _is_specific_identifier(token: str) -> bool:
    if len(token) < 5 or token in _GENERIC_WORDS or token.strip("_").isdigit():
        return False
    core = token.strip("_")
    snake = "_" in core
    camel = bool(re.search(r"[a-z][A-Z]", core)) or bool(re.search(r"[A-Z][a-z]+[A-Z]", core))
    return snake or camel


def task_specifics(trajectory: Trajectory) -> set[str]:
    """Specific tokens of a run: paths and file names anywhere; identifiers and quoted strings from the
    task, the actions and the submission (observations are too noisy for those)."""
    core = "\n".join([trajectory.task.instruction, *(s.action for s in trajectory.steps), trajectory.submission or ""])
    everything = "\n".join([core, *(s.observation for s in trajectory.steps)])
    found: set[str] = set()
    for m in _PATH.finditer(everything):
        path = m.group(0).rstrip(".")
        if len(path) >= 6 and not path.startswith(_GENERIC_PATH_PREFIXES) and not path.endswith("/"):
            found.add(path)
    found |= {f for f in _FILE.findall(everything) if f not in _GENERIC_FILES}
    found |= {t for t in _IDENT.findall(core) if _is_specific_identifier(t)}
    for groups in _QUOTED.findall(trajectory.task.instruction):
        text = next(g for g in groups if g).strip()
        structured = bool(re.search(r"[\s\d\W]", text)) and len(text) >= 4
        if (structured or len(text) >= 12) and text not in _GENERIC_WORDS:
            found.add(text)
    return found


def find_leaks(text: str, specifics: set[str]) -> list[str]:
    """The specifics that occur in text (identifiers as whole words), sorted."""
    hits = []
    for token in specifics:
        if re.fullmatch(r"\w+", token):
            if re.search(rf"(?<![\w]){re.escape(token)}(?![\w])", text):
                hits.append(token)
        elif token in text:
            hits.append(token)
    return sorted(hits)
