"""Choose a sandbox backend by name."""

from __future__ import annotations

import warnings
from pathlib import Path

from mtl_graph.sandbox.base import Sandbox, SandboxError
from mtl_graph.sandbox.bwrap import BwrapSandbox
from mtl_graph.sandbox.config import SandboxConfig
from mtl_graph.sandbox.docker import DockerSandbox
from mtl_graph.sandbox.local import LocalSandbox

BACKENDS = {"local": LocalSandbox, "bwrap": BwrapSandbox, "docker": DockerSandbox}
KINDS = ("auto", *BACKENDS)


def make_sandbox(
    kind: str = "auto",
    workspace: str | Path | None = None,
    config: SandboxConfig | None = None,
    network: bool | None = None,
) -> Sandbox:
    """A sandbox of the given kind over workspace (created if missing).

    ``auto`` picks bwrap when it works on this machine, else local with a warning (no isolation).
    ``network`` overrides the config's (a task's setup step fetches dependencies; the agent never does).
    """
    if workspace is None:
        raise ValueError("make_sandbox needs a workspace directory")
    if kind not in KINDS:
        raise SandboxError(f"unknown sandbox kind {kind!r}; choose one of {', '.join(KINDS)}")
    if kind == "auto":
        if BwrapSandbox.is_available():
            kind = "bwrap"
        else:
            warnings.warn(
                "bubblewrap is not usable here: commands run on the host without filesystem or network "
                "isolation (local sandbox)",
                RuntimeWarning,
                stacklevel=2,
            )
            kind = "local"
    if network is not None:
        config = (config or SandboxConfig()).model_copy(update={"network": network})
    return BACKENDS[kind](workspace, config)
