"""What the adapters of released benchmarks share: hidden payloads passed to a check, the checks' Python and the
requirements it meets (parsed with `packaging`), GPUs.

A check's hidden data (test cases, expected answers, test files) never enters the agent's workspace: it is packed
(zlib, then base85) into the check command's stdin script. Past a command line's size limit the packed data goes
into a check-only file instead (`Task.check_files`, clean_room.py): the clean room alone has it, never the
workspace or its snapshot, and the check deletes it before any graded code runs in that room.
"""

from __future__ import annotations

import base64
import functools
import json
import shutil
import subprocess
import zlib
from importlib import resources
from typing import Any, NamedTuple

from packaging.requirements import InvalidRequirement, Requirement

from mtl_graph.bench.suites.base import SuiteError, hidden_python_check

PROBE_TIMEOUT_S = 30.0
CHECK_ONLY_DIR = ".mtl_check_only"
PAYLOAD_FILE = f"{CHECK_ONLY_DIR}/payload.b85"
"""Where a payload too large for the command line lies in the clean room (relative to it: the check's cwd)."""
_UNPACK = "import base64 as _b, json as _j, zlib as _z\nPAYLOAD = _j.loads(_z.decompress(_b.b85decode({blob!r})))\n"
# Read, then deleted before the call: the graded solution runs in this room and must not find its expected outputs.
_UNPACK_FILE = f"""\
import base64 as _b, json as _j, os as _o, zlib as _z
with open({PAYLOAD_FILE!r}, "rb") as _fh:
    _blob = _fh.read()
_o.unlink({PAYLOAD_FILE!r})
try:
    _o.rmdir({CHECK_ONLY_DIR!r})
except OSError:
    pass
PAYLOAD = _j.loads(_z.decompress(_b.b85decode(_blob)))
del _blob
"""


class TaskSkip(SuiteError):
    """One task of a suite cannot run here; the suite lists it as skipped with this reason."""


class HiddenCheck(NamedTuple):
    """A check command and the check-only files it reads (Task.check and Task.check_files)."""

    command: str
    """The check command (its script on stdin)."""
    check_files: dict[str, str]
    """Check-only files for the clean room: the packed payload when the command line cannot hold it."""

    def task_fields(self) -> dict[str, Any]:
        """The Task fields it sets: ``Task(..., **hidden.task_fields())``."""
        return {"check": self.command, "check_files": self.check_files}


def packed_check(script: str, payload: Any, call: str) -> HiddenCheck:
    """A check running ``script`` with ``PAYLOAD`` (any JSON value) defined, then ``call``, the script on stdin; the
    payload is inline, or, past the command line's limit, a check-only file the script reads and deletes.

    Raises TaskSkip when even the script without its payload is too large for a command line."""
    blob = base64.b85encode(zlib.compress(json.dumps(payload).encode("utf-8"), 9)).decode("ascii")
    check, files = hidden_python_check(f"{script}\n\n{_UNPACK.format(blob=blob)}\n{call}\n")
    if not files:
        return HiddenCheck(check, {})
    check, files = hidden_python_check(f"{script}\n\n{_UNPACK_FILE}\n{call}\n")
    if files:
        raise TaskSkip("its check script is too large to pass outside the workspace, and in the workspace the agent "
                       "could read it")
    return HiddenCheck(check, {PAYLOAD_FILE: blob})


def yaml_problem(exc: Exception) -> str:
    """A YAML error in one line: what is wrong and where."""
    mark = getattr(exc, "problem_mark", None)
    return f"{getattr(exc, 'problem', None) or exc}" + (f" at line {mark.line + 1}" if mark is not None else "")


def script(name: str) -> str:
    """The text of a stdlib-only check script shipped beside the suites."""
    return resources.files("mtl_graph.bench.suites.checks").joinpath(name).read_text(encoding="utf-8")


PROBE_SANDBOX = "auto"
"""The sandbox kind whose checks' interpreter the package probes ask: `auto`, as `mtl eval` runs by default."""


def checks_python() -> str | None:
    """The interpreter the checks' ``python3`` is (interpreter.check_python), which the package probes ask."""
    from mtl_graph.sandbox.interpreter import check_python

    return check_python(PROBE_SANDBOX)


# Run by the checks' interpreter (stdlib only, any Python 3): what it has of each distribution or module, and the
# values environment markers are evaluated against (the keys packaging's markers read).
_PROBE = """\
import importlib.metadata as m, importlib.util as u, json, os, platform, sys
def found(name):
    try:
        d = m.distribution(name)
        return {"version": d.version, "requires": d.requires or []}
    except m.PackageNotFoundError:
        pass
    try:
        module = u.find_spec(name.replace("-", "_")) is not None
    except (ImportError, ValueError):
        module = False
    return {"version": None, "module": module}
impl = sys.implementation
iver = "%d.%d.%d" % impl.version[:3] + ("" if impl.version.releaselevel == "final"
                                        else impl.version.releaselevel[0] + str(impl.version.serial))
env = {"implementation_name": impl.name, "implementation_version": iver, "os_name": os.name,
       "platform_machine": platform.machine(), "platform_release": platform.release(),
       "platform_system": platform.system(), "platform_version": platform.version(),
       "python_full_version": platform.python_version(), "platform_python_implementation":
       platform.python_implementation(), "python_version": ".".join(platform.python_version_tuple()[:2]),
       "sys_platform": sys.platform}
print(json.dumps({"env": env, "found": {n: found(n) for n in json.loads(sys.argv[1])}}))
"""


