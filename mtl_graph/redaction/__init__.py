"""Secret redaction: detect-secrets' plugins plus our own context rules, applied wherever data leaves the process
(the run log, progress events, the pool, prompts)."""
