"""`mtl mcp`'s own options: a bad transport, namespace or port is one error line and exit 1 before any pool is
opened or any server starts (the servers themselves are tested in tests/mcp/)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from mtl_graph.cli import app

runner = CliRunner()


@pytest.mark.parametrize("args, said", [
    (["--transport", "tcp"], "--transport must be one of stdio, http, not 'tcp'"),
    (["--transport", "HTTP "], "--transport must be one of stdio, http"),
    (["--namespace", "a b"], "invalid namespace 'a b'"),
    (["--namespace", "ok", "--namespace", "../up"], "invalid namespace '../up'"),
])
def test_bad_options_are_one_line_before_anything_starts(tmp_path, args, said):
    pool = tmp_path / "pool"
    result = runner.invoke(app, ["mcp", "--pool", str(pool), *args])
    assert result.exit_code == 1 and said in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1
    assert not pool.exists()


def test_a_port_out_of_range_is_refused_by_the_option():
    result = runner.invoke(app, ["mcp", "--transport", "http", "--port", "70000"])
    assert result.exit_code == 2 and "65535" in result.output
