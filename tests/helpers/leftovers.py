"""What a run left behind, for tests that check its clean-up."""

from pathlib import Path


def files_in(root: Path) -> list[str]:
    """Files left under a workspace root (a root may keep empty per-thread directories)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir()) if root.exists() else []
