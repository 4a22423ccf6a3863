"""Generated pairs of advice for the supersession rule: pairs that conflict and pairs that merely rephrase.

Every pair is (older, newer, class). The conflicting classes: negation (always X / never X, do not X, don't X,
avoid X-ing), opposite actions (pin / unpin, enable / disable, add / remove, ...), and different values of one
setting (a flag's value, a version, an assignment, "set X to V"). The rephrasing classes, which must never
supersede: synonyms, reordering, added detail, casing and punctuation, double negatives ("don't forget to X",
"never skip X"), two negative phrasings of one prohibition, and one value written two ways (`--timeout 30` /
`--timeout=30`, `python 3.11` / `Python3.11`); and, not a rephrasing but no conflict either, opposite polarity
on another action on the same thing ("never run X" / "always check X"). Subjects, contexts and wrappers are crossed, so each class holds
many sentences that no rule was tuned on one by one."""

from __future__ import annotations

import itertools
import random

# (verb, gerund, object, a synonym sentence of the positive advice, without its context)
ACTIONS = [
    ("run", "running", "the linter", "execute the linter"),
    ("run", "running", "the full test suite", "execute every unit test"),
    ("rebuild", "rebuilding", "the docker image", "build the container image again"),
    ("clear", "clearing", "the pip cache", "empty the cache of pip"),
    ("commit", "committing", "generated files", "check the generated files into git"),
    ("format", "formatting", "the code with black", "let black reformat the sources"),
    ("restart", "restarting", "the database container", "bring the database container up again"),
    ("delete", "deleting", "the build directory", "wipe out the build folder"),
]
CONTEXTS = ["before committing", "after every edit", "when the build fails", "in continuous integration"]
# (positive, negative, object)
OPPOSITES = [
    ("pin", "unpin", "numpy in the requirements"),
    ("enable", "disable", "strict mode in mypy"),
    ("add", "remove", "the retry decorator on network calls"),
    ("install", "uninstall", "the pre-commit hook"),
    ("turn on", "turn off", "the build cache"),
    ("include", "exclude", "the vendored packages in coverage"),
    ("allow", "deny", "network access in the sandbox"),
    ("increase", "decrease", "the worker count for parallel tests"),
    ("lock", "unlock", "the dependency versions"),
]
# (a sentence with {v}, value a, value b, the same sentence with value a written another way)
SETTINGS = [
    ("Run pytest with --timeout {v}", "30", "300", "Run pytest with --timeout=30"),
    ("Build with make -j {v}", "2", "8", "Build with make -j2"),
    ("Call pip install with --retries {v}", "3", "10", "Call pip install with --retries=3"),
    ("Use python {v} for the build image", "3.11", "3.13", "Use Python3.11 for the build image"),
    ("Run the frontend tests on node {v}", "18.19", "20.11", "Run the frontend tests on Node v18.19"),
    ("Pin numpy=={v} in the requirements", "1.26", "2.0", "Pin numpy == 1.26 in the requirements"),
    ("Set max_connections to {v} in the database config", "50", "500",
     "Set max_connections to 50 in the database config"),
    ("Start the server with --workers {v}", "4", "16", "Start the server with --workers=4"),
]
WRAPPERS = ["{s}.", "{s}; it keeps the results reproducible.", "Lesson: {s}."]
DETAILS = ["and read every warning it prints", "because a stale state hides real failures",
           "then check the exit code"]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def conflicting() -> list[tuple[str, str, str]]:
    out = []
    for (verb, gerund, obj, _), ctx, wrap in itertools.product(ACTIONS, CONTEXTS, WRAPPERS):
        positive = f"Always {verb} {obj} {ctx}"
        for negative in (f"Never {verb} {obj} {ctx}", f"Do not {verb} {obj} {ctx}", f"Don't {verb} {obj} {ctx}",
                         f"Avoid {gerund} {obj} {ctx}"):
            out.append((wrap.format(s=positive), wrap.format(s=negative), "negation"))
    for (pos, neg, obj), ctx, wrap in itertools.product(OPPOSITES, CONTEXTS, WRAPPERS):
        out.append((wrap.format(s=f"{_cap(pos)} {obj} {ctx}"), wrap.format(s=f"{_cap(neg)} {obj} {ctx}"),
                    "opposite action"))
        out.append((wrap.format(s=f"{_cap(neg)} {obj} {ctx}"), wrap.format(s=f"{_cap(pos)} {obj} {ctx}"),
                    "opposite action"))
    for (sentence, a, b, _), ctx, wrap in itertools.product(SETTINGS, CONTEXTS, WRAPPERS):
        out.append((wrap.format(s=f"{sentence.format(v=a)} {ctx}"), wrap.format(s=f"{sentence.format(v=b)} {ctx}"),
                    "different value"))
    return out


