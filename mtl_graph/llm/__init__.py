"""Chat models, below every stage that calls one:
- `chat`: a model from a string (`chat_model`, `check_model`; `ModelOptions`, `model_label`) and the one-line
  errors of a model that cannot be made (`ModelNotConfigured` and its kinds);
- `retry`: provider-failure classification (`is_transient`, `retry_after`, `describe`) and the one retry policy of
  every model call (`RetrySettings`, on tenacity; `using_retry` / `current_retry`);
- `structured`: one structured call with validation and error-fed re-asking (`structured_call`), which the judge and
  the distillers share;
- `scripted`: the scripted model for tests, the offline demo and first runs (`ScriptedChatModel`,
  `load_action_script`)."""
