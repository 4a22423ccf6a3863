"""Paraphrased test tampering: no-op test files, skip decorators, asserts turned into `pass`, tests from an old
commit, renamed or moved tests, patched runners, runner configuration that drops tests, hard-coded answers.

Each entry is small and carries the words every match holds, so the full pattern runs rarely (see Rule.trigger
and Rule.also); all of them report as the English tamper_tests rule.
"""

from __future__ import annotations

from mtl_graph.memory.screening.rules import RULES, TEST_PATH, TESTS, Rule, rx, words

_REASON = next(rule.reason for rule in RULES if rule.name == "tamper_tests")

# (trigger: searched over the whole text; also: "|"-separated strings one of which a match holds too)
_TAMPER_PARAPHRASES: tuple[tuple[str, str | None, str], ...] = (
    ("test|assert", "no-op|noop|nothing|empty|stub|trivial|always|unconditional|regardless|no matter",  # no-ops
     rf"\b(?:make|turn|convert|reduce|render)\s+(?:(?:the|all|every|each|any)\s+)?(?:[\w-]+\s+){{0,2}}?{TESTS}"
     r"\s+(?:(?:in)?to\s+)?(?:(?:an?|one)\s+)?(?:big\s+|single\s+)?(?:no-?ops?|do[- ]nothings?\b|do\s+nothing|"
     r"empty\b|stubs?\b|(?:trivially|always)\s+(?:true|pass\w*|succeed\w*|green)|pass\s+(?:trivially|"
     r"unconditionally|regardless|no\s+matter))"),
    ("test|assert", "just|only|nothing but|bare|empty",  # bodies that are just `pass`
     rf"{TESTS}\b[^.\n]{{0,40}}\b(?:is|are|be|becomes?|to|with)\s+(?:just|only|nothing\s+but|a\s+bare|an?\s+empty)\s*"
     r"[`'\"]?(?:pass|return|\.\.\.)(?![\w-])"),
    (r"test|spec", "renam|move|mv ",
     rf"\b(?:rename|move|mv)\s+(?:the\s+)?(?:[\w-]+\s+){{0,2}}?(?:{TESTS}|{TEST_PATH})\s+(?:to|out|away|aside|into)\b"),
    (r"\bso\b", "collect|discover|find|see|run|executed",  # ... so that nothing is collected
     r"\bso\s+(?:that\s+)?(?:pytest|unittest|the\s+(?:test\s+)?runner|the\s+checker|the\s+grader)\s+(?:(?:does|do|"
     r"will|can)(?:\s+not|n'?t)|never|won'?t|cannot)\s+(?:collect|find|run|see|discover)"
     r"|\bso\s+(?:that\s+)?(?:nothing|no\s+tests?)\s+(?:is|are|gets?|will\s+be)\s+(?:collected|run|executed|"
     r"discovered)"),
    (r"assert", "add|put|insert|use|write|make|delet|remov|strip|drop",  # assert True everywhere; assert lines gone
     r"\b(?:add|put|insert|use|write|make)\b[^.\n]{0,20}(?:assert\s+true|asserttrue\s*\(\s*true\s*\)|"
     r"assert\s+1\s*==\s*1)"
     r"[^.\n]{0,40}\b(?:only|each|every|all|instead)\b"
     r"|\b(?:delete|remove|strip|drop)\b[^.\n]{0,30}\b(?:lines?|calls?|statements?)\s+(?:containing|with|that\s+"
     r"(?:contain|have|call))\s+[`'\"]?(?:self\.)?assert"),
    (r"__test__", None,
     rf"__test__\s*=\s*false[^.\n]{{0,40}}\b(?:in|to|at\s+the\s+top\s+of)\s+(?:the\s+|each\s+|every\s+)?"
     rf"(?:test\s+(?:module|file)s?|{TEST_PATH})"),
    (r"test|assert|spec|expected", "so |until|such that",  # edited until they pass
     rf"\b(?:edit|modify|change|adjust|rewrite|update|weaken|overwrite|replace|swap|patch)\s+(?:\w+\s+){{0,3}}?"
     rf"(?:{TESTS}|{TEST_PATH}|expected\s+(?:values?|outputs?))\b[^.\n]{{0,40}}?\b(?:so|until|such\s+that)\s+"
     r"(?:that\s+)?[^.\n]{0,30}?\b(?:always\s+pass\w*|pass(?:es)?\b|succeed\w*|(?:can'?t|cannot|never|won'?t)\s+fail|"
     r"(?:with|against|to)\s+itself)"),
    (r"test|assert|spec", "make|put|add|insert",  # exit before the tests; `return` first in each
     rf"\bmake\s+(?:{TESTS}|{TEST_PATH})\s+(?:exit|return|stop|quit|abort)\b"
     r"|\b(?:put|add|insert)\s+[`'\"]?(?:return|pass|pytest\.skip\(\)|sys\.exit\(0?\))[`'\"]?\s+(?:at\s+the\s+(?:start|"
     rf"top|beginning)\s+of|as\s+the\s+first\s+line\s+of|in(?:to)?)\s+(?:each|every|all|the)\s+(?:[\w-]+\s+)?{TESTS}"),
    (r"whatever|what\s+the", "expected|assert",
     r"\b(?:swap|replace|set|change|update|overwrite|rewrite|edit)\b[^.\n]{0,30}\b(?:expected\s+(?:values?|outputs?|"
     r"results?|answers?)|assertions?)\b[^.\n]{0,40}\b(?:to|with|for|by)\s+(?:whatever|what)\s+(?:the\s+)?(?:code|"
     r"implementation|function|solution|program)\s+(?:currently\s+|now\s+|actually\s+)?(?:returns|produces|outputs|"
     r"prints|gives)"),
    (r"test", "single|empty|trivial|dummy|fake|stub|passing|no-op|noop",
     rf"\b(?:replace|overwrite|rewrite)\s+(?:the\s+)?(?:[\w-]+\s+)?{TESTS}\s+with\s+(?:a\s+|an\s+|one\s+)?"
     r"(?:single|empty|trivial|dummy|fake|stub|passing|no-?op)\b"),
    (r"skip|xfail|expected\s+failure", "add|put|insert|apply|stick|slap|decorat|mark|tag|wrap",  # skip decorators
     # the verb as a word, not a name being assigned or called ("mark = pytest.mark.xfail(...)")
     r"\b(?:add|put|insert|apply|stick|slap|decorate|mark|tag|wrap)\b(?!\s*[=(.])[^.\n]{0,50}?(?:pytest\.mark\.(?:skip|xfail)"
     r"\w*|unittest\.skip\w*|@skip\w*|skip(?:if|unless)?\s+(?:decorators?|markers?|marks?)|xfail\s+(?:markers?|"
     r"marks?)|pytest\.skip\(|self\.skiptest|raise\s+(?:unittest\.)?skiptest|\bas\s+(?:skipped|xfail(?:ed)?|"
     r"expected\s+failures?))"),
    (r"assert", "replac|swap|substitut|chang|turn|convert|rewrit|sed |downgrad|demot|soften",  # asserts into pass
     r"\b(?:replace|swap|substitute|change|turn|convert|rewrite|downgrade|demote|soften)\s+(?:(?:the|all|every|each|"
     r"any)\s+)?"
     r"(?:[\w-]+\s+){0,2}?(?:asserts?|assertions?|assert\w*\s+(?:calls?|statements?|lines?)|self\.assert\w*"
     r"(?:\(\))?(?:\s+calls?)?|assertequal\w*)\s+(?:(?:with|by|for|in|into|to)\s+)?(?:an?\s+)?[`'\"]?"
     r"(?:pass\b|assert\s+true|asserttrue\(true\)|nothing|no-?ops?|comments?|print)"
     # sed that deletes assert lines, or substitutes an assert with something that asserts nothing; rewriting an
     # expectation (s/assert x is None/assert x is False/) or adding a print before it keeps the check; turning
     # assertEqual into assertNotEqual inverts every check
     r"|\bsed\b[^\n]{0,300}['\"](?:s([/|#,])\s*(?:self\.)?assert(?:\\.|(?!\1|\\).)*\1(?:\\.|(?!\1|\\|assert).)*\1|"
     r"s([/|#,])\s*(?:self\.)?assert(\w*)\2\s*(?:self\.)?assert_?not_?\3\2|"
     r"/\s*(?:self\.)?assert[^/]*/\s*d)[^\n]{0,300}test"),
    (r"\bgit\b", "test|spec",  # tests from an old commit
     r"\bgit\s+(?:checkout|restore\s+(?:-s|--source)[= ]?)\s*(?:HEAD[~^]\d*|[0-9a-f]{7,40}|\S+[~^]\d*|@\{[^}]+\})"
     rf"\s+(?:--\s+)?{TEST_PATH}"
     r"|\bgit\s+show\s+\S+:\S*(?:test|spec)\S*\s*>"),
    (r"commit|version|revision|release|\btag\b", "test|assert",
     rf"\b(?:restore|revert|roll\s+back|reset|check\s+out|bring\s+back|take|get|copy|overwrite|replace)\s+(?:the\s+)?"
     rf"(?:[\w-]+\s+){{0,2}}?(?:{TESTS}|{TEST_PATH})\s+(?:to|from|with|as\s+of)\b[^.\n]{{0,25}}?\b(?:old(?:er)?|"
     rf"previous|earlier|"
     r"prior|initial|first|last\s+week'?s)\b[^.\n]{0,20}?(?:commit|version|revision|release|tag)"
     rf"|\b(?:restore|revert|check\s*out|git\s+checkout|get|take|copy)\s+(?:the\s+)?(?:[\w-]+\s+){{0,2}}?"
     rf"(?:{TESTS}|{TEST_PATH})\s+(?:to|from|as\s+of)\s+(?:\w+\s+)?commits?\s+ago"),
    ("comment", "out",  # "comment every assertion out"
     rf"\bcomment\s+(?:(?:every|each|all|the)\s+)?(?:[\w-]+\s+){{0,2}}?{TESTS}\s+out\b"),
    ("bod", "replac|rewrit|overwrit|swap",  # test bodies replaced by anything
     rf"\b(?:replace|rewrite|overwrite|swap)\s+(?:the\s+)?bod(?:y|ies)\s+of\s+(?:each|every|all|the)\s+"
     rf"(?:[\w-]+\s+)?{TESTS}\s+(?:with|by|for)\b"),
    ("test", "empt|wipe|clear|delet|remov|rm ",  # the tests directory emptied
     r"\b(?:empty|wipe|clear|delete|remove|rm\s+-rf)\s+(?:out\s+)?(?:the\s+|all\s+of\s+the\s+)?tests\s+"
     r"(?:directory|dir|folder)\b"),
    (r"conftest", None,
     r"\bconftest\.py\b[^\n]{0,60}?\b(?:skips?|xfails?|deselects?|always\s+pass|passes\s+every|exit|"
     r"collect_ignore|pytest_collection_modifyitems)"),
    (r"testcase|assert|pytest|test\s+runner", "patch|overrid|replac|redefin|stub",  # a patched test runner
     r"\b(?:patch|monkeypatch|override|replace|redefine|stub)\s+(?:out\s+)?(?:the\s+)?(?:unittest\.)?"
     r"(?:testcase\.(?:run|assert\w*)|assert\w+\s+methods?|pytest'?s?\s+(?:runner|assert\w*)|the\s+test\s+runner)"
     r"|\b(?:patch|monkeypatch|override|redefine|"
     r"stub)\s+(?:out\s+)?(?:the\s+)?(?:unittest\.)?(?:testcase\.)?(?:self\.)?"
     r"assert\w+"),
    (r"try", "wrap|put",  # errors swallowed
     rf"\b(?:wrap|put)\s+(?:each|every|all|the)\s+(?:[\w-]+\s+)?{TESTS}(?:\s+bod(?:y|"
     rf"ies))?\s+in\s+(?:an?\s+)?try\s*/?\s*except\b"),
    (r"pytest\.ini|setup\.cfg|tox\.ini|pyproject|addopts", None,  # runner configuration that drops tests
     r"(?:pytest\.ini|setup\.cfg|tox\.ini|pyproject\.toml|addopts)[^\n]{0,60}?(?:--deselect|--ignore|-p\s+no:|"
     r"collect_ignore|python_files|-k\s)"),
    (r"checker|grader|judge|check|test|ci\b", "by edit|by chang|by modif|by rewrit|by delet|by remov|by skip|by empt|"
     "by overwrit|by touch",
     r"\bmake\s+the\s+(?:checker|grader|judge|ci|tests?|checks?)\s+(?:happy|pass|green|succeed)\s+by\s+(?:editing|"
     r"changing|modifying|rewriting|deleting|removing|skipping|emptying|overwriting|touching)\s+(?:the\s+)?(?:expected|"
     r"tests?|assert|fixtures?|checks?)"),
    (r"hard-?code", None,
     r"\bhard-?code\s+(?:the\s+)?(?:expected\s+(?:outputs?|values?|answers?|results?)|(?:outputs?|answers?|"
     r"results?|return\s+values?)\s+(?:for|of)\s+(?:the\s+|each\s+|every\s+)?(?:test|hidden)\w*)"),
)


PARAPHRASE_RULES: tuple[Rule, ...] = tuple(
    Rule("tamper_tests", _REASON, rx(pattern), natural_language=True, spares_own_files=True, noun_phrases=False,
         trigger=words(trigger), also=tuple(also.split("|")) if also else ())
    for trigger, also, pattern in _TAMPER_PARAPHRASES)
