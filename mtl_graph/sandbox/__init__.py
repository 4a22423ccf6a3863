"""Where the agent's commands run: local subprocess with limits, bubblewrap, docker."""

from mtl_graph.sandbox.base import CommandResult, Sandbox, SandboxError
from mtl_graph.sandbox.bwrap import BwrapSandbox
from mtl_graph.sandbox.config import SandboxConfig
from mtl_graph.sandbox.docker import DockerSandbox
from mtl_graph.sandbox.factory import KINDS, make_sandbox
from mtl_graph.sandbox.local import LocalSandbox
from mtl_graph.sandbox.process import TIMEOUT_EXIT_CODE, cap_text

__all__ = [
    "KINDS",
    "TIMEOUT_EXIT_CODE",
    "BwrapSandbox",
    "CommandResult",
    "DockerSandbox",
    "LocalSandbox",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "cap_text",
    "make_sandbox",
]
