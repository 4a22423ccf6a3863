"""Terminal-Bench task directories: ``task.yaml``, ``Dockerfile`` / ``docker-compose.yaml``, ``run-tests.sh``,
``tests/``, ``solution.sh``.

Spec: ``terminalbench:PATH``, PATH one task directory or a directory of them (Terminal-Bench's ``tasks/``). Each task
runs in one of two modes, decided from its files (``environment``):

- **bwrap** when the task needs only a standard Terminal-Bench base image (``FROM ghcr.io/laude-institute/t-bench/
  python-3-13`` or ``ubuntu-24-04``, with at most the template's ``RUN apt-get install -y tmux asciinema``, a
  ``WORKDIR`` and ``COPY`` of the task's own files into it), one compose service, and a run-tests.sh that only
  installs pytest and runs it. The host stands in for the base image: the COPYed files make the workspace, the
  WORKDIR (``/app``) is the workspace, so absolute WORKDIR paths in the instruction, tests and solution are
  rewritten relative to it, and the tests are packed into the check (never in the workspace).
- **docker** otherwise: the check builds the task image, copies the graded solution into its WORKDIR and the tests
  into /tests, and runs run-tests.sh there (it needs a reachable engine: run with ``--sandbox local``).

A task neither can run is skipped with the reason; so is a task whose files are missing or malformed, and a task
without tests (Docker would not give it any).

The tamper scan guards the test process against the agent's code; it applies only to a task whose tests load the
workspace's code (``solution_loaders``: they import a module of the workspace, or one no installed package
provides, or reach the import path or load code at run time). A task whose tests only read the files and outputs
the solution produced is graded by the clean room alone, its pytest run with the graded directory off the import
path (``python -P``), so no module planted there loads in the test process either.

bwrap mode runs the host's interpreter where the task's image has its own; where their versions differ the task's
metadata (``python_mismatch``) and the check's output say so.
"""

from __future__ import annotations

import ast
import base64
import re
import shlex
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from mtl_graph.bench.suites.base import REFERENCE_SCRIPT_KEY, REFERENCE_UNAVAILABLE_KEY, SkippedTask, Suite, \
    SuiteError, sample
from mtl_graph.bench.suites.hidden import TaskSkip, docker_reason, missing_python, packed_check, python_reason, \
    relative_to_container_dir, sandbox_python_version, script, yaml_problem
from mtl_graph.core.task import Task

DOMAIN = "terminalbench"
TASK_FILE = "task.yaml"
BASE_IMAGE = re.compile(r"^ghcr\.io/laude-institute/t-bench/(python-3-13|ubuntu-24-04)(:[\w.-]+)?$")
IMAGE_PYTHON = {"python-3-13": "3.13"}
"""The Python of a base image whose name says it (the Ubuntu image's is whatever its run-tests.sh installs)."""
LOADING_MODULES = frozenset({"importlib", "runpy", "imp", "zipimport", "pkgutil"})
LOADING_CALLS = frozenset({"__import__", "exec", "eval", "compile"})
DEFAULT_WORKDIR = "/app"
TOOLS_ONLY = {"tmux", "asciinema"}
HARNESS_FILES = {TASK_FILE, "solution.sh", "solution.yaml", "run-tests.sh", "tests", "Dockerfile",
                 "docker-compose.yaml", "docker-compose.yml"}
_DEFAULT_PYTEST = ["$TEST_DIR/test_outputs.py", "-rA"]
# run-tests.sh lines that only prepare a pytest run (the template's uv bootstrap); anything else needs Docker.
_BOILERPLATE = re.compile(
    r"^(#.*|set -[euxo pipefail ]+|fi|then|else|exit \d+|echo .*|if .*|"
    r"apt-get (update|install -y curl)( .*)?|curl -LsSf https://astral\.sh/uv/\S+ \| sh|"
    r"source \$HOME/\.local/bin/env.*|uv (init|venv)( .*)?|source \S+/bin/activate|"
    r"(uv add|uv pip install|pip3? install|python3? -m pip install) pytest(==[\w.]+)?)$")
_PYTEST = re.compile(r"^(uv run )?(python3? -m )?pytest( .*)?$")
_NOTE = ("(Terminal-Bench runs this task in a container whose working directory is {workdir}; here that directory "
         "is your current directory, and paths under {workdir} are written relative to it.)")


