"""The README and docs/ say what the code does: every setting is documented, the README's Python compiles and is
an example script that runs, and no relative link points at a missing file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mtl_graph.config.names import RUN_SETTINGS
from mtl_graph.core.environment import ProcessSettings
from helpers.paths import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
SETTINGS_DOC = ROOT / "docs" / "settings.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def python_blocks(path: Path) -> list[str]:
    return [body for lang, body in FENCE.findall(path.read_text()) if lang == "python"]


def missing_links(path: Path) -> list[str]:
    """Relative link targets of a markdown file that name no file (web links and in-page anchors aside)."""
    text = FENCE.sub("", path.read_text())  # a link inside a code block is code, not a link
    targets = [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]
    return [t for t in targets if not (path.parent / t.split("#")[0]).exists()]


@pytest.mark.parametrize("name", RUN_SETTINGS)
def test_every_run_setting_is_in_the_settings_doc(name: str) -> None:
    assert f"`{name}`" in SETTINGS_DOC.read_text(), f"docs/settings.md does not name the run setting {name}"


def test_the_settings_reference_is_written_from_the_configuration() -> None:
    from mtl_graph.cli.settings_doc import settings_reference

    assert settings_reference() in SETTINGS_DOC.read_text(), (
        "docs/settings.md is stale: run python -m mtl_graph.cli.settings_doc docs/settings.md")


def test_the_settings_page_examples_run() -> None:
    blocks = python_blocks(SETTINGS_DOC)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/settings.md", "exec"), {})


@pytest.mark.parametrize("name", [n for n in ProcessSettings.model_fields])
def test_every_environment_variable_is_in_the_settings_doc(name: str) -> None:
    info = ProcessSettings.model_fields[name]
    variable = info.validation_alias if isinstance(info.validation_alias, str) else f"MTL_{name.upper()}"
    assert f"`{variable}`" in SETTINGS_DOC.read_text(), f"docs/settings.md does not name {variable}"


def test_the_readme_python_compiles_and_each_block_is_an_example_script() -> None:
    blocks = python_blocks(README)
    assert len(blocks) >= 3, "the README shows the quickstart and the two ways to wrap an agent"
    examples = {path.name: path.read_text() for path in (ROOT / "examples").glob("*.py")}
    for block in blocks:
        compile(block, "README.md", "exec")
        # tests/test_examples.py runs the scripts: a block found verbatim in one runs as pasted.
        assert any(block in text for text in examples.values()), f"no examples/*.py holds:\n{block[:300]}"


@pytest.mark.parametrize("path", [README, ROOT / "CHANGELOG.md", *DOCS], ids=lambda p: p.name)
def test_relative_links_point_at_files(path: Path) -> None:
    assert not missing_links(path), f"{path.relative_to(ROOT)} links to missing files: {missing_links(path)}"


def test_the_link_check_reports_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# here")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#here) [gone](gone.md) [web](https://example.org/x.md) [top](#top)\n"
                    "```bash\necho [not a link](nowhere.md)\n```\n")
    assert missing_links(page) == ["gone.md"]
