"""The task inside an agent's instance prompt: the issue or challenge the template wraps, not the boilerplate.

The task text is also the retrieval key of trajectory memories, so 3k characters of "you are an agent, these
are your commands" must not stand in for a 300-character issue. Each pattern below is one family of templates
the agents ship (mini-swe-agent's ``<pr_description>`` and "Please solve this issue:", SWE-agent's
``ISSUE: ... INSTRUCTIONS:`` and its CTF challenge prompt); a prompt matching none is kept whole.
"""

from __future__ import annotations

import re

_TASK_TAGS = ("pr_description", "issue_description", "issue", "problem_statement", "task")
_PREAMBLE = re.compile(r"^\s*(?:consider the following|here is|here's|the following)[^\n]{0,80}:[ \t]*\n", re.I)
# Ordered from the most to the least specific; group 1 is the task.
_WRAPPERS = (
    # SWE-agent EnIGMA (CTF): the challenge's name, category, description, files and server, up to INSTRUCTIONS
    re.compile(r"We're currently solving the following CTF challenge\.\s*(.*?)\n\s*INSTRUCTIONS:", re.S),
    # SWE-agent 0.x and its coding-challenge config
    re.compile(r"^ISSUE:[ \t]*\n(.*?)\n\s*INSTRUCTIONS:", re.S | re.M),
    # mini-swe-agent's default and `mini` configs
    re.compile(r"^Please solve this issue:\s*(.*?)\n\s*\nYou can execute bash commands", re.S | re.M),
)


def task_text(prompt: str) -> str:
    """The task inside an agent's instance prompt (tagged block, known wrapper), else the whole prompt."""
    for tag in _TASK_TAGS:
        m = re.search(rf"<{tag}>\s*(.*?)\s*</{tag}>", prompt, re.S)
        if m and m.group(1).strip():
            return _PREAMBLE.sub("", m.group(1)).strip()
    for wrapper in _WRAPPERS:
        m = wrapper.search(prompt)
        if m and m.group(1).strip():
            return m.group(1).strip()
    return prompt.strip()
