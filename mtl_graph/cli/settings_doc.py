"""The settings reference of docs/settings.md, written from the configuration itself: one table per group of
`MTLConfig`, each setting with its place in the config, flags, MTL_* variable, default and docstring.

`python -m mtl_graph.cli.settings_doc docs/settings.md` rewrites the part between the markers;
`tests/test_docs.py` checks that the page holds what this writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from mtl_graph.cli.options import flag_specs
from mtl_graph.config.names import SETTINGS, MTLContext, value_of
from mtl_graph.config.schema import MTLConfig, SettingsGroup, non_none

START, END = "<!-- settings: start -->", "<!-- settings: end -->"


def _flags(name: str) -> str:
    specs = [spec for spec in flag_specs(MTLContext) if spec.path[0] == name]
    if not specs:
        return "— (build only)"
    if len(specs) > 1 or len(specs[0].path) > 1:  # a settings model: one flag per field
        return ", ".join(f"`{spec.flags[0]}`" for spec in specs)
    spec = specs[0]
    if spec.annotation is bool:
        return f"`{spec.flags[0]}` / `--no-{spec.flags[0][2:]}`"
    return ", ".join(f"`{flag}`" for flag in spec.flags)


def _variable(name: str) -> str:
    if not SETTINGS[name].run:
        return "—"
    kind = non_none(SETTINGS[name].info.annotation)
    nested = isinstance(kind, type) and issubclass(kind, BaseModel)
    return f"`MTL_{name.upper()}`" + (f", `MTL_{name.upper()}__<FIELD>`" if nested else "")


def _default(config: MTLConfig, name: str) -> str:
    value = value_of(config, name)
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "—"
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def settings_reference() -> str:
    """The markdown of every group's table, between the markers."""
    config, lines = MTLConfig(), [START]
    for top, info in MTLConfig.model_fields.items():
        group = non_none(info.annotation)
        is_group = isinstance(group, type) and issubclass(group, SettingsGroup)
        doc = (group.__doc__ if is_group else info.description) or ""
        lines += ["", f"#### `{top}`: {_cell(doc)}", "",
                  "| setting | in MTLConfig | flags | variable | default | meaning |", "|---|---|---|---|---|---|"]
        for name, setting in SETTINGS.items():
            if setting.path[0] == top:
                lines.append(f"| `{name}` | `{'.'.join(setting.path)}` | {_flags(name)} | {_variable(name)} | "
                             f"{_default(config, name)} | {_cell(setting.info.description or '')} |")
    return "\n".join([*lines, "", END])


def rewrite(page: Path) -> bool:
    """Put the reference into `page` between its markers; True when the page changed."""
    text = page.read_text()
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    new = head + settings_reference() + tail
    page.write_text(new)
    return new != text


if __name__ == "__main__":
    print("updated" if rewrite(Path(sys.argv[1])) else "up to date")
