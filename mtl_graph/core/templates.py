"""Prompt templates are files in each stage's ``prompts/`` folder, rendered with ``string.Template``.

Placeholders are ``$name``; a literal dollar sign is written ``$$``. Values are inserted as they are (a ``$`` in
a memory or a transcript is never read as a placeholder)."""

from __future__ import annotations

import functools
from importlib.resources import files
from pathlib import Path
from string import Template


@functools.cache
def _packaged(package: str, name: str) -> str:
    path = files(package) / "prompts" / name
    if not path.is_file():
        raise FileNotFoundError(f"no prompt template named {name!r} in {package}")
    return path.read_text(encoding="utf-8")


def load_template(package: str, name: str, override_dir: Path | None = None) -> str:
    """The text of template ``name`` (".md" implied): from override_dir when it has it, else the packaged one."""
    name = name if name.endswith(".md") else f"{name}.md"
    if override_dir is not None and (Path(override_dir) / name).is_file():
        return (Path(override_dir) / name).read_text(encoding="utf-8")
    return _packaged(package, name)


def render_template(package: str, name: str, override_dir: Path | None = None, **values: object) -> str:
    """A template with every placeholder filled; a missing value is an error, never left in the prompt."""
    try:
        text = Template(load_template(package, name, override_dir)).substitute({k: str(v) for k, v in values.items()})
    except KeyError as exc:
        raise ValueError(f"prompt template {name} needs a value for {exc}") from None
    return text.strip()
