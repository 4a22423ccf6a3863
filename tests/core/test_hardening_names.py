"""File names that are not UTF-8, made by the agent, never turn its run into an `error`.

Python decodes such names with surrogateescape; a UTF-8 writer (the run log, a checkpointer, the stream) refuses
them. The names are generated here, by class of invalid UTF-8, and the agent makes them with real commands in the
real sandbox (bwrap as root runs them as uid 65534) through the real graph: the verdict stays the check's.
"""

import json
import random

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.core.safe_text import safe_json_text, safe_text, safe_value
from mtl_graph.core.task import Task


def invalid_utf8_names(rng: random.Random) -> list[bytes]:
    """One name per class of bytes a UTF-8 decoder rejects, with random bytes in each (and a valid part)."""
    lone_continuation = bytes([rng.randrange(0x80, 0xC0)])
    lone_lead = bytes([rng.randrange(0xC2, 0xF5)]) + b"x"  # a lead byte not followed by a continuation
    truncated = "é€😀".encode()[: rng.choice([1, 3, 4])]
    overlong = bytes([0xC0 | rng.randrange(0, 2), rng.randrange(0x80, 0xC0)])
    encoded_surrogate = bytes([0xED, rng.randrange(0xA0, 0xC0), rng.randrange(0x80, 0xC0)])
    beyond_unicode = bytes([0xF4, rng.randrange(0x90, 0xC0), 0x80, 0x80])
    never_valid = bytes([rng.choice([0xFE, 0xFF, 0xF8])])
    return [b"ok-" + lone_continuation, lone_lead, b"t" + truncated, overlong, encoded_surrogate, beyond_unicode,
            never_valid + never_valid, b"\xff\xfe"]


def octal(name: bytes) -> str:
    return "".join(f"\\{b:03o}" for b in name)


def escaped(name: bytes) -> str:
    """How a name is recorded: its valid UTF-8 kept, every other byte as the text \\xNN."""
    return safe_text(name.decode("utf-8", "surrogateescape"))


def planting_command(names: list[bytes]) -> str:
    """Directories and files with those names, a conftest.py in each directory (the check's cleanup lists it as
    planted, so the name reaches the verdict, the run log and the memory), and a listing of them."""
    parts = []
    for i, name in enumerate(names):
        parts.append(f'd="$(printf \'{octal(name)}\')"; mkdir -p "$d" && touch "$d/conftest.py" "f{i}-$d"')
    return "; ".join(parts) + "; ls -R; printf '\\377\\376 raw bytes out\\n'"


@pytest.mark.parametrize("solves", [False, True], ids=["fail", "pass"])
def test_non_utf8_names_leave_the_verdict_to_the_check(pool, tmp_path, solves):
    names = invalid_utf8_names(random.Random(1700 + solves))
    task = Task(id="names", domain="shell", instruction="Create hello.txt containing hi.",
                check="grep -qx hi hello.txt")
    commands = [bash_call(planting_command(names))] + ([bash_call("echo hi > hello.txt")] if solves else [])
    model = ScriptedChatModel(responses=[AIMessage("Plan: make hello.txt."), *commands, submit_call("done")])
    log = tmp_path / "runs.jsonl"
    graph = build_mtl_graph(model, pool, memory_type="trajectory", distill_formats=["trajectory"], run_log=log,
                            checkpointer=InMemorySaver())  # a checkpointer serialises every state update
    events, final = [], {}
    for mode, chunk in graph.stream({"task": task}, {"configurable": {"thread_id": f"names-{solves}"}},
                                    stream_mode=["custom", "values"]):
        (events.append(chunk) if mode == "custom" else final.update(chunk))

    assert final["error"] is None
    assert final["verdict"]["status"] == ("pass" if solves else "fail"), final["verdict"]
    planted = {f"{escaped(n)}/conftest.py" for n in names}
    assert planted <= {d.rsplit(" (", 1)[0] for d in final["verdict"]["dropped"]}  # never carried to the check
    text = log.read_bytes().decode("utf-8")  # strict: the log is valid UTF-8
    [record] = [json.loads(line) for line in text.splitlines()]
    assert record["verdict"]["status"] == final["verdict"]["status"] and record["error"] is None
    assert planted <= {d.rsplit(" (", 1)[0] for d in record["dropped"]}
    assert "raw bytes out" in record["steps"][0]["observation"]
    json.dumps(events, ensure_ascii=False).encode("utf-8")  # the stream's events encode too
    assert [e["dropped"] for e in events if e["kind"] == "verdict"] == [final["verdict"]["dropped"]]
    [memory_id] = final["new_memory_ids"]  # the trajectory memory was written, names and all
    assert pool.get(memory_id).outcome == ("success" if solves else "failure")


def random_strings(rng: random.Random, n: int) -> list[str]:
    """Strings mixing ASCII, other planes and lone surrogates of both halves."""
    pools = ["abc/ .\\\"", "éß漢字", "😀\U0010fffd", "".join(map(chr, range(0xD800, 0xD810))),
             "".join(map(chr, range(0xDC80, 0xDD00))), "".join(map(chr, range(0xDC00, 0xDC10)))]
    return ["".join(rng.choice(rng.choice(pools)) for _ in range(rng.randrange(0, 30))) for _ in range(n)]


def test_safe_text_always_encodes_and_keeps_valid_text():
    rng = random.Random(17)
    for text in random_strings(rng, 500):
        safe = safe_text(text)
        safe.encode("utf-8")
        if all(not 0xD800 <= ord(c) <= 0xDFFF for c in text):
            assert safe is text
        line = json.dumps({text: [text, (text,)]}, ensure_ascii=False)
        assert json.loads(safe_json_text(line)) == {safe: [safe, [safe]]}
        assert safe_value({text: [text, (text, 1, None)]}) == {safe: [safe, (safe, 1, None)]}


def test_an_escaped_byte_reads_like_ls_b_and_other_surrogates_are_replaced():
    assert safe_text(b"a\xff\x80b".decode("utf-8", "surrogateescape")) == "a\\xff\\x80b"
    assert safe_text("x\ud800y") == "x\ufffdy"
    untouched = {"k": ["v", ("w",)], "n": 1}
    assert safe_value(untouched) is untouched  # nothing to change: nothing copied
