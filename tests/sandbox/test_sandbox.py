"""Sandbox backends run real subprocesses (and real bubblewrap where it works)."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from mtl_graph.sandbox import (
    BwrapSandbox,
    LocalSandbox,
    Sandbox,
    SandboxConfig,
    SandboxError,
    cap_text,
    make_sandbox,
)
from mtl_graph.sandbox.docker import docker_available
from helpers.sandbox_attack_kit import needs_bwrap, wait_gone

pytestmark = pytest.mark.filterwarnings("ignore:local sandbox")

KINDS = ["local", pytest.param("bwrap", marks=needs_bwrap)]


@pytest.fixture(params=KINDS)
def sandbox(request, tmp_path):
    sb = make_sandbox(request.param, tmp_path / "ws", SandboxConfig(output_cap=1000))
    yield sb
    sb.close()


def test_backends_satisfy_protocol(sandbox):
    assert isinstance(sandbox, Sandbox)
    assert sandbox.workspace.is_dir()


def test_exit_code_and_interleaved_output(sandbox):
    result = sandbox.run("echo out; echo err >&2; exit 7")
    assert result.exit_code == 7
    assert "out\n" in result.output and "err\n" in result.output
    assert not result.timed_out and not result.truncated


def test_killed_by_signal_reports_shell_style_code(sandbox):
    assert sandbox.run("kill -9 $$").exit_code == 128 + 9


def test_commands_start_in_the_workspace_and_write_there(sandbox):
    result = sandbox.run("pwd; echo data > made.txt")
    assert result.output.strip() == str(sandbox.workspace)
    assert (sandbox.workspace / "made.txt").read_text() == "data\n"


@pytest.mark.parametrize("command", ["sleep 100", "yes", "exec >&- 2>&-; sleep 100"])
def test_timeout_kills_and_returns_124(sandbox, command):
    start = time.monotonic()
    result = sandbox.run(command, timeout=1)
    assert time.monotonic() - start < 4
    assert result.exit_code == 124 and result.timed_out
    assert len(result.output) < 1100  # a flood is capped, not buffered


def test_output_cap_keeps_head_and_tail(sandbox):
    full = "".join(f"{i}\n" for i in range(1, 20001))
    result = sandbox.run("seq 1 20000")
    assert result.exit_code == 0 and result.truncated
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.endswith("19999\n20000\n")
    kept = result.output.split("\n... [")
    cut = len(full) - 1000
    assert f"[{cut} characters cut]" in result.output, kept[1][:40]


def test_cap_text_marks_the_cut_and_leaves_short_text_alone():
    assert cap_text("short", 100) == ("short", False)
    text, cut = cap_text("a" * 50 + "b" * 100 + "c" * 50, 100)
    assert cut and text == "a" * 50 + "\n... [100 characters cut] ...\n" + "c" * 50


def test_invalid_utf8_output_is_replaced_not_fatal(sandbox):
    result = sandbox.run(r"printf 'ok \377\n'")
    assert result.output == "ok \ufffd\n"


def test_secrets_in_the_environment_do_not_reach_commands(sandbox, monkeypatch):
    monkeypatch.setenv("MTL_TEST_API_KEY", "sk-very-secret")
    result = sandbox.run("env")
    assert "sk-very-secret" not in result.output
    assert f"HOME={sandbox.workspace}\n" in result.output
    assert "PATH=" in result.output


def test_env_allow_list_and_extras_are_passed(tmp_path, monkeypatch):
    monkeypatch.setenv("MTL_TEST_VISIBLE", "yes-visible")
    config = SandboxConfig(env_allow=("PATH", "MTL_TEST_VISIBLE"), extra_env={"EXTRA": "set"})
    with LocalSandbox(tmp_path, config) as sb:
        assert sb.run('echo "$MTL_TEST_VISIBLE $EXTRA"').output == "yes-visible set\n"


def test_file_size_limit_stops_a_large_write(tmp_path):
    with LocalSandbox(tmp_path, SandboxConfig(max_file_size_mb=1)) as sb:
        result = sb.run("head -c 3000000 /dev/zero > big.bin")
    assert result.exit_code != 0
    assert (tmp_path / "big.bin").stat().st_size <= 1024 * 1024


def test_memory_limit_stops_a_large_allocation(tmp_path):
    with LocalSandbox(tmp_path, SandboxConfig(memory_mb=300)) as sb:
        result = sb.run("python3 -c 'x = bytearray(800 * 2**20); print(len(x))'")
    assert result.exit_code != 0
    assert "MemoryError" in result.output


def test_cpu_limit_stops_a_busy_loop(tmp_path):
    with LocalSandbox(tmp_path, SandboxConfig(cpu_seconds=1)) as sb:
        result = sb.run("python3 -c 'while True: pass'", timeout=20)
    assert not result.timed_out and result.exit_code != 0
    assert result.duration_s < 10


def test_background_processes_end_with_their_command(sandbox):
    # what a command leaves running is killed when it returns (bwrap: its pid namespace; local: the supervisor)
    result = sandbox.run("sleep 31337.5 >/dev/null 2>&1 & echo started")
    assert result.output == "started\n"
    assert wait_gone("31337.5") == []


def test_file_helpers_confined_to_workspace(sandbox, tmp_path):
    sandbox.write_file("sub/dir/a.txt", "hello")
    assert sandbox.read_file("sub/dir/a.txt") == "hello"
    assert sandbox.run("cat sub/dir/a.txt").output == "hello"
    (tmp_path / "outside.txt").write_text("secret")
    (sandbox.workspace / "link").symlink_to(tmp_path / "outside.txt")
    for bad in ["../outside.txt", "/etc/hostname", "link", "sub/../../outside.txt"]:
        with pytest.raises(SandboxError, match="escapes the workspace"):
            sandbox.read_file(bad)
    with pytest.raises(SandboxError, match="escapes the workspace"):
        sandbox.write_file("../evil.txt", "x")
    assert not (tmp_path / "evil.txt").exists()


@needs_bwrap
def test_bwrap_only_the_workspace_is_writable(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    with BwrapSandbox(tmp_path / "ws") as sb:
        for target in ["/etc/mtl-test-x", str(outside / "x"), str(Path(__file__).parent / "mtl-test-x")]:
            result = sb.run(f"touch {target}")
            assert result.exit_code != 0, target
            assert not Path(target).exists()
        # the host's /tmp is hidden behind a private tmpfs, the rest of the root is read-only
        assert "Read-only file system" in sb.run("touch /etc/mtl-test-x").output
        assert sb.run("touch inside && echo private > /tmp/mtl-test-tmp").exit_code == 0
    assert (tmp_path / "ws" / "inside").exists()
    assert not Path("/tmp/mtl-test-tmp").exists()  # /tmp inside is a private tmpfs


@pytest.mark.parametrize("kind", KINDS)
def test_network_is_cut_only_in_bwrap(tmp_path, kind):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')"
    try:
        with make_sandbox(kind, tmp_path) as sb:
            result = sb.run(f"python3 -c \"{code}\"")  # the host interpreter: a venv may sit under the private /tmp
    finally:
        listener.close()
    if kind == "bwrap":
        assert result.exit_code != 0 and "ConnectionRefusedError" in result.output
    else:  # the control: the same command reaches the host listener without isolation
        assert result.exit_code == 0 and "connected" in result.output


@needs_bwrap
def test_bwrap_has_no_interface_but_loopback(tmp_path):
    with BwrapSandbox(tmp_path) as sb:
        result = sb.run("cat /proc/net/dev")
    names = {line.split(":")[0].strip() for line in result.output.splitlines()[2:]}
    assert names == {"lo"}


def test_auto_prefers_bwrap_and_falls_back_with_a_warning(tmp_path, monkeypatch):
    if BwrapSandbox.is_available():
        assert isinstance(make_sandbox("auto", tmp_path), BwrapSandbox)
    monkeypatch.setattr(BwrapSandbox, "is_available", staticmethod(lambda: False))
    with pytest.warns(RuntimeWarning, match="isolation"):
        assert isinstance(make_sandbox("auto", tmp_path), LocalSandbox)


def test_unknown_kind_and_missing_workspace_are_refused(tmp_path):
    with pytest.raises(SandboxError, match="unknown sandbox kind"):
        make_sandbox("vm", tmp_path)
    with pytest.raises(ValueError, match="workspace"):
        make_sandbox("local")


@pytest.mark.skipif(docker_available(), reason="a docker engine answers here")
def test_docker_without_engine_raises_a_clear_error(tmp_path):
    with pytest.raises(SandboxError, match="Docker engine"):
        make_sandbox("docker", tmp_path)


@needs_bwrap
def test_bwrap_shows_no_home_and_masks_credentials_in_bound_directories(tmp_path, monkeypatch):
    import shutil
    import tempfile

    # Outside /tmp, which the sandbox replaces with its own: the control file must stay visible.
    home = Path(tempfile.mkdtemp(prefix="mtl-home-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None))
    try:
        os.chmod(home, 0o755)
        (home / ".ssh").mkdir()
        (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
        (home / ".netrc").write_text("machine example.com password hunter2")
        (home / "notes.txt").write_text("visible")
        monkeypatch.setenv("HOME", str(home))
        read = f"cat {home}/.ssh/id_ed25519; cat {home}/.netrc; cat {home}/notes.txt"
        with make_sandbox("bwrap", tmp_path / "a") as sb:
            unbound = sb.run(read).output
        # a toolchain directory holding credentials is bound with them masked
        with make_sandbox("bwrap", tmp_path / "b", SandboxConfig(toolchain_paths=(str(home),))) as sb:
            bound = sb.run(read).output
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert "No such file or directory" in unbound and "visible" not in unbound
    assert "PRIVATE KEY" not in bound and "hunter2" not in bound
    assert "visible" in bound


@needs_bwrap
def test_a_toolchain_under_tmp_stays_visible_beside_the_private_tmp(tmp_path):
    """A checkout (and its venv) under /tmp: binding it before the private /tmp hid it and broke every sandbox."""
    tools = tmp_path / "checkout" / ".venv" / "bin"
    tools.mkdir(parents=True)
    (tools / "hello").write_text("#!/bin/sh\necho hello from the venv\n")
    (tools / "hello").chmod(0o755)
    (tmp_path / "checkout" / "secret.txt").write_text("not part of the toolchain")
    config = SandboxConfig(toolchain_paths=(str(tools),))
    with make_sandbox("bwrap", tmp_path / "ws", config) as sb:
        result = sb.run(f"{tools}/hello; ls /tmp; cat {tmp_path}/checkout/secret.txt", timeout=30)
    assert "hello from the venv" in result.output
    assert "not part of the toolchain" not in result.output  # only the bound directory, not its checkout


LIMITS = "ulimit -H -v -t -u -f; ulimit -S -v -t -u -f"


def _limit_values(output: str) -> list[str]:
    return [line.split()[-1] for line in output.splitlines()]


@pytest.mark.parametrize("kind", KINDS)
def test_limits_are_hard_and_follow_a_config_change(kind, tmp_path):
    """The supervisor may wear the limits itself so commands inherit them: soft = hard, no command can raise one,
    and a sandbox whose limits change gets a supervisor with the new ones."""
    config = SandboxConfig(memory_mb=2048, cpu_seconds=120, max_processes=300, max_file_size_mb=64)
    with make_sandbox(kind, tmp_path / "ws", config) as sb:
        first = sb.run(LIMITS)
        assert _limit_values(first.output) == ["2097152", "120", "300", "65536"] * 2, first.output
        raised = sb.run("ulimit -H -t 121 || echo refused; ulimit -S -v 99999999 || echo refused")
        assert raised.output.count("refused") == 2, raised.output
        sb.config = config.model_copy(update={"cpu_seconds": 90, "memory_mb": 1024})
        again = sb.run(LIMITS)
        assert _limit_values(again.output) == ["1048576", "90", "300", "65536"] * 2, again.output


@pytest.mark.parametrize("kind", KINDS)
def test_limits_too_tight_for_the_supervisor_still_bind_the_command(kind, tmp_path):
    """A memory limit the supervisor could not live under is applied in the child alone (and the next command
    still gets it: the supervisor keeps no trace of it)."""
    config = SandboxConfig(memory_mb=100, cpu_seconds=5)
    with make_sandbox(kind, tmp_path / "ws", config) as sb:
        for _ in range(2):
            result = sb.run(LIMITS)
            assert _limit_values(result.output)[:2] == ["102400", "5"], result.output


def test_the_supervisor_is_replaced_after_its_quota_of_commands(tmp_path, monkeypatch):
    """As root it wears the commands' CPU limit itself: it is replaced before its own CPU time could reach it."""
    import mtl_graph.sandbox.supervisor.client as supervisor_module

    monkeypatch.setattr(supervisor_module, "SUPERVISOR_COMMANDS", 2)
    with LocalSandbox(tmp_path, SandboxConfig(cpu_seconds=120)) as sb:
        pids = []
        for _ in range(5):
            assert sb.run("ulimit -H -t").output == "120\n"
            pids.append(sb.supervisor.pid)
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]
