"""A canary for the Studio test: an async node that blocks its event loop, which `langgraph dev` must refuse.

It shows the server's blocking-call detection is on, so the MTL graph's clean runs through it mean something."""

import time

from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict, total=False):
    slept: bool


async def nap(state: State) -> State:
    time.sleep(0.01)  # a synchronous call inside async code: the server raises BlockingError
    return {"slept": True}


graph = StateGraph(State).add_node("nap", nap).add_edge(START, "nap").compile()
