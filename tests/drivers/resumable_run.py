"""Runs the MTL graph on one thread with a SQLite checkpointer; with --kill-at N the process SIGKILLs itself when
the model is asked for its Nth reply (counted from the conversation, so a resumed process continues the script).

usage: resumable_run.py DB WORKSPACE_ROOT THREAD STEPS [--kill-at N] [--slow-at N] [--review] [--text] [--resume]
--review: pause before every command; a paused run prints {"paused": the pending tool call} and exits.
--text: the agent acts with fenced ```bash / ```submit blocks instead of tool calls.
--slow-at N: command N touches `started`, then waits (up to a minute) for a file named `resumed` in the workspace.
Prints the final state's trajectory, error and workspace as JSON."""

import json
import os
import signal
import sqlite3
import sys

from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from mtl_graph.agent import AgentConfig, DefaultAgent

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call, text_action
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.core.task import Task


class ConversationScript(ScriptedChatModel):
    """Reply i is script[i], i = the number of model replies already in the conversation."""

    kill_at: int | None = None

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        turn = sum(isinstance(m, AIMessage) for m in messages)
        if turn == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        self.i = turn
        return super()._generate(messages, stop, run_manager, **kwargs)


def main() -> None:
    db, root, thread, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    kill_at = int(sys.argv[sys.argv.index("--kill-at") + 1]) if "--kill-at" in sys.argv else None
    slow_at = int(sys.argv[sys.argv.index("--slow-at") + 1]) if "--slow-at" in sys.argv else None
    wait = "touch started && for _ in $(seq 600); do test -f resumed && break; sleep 0.1; done && "
    text = "--text" in sys.argv
    commands = [f"echo {i} >> log.txt && {wait if i == slow_at else ''}echo step {i} > step_{i}.txt"
                for i in range(steps)]
    script = [text_action("bash", c, thought=f"Step {i}.") if text else bash_call(c) for i, c in enumerate(commands)]
    done = text_action("submit", "all steps done") if text else submit_call("all steps done")
    model = ConversationScript(responses=[*script, done], kill_at=kill_at)
    task = Task(id="resume-task", instruction="Write the step files.", check=f"test -f step_{steps - 1}.txt")
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    agent = DefaultAgent(AgentConfig(action_format="text" if text else "tool_calls"))
    graph = build_mtl_graph(model, None, memory_type="none", online=False, checkpointer=saver, workspace_root=root,
                            agent=agent,
                            keep_workspaces=True, run_log=os.path.join(root, "runs.jsonl"),
                            interrupt_before_tools="--review" in sys.argv)
    config = {"configurable": {"thread_id": thread}}
    state = graph.invoke(None if "--resume" in sys.argv else {"task": task}, config)
    if graph.get_state(config).next:  # paused before a command
        inner = graph.get_state(config, subgraphs=True)
        while inner.tasks and inner.tasks[0].state is not None:
            inner = inner.tasks[0].state
        print(json.dumps({"paused": inner.values["messages"][-1].tool_calls[0]}))
        return
    print(json.dumps({key: state.get(key) for key in ("trajectory", "error", "verdict")}))


if __name__ == "__main__":
    main()
