"""The per-sandbox supervisor: starts each command and kills every process it leaves behind.

Runs as its own small, single-threaded process (``python -I -S supervisor/server.py FD``, standard library only) so that:
- it is a child subreaper: whatever a command spawns, even after ``setsid``, ``nohup`` or a double fork, stays
  below it, and is killed when the command ends, times out, or the sandbox closes;
- it notices its parent's death (the control socket reaches EOF) and then kills everything too;
- resource limits and uid switches happen in a fork of this small process, never in the (threaded) host. As
  root it wears the commands' limits itself (they are fixed for a sandbox; see ``can_wear``), so every child
  inherits them without running Python between fork and exec (a ``preexec_fn`` forbids the fast spawn path and
  costs ~0.5 ms per command; an exec of ``prlimit`` ~0.7 ms).

The same program is a sandbox's long-lived runner (persistent.py), which has the commands' uid so it starts them
without a uid switch (the fast spawn path) and confines itself (``confine_runner``). Inside a persistent bwrap
sandbox it is ``supervisor/server.py FD LIFELINE inside``, pid 1 of the sandbox's pid namespace, so the commands can neither
signal, stop nor trace it; LIFELINE is a pidfd of the supervisor on the host that holds bwrap: when that one dies,
so does the runner, and with it the namespace (a parent-death signal cannot do it: bwrap, without capabilities,
may not signal another uid). For the local backend as root, this supervisor forks it (``"runner": true``).

Protocol on the control socket (newline-delimited JSON; one command at a time):
  host → ``{"op": "run", "argv", "cwd", "env", "uid", "gid", "limits": [[resource, value], ...], "files": [path]}``
  (each file opened read-only and passed to the child, its number replacing ``@mtl-fd:N`` in argv) with the
  output pipe's write end attached (SCM_RIGHTS), then any descriptors to pass on (numbered after the files,
  followed by a pidfd of this process when ``"lifeline": true``); reply ``{"pid": N}`` or ``{"error": "..."}``,
  later ``{"exit": code}``.
  host → ``{"op": "kill"}``: kill the running command and everything below; its ``{"exit": ...}`` follows.
  host → ``{"op": "run", "runner": true, "uid", "gid", "seccomp"}`` with the output pipe and a socket attached: fork
  a runner switched to uid:gid, under the seccomp filter given (hex of its BPF program, optional), serving that
  socket (supervised like a command).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
_MAX_MSG = 64 * 1024 * 1024
# Below these limits this process could fail its own allocations, or use up its CPU time, while wearing them.
_SELF_LIMIT_MIN_AS = 256 * 1024 * 1024
_SELF_LIMIT_MIN_CPU_S = 60


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value}) failed")


def set_subreaper() -> None:
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


PR_SET_SECCOMP, SECCOMP_MODE_FILTER, PR_SET_NO_NEW_PRIVS = 22, 2, 38


def load_seccomp(program: bytes) -> None:
    """Install a seccomp filter (struct sock_filter[], as seccomp.py builds it) on this process and all it will
    start, after no_new_privs (so neither this process nor a setuid binary it runs can drop it)."""

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "could not install the seccomp filter")


def confine_runner() -> None:
    """Make a runner untouchable by the commands it starts, which share its uid.

    Not dumpable, it cannot be ptraced nor its /proc entries (fds, memory, environment) opened by that uid. As pid 1
    of a pid namespace (bwrap) the kernel also drops every signal sent from inside for which it has no handler,
    SIGKILL and SIGSTOP included, so Python's SIGINT handler goes. The parent-death signal, cleared by any uid
    switch before, is set again.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    """Direct children of pid (from /proc/PID/task/*/children, else a scan of every process's parent)."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                found += [int(c) for c in fh.read().split()]
        except FileNotFoundError:  # kernel without CONFIG_PROC_CHILDREN
            return _children_by_scan(pid)
        except OSError:
            continue
    return found


def _children_by_scan(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(name))
    return found


def _alive(pid: int) -> bool:
    """False for a process that is gone or only a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


_IPC_RMID = 0
_SYSV_IPC = (("shm", "shmctl"), ("msg", "msgctl"), ("sem", "semctl"))


