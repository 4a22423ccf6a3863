"""Chat models: from strings (`chat_model`), retries of provider failures, one structured call with validation, and
the scripted model for tests, the offline demo and first runs."""