def rephrasing(seed: int = 7) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    out = []
    for (verb, gerund, obj, synonym), ctx, wrap in itertools.product(ACTIONS, CONTEXTS, WRAPPERS):
        base = f"Always {verb} {obj} {ctx}"
        detail = rng.choice(DETAILS)
        out += [
            (wrap.format(s=base), wrap.format(s=f"Make sure to {synonym} {ctx}"), "synonym"),
            (wrap.format(s=base), wrap.format(s=f"{_cap(ctx)}, {verb} {obj}"), "reordering"),
            (wrap.format(s=base), wrap.format(s=f"{base} {detail}"), "added detail"),
            (wrap.format(s=base), wrap.format(s=base).upper().rstrip(".") + "!", "casing and punctuation"),
            (wrap.format(s=base), wrap.format(s=f"Don't forget to {verb} {obj} {ctx}"), "double negative"),
            (wrap.format(s=f"Never {verb} {obj} {ctx}"), wrap.format(s=f"Avoid {gerund} {obj} {ctx}"),
             "two prohibitions"),
            (wrap.format(s=f"Do not {verb} {obj} {ctx}"), wrap.format(s=f"{_cap(ctx)}, never {verb} {obj}"),
             "two prohibitions"),
        ]
    for ((verb, _, obj, _), (other, _, _, _)), ctx in itertools.product(zip(ACTIONS, ACTIONS[1:] + ACTIONS[:1]),
                                                                        CONTEXTS):
        if other != verb:  # not a rephrasing, but no conflict either: two actions on one thing
            out += [(f"Never {verb} {obj} {ctx}.", f"Always {other} {obj} {ctx}.", "another action"),
                    (f"Always {verb} {obj} {ctx}.", f"Never {other} {obj} {ctx}.", "another action")]
    for obj, ctx in itertools.product(["the pip cache", "the lock file", "the docker image"], CONTEXTS):
        noun = obj.split()[-1]  # the thing's name used as the verb: every other word the same
        out.append((f"Never run {obj} {ctx}.", f"Always {noun} {obj} {ctx}.", "another action"))
    for (pos, neg, obj), ctx, wrap in itertools.product(OPPOSITES, CONTEXTS, WRAPPERS):
        out += [
            (wrap.format(s=f"{_cap(neg)} {obj} {ctx}"), wrap.format(s=f"Do not {pos} {obj} {ctx}"),
             "two prohibitions"),
            (wrap.format(s=f"{_cap(pos)} {obj} {ctx}"), wrap.format(s=f"Do not {neg} {obj} {ctx}"),
             "double negative"),
            (wrap.format(s=f"{_cap(pos)} {obj} {ctx}"), wrap.format(s=f"{_cap(ctx)}, {pos} {obj}"), "reordering"),
        ]
    for (sentence, a, _, written), ctx, wrap in itertools.product(SETTINGS, CONTEXTS, WRAPPERS):
        out += [
            (wrap.format(s=f"{sentence.format(v=a)} {ctx}"), wrap.format(s=f"{written} {ctx}"), "value written"),
            (wrap.format(s=f"{sentence.format(v=a)} {ctx}"),
             wrap.format(s=f"{sentence.format(v=a)} {ctx} {rng.choice(DETAILS)}"), "added detail"),
            (wrap.format(s=f"{sentence.format(v=a)} {ctx}"),
             wrap.format(s=f"{sentence.format(v=a)} {ctx}").lower().rstrip("."), "casing and punctuation"),
        ]
    return out