def remove_sysv_ipc() -> None:
    """Remove the System V IPC objects of this IPC namespace (a persistent sandbox's own): like the processes of
    a command, and unlike /tmp, they must not outlive it, as no size limit bounds them."""
    libc = None
    for kind, ctl in _SYSV_IPC:
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                ids = [int(line.split()[1]) for line in fh.readlines()[1:]]
        except (OSError, ValueError, IndexError):
            continue
        for ipc_id in ids:
            libc = libc or ctypes.CDLL(None, use_errno=True)
            getattr(libc, ctl)(ipc_id, *((0,) if kind == "sem" else ()), _IPC_RMID, None)


def kill_all_descendants() -> None:
    """SIGKILL every process below this one until none is left, reaping as they die."""
    me = os.getpid()
    while True:
        if me == 1:  # the sandbox's init: one call signals every other process of the namespace (all of its uid)
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        stack, living = [me], []
        while stack:
            for child in _children(stack.pop()):
                stack.append(child)
                if _alive(child):
                    living.append(child)
        for pid in living:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap()
        if not living:
            return
        time.sleep(0.001)  # orphans of the killed reparent to us a moment later


def _reap() -> dict[int, int]:
    """Collect every finished child; pid -> wait status."""
    done: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done[pid] = status


def can_wear(limits: list[tuple[int, int]], inside: bool = False) -> bool:
    """Whether this process may take the commands' limits on itself for the rest of its life: a limit cannot be
    raised again without CAP_SYS_RESOURCE, so it must leave room for this process's own allocations and CPU time
    (the host restarts it every SUPERVISOR_COMMANDS commands). A supervisor only as root, being exempt from
    RLIMIT_NPROC when it forks; a runner (``inside``) always, as it has the commands' uid: it is one process of
    theirs (between commands, their only one) and its forks meet the very check theirs do."""
    floor = {resource.RLIMIT_AS: _SELF_LIMIT_MIN_AS, resource.RLIMIT_CPU: _SELF_LIMIT_MIN_CPU_S}
    allowed = inside or os.geteuid() == 0
    return allowed and bool(limits) and all(value >= floor.get(res, 0) for res, value in limits)


FD_TOKEN = "@mtl-fd:"


def with_fds(argv: list[str], fds: list[int]) -> list[str]:
    """argv with each ``@mtl-fd:N`` option replaced by the number of the N-th opened file (never the last
    element: that is the command text)."""
    head = [str(fds[int(a[len(FD_TOKEN):])]) if a.startswith(FD_TOKEN) else a for a in argv[:-1]]
    return head + argv[-1:]


class Forked:
    """What supervise() uses of a Popen, for a child forked without exec."""

    def __init__(self, pid: int) -> None:
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode


class Supervisor:
    def __init__(self, sock: socket.socket, lifeline: int | None = None) -> None:
        self.sock = sock
        self.lifeline = lifeline
        """For a runner: a pidfd of the supervisor holding it, readable once that one is dead."""
        self.inside = lifeline is not None
        """A runner, of the commands' uid (inside bwrap, or forked for the local backend as root)."""
        self.buffer = b""
        self.fds: list[int] = []
        self.worn: list[tuple[int, int]] | None = None
        """The limits this process took on itself (children inherit them), once it did."""

    def wear(self, limits: list[tuple[int, int]]) -> bool:
        """True when a child forked now starts with exactly limits, inherited from this process."""
        if self.worn is None and can_wear(limits, self.inside):
            for res, value in limits:
                resource.setrlimit(res, (value, value))
            self.worn = limits
        return self.worn == limits

    def send(self, **message: object) -> None:
        try:
            self.sock.sendall(json.dumps(message).encode() + b"\n")
        except (BrokenPipeError, ConnectionResetError):  # the host is gone: the next receive() sees it
            pass

    def receive(self) -> dict | None:
        """The next message (None at EOF: the host is gone)."""
        while b"\n" not in self.buffer:
            if self.lifeline is not None and self.lifeline in select.select([self.sock, self.lifeline], [], [])[0]:
                return None
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 4)
            except ConnectionResetError:  # the host closed its end without reading our last message
                return None
            self.fds += fds
            if not data:
                return None
            self.buffer += data
            if len(self.buffer) > _MAX_MSG:
                return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def spawn(self, request: dict) -> subprocess.Popen | None:
        out = self.fds.pop(0) if self.fds else None
        passed, self.fds = self.fds, []
        if out is None:
            self.send(error="no output pipe attached")
            return None
        if request.get("lifeline"):
            passed.append(os.pidfd_open(os.getpid()))
        limits = [(int(res), int(value)) for res, value in request.get("limits", [])]
        uid, gid = request.get("uid"), request.get("gid")
        if self.worn is not None and limits != self.worn:  # the host restarts us when a sandbox's limits change
            self.send(error="the supervisor already wears other limits")
            for fd in (out, *passed):
                os.close(fd)
            return None
        inherit = self.wear(limits)

        def apply_limits() -> None:  # safe here: this process is single-threaded
            for res, value in limits:
                _, hard = resource.getrlimit(res)
                if hard != resource.RLIM_INFINITY and os.geteuid() != 0:
                    value = min(value, hard)
                resource.setrlimit(res, (value, value))

        switch = {"user": uid, "group": gid, "extra_groups": []} if uid is not None else {}
        opened: list[int] = passed
        try:
            opened = [*(os.open(path, os.O_RDONLY) for path in request.get("files", [])), *passed]
            proc = subprocess.Popen(
                with_fds(request["argv"], opened), cwd=request["cwd"], env=request["env"], stdin=subprocess.DEVNULL,
                stdout=out, stderr=out, start_new_session=True,
                preexec_fn=apply_limits if limits and not inherit else None, pass_fds=opened, **switch,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
            self.send(error=f"could not start {request.get('argv', ['?'])[0]!r}: {exc}")
            return None
        finally:
            os.close(out)
            for fd in opened:
                os.close(fd)
        self.send(pid=proc.pid)
        return proc

    def fork_runner(self, request: dict) -> Forked | None:
        """This process, forked and switched to the request's uid:gid, serving the attached socket as a runner (no
        exec: the interpreter may live where that uid cannot read)."""
        attached, self.fds = self.fds, []
        if len(attached) != 2:
            for fd in attached:
                os.close(fd)
            self.send(error="a runner needs an output pipe and a socket")
            return None
        out, channel = attached
        lifeline = os.pidfd_open(os.getpid())
        pid = os.fork()
        if pid == 0:  # safe: this process is single-threaded
            try:
                os.dup2(out, 1)  # its errors reach the host's log of it
                os.dup2(out, 2)
                self.sock.close()  # the runner must never speak for the host
                os.setgroups([])
                os.setresgid(request["gid"], request["gid"], request["gid"])
                os.setresuid(request["uid"], request["uid"], request["uid"])
                if request.get("seccomp"):  # what bwrap --seccomp does for a bwrap sandbox as root
                    load_seccomp(bytes.fromhex(request["seccomp"]))
                confine_runner()
                set_subreaper()  # not inherited across fork
                Supervisor(socket.socket(fileno=channel), lifeline).serve()
            except BaseException as exc:
                os.write(2, f"the runner failed: {exc!r}\n".encode())
            finally:
                kill_all_descendants()
                os._exit(0)
        for fd in (out, channel, lifeline):
            os.close(fd)
        self.send(pid=pid)
        return Forked(pid)

    def serve(self) -> None:
        while True:
            request = self.receive()
            if request is None:
                return
            if request.get("op") != "run":
                continue  # a kill for a command that already ended
            proc = self.fork_runner(request) if request.get("runner") else self.spawn(request)
            if proc is not None and not self.supervise(proc):
                return

    def supervise(self, proc: subprocess.Popen | Forked) -> bool:
        """Wait for the command or a kill; kill what is left; report. False when the host is gone."""
        pidfd = os.pidfd_open(proc.pid)
        host_alive = True
        try:
            while True:
                watched = [pidfd, self.sock] if self.lifeline is None else [pidfd, self.sock, self.lifeline]
                ready, _, _ = select.select(watched, [], [])
                if pidfd in ready:
                    break
                request = self.receive()
                if request is None:
                    host_alive = False
                    break
                if request.get("op") == "kill":
                    break
        finally:
            os.close(pidfd)
        if proc.poll() is None:
            proc.kill()
        status = proc.wait()  # before anything reaps with waitpid(-1), which would lose the exit status
        kill_all_descendants()
        if os.getpid() == 1:
            remove_sysv_ipc()
        if host_alive:
            self.send(exit=status)
        return host_alive


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    lifeline = int(sys.argv[2]) if sys.argv[3:] == ["inside"] else None
    if lifeline is not None:
        confine_runner()
    set_subreaper()
    try:
        Supervisor(sock, lifeline).serve()
    finally:
        kill_all_descendants()


if __name__ == "__main__":
    main()
