"""Staleness tied to code: memories whose runs' files changed in the repository are marked stale by
`mtl pool verify --repo`, ranked lower and shown in the trace; unchanged ones are current; a memory with no code
link is never stale. Real git repositories, a real pool, real runs in the sandbox."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mtl_graph.cli import app
from mtl_graph.core.trajectory import CodeLink, Step
from mtl_graph.importers.sessions import code_link
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.lifecycle.policy import LifecycleConfig
from mtl_graph.memory.lifecycle.verify import Checkout, normalise_remote, verify
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.pipeline.code_probe import parse_probe

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
runner = CliRunner()
REMOTE = "https://example.com/team/app.git"
FILES = {"app/core.py": "def f():\n    return 1\n", "app/util.py": "X = 1\n", "README.md": "app\n"}
WHEN = "2026-01-02T03:04:05+00:00"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": WHEN, "GIT_COMMITTER_DATE": WHEN,
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def make_repo(path: Path, files: dict[str, str] = FILES, remote: str | None = REMOTE) -> str:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "start")
    if remote:
        git(path, "remote", "add", "origin", remote)
    return git(path, "rev-parse", "HEAD")


def memory(title: str, link: CodeLink | None) -> InsightMemory:
    return InsightMemory(title=title, description=f"When working on {title}.", content=f"Advice about {title}.",
                         outcome="success", sources=[Provenance(run_id=f"run-{title}", code=link)])


def commit_change(repo: Path, rel: str, text: str | None) -> None:
    if text is None:
        git(repo, "rm", "-q", rel)
    else:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
        git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"change {rel}")


# Each change to the checkout, and whether a memory linked to app/core.py is stale after it.
CHANGES = {
    "unchanged": (lambda r: None, False),
    "edited, committed": (lambda r: commit_change(r, "app/core.py", "def f():\n    return 2\n"), True),
    "edited, not committed": (lambda r: (r / "app/core.py").write_text("def f():\n    return 3\n"), True),
    "deleted": (lambda r: commit_change(r, "app/core.py", None), True),
    "renamed": (lambda r: git(r, "mv", "app/core.py", "app/main.py"), True),
    "mode changed": (lambda r: (r / "app/core.py").chmod(0o755), True),
    "another file edited": (lambda r: commit_change(r, "app/util.py", "X = 2\n"), False),
    "a new file added": (lambda r: commit_change(r, "app/new.py", "Y = 1\n"), False),
    "edited then restored": (lambda r: (commit_change(r, "app/core.py", "z\n"),
                                        commit_change(r, "app/core.py", FILES["app/core.py"])), False),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_to_the_linked_file_and_only_that_makes_a_memory_stale(tmp_path, change):
    repo = tmp_path / "repo"
    commit = make_repo(repo)
    act, expected = CHANGES[change]
    act(repo)
    with MemoryPool.open(tmp_path / "pool") as pool:
        linked = memory("core", CodeLink(repository=REMOTE, commit=commit, paths=["app/core.py"]))
        plain = memory("plain", None)
        pool.add_many([linked, plain])
        report = verify(pool, repo)
        got = pool.get(linked.id)
        assert (linked.id in report.stale) is expected and (linked.id in report.current) is not expected
        assert got.status == ("stale" if expected else "active") and got.last_verified is not None
        if expected:
            assert got.stale[0].startswith(f"changed since {commit[:12]}: app/core.py")
        assert report.unlinked == 1 and pool.get(plain.id).status == "active" and pool.get(plain.id).last_verified is None


def test_a_stale_memory_is_current_again_once_its_files_are_back_and_dry_runs_change_nothing(tmp_path):
    repo = tmp_path / "repo"
    commit = make_repo(repo)
    with MemoryPool.open(tmp_path / "pool") as pool:
        m = memory("core", CodeLink(repository=REMOTE, commit=commit, paths=["app/core.py"]))
        pool.add(m)
        (repo / "app/core.py").write_text("changed\n")
        assert m.id in verify(pool, repo, dry_run=True).stale and pool.get(m.id).status == "active"
        verify(pool, repo)
        assert pool.get(m.id).status == "stale"
        (repo / "app/core.py").write_text(FILES["app/core.py"])
        assert verify(pool, repo).current == [m.id] and pool.get(m.id).stale == []


@pytest.mark.parametrize("name,same", [
    ("https://example.com/team/app.git", True), ("https://example.com/Team/App", True),
    ("git@example.com:team/app.git", True), ("ssh://git@example.com/team/app", True),
    ("https://user:token@example.com/team/app.git/", True), ("https://example.com/team/app2.git", False),
    ("https://example.org/team/app.git", False), ("team/app", False), ("", False)])
def test_a_link_names_the_checkout_by_any_spelling_of_its_remote_or_by_its_directory(tmp_path, name, same):
    repo = tmp_path / "repo"
    make_repo(repo)
    checkout = Checkout.of(repo)
    assert checkout.holds(CodeLink(repository=name or None, commit="a" * 40, paths=["x"])) is same
    assert checkout.holds(CodeLink(repository=str(repo / "app" / ".."), commit="a" * 40, paths=["x"]))
    assert normalise_remote("git@example.com:team/app.git") == "example.com/team/app"


def test_links_it_cannot_check_are_reported_and_left_alone(tmp_path):
    repo = tmp_path / "repo"
    commit = make_repo(repo)
    (repo / "app/core.py").write_text("changed\n")
    old = datetime(2025, 1, 1, tzinfo=timezone.utc)
    with MemoryPool.open(tmp_path / "pool") as pool:
        missing = memory("missing", CodeLink(repository=REMOTE, commit="b" * 40, paths=["app/core.py"]))
        before = memory("before", CodeLink(repository=REMOTE, at=old, paths=["app/core.py"]))
        after = memory("after", CodeLink(repository=REMOTE, at=old + timedelta(days=400), paths=["app/core.py"]))
        other = memory("other", CodeLink(repository="https://example.com/else.git", commit=commit, paths=["app/core.py"]))
        pool.add_many([missing, before, after, other])
        report = verify(pool, repo)
        assert "is not in this checkout" in report.unverifiable[missing.id]
        assert "no commit of this checkout is older" in report.unverifiable[before.id]
        assert after.id in report.stale  # no commit in its log: the commit of its time is the one compared
        assert report.elsewhere == 1 and pool.get(other.id).status == "active"
        assert pool.get(missing.id).last_verified is None


@pytest.mark.parametrize("hostile", ["*", "app/*", ":(glob)app/**", "--output=/tmp/x", "-p", ":/", "app/[c]ore.py"])
def test_paths_from_the_pool_are_literal_never_globs_options_or_magic(tmp_path, hostile):
    repo = tmp_path / "repo"
    commit = make_repo(repo)
    commit_change(repo, "app/core.py", "changed\n")
    with MemoryPool.open(tmp_path / "pool") as pool:
        m = memory("hostile", CodeLink(repository=REMOTE, commit=commit, paths=[hostile]))
        pool.add(m)
        report = verify(pool, repo)
        assert m.id in report.current and not (tmp_path / "x").exists()


@pytest.mark.parametrize("bad", [{"commit": "HEAD"}, {"commit": "--all"}, {"commit": "abc"}, {"commit": "g" * 40},
                                 {"paths": ["/etc/passwd"]}, {"paths": ["../outside.py"]}, {"paths": ["a\nb"]},
                                 {"paths": [""]}, {"paths": ["x" * 501]}])
def test_a_code_link_refuses_what_is_not_a_commit_or_a_path_inside_the_repository(bad):
    with pytest.raises(ValueError):
        CodeLink(repository=REMOTE, **bad)


def test_importers_link_the_files_a_session_named_inside_its_directory():
    steps = [Step(action="Read", tool="Read", args={"file_path": "/home/u/app/app/core.py"}),
             Step(action="Edit", tool="Edit", args={"file_path": "/home/u/app/tests/test_core.py"}),
             Step(action="Read", tool="Read", args={"file_path": "/etc/hosts"}),
             Step(action="apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: app/util.py\n*** End Patch\nEOF"),
             Step(action="ls", args={"path": "../../escape"})]
    link = code_link("/home/u/app", "not-a-commit", "2026-11-30T10:00:00Z", steps, root="/home/u/app")
    assert link.paths == ["app/core.py", "app/util.py", "tests/test_core.py"] and link.commit is None
    assert link.at == datetime(2026, 11, 30, 10, tzinfo=timezone.utc) and link.linked
    assert code_link(None, None, None, [Step(action="ls")]) is None


def test_the_probe_output_is_parsed_as_untrusted():
    commit = "a" * 40
    out = f"{commit}\n\x1e{REMOTE}\n\x1e M app/core.py\0?? new.py\0 D ../x\0?? .git/config\0M  /abs\0?? cut"
    assert parse_probe(out, truncated=True) == (commit, REMOTE, ["app/core.py", "new.py"])
    assert parse_probe("HEAD\x1e\x1e M a.py\0") == (None, None, ["a.py"])
    assert parse_probe("garbage") == (None, None, [])


def test_a_stale_memory_ranks_below_a_current_one_and_the_trace_says_so(tmp_path):
    repo = tmp_path / "repo"
    commit = make_repo(repo)
    (repo / "app/core.py").write_text("changed\n")
    link = CodeLink(repository=REMOTE, commit=commit, paths=["app/core.py"])
    a = InsightMemory(title="Parse dates with the ISO format", description="A date parser fails.",
                      content="Use datetime.fromisoformat.", outcome="success",
                      sources=[Provenance(run_id="r-a", code=link)])
    b = InsightMemory(title="Read timestamps in ISO 8601 with the standard library",
                      description="Dates in logs are not parsed.", content="Call fromisoformat, not strptime.",
                      outcome="success", sources=[Provenance(run_id="r-b")])
    with MemoryPool.open(tmp_path / "pool") as pool:
        pool.add_many([a, b])
        assert pool.count() == 2
        cfg = LifecycleConfig(relevance_floor=-1.0, stale_penalty=1.0)
        first = pool.retrieve("parse dates with the ISO format", k=2, lifecycle=cfg)
        assert first.hits[0].memory.id == a.id  # the closer one, while it is current
        verify(pool, repo)
        again = pool.retrieve("parse dates with the ISO format", k=2, lifecycle=cfg)
        assert [h.memory.id for h in again.hits] == [b.id, a.id]
        traced = {c["id"]: c for c in again.trace()["candidates"]}
        assert traced[a.id]["stale"] is True and "stale" not in traced[b.id]
        assert pool.search("parse dates with the ISO format", k=1)[0].memory.id == a.id  # research retrieval: as is


def test_mtl_pool_verify_reports_and_refuses_what_is_not_a_checkout(tmp_path):
    repo = tmp_path / "repo"
    commit = make_repo(repo)
    (repo / "app/core.py").write_text("changed\n")
    with MemoryPool.open(tmp_path / "pool") as pool:
        m = memory("core", CodeLink(repository=REMOTE, commit=commit, paths=["app/core.py"]))
        pool.add(m)
    out = runner.invoke(app, ["pool", "verify", "--repo", str(repo), "--pool", str(tmp_path / "pool"), "--json"])
    assert out.exit_code == 0, out.output and json.loads(out.output)["stale"] == {m.id: ["app/core.py"]}
    shown = runner.invoke(app, ["memories", "show", m.id, "--pool", str(tmp_path / "pool")])
    assert "stale (served, ranked lower): changed since" in shown.output and "code last verified" in shown.output
    listed = runner.invoke(app, ["memories", "list", "--status", "stale", "--json", "--pool", str(tmp_path / "pool")])
    assert [x["id"] for x in json.loads(listed.output)] == [m.id]
    bad = runner.invoke(app, ["pool", "verify", "--repo", str(tmp_path), "--pool", str(tmp_path / "pool")])
    assert bad.exit_code == 1 and "not a git checkout" in bad.output


SETUP_ENV = ("GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com "
             f"GIT_AUTHOR_DATE={WHEN} GIT_COMMITTER_DATE={WHEN} GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1")


def test_a_run_in_a_git_workspace_links_its_memory_to_the_commit_and_the_files_it_changed(tmp_path):
    """The workspace is made as the person's checkout was (same files, same commit); the agent edits app/core.py;
    the distilled memory carries the link; once the fix lands in the checkout the memory is stale."""
    from mtl_graph.core.task import Task
    from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
    from mtl_graph.pipeline import build_mtl_graph

    repo = tmp_path / "checkout"
    commit = make_repo(repo)
    task = Task(id="fix-core", domain="app", instruction="Make f() return 2.", files=dict(FILES),
                setup=f"git init -q -b main && git add -A && {SETUP_ENV} git commit -q -m start && "
                      f"git remote add origin {REMOTE}",
                check="grep -q 'return 2' app/core.py")
    model = ScriptedChatModel(plan="Edit app/core.py so f returns 2.", responses=[
        bash_call("printf 'def f():\\n    return 2\\n' > app/core.py"), submit_call("f returns 2")])
    with MemoryPool.open(tmp_path / "pool") as pool:
        graph = build_mtl_graph(model, pool, memory_type="none", distill_formats=["trajectory"],
                                workspace_root=tmp_path / "ws", run_log=tmp_path / "runs.jsonl")
        out = graph.invoke({"task": task})
        assert out["verdict"]["status"] == "pass", out.get("error")
        assert out["trajectory"]["code"] == {"repository": REMOTE, "commit": commit, "at": None,
                                             "paths": ["app/core.py"]}
        [written] = out["new_memory_ids"]
        assert pool.get(written).sources[0].code.paths == ["app/core.py"]
        assert verify(pool, repo).current == [written]
        commit_change(repo, "app/core.py", "def f():\n    return 2\n")
        assert verify(pool, repo).stale == {written: ["app/core.py"]}
