"""Tables of memories that stay readable in a narrow terminal: a table while its text columns (a memory's key, the
reasons it is held back) get at least MIN_TEXT characters a line, one record per memory below that width."""

from __future__ import annotations

from typing import Any, Sequence

MIN_TEXT = 40
"""Characters a line a text column keeps; with less, the memory's text is shown under its fields, full width."""
INDENT = 4
"""Indent of the text lines of a record."""


def fits(console: Any, columns: Sequence[str], rows: Sequence[Sequence[str]], text_columns: set[str]) -> bool:
    """Whether a table gives each text column MIN_TEXT characters: the other columns are as wide as their widest
    cell (heading included), and Rich's rounded box takes 3 characters a column plus 1."""
    from rich.text import Text

    fixed = 0
    for i, name in enumerate(columns):
        if name not in text_columns:
            fixed += max(Text.from_markup(str(cell)).cell_len for cell in [name, *(row[i] for row in rows)])
    return fixed + MIN_TEXT * len(text_columns) + 3 * len(columns) + 1 <= console.width


SELF_EVIDENT = frozenset({"type", "outcome", "status"})
"""Columns whose values say what they are (insight, success, active): a record shows them without their name."""


def print_records(console: Any, columns: Sequence[str], rows: Sequence[Sequence[str]], *, text: Sequence[str],
                  title: str | None = None, right: Sequence[str] = ()) -> None:
    """Rows of rich-markup cells (data escaped by the caller) as a table, or as records when it would not fit.

    In a record the first column's cell leads, the other short ones follow ("name value" but for SELF_EVIDENT
    ones), and each text column has its own lines under them ("key" unlabelled: it is what the memory says).
    `right`: columns of numbers, right-justified in the table."""
    from rich.padding import Padding
    from rich.table import Table

    text_columns = set(text)
    if fits(console, columns, rows, text_columns):
        table = Table(title=title)
        for name in columns:
            wide = name in text_columns
            table.add_column(name, no_wrap=not wide, min_width=MIN_TEXT if wide else None,
                             justify="right" if name in right else "left")
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    if title:
        console.print(f"[bold]{title}[/]")
    for row in rows:
        cells = dict(zip(columns, row))
        short = [f"[bold]{row[0]}[/]", *(cells[name] if name in SELF_EVIDENT else f"[dim]{name}[/] {cells[name]}"
                                         for name in columns[1:] if name not in text_columns)]
        console.print("  ".join(short))
        for name in text:
            label = "" if name == "key" else f"[dim]{name}:[/] "
            console.print(Padding(f"{label}{cells[name]}", (0, 0, 0, INDENT)))
