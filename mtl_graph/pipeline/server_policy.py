"""What a served graph takes from its clients: their own input, never the server's files, network or keys.

A LangGraph server's clients choose each run's input, context and (through thread updates) state. Built with a
`ServerPolicy` (graphs/mtl.py does), the MTL graph accepts a task path, a dict task's `source_dir` and a
`scripted:` model file only inside the task roots (resolved first, so a symlink or `..` out of a root is
outside), a task's setup with network only when the server allows it, a model endpoint (`base_url`) or provider
named in the context only when the server lists it, and a workspace only where the graph makes workspaces. A
refusal is one line that names the setting and the client's own value, never what a file holds, and reads the
same whether the path exists or not. Without a policy (the CLI, library users) any path is accepted: a person on
their own machine may name their own files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from mtl_graph.llm.chat import SCRIPTED_PREFIX
from mtl_graph.config.names import as_context
from mtl_graph.core.errors import MAX_SHOWN, MTLError, SettingsError
from mtl_graph.core.task import INSTRUCTIONS_FILE, METADATA_FILE, Task

ROOTS_VARIABLE = "MTL_TASK_ROOTS"


class PolicyError(MTLError, ValueError):
    """A client asked the server for something of its own (a path, the network, an endpoint): one line."""


def _shown(value: Any) -> str:
    text = repr(str(value))
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."


def parse_roots(text: str, variable: str = ROOTS_VARIABLE) -> tuple[Path, ...]:
    """Task roots from an os.pathsep-separated list of absolute directories ("" is none); SettingsError otherwise."""
    if not text.strip():
        return ()
    roots: list[Path] = []
    for n, entry in enumerate(text.split(os.pathsep), 1):
        where = f"environment: {variable} entry {n}"
        if not entry.strip():
            raise SettingsError(f"{where} is empty (separate directories with {os.pathsep!r})")
        path = Path(entry)
        if not path.is_absolute():
            raise SettingsError(f"{where} {_shown(entry)} is not an absolute path")
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            raise SettingsError(f"{where} {_shown(entry)} does not exist") from None
        if not real.is_dir():
            raise SettingsError(f"{where} {_shown(entry)} is not a directory")
        if real == Path(real.anchor):
            raise SettingsError(f"{where} {_shown(entry)} is the filesystem root: name the task folders themselves")
        roots.append(real)
    return tuple(roots)


def parse_base_urls(urls: Iterable[str], variable: str = "MTL_ALLOWED_BASE_URLS") -> tuple[str, ...]:
    """Allowed model endpoints: absolute http(s) URLs without credentials, compared without a trailing slash."""
    kept = []
    for url in urls:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
            raise SettingsError(f"environment: {variable}: {_shown(url)} is not an http(s) URL without credentials")
        kept.append(_normal_url(url))
    return tuple(kept)


def parse_providers(names: Iterable[str] | None, variable: str = "MTL_ALLOWED_PROVIDERS") -> tuple[str, ...] | None:
    """Allowed providers, as init_chat_model names them (openai, anthropic, google_genai...); None: any."""
    if names is None:
        return None
    for name in names:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", name.strip()):
            raise SettingsError(f"environment: {variable}: {_shown(name)} is not a provider name (e.g. openai)")
    return tuple(name.strip() for name in names)


def _normal_url(url: str) -> str:
    return url.strip().rstrip("/")


class ServerPolicy(BaseModel):
    """What the served graph accepts from a run's input, context and state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_roots: tuple[Path, ...] = ()
    """Resolved directories a task path, a dict task's source_dir and a scripted: file must lie in."""
    allowed_base_urls: tuple[str, ...] = ()
    """Model endpoints a run's context may name in model_options.base_url (none: only the server's own)."""
    allowed_providers: tuple[str, ...] | None = None
    """Providers a run's context may name in `model` (provider:model); None: any provider."""
    allow_setup_network: bool = False
    """Whether a task from a client may run its setup with network access (setup_network)."""
    allowed_namespaces: tuple[str, ...] = ()
    """Pool namespaces a run's context may name (none: only the server's own pool namespace)."""

    @classmethod
    def from_settings(cls, settings: Any, default_roots: Iterable[Path] = ()) -> "ServerPolicy":
        """The policy of the server's environment (MTL_TASK_ROOTS unset: the existing ones of default_roots)."""
        if settings.task_roots is not None:
            roots = parse_roots(settings.task_roots)
        else:
            roots = tuple(p.resolve() for p in default_roots if p.is_dir())
        return cls(task_roots=roots, allowed_base_urls=parse_base_urls(settings.allowed_base_urls),
                   allowed_providers=parse_providers(settings.allowed_providers),
                   allow_setup_network=settings.allow_setup_network,
                   allowed_namespaces=tuple(settings.allowed_namespaces))

    # ------------------------------------------------------------------ paths
    def inside(self, raw: Any, what: str) -> Path:
        """`raw` resolved, when it lies in a task root; PolicyError otherwise (the same line if it does not exist)."""
        try:
            path = Path(raw).resolve()
        except (OSError, RuntimeError, ValueError, TypeError):  # a loop, a NUL byte, not a path
            path = None
        if path is None or not any(path.is_relative_to(root) for root in self.task_roots):
            roots = "none are set" if not self.task_roots else f"{len(self.task_roots)} configured"
            raise PolicyError(f"{what} {_shown(raw)} is outside this server's task roots ({ROOTS_VARIABLE}: {roots}); "
                              "send the task's files inline (\"files\") instead")
        return path

    def task(self, value: Any) -> Task:
        """The task a client sent (a path, a dict, or the dict the graph keeps in its state), once it is allowed."""
        from mtl_graph.core.task import as_task

        if isinstance(value, (str, Path)):
            root = self.inside(value, "task path")
            for name in (INSTRUCTIONS_FILE, METADATA_FILE):  # a link out of the task directory is outside too
                self.inside(root / name, f"task path {_shown(value)}: {name}")
            task = Task.from_dir(root)
        else:
            task = as_task(value)
        if task.source_dir is not None:
            self.inside(task.source_dir, "source_dir")
        if task.setup_network and not self.allow_setup_network:
            raise PolicyError("setup_network: this server does not let a task's setup reach the network "
                              "(MTL_ALLOW_SETUP_NETWORK is off)")
        return task

    def workspace(self, workspace: Any, base: Path) -> str:
        """A workspace path from the run's state, when it is one the graph makes (a directory right under base)."""
        try:
            path = Path(workspace).resolve()
        except (OSError, RuntimeError, ValueError, TypeError):
            path = None
        if path is None or path.parent != base.resolve():
            raise PolicyError(f"workspace {_shown(workspace)} is not one this server made for the run")
        return str(path)

    # ------------------------------------------------------------------ models
    def check_namespace(self, namespace: str | None, server_namespace: str) -> None:
        """A pool namespace the run's context names, when this server allows it (its own always is): a client of
        a shared server reads and writes no other team's memories unless the server says so."""
        if namespace is None or namespace == server_namespace or namespace in self.allowed_namespaces:
            return
        raise PolicyError(f"namespace {_shown(namespace)}: this server's runs use the pool namespace "
                          f"{server_namespace!r} or those in MTL_ALLOWED_NAMESPACES "
                          f"({', '.join(self.allowed_namespaces) or 'none'})")

    def check_model(self, context: Any, server_model: Any, server_base_url: str | None) -> None:
        """A model and endpoint the run's context names, when this server allows them (its own always are)."""
        context = as_context(context)
        if context is None:
            return
        spec = context.model
        if isinstance(spec, str) and spec != server_model:
            if spec.startswith(SCRIPTED_PREFIX):
                self.inside(spec.removeprefix(SCRIPTED_PREFIX), "scripted model file")
            elif self.allowed_providers is not None:
                provider = spec.split(":", 1)[0] if ":" in spec else None
                if provider not in self.allowed_providers:
                    raise PolicyError(f"model {_shown(spec)}: this server runs only the providers in "
                                      f"MTL_ALLOWED_PROVIDERS ({', '.join(self.allowed_providers) or 'none'}), "
                                      "named as provider:model")
        options = context.model_options
        url = getattr(options, "base_url", None) if options is not None else None
        if url is None or _normal_url(url) == _normal_url(server_base_url or ""):
            return
        if _normal_url(url) not in self.allowed_base_urls:
            raise PolicyError(f"model_options.base_url {_shown(url)} from the run's context is refused: this "
                              "server sends its model requests only to the endpoints in MTL_ALLOWED_BASE_URLS")
