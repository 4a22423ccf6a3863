"""The deterministic rendering of a trajectory into a prompt (the judge, the distillers and the Trajectory format share it)."""

from __future__ import annotations

from mtl_graph.core.trajectory import Step, Trajectory

CHARS_PER_TOKEN = 4
"""Rough chars-per-token ratio used to turn a token budget into characters (English and code average)."""




def clip_middle(text: str, limit: int) -> str:
    """text cut to about limit characters, keeping head and tail, with the cut marked."""
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def render_step(n: int, step: Step, observation_chars: int, reasoning: bool = True) -> str:
    lines = [f"### Step {n}"]
    if reasoning and step.reasoning:
        lines.append(f"Thought: {clip_middle(step.reasoning.strip(), observation_chars)}")
    code = "" if step.exit_code is None else f"  [exit {step.exit_code}]"
    lines.append(f"Action ({step.tool}):{code}\n{clip_middle(step.action.strip(), observation_chars * 2)}")
    obs = step.observation.strip()
    lines.append(f"Observation:\n{clip_middle(obs, observation_chars)}" if obs else "Observation: (none)")
    return "\n".join(lines)


def render_trajectory(t: Trajectory, budget_chars: int = 60_000, observation_chars: int = 1_500,
                      reasoning: bool = True) -> str:
    """The run as prompt text within budget_chars.

    Over budget, the task, the first steps, the last steps and the final submission are kept and the middle
    steps are replaced by one marked cut: the start shows how the agent oriented itself, the end shows what it
    verified and submitted, and the same input always yields the same text.
    """
    quarter = max(budget_chars // 4, 200)
    head = f"## Task {t.task.id} (domain: {t.task.domain})\n{clip_middle(t.task.instruction.strip(), quarter)}"
    ending = [f"## Final submission\n{clip_middle(t.submission.strip(), quarter)}" if t.submission
              else "## Final submission\n(none)"]
    if t.exit_status:
        ending.append(f"Agent loop ended with: {t.exit_status}")
    tail = "\n\n".join(ending)
    steps = [render_step(i, s, observation_chars, reasoning) for i, s in enumerate(t.steps, 1)]
    room = budget_chars - len(head) - len(tail) - 200
    body = _fit_steps(steps, room)
    return "\n\n".join([head, "## Steps", body or "(no steps)", tail])


def _fit_steps(steps: list[str], room: int) -> str:
    if sum(len(s) + 2 for s in steps) <= room:
        return "\n\n".join(steps)
    first: list[str] = []
    last: list[str] = []
    used = 0
    i, j = 0, len(steps) - 1
    while i <= j:  # alternate ends so both the orientation and the verification survive
        take_front = len(first) <= len(last)
        candidate = steps[i] if take_front else steps[j]
        if used + len(candidate) + 2 > room:
            break
        used += len(candidate) + 2
        if take_front:
            first.append(candidate)
            i += 1
        else:
            last.insert(0, candidate)
            j -= 1
    cut = len(steps) - len(first) - len(last)
    marker = f"[... {cut} steps cut (steps {len(first) + 1}-{len(first) + cut}) to fit the budget ...]"
    return "\n\n".join([*first, marker, *last])