class TaskFiles:
    """A task directory's parsed files."""

    def __init__(self, path: Path):
        self.path = path
        self.config = self._yaml(TASK_FILE, required=True)
        self.compose = self._yaml("docker-compose.yaml") or self._yaml("docker-compose.yml")
        self.dockerfile = self._dockerfile_name()
        if not (path / self.dockerfile).is_file():
            raise TaskSkip(f"no {self.dockerfile} describing its environment")
        self.instructions = dockerfile_instructions((path / self.dockerfile).read_text(encoding="utf-8"))
        self.workdir = next((arg for op, arg in reversed(self.instructions) if op == "WORKDIR"), DEFAULT_WORKDIR)

    def _yaml(self, name: str, required: bool = False) -> Any:
        file = self.path / name
        if not file.is_file():
            if required:
                raise TaskSkip(f"no {name}")
            return None
        try:
            return yaml.safe_load(file.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise TaskSkip(f"{name} is not UTF-8 text") from None
        except yaml.YAMLError as exc:
            raise TaskSkip(f"{name} is not valid YAML ({yaml_problem(exc)})") from None

    def _dockerfile_name(self) -> str:
        client = ((self.compose or {}).get("services") or {}).get("client") if isinstance(self.compose, dict) else None
        build = client.get("build") if isinstance(client, dict) else None
        return str(build.get("dockerfile") or "Dockerfile") if isinstance(build, dict) else "Dockerfile"

    def instruction(self) -> str:
        cfg = self.config
        if not isinstance(cfg, dict):
            raise TaskSkip(f"{TASK_FILE} must be a mapping")
        text = cfg.get("instruction")
        if text is None:  # the older format: a list of {key, description}, the base one first
            text = next((d.get("description") for d in cfg.get("descriptions") or []
                         if isinstance(d, dict) and d.get("key") == "base"), None)
        if not isinstance(text, str) or not text.strip():
            raise TaskSkip(f"{TASK_FILE} has no instruction")
        return text.strip()


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    out, pending = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        op, _, arg = line.partition(" ")
        out.append((op.upper(), " ".join(arg.split())))
    return out


def _tools_only(command: str) -> bool:
    for part in re.split(r"&&|;", command):
        words = part.split()
        if words in (["apt-get", "update"], ["rm", "-rf", "/var/lib/apt/lists/*"]):
            continue
        if words[:3] != ["apt-get", "install", "-y"] or not set(words[3:]) <= TOOLS_ONLY:
            return False
    return True


def copied_files(task: TaskFiles) -> dict[str, Path]:
    """Workspace path -> task file, for the Dockerfile's COPY of task files into WORKDIR; TaskSkip (why Docker is
    needed) for anything else the Dockerfile does."""
    files: dict[str, Path] = {}
    froms = [arg for op, arg in task.instructions if op == "FROM"]
    if len(froms) != 1 or not BASE_IMAGE.match(froms[0]):
        raise TaskSkip(f"its Dockerfile builds on {', '.join(froms) or 'no image'}, not a Terminal-Bench base image")
    workdir = PurePosixPath(task.workdir)
    for op, arg in task.instructions:
        if op in ("FROM", "WORKDIR", "CMD", "ENTRYPOINT", "LABEL", "EXPOSE") or (op == "RUN" and _tools_only(arg)):
            continue
        if op not in ("COPY", "ADD"):
            raise TaskSkip(f"its Dockerfile runs `{op} {arg[:80]}` beyond the base image")
        *sources, dest = [w for w in shlex.split(arg) if not w.startswith(("--chown", "--chmod"))]
        target = workdir / dest
        if any(w.startswith("--") or "://" in w or any(c in w for c in "*?[") for w in sources) \
                or not target.is_relative_to(workdir):
            raise TaskSkip(f"its Dockerfile runs `{op} {arg[:80]}`, which the workspace cannot stand in for")
        rel = target.relative_to(workdir)
        for src in sources:
            source = (task.path / src).resolve()
            if not source.is_relative_to(task.path.resolve()) or not source.exists():
                raise TaskSkip(f"its Dockerfile copies {src!r}, which is not a file of the task")
            if source.is_file():
                into_dir = dest.endswith("/") or len(sources) > 1 or target == workdir
                files[str(rel / source.name if into_dir else rel)] = source
            for f in sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else []:
                inner = f.relative_to(source)
                # The harness's own files stay out even under `COPY . /app`: the tests arrive after the agent.
                if source == task.path.resolve() and inner.parts[0] in HARNESS_FILES:
                    continue
                files[str(rel / inner)] = f
    return files


def pytest_args(task: TaskFiles) -> list[str]:
    """The arguments run-tests.sh passes to pytest; TaskSkip when it does more than install and run pytest."""
    runner = task.path / "run-tests.sh"
    if not runner.is_file():
        return list(_DEFAULT_PYTEST)
    args = None
    for n, raw in enumerate(runner.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("[ ") or line.startswith("if ["):
            continue
        if _PYTEST.match(line) and args is None:
            args = shlex.split(line.split("pytest", 1)[1])
        elif not _BOILERPLATE.match(line):
            raise TaskSkip(f"its run-tests.sh does more than install and run pytest (line {n}: `{line[:80]}`)")
    if args is None:
        raise TaskSkip("its run-tests.sh runs no pytest")
    if any("$" in a.replace("$TEST_DIR", "").replace("${TEST_DIR}", "") for a in args):
        raise TaskSkip("its run-tests.sh passes pytest variables other than $TEST_DIR")
    return args


def relative_to_workdir(text: str, workdir: str) -> str:
    """Absolute paths under workdir made relative (``/app/x`` -> ``./x``, ``/app`` -> ``.``)."""
    return relative_to_container_dir(text, workdir)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TaskSkip(f"{path.name} is not UTF-8 text, so the workspace cannot hold it") from None


def workspace_modules(files: dict[str, object]) -> set[str]:
    """The top-level Python modules and packages the task's workspace files make importable."""
    out = set()
    for rel in files:
        parts = PurePosixPath(rel).parts
        if len(parts) > 1:
            out.add(parts[0])
        elif rel.endswith(".py"):
            out.add(rel.removesuffix(".py"))
    return out


def solution_loaders(tests: dict[str, str], modules: set[str], probe: bool = True) -> list[str]:
    """Why the tests load the workspace's code into their own process, one line per finding (empty: they only read
    the files and outputs the solution produced). modules: the workspace's own module names; probe: whether the
    interpreter the tests run with is this machine's (else, in a task image, any import beyond the standard library
    and pytest may be the workspace's)."""
    found: list[str] = []
    imported: dict[str, str] = {}  # top-level module -> the test file importing it
    for rel, text in sorted(tests.items()):
        if not rel.endswith(".py"):
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            found.append(f"{rel} does not parse, so what it imports is unknown")
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    imported.setdefault(alias.name.split(".")[0], rel)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.setdefault(node.module.split(".")[0], rel)
                if node.module == "sys" and any(a.name == "path" for a in node.names):
                    found.append(f"{rel} line {node.lineno} imports sys.path")
            elif isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
                    and node.value.id == "sys":
                found.append(f"{rel} line {node.lineno} changes the import path (sys.path)")
            elif isinstance(node, ast.Name) and node.id in LOADING_CALLS:
                found.append(f"{rel} line {node.lineno} builds code at run time ({node.id})")
    local = {m for m in imported if m not in sys.stdlib_module_names and m not in tests_helpers(tests)}
    unknown = sorted(local - modules - {"pytest", "_pytest"})
    missing = (set(missing_python(unknown)) if probe else set(unknown)) if unknown else set()
    for module in sorted(local):
        if module in modules:
            found.append(f"{imported[module]} imports {module}, a module of the workspace")
        elif module in missing:
            found.append(f"{imported[module]} imports {module}, which no installed package provides (only the "
                         "workspace could)" if probe else f"{imported[module]} imports {module}, which the task "
                         "image may not provide (then only the workspace could)")
    found += [f"{imported[m]} imports {m}, which loads code at run time" for m in sorted(imported)
              if m in LOADING_MODULES]
    return sorted(set(found))


def tests_helpers(tests: dict[str, str]) -> set[str]:
    """The modules the tests directory itself holds (a helper beside test_outputs.py, imported by it)."""
    return {PurePosixPath(rel).parts[0].removesuffix(".py") for rel in tests}


def _services(task: TaskFiles) -> list[str]:
    services = (task.compose or {}).get("services") if isinstance(task.compose, dict) else None
    return sorted(services) if isinstance(services, dict) else ["client"]


def test_paths(task: TaskFiles) -> list[Path]:
    """The files of the task's tests/ directory."""
    tests = task.path / "tests"
    return sorted(f for f in tests.rglob("*") if f.is_file()) if tests.is_dir() else []


def _python_sources(task: TaskFiles) -> dict[str, str]:
    tests = task.path / "tests"
    out = {}
    for f in test_paths(task):
        if f.suffix == ".py":
            try:
                out[str(f.relative_to(tests))] = f.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                out[str(f.relative_to(tests))] = ""
    return out


def python_mismatch(task: TaskFiles) -> str | None:
    """The sentence saying the image's Python and the host's differ, or None (same version, or not known)."""
    froms = [arg for op, arg in task.instructions if op == "FROM"]
    match = BASE_IMAGE.match(froms[0]) if len(froms) == 1 else None
    image = IMAGE_PYTHON.get(match.group(1)) if match else None
    host = sandbox_python_version()
    if image is None or host is None or host == image or host.startswith(image + "."):
        return None
    return (f"the task's image runs Python {image}; here its tests and the agent's commands run with this machine's "
            f"python3, Python {host} (a result can differ where the two versions behave differently)")


def bwrap_task(task: TaskFiles, base: dict[str, Any]) -> Task:
    """A task the host can run in place of the base image; TaskSkip when it needs Docker."""
    if len(services := _services(task)) > 1:
        raise TaskSkip(f"it starts {len(services)} services ({', '.join(services)})")
    files = {rel: relative_to_workdir(_read(src), task.workdir) for rel, src in copied_files(task).items()}
    args = pytest_args(task)
    tests = task.path / "tests"
    packed = {str(f.relative_to(tests)): base64.b85encode(
        relative_to_workdir(_read(f), task.workdir).encode("utf-8") if f.suffix in (".py", ".sh", ".txt", ".json")
        else f.read_bytes()).decode("ascii") for f in test_paths(task)}
    if reason := python_reason(["pytest"], "the tests run with pytest"):
        raise TaskSkip(reason)
    loaders = solution_loaders(_python_sources(task), workspace_modules(files))
    mismatch = python_mismatch(task)
    call = f"bwrap(PAYLOAD, {args!r}, {not loaders!r}, {mismatch!r})"
    check = packed_check(script("terminalbench.py"), packed, call)
    instruction = relative_to_workdir(base["instruction"], task.workdir) + "\n\n" + _NOTE.format(workdir=task.workdir)
    metadata = {**base["metadata"], "mode": "bwrap", "solution_loaders": loaders,
                **({"python_mismatch": mismatch} if mismatch else {})}
    return Task(**{**base, "instruction": instruction, "metadata": metadata}, files=files,
                tests_load_solution=bool(loaders), **check.task_fields())


def docker_task(task: TaskFiles, base: dict[str, Any], why: str) -> Task:
    """A task graded in its own image; TaskSkip with both reasons when no engine is reachable."""
    if reason := docker_reason():
        raise TaskSkip(f"needs Docker ({why}); {reason}")
    if len(services := _services(task)) > 1:
        raise TaskSkip(f"needs docker compose: it starts {len(services)} services ({', '.join(services)}), "
                       "and only single-container tasks are graded")
    try:
        files = {rel: _read(src) for rel, src in copied_files(task).items()}
    except TaskSkip:
        files = {}  # the image has them; the agent's workspace starts empty
    call = f"docker({str(task.path.resolve())!r}, {task.dockerfile!r}, {task.workdir!r}, {base['check_timeout']!r})"
    check = packed_check(script("terminalbench.py"), None, call)
    loaders = solution_loaders(_python_sources(task), workspace_modules(files), probe=False)
    return Task(**{**base, "metadata": {**base["metadata"], "mode": "docker", "solution_loaders": loaders}},
                files=files, tests_load_solution=bool(loaders), **check.task_fields())


def task_of(path: Path) -> Task:
    """The task of one directory; TaskSkip says why it cannot run here."""
    task = TaskFiles(path)
    instruction, cfg = task.instruction(), task.config
    solution = path / "solution.sh"
    metadata: dict[str, Any] = {"suite": DOMAIN, "workdir": task.workdir,
                                **{k: cfg[k] for k in ("difficulty", "category", "tags") if k in cfg}}
    if solution.is_file():
        # solution.sh, rewritten like the tests; the oracle runs it in the run's sandbox (runners.py)
        metadata[REFERENCE_SCRIPT_KEY] = relative_to_workdir(_read(solution), task.workdir)
    else:
        metadata[REFERENCE_UNAVAILABLE_KEY] = "it has no solution.sh"
    if not test_paths(task):
        raise TaskSkip("it has no tests (its tests/ directory is missing or empty), so nothing can grade it; Docker "
                       "would not change that")
    base = {"id": f"{DOMAIN}/{path.name}", "domain": DOMAIN, "instruction": instruction,
            "check_timeout": float(cfg.get("max_test_timeout_sec") or 180.0) + 120.0, "metadata": metadata}
    try:
        return bwrap_task(task, base)
    except TaskSkip as exc:
        return docker_task(task, base, str(exc))


def load(arg: str | None, limit: int | None, seed: int) -> Suite:
    """``terminalbench:PATH``: one task directory or a directory of them."""
    if not arg:
        raise SuiteError("suite 'terminalbench' needs a path: terminalbench:PATH (a tasks directory)")
    root = Path(arg).expanduser()
    if not root.is_dir():
        raise SuiteError(f"terminalbench directory not found: {root}")
    dirs = [root] if (root / TASK_FILE).is_file() else sorted(
        d for d in root.iterdir() if d.is_dir() and (d / TASK_FILE).is_file())
    if not dirs:
        raise SuiteError(f"{root}: no Terminal-Bench tasks (each is a directory with a {TASK_FILE})")
    tasks, skipped = [], []
    for d in dirs:
        try:
            tasks.append(task_of(d))
        except (TaskSkip, OSError) as exc:
            skipped.append(SkippedTask(id=f"{DOMAIN}/{d.name}", reason=str(exc)))
    return Suite(spec=f"terminalbench:{arg}", name=DOMAIN, tasks=sample(tasks, limit, seed), skipped=skipped,
                 total=len(dirs))
