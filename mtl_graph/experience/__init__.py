"""How raw agent runs become memories.

- `trajectory` — a run as data (task, steps, submission, verdict, model, tokens).
- `importers` — the project's run log, LangChain messages, mini-swe-agent and SWE-agent logs -> trajectories
  (a package, one module per format).
- `redact` — secrets become ``[REDACTED:<kind>]`` before any text reaches a prompt, the pool or a log.
- `judge` — the `Judge` protocol, the strict `LLMJudge`, and `LabelJudge` (labels that came with the logs).
- `distill` — one distiller per memory format, success and failure prompts (templates under ``prompts/``).
- `structured` — the structured-output call with validation and error-fed retries that judge and distillers share.
- `ingest` / `commands` — the ingest engine and the `mtl ingest` command.
- `testing` — scripted chat models for tests and offline demos.

Submodules are imported on demand: this package stays cheap to import for the CLI.
"""
