"""Prompt templates are files (``prompts/*.md``) rendered with ``string.Template``.

Placeholders are ``$name``; a literal dollar sign is written ``$$``.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from string import Template

PACKAGED = files("mtl_graph.agent") / "prompts"


def load_template(name: str, override_dir: Path | None = None) -> Template:
    """The template file ``name``, from override_dir when it has one, else the packaged one."""
    if override_dir is not None and (Path(override_dir) / name).is_file():
        return Template((Path(override_dir) / name).read_text(encoding="utf-8"))
    return Template((PACKAGED / name).read_text(encoding="utf-8"))


def render(name: str, override_dir: Path | None = None, **values: object) -> str:
    """Render a template; a placeholder without a value is an error, not silently left in the prompt."""
    try:
        return load_template(name, override_dir).substitute(values).strip()
    except KeyError as exc:
        raise ValueError(f"prompt template {name} needs a value for {exc}") from None
