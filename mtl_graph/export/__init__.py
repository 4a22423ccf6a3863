"""Export to the files coding agents read: the memories that measurably helped, as a section of `AGENTS.md` /
`CLAUDE.md` or as one skill folder per workflow memory.

`selection.py` decides what goes out (and why the rest stays in the pool), `markdown.py` renders memories as
text no memory can use to escape its place, `section.py` and `skills.py` write the files. The package reads the
pool and never writes it."""
