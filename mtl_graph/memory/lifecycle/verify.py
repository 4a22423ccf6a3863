"""Staleness tied to code: a memory whose run worked on files that have changed since is marked stale.

A memory's provenance may carry a code link (core/trajectory.py `CodeLink`: repository, commit or time, paths),
filled by the importers where a log names them and by runs in a git workspace. `verify` checks the links of one
repository against a checkout of it: the files changed between the link's commit (or the last commit before its
time) and the checkout's working tree make the memory stale, with them as the reason; a memory whose files are
unchanged is current again, and either way `last_verified` is set. A memory with no code link, or linked to
another repository, is never touched. Git runs on the person's own checkout; what comes from the pool (commit,
paths) is untrusted and is only ever a checked hex commit and literal pathspecs after `--`."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mtl_graph.core.errors import MTLError
from mtl_graph.core.trajectory import CodeLink
from mtl_graph.memory.base import Memory
from mtl_graph.memory.errors import PoolError
from mtl_graph.memory.lifecycle.protocol import LifecyclePool
from mtl_graph.memory.pool.points import memory_of, payload_of

GIT = ("git", "--no-pager", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "diff.external=")
PATHS_PER_CALL = 200
SHOWN_PATHS = 5
"""Changed files named in a stale memory's reason (the rest are counted)."""
_SCP_LIKE = re.compile(r"^[\w.-]+@([\w.-]+):(.+)$")  # git@github.com:owner/repo.git


class VerifyError(PoolError):
    """The directory cannot be verified against (not a git checkout, git missing)."""


class Unverifiable(MTLError):
    """This link cannot be checked in this checkout (its commit is not here, nothing before its time)."""


def normalise_remote(url: str) -> str:
    """A remote URL as one comparable form: host/path, no scheme, user, port-less scp syntax or .git suffix."""
    url = url.strip()
    scp = _SCP_LIKE.match(url)
    if scp:
        url = f"{scp.group(1)}/{scp.group(2)}"
    url = re.sub(r"^[a-z][a-z0-9+.-]*://", "", url, flags=re.I)
    url = re.sub(r"^[^@/]*@", "", url)
    url = url.rstrip("/")
    url = url[:-4] if url.endswith(".git") else url
    return url.lower()


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        return subprocess.run([*GIT, "-C", str(repo), *args], capture_output=True, text=True, env=env, timeout=120)
    except FileNotFoundError:
        raise VerifyError("git is not installed: `mtl pool verify` reads the repository with it") from None