class _Probe(NamedTuple):
    env: dict[str, str]
    found: dict[str, dict[str, Any]]


@functools.cache
def _probe(python: str, names: tuple[str, ...]) -> _Probe | None:
    try:
        proc = subprocess.run([python, "-I", "-c", _PROBE, json.dumps(list(names))], capture_output=True,
                              text=True, timeout=PROBE_TIMEOUT_S, cwd="/")
        out = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
        return None
    if not (isinstance(out, dict) and isinstance(out.get("env"), dict) and isinstance(out.get("found"), dict)):
        return None
    return _Probe(out["env"], out["found"])


def forget_probes() -> None:
    """Forget what the interpreters answered (a test installing a distribution between two probes)."""
    _probe.cache_clear()


def parse_requirements(lines: list[str]) -> list[Requirement]:
    """Requirements (PEP 508: name, extras, specifiers, markers) from requirement lines or bare names; a line
    that is none is a TaskSkip naming it."""
    parsed = []
    for line in lines:
        text = line.split(" #", 1)[0].strip()
        if not text or text.startswith("#"):
            continue
        try:
            parsed.append(Requirement(text))
        except InvalidRequirement as exc:
            raise TaskSkip(f"cannot check the dependency {text!r}: not a requirement this harness can read "
                           f"({str(exc).splitlines()[0]})") from None
    return parsed


def requirement_lines(text: str) -> list[str]:
    """The requirement lines of a requirements file: comments, blank lines and pip options (``-r``, ``--index-url``,
    ``-e``) left out, continued lines joined."""
    joined = text.replace("\\\n", "")
    return [ln for ln in (raw.split(" #", 1)[0].strip() for raw in joined.splitlines())
            if ln and not ln.startswith(("#", "-"))]


def _applies(req: Requirement, env: dict[str, str], extra: str = "") -> bool:
    return req.marker is None or req.marker.evaluate({**env, "extra": extra})


def _unmet(reqs: list[Requirement], probe: _Probe) -> list[str]:
    problems = []
    for req in reqs:
        have = probe.found.get(req.name) or {}
        version = have.get("version")
        if version is None:
            if not have.get("module"):
                problems.append(f"{req.name}{req.specifier}")
            elif req.specifier:  # importable, but with no metadata to hold against the specifier
                problems.append(f"{req.name}{req.specifier} (importable, no version metadata)")
            continue
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req.name}{req.specifier} (installed: {version})")
    return problems


def unmet_requirements(lines: list[str]) -> tuple[str | None, list[str]]:
    """(the checks' interpreter, what it lacks of these requirements: each missing one, or one whose installed
    version its specifier excludes, or an extra's missing dependency); markers are evaluated for that interpreter,
    one that does not apply is no need. A line that is no requirement raises TaskSkip."""
    python = checks_python()
    reqs = parse_requirements(lines)
    if python is None or not reqs:
        return python, [str(r) for r in reqs] if python is None else []
    probe = _probe(python, tuple(sorted({r.name for r in reqs})))
    if probe is None:
        return python, [f"{r} (the interpreter did not answer)" for r in reqs]
    wanted = [r for r in reqs if _applies(r, probe.env)]
    problems = _unmet(wanted, probe)
    extras = []  # what each requested extra adds, read from the installed distribution's metadata
    for req in wanted:
        requires = (probe.found.get(req.name) or {}).get("requires") or []
        for extra in sorted(req.extras):
            for line in requires:
                try:
                    dep = Requirement(line)
                except InvalidRequirement:
                    continue
                if dep.marker is not None and _applies(dep, probe.env, extra) and not _applies(dep, probe.env):
                    extras.append(dep)
    if extras:
        extra_probe = _probe(python, tuple(sorted({r.name for r in extras})))
        problems += ([f"{r} (for an extra)" for r in _unmet(extras, extra_probe)] if extra_probe is not None
                     else [str(r) for r in extras])
    return python, list(dict.fromkeys(problems))


def missing_python(names: list[str]) -> list[str]:
    """Of these requirements (or bare distribution or module names), what the checks' interpreter lacks."""
    return unmet_requirements(names)[1]


def python_reason(requirements: list[str], where: str) -> str | None:
    """Why a task needing these Python requirements (PEP 508 lines or bare names) cannot run here, or None: what
    is missing and for which interpreter."""
    try:
        python, unmet = unmet_requirements(requirements)
    except TaskSkip as exc:
        return f"{exc} ({where})"
    if python is None:
        return f"no python3 that the {PROBE_SANDBOX} sandbox's checks can run ({where})"
    return f"needs Python packages {', '.join(unmet)} in {python} ({where})" if unmet else None


def gpu_reason() -> str | None:
    """Why a GPU task cannot run here, or None (nvidia-smi lists a GPU)."""
    if shutil.which("nvidia-smi") is None:
        return "needs a GPU (no nvidia-smi on PATH)"
    try:
        out = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return "needs a GPU (nvidia-smi did not answer)"
    return None if out.returncode == 0 and out.stdout.strip() else "needs a GPU (nvidia-smi lists none)"


@functools.cache
def docker_reason() -> str | None:
    """Why Docker cannot run a task here, or None (a reachable engine)."""
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    try:
        ok = subprocess.run(["docker", "info"], capture_output=True, timeout=PROBE_TIMEOUT_S).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return None if ok else "no Docker engine reachable (docker info failed)"
