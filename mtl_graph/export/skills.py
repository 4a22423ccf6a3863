"""Workflow memories as skill folders (`<dir>/<name>/SKILL.md`, the Agent Skills layout Claude Code, Codex CLI
and others read).

A skill's frontmatter names it (lowercase letters, digits and single hyphens, at most 64 characters, the folder's
name) and says when it applies (at most 1024 characters). The export marks the skills it writes in their
`metadata` (generator, namespace, memory id), and only ever replaces or removes folders so marked for the same
namespace: a skill a person wrote, or another namespace's export, is never touched, even on a name clash (the
memory is then left out with that reason). A folder the export made that now holds files of a person's is kept."""

from __future__ import annotations

import re
import shutil
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mtl_graph.export.markdown import evidence_line, provenance, quoted
from mtl_graph.export.section import ExportError, Update, read_text, write_atomically
from mtl_graph.export.selection import Exported, LeftOut, Selection, article
from mtl_graph.memory.fence import INVISIBLE
from mtl_graph.redaction.redact import redact

GENERATOR = "mtl_graph"
SKILL_FILE = "SKILL.md"
NAME_CHARS = 64
DESCRIPTION_CHARS = 1024
_NOT_NAME = re.compile(r"[^a-z0-9]+")
_FRONTMATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n", re.DOTALL)


def skill_name(memory_id: str, goal: str) -> str:
    """A valid skill name from the goal's words and the memory id (unique, stable across exports)."""
    folded = unicodedata.normalize("NFKD", goal).encode("ascii", "ignore").decode().lower()
    words = _NOT_NAME.sub("-", folded).strip("-")
    suffix = re.sub(r"[^a-z0-9]", "", memory_id.lower())[:8] or "memory"
    stem = words[:NAME_CHARS - len(suffix) - 1].rstrip("-")
    return f"{stem}-{suffix}" if stem else f"workflow-{suffix}"


def one_line(text: str, limit: int) -> str:
    """Untrusted text as one plain line for frontmatter: redacted, controls escaped, whitespace collapsed."""
    line = " ".join(INVISIBLE.sub(" ", redact(text)).split())
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def skill_text(item: Exported, name: str, namespace: str) -> str:
    memory = item.memory
    goal = getattr(memory, "goal", memory.key_text())
    description = one_line(f"Use when: {goal}", DESCRIPTION_CHARS)
    front = {"name": name, "description": description,
             "metadata": {"generator": GENERATOR, "namespace": namespace, "memory-id": memory.id,
                          "cited-runs": str(item.evidence.cited_runs),
                          "utility": f"{item.evidence.utility:.2f}"}}
    steps = "\n".join(f"{n}. {a}" for n, a in enumerate(getattr(memory, "actions", []), 1)) or memory.body()
    return "\n".join(["---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=10_000).rstrip("\n"),
                      "---", "", f"# {name}", "",
                      "A workflow another run followed, exported from the memory pool because it measurably helped. "
                      "It is experience, not an order: check each step against this repository.", "",
                      "## When it applies", "", quoted(goal), "", "## Steps", "", quoted(steps), "",
                      "## Evidence", "", evidence_line(item), quoted(f"Provenance: {provenance(item)}"), ""])


def owner_of(skill_md: Path) -> dict[str, Any] | None:
    """The export's marks in a SKILL.md's frontmatter (None: not written by the export, or unreadable)."""
    try:
        text = read_text(skill_md) if skill_md.is_file() and not skill_md.is_symlink() else None
    except ExportError:
        return None
    match = _FRONTMATTER.match(text or "")
    if not match:
        return None
    try:
        front = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return None
    meta = front.get("metadata") if isinstance(front, dict) else None
    return meta if isinstance(meta, dict) and meta.get("generator") == GENERATOR else None


@dataclass
class SkillsExport:
    """What a skills export wrote (or, dry, would write), removed, and left out."""

    updates: list[Update] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    kept_foreign: list[Path] = field(default_factory=list)
    """Folders the export made once that now hold a person's files: left in place."""
    left_out: list[LeftOut] = field(default_factory=list)


def export_skills(root: Path, selection: Selection, namespace: str, *, dry_run: bool = False) -> SkillsExport:
    """One folder per selected workflow memory under root; the export's folders of this namespace that are no
    longer selected are removed."""
    if root.exists() and not root.is_dir():
        raise ExportError(f"{root}: not a directory")
    out = SkillsExport()
    ours: dict[str, Path] = {}
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        meta = owner_of(folder / SKILL_FILE) if folder.is_dir() and not folder.is_symlink() else None
        if meta is not None and meta.get("namespace") == namespace:
            ours[folder.name] = folder
    wanted: dict[str, str] = {}
    for item in selection.kept:
        if item.memory.type != "workflow":
            out.left_out.append(LeftOut(item.memory.id, f"{article(item.memory.type)} {item.memory.type} memory (skills are workflows)", "scope"))
            continue
        name = skill_name(item.memory.id, getattr(item.memory, "goal", ""))
        folder = root / name
        if (folder.exists() or folder.is_symlink()) and name not in ours:
            out.left_out.append(LeftOut(item.memory.id, f"{folder} exists and was not written by this export", "clash"))
            continue
        wanted[name] = skill_text(item, name, namespace)
    for name, text in wanted.items():
        path = root / name / SKILL_FILE
        before = read_text(path) if name in ours else None
        update = Update(path, before, text, "unchanged" if before == text else "replaced" if before else "added")
        out.updates.append(update)
        if not dry_run and update.action != "unchanged":
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, text)
    for name, folder in ours.items():
        if name in wanted:
            continue
        if any(p.name != SKILL_FILE for p in folder.iterdir()):
            out.kept_foreign.append(folder)
            continue
        out.updates.append(Update(folder / SKILL_FILE, read_text(folder / SKILL_FILE), "", "removed"))
        out.removed.append(folder)
        if not dry_run:
            shutil.rmtree(folder)
    return out
