"""Task files with hostile symlinks, workspace ownership across the uid switch, real toolchains inside bwrap,
the docker backend's flags, the quota watch and a supervisor killed from outside."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.sandbox_attack_kit import needs_bwrap

from mtl_graph.sandbox import SandboxConfig, make_sandbox
from mtl_graph.sandbox.docker import docker_exec_argv, docker_run_argv
from mtl_graph.sandbox.workspace import hand_over
from mtl_graph.core.task import Task, TaskError

pytestmark = pytest.mark.filterwarnings("ignore:local sandbox")
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the uid switch happens only when running as root")
KINDS = ["local", pytest.param("bwrap", marks=needs_bwrap)]


# ---------------------------------------------------------------- task materialisation


def task_dir(tmp_path: Path) -> Path:
    root = tmp_path / "task"
    (root / "files" / "src").mkdir(parents=True)
    (root / "task.md").write_text("Fix it.")
    (root / "files" / "src" / "main.py").write_text("print('hi')\n")
    return root


def test_links_that_stay_inside_are_copied_as_relative_links(tmp_path):
    root = task_dir(tmp_path)
    files = root / "files"
    (files / "rel").symlink_to("src/main.py")
    (files / "abs").symlink_to(files / "src" / "main.py")  # absolute, but inside the task
    (files / "src" / "up").symlink_to("../rel")  # a chain that stays inside
    (files / "dangling").symlink_to("src/not-yet-built")
    ws = Task.from_dir(root).materialize(tmp_path / "ws")
    for name in ("rel", "abs", "src/up"):
        link = ws / name
        assert link.is_symlink() and not os.readlink(link).startswith("/")
        assert link.resolve() == (ws / "src" / "main.py").resolve()
        assert link.read_text() == "print('hi')\n"
    assert (ws / "dangling").is_symlink() and os.readlink(ws / "dangling") == "src/not-yet-built"


def _escapes(tmp_path: Path, files: Path) -> dict[str, str]:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    (tmp_path / "secret.txt").write_text("outside")
    return {
        "environ": "/proc/self/environ",
        "ssh_key": str(home / ".ssh" / "id_rsa"),
        "absolute": "/etc/passwd",
        "relative": "../../secret.txt",
        "deep_relative": "src/../../../secret.txt",
        "dir_link": str(tmp_path / "home"),
    }


@pytest.mark.parametrize("name", ["environ", "ssh_key", "absolute", "relative", "deep_relative", "dir_link"])
def test_links_leaving_the_task_directory_are_refused_and_nothing_is_copied(tmp_path, name):
    root = task_dir(tmp_path)
    files = root / "files"
    (files / name).symlink_to(_escapes(tmp_path, files)[name])
    ws = tmp_path / "ws"
    with pytest.raises(TaskError, match=f"symlink {name} -> .* points outside the task directory"):
        Task.from_dir(root).materialize(ws)
    assert list(ws.iterdir()) == []  # every entry is checked before the first copy


def test_a_link_chain_through_an_inside_link_to_the_outside_is_refused(tmp_path):
    root = task_dir(tmp_path)
    files = root / "files"
    (tmp_path / "secret.txt").write_text("outside")
    (files / "src" / "hop").symlink_to("../../../secret.txt")
    (files / "innocent").symlink_to("src/hop")  # looks inside, ends outside
    with pytest.raises(TaskError, match="points outside the task directory"):
        Task.from_dir(root).materialize(tmp_path / "ws")
    assert not (tmp_path / "ws" / "innocent").exists()


def test_link_loops_and_special_files_are_refused(tmp_path):
    root = task_dir(tmp_path)
    (root / "files" / "a").symlink_to("b")
    (root / "files" / "b").symlink_to("a")
    with pytest.raises(TaskError, match="cannot be resolved|points outside"):
        Task.from_dir(root).materialize(tmp_path / "ws")
    for link in ("a", "b"):
        (root / "files" / link).unlink()
    os.mkfifo(root / "files" / "pipe")
    with pytest.raises(TaskError, match="pipe is not a regular file"):
        Task.from_dir(root).materialize(tmp_path / "ws2")


# ---------------------------------------------------------------- ownership across the uid switch


@needs_root
@pytest.mark.parametrize("kind", KINDS)
def test_commands_change_task_files_and_root_reads_what_they_make(kind, tmp_path):
    ws = Task.from_dir(task_dir(tmp_path)).materialize(tmp_path / "ws")
    with make_sandbox(kind, ws) as sb:
        sb.write_file("notes/todo.txt", "from the host")
        result = sb.run(
            "echo more >> src/main.py && echo agent >> notes/todo.txt && mkdir -p private && "
            "echo hidden > private/out.txt && chmod 000 private/out.txt && chmod 700 private && id -u"
        )
        assert result.exit_code == 0, result.output
        assert result.output.strip() == str(sb.config.run_as_uid)
    # the judge and the distiller run as root on the host: the agent's modes do not lock them out
    assert (ws / "private" / "out.txt").read_text() == "hidden\n"
    assert (ws / "src" / "main.py").read_text().endswith("more\n")
    assert (ws / "notes" / "todo.txt").read_text() == "from the hostagent\n"
    shutil.rmtree(ws)


@needs_root
def test_local_as_root_reaches_a_workspace_under_a_private_directory(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "other.txt").write_text("root's")
    ws = private / "ws"
    with make_sandbox("local", ws) as sb:
        sb.write_file("hello.py", "print('reached')")
        result = sb.run(f"python3 hello.py && python3 {ws}/hello.py; ls {private}")
    assert result.output.startswith("reached\nreached\n")
    assert "Permission denied" in result.output  # traversable, still not listable
    assert oct(private.stat().st_mode & 0o777) == "0o701"


@needs_root
def test_hand_over_never_follows_links_nor_touches_hard_linked_files(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "host-file"
    outside.write_text("host")
    (ws / "link").symlink_to(outside)
    os.link(outside, ws / "hard")
    (ws / "own.txt").write_text("mine")
    hand_over(ws, 65534, 65534)
    assert outside.stat().st_uid == 0  # neither through the symlink nor through the hard link
    assert (ws / "link").lstat().st_uid == 65534
    assert (ws / "own.txt").stat().st_uid == 65534


# ---------------------------------------------------------------- real toolchains inside bwrap

TOOLCHAINS = {
    "python3": ("python3", "python3 -c 'import json, ssl, sqlite3; print(\"py-ok\")'", "py-ok"),
    "venv": (sys.executable, f"{sys.executable} -c 'import pydantic; print(\"venv-ok\")'", "venv-ok"),
    "gcc": ("gcc", "printf '#include <stdio.h>\\nint main(){puts(\"c-ok\");}' > m.c && gcc m.c -o m && ./m", "c-ok"),
    "cmake": (
        "cmake",
        "mkdir -p cm && printf 'cmake_minimum_required(VERSION 3.10)\\nproject(p C)\\nadd_executable(p m.c)\\n'"
        " > cm/CMakeLists.txt && printf '#include <stdio.h>\\nint main(){puts(\"cmake-ok\");}' > cm/m.c && "
        "cmake -S cm -B cm/b >/dev/null && cmake --build cm/b >/dev/null && ./cm/b/p",
        "cmake-ok",
    ),
    "rustc": ("rustc", "printf 'fn main(){println!(\"rs-ok\");}' > m.rs && rustc m.rs -o r && ./r", "rs-ok"),
    "cargo": ("cargo", "cargo new --vcs none --quiet hello && cd hello && cargo run --offline --quiet", "Hello, world!"),
    "node": ("node", "node -e 'console.log(\"js-ok\")'", "js-ok"),
    "java": (
        "javac",
        "printf 'class M{public static void main(String[] a){System.out.println(\"java-ok\");}}' > M.java && "
        "javac M.java && java -cp . M",
        "java-ok",
    ),
}


@needs_bwrap
@pytest.mark.parametrize("name", list(TOOLCHAINS))
def test_real_toolchains_work_inside_bwrap(name, tmp_path):
    binary, command, expected = TOOLCHAINS[name]
    if shutil.which(binary) is None:
        pytest.skip(f"{binary} is not installed on this machine")
    with make_sandbox("bwrap", tmp_path / "ws") as sb:
        result = sb.run(command, timeout=240)
    assert result.exit_code == 0, result.output
    assert expected in result.output


# ---------------------------------------------------------------- docker flags (no engine here)


def test_docker_container_flags(tmp_path):
    config = SandboxConfig(memory_mb=512, max_processes=100, docker_cpus=1.5, tmp_size_mb=64, cpu_seconds=30)
    argv = docker_run_argv(tmp_path, config)
    joined = " ".join(argv)
    for flag in ("--cap-drop ALL", "--security-opt no-new-privileges", "--network none", "--read-only",
                 "--pids-limit 100", "--memory 512m", "--memory-swap 512m", "--cpus 1.5", "--user 65534:65534",
                 "--ulimit cpu=30:30", f"--mount type=bind,source={tmp_path},target={tmp_path}"):  # fmt: skip
        assert flag in joined, flag
    assert "--tmpfs /tmp:rw,nosuid,nodev,size=64m,mode=1777" in joined
    assert "--privileged" not in argv and "--cap-add" not in argv
    assert argv[-3:] == [config.docker_image, "sleep", "infinity"]
    exec_argv = docker_exec_argv("cid", tmp_path, config, "make test", 10)
    assert exec_argv[:4] == ["docker", "exec", "-w", str(tmp_path)]
    assert exec_argv[-8:] == ["cid", "timeout", "-s", "KILL", "11", "sh", "-c", "make test"]
    assert not any(a.startswith("PATH=") for a in exec_argv)


def test_seccomp_program_shape():
    from mtl_graph.sandbox.seccomp import filter_program

    assert filter_program("riscv64") is None  # unknown: bwrap runs without it rather than with wrong numbers
    for machine in ("x86_64", "aarch64"):
        program = filter_program(machine)
        assert program is not None and len(program) == 14 * 8  # struct sock_filter is 8 bytes


# ---------------------------------------------------------------- quota and supervisor


@pytest.mark.parametrize("kind", KINDS)
def test_a_workspace_over_quota_may_still_delete_files(kind, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "blob").write_bytes(b"x" * (3 * 2**20))
    with make_sandbox(kind, ws, SandboxConfig(workspace_quota_mb=1)) as sb:
        result = sb.run("rm blob && echo cleaned")
        after = sb.run("echo normal > f && cat f")
    first, *rest = result.output.splitlines()
    assert "file writes refused" in first and "cleaned" in rest and rest[-1] == "[the workspace is back under its quota]"
    assert not (ws / "blob").exists()
    assert after.output == "normal\n"  # back under: commands write again


@pytest.mark.parametrize("kind", KINDS)
def test_a_killed_supervisor_fails_the_command_and_is_restarted(kind, tmp_path):
    with make_sandbox(kind, tmp_path / "ws") as sb:
        sb.run("true")
        pid = sb.supervisor.pid
        results = []
        worker = threading.Thread(target=lambda: results.append(sb.run("sleep 30", timeout=60)))
        worker.start()
        time.sleep(0.5)  # let the command start (not a timing assert)
        os.kill(pid, 9)
        worker.join(30)
        assert results and results[0].exit_code == 137 and "supervisor was killed" in results[0].output
        assert sb.run("echo again").output == "again\n"
        assert sb.supervisor.pid != pid
