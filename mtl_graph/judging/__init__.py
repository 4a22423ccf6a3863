"""Who decides whether a run passed: the task's own tests in a clean room (`ground_truth`), or the strict LLM judge
(`judges`). The clean room, the check's environment, the tamper scan and the runner's accounting live here."""