@dataclass(frozen=True)
class Checkout:
    """A git checkout as verification compares links with it."""

    root: Path
    remotes: frozenset[str]

    @classmethod
    def of(cls, directory: Path | str) -> "Checkout":
        directory = Path(directory)
        top = _git(directory, "rev-parse", "--show-toplevel")
        if not directory.is_dir() or top.returncode != 0:
            raise VerifyError(f"{directory}: not a git checkout (`git rev-parse` says: "
                              f"{(top.stderr or '').strip().splitlines()[-1:] or ['no such directory']})")
        root = Path(top.stdout.strip()).resolve()
        urls = _git(root, "remote", "-v").stdout.split()
        remotes = frozenset(normalise_remote(u) for u in urls[1::3])  # name url (fetch) name url (push) ...
        return cls(root, remotes)

    def holds(self, link: CodeLink) -> bool:
        """Whether the link names this repository: one of its remotes, or its directory."""
        name = link.repository
        if not name:
            return False
        if "://" in name or _SCP_LIKE.match(name):
            return normalise_remote(name) in self.remotes
        try:
            return Path(name).resolve() == self.root or normalise_remote(name) in self.remotes
        except (OSError, ValueError):
            return False

    def commit_of(self, link: CodeLink) -> str:
        """The link's commit checked to be in this checkout, or the last commit before its time."""
        if link.commit is not None:
            found = _git(self.root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{link.commit}^{{commit}}")
            if found.returncode != 0:
                raise Unverifiable(f"commit {link.commit[:12]} is not in this checkout (fetch it, then verify again)")
            return found.stdout.strip()
        assert link.at is not None
        at = link.at if link.at.tzinfo else link.at.replace(tzinfo=timezone.utc)
        found = _git(self.root, "rev-list", "-1", f"--before={at.isoformat()}", "HEAD")
        if found.returncode != 0 or not found.stdout.strip():
            raise Unverifiable(f"no commit of this checkout is older than the run ({at:%Y-%m-%d %H:%M})")
        return found.stdout.strip()

    def changed(self, commit: str, paths: list[str]) -> list[str]:
        """Of paths, those that differ between commit and the working tree (changed, added, deleted, renamed)."""
        out: set[str] = set()
        for start in range(0, len(paths), PATHS_PER_CALL):
            specs = [f":(literal){p}" for p in paths[start:start + PATHS_PER_CALL]]
            diff = _git(self.root, "diff", "--name-only", "--no-renames", "--no-ext-diff", "--no-textconv", "-z",
                        commit, "--", *specs)
            if diff.returncode != 0:
                raise Unverifiable(f"git diff failed: {diff.stderr.strip()[:200]}")
            out.update(p for p in diff.stdout.split("\0") if p)
        return sorted(out)


@dataclass
class VerifyReport:
    """What one verification found."""

    stale: dict[str, list[str]] = field(default_factory=dict)
    """Memory id -> the files changed since its run (newly stale or still stale)."""
    current: list[str] = field(default_factory=list)
    """Linked memories whose files are unchanged (a stale one among them is current again)."""
    unverifiable: dict[str, str] = field(default_factory=dict)
    """Memory id -> why its link could not be checked here (left as it was)."""
    unlinked: int = 0
    """Memories with no code link (never stale)."""
    elsewhere: int = 0
    """Memories linked to another repository."""

    def to_json(self) -> dict[str, Any]:
        return {"stale": self.stale, "current": self.current, "unverifiable": self.unverifiable,
                "unlinked": self.unlinked, "elsewhere": self.elsewhere}


def _reason(changed: list[str], commits: list[str]) -> str:
    named = ", ".join(changed[:SHOWN_PATHS]) + (f" and {len(changed) - SHOWN_PATHS} more" if len(changed) > SHOWN_PATHS
                                               else "")
    return f"changed since {', '.join(c[:12] for c in commits)}: {named}"


def verify(pool: LifecyclePool, directory: Path | str, *, dry_run: bool = False,
           now: datetime | None = None) -> VerifyReport:
    """Check every memory linked to the checkout at directory; mark the changed stale, the unchanged current
    (`last_verified` set on both), unless dry_run."""
    checkout = Checkout.of(directory)
    now = now or datetime.now(timezone.utc)
    report = VerifyReport()
    updates: list[Memory] = []
    for hit in pool.store.scroll():
        try:
            memory = memory_of(hit)
        except PoolError:
            continue  # `mtl pool check` reports unreadable points
        links = [s.code for s in memory.sources if s.code is not None and s.code.linked]
        if not links:
            report.unlinked += 1
            continue
        mine = [link for link in links if checkout.holds(link)]
        if not mine:
            report.elsewhere += 1
            continue
        changed: set[str] = set()
        commits: list[str] = []
        try:
            for link in mine:
                commit = checkout.commit_of(link)
                found = checkout.changed(commit, link.paths)
                if found:
                    changed.update(found)
                    commits.append(commit)
        except Unverifiable as exc:
            report.unverifiable[memory.id] = str(exc)
            continue
        if changed:
            report.stale[memory.id] = sorted(changed)
            stale = [_reason(sorted(changed), commits)]
        else:
            report.current.append(memory.id)
            stale = []
        updates.append(memory.model_copy(update={"stale": stale, "last_verified": now}))
    if not dry_run and updates:
        with pool.write_lock:
            for memory in updates:
                pool.store.set_payload(memory.id, payload_of(memory))
    return report
