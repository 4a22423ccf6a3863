"""The checks suites hand to a sandbox: standard-library scripts read as text and run inside the task's workspace."""
