"""The checks of Terminal-Bench tasks; stdlib only, the suite appends one call (``bwrap(...)`` or ``docker(...)``).

bwrap: the task's hidden tests (``PAYLOAD``: path -> base85 bytes) are unpacked into a fresh directory outside the
graded one and pytest runs them with ``TEST_DIR`` pointing there, as run-tests.sh would (with the graded directory
off the import path when the tests never import the solution). docker: the task image is
built from the task directory, the graded directory is copied into its WORKDIR and the task's tests into /tests,
and the task's own run-tests.sh decides.
"""

import base64
import os
import subprocess
import sys
import tempfile
import uuid


def _unpack(files):
    test_dir = tempfile.mkdtemp(prefix="tb-tests-")
    for rel, blob in files.items():
        path = os.path.join(test_dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(base64.b85decode(blob))
    return test_dir


def bwrap(files, pytest_args, isolated=False, mismatch=None):
    """isolated: the tests only read what the solution produced, so pytest runs with the graded directory off the
    import path (``-P``): no module of the agent's, named like one pytest or the tests import, loads in it."""
    test_dir = _unpack(files)
    args = [a.replace("${TEST_DIR}", test_dir).replace("$TEST_DIR", test_dir) for a in pytest_args]
    env = dict(os.environ, TEST_DIR=test_dir)
    if isolated and sys.version_info < (3, 11):
        print("the tests must run with the graded directory off the import path, which needs Python 3.11's -P")
        sys.exit(2)
    flags = ["-P"] if isolated else []
    proc = subprocess.run([sys.executable, *flags, "-m", "pytest", "-p", "no:cacheprovider", *args], env=env)
    if mismatch:
        print("note: %s" % mismatch)
    sys.exit(proc.returncode)


def _docker(*argv, check=True, timeout=None):
    proc = subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        print("docker %s failed (exit %d): %s" % (argv[0], proc.returncode, proc.stderr.strip()[-2000:]))
        sys.exit(2)
    return proc


def docker(task_dir, dockerfile, workdir, timeout):
    tag = "mtl-tbench-%s" % os.path.basename(os.path.normpath(task_dir)).lower()
    name = "mtl-tbench-%s" % uuid.uuid4().hex[:12]
    _docker("build", "-q", "-t", tag, "-f", os.path.join(task_dir, dockerfile), task_dir, timeout=3600)
    # Default network, as Terminal-Bench runs tests: its run-tests.sh installs pytest (uv) when the tests start.
    _docker("run", "-d", "--name", name, tag, "sleep", "infinity")
    try:
        _docker("exec", name, "mkdir", "-p", workdir, "/tests")
        _docker("cp", "./.", "%s:%s" % (name, workdir))
        _docker("cp", os.path.join(task_dir, "tests") + "/.", "%s:/tests" % name)
        runner = os.path.join(task_dir, "run-tests.sh")
        if os.path.exists(runner):
            _docker("cp", runner, "%s:/tests/run-tests.sh" % name)
            command = ["bash", "/tests/run-tests.sh"]
        else:
            command = ["python3", "-m", "pytest", "/tests/test_outputs.py", "-rA"]
        proc = _docker("exec", "-e", "TEST_DIR=/tests", "-w", workdir, name, *command, check=False, timeout=timeout)
        print(proc.stdout[-6000:] + proc.stderr[-2000:])
        sys.exit(proc.returncode)
    finally:
        _docker("rm", "-f", name, check=False)
