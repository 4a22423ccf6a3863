"""Regenerate mtl_graph/redaction/data/words.txt: the English words redaction uses to tell identifiers made of words
(`AbstractSingletonProxyFactoryBeanConfigurer2`) from random tokens.

The words are the whole-word entries of the WordPiece vocabulary bundled with the local embedding model
(mtl_graph/memory/engine/model_data/tokenizer.json, BERT's uncased vocabulary): ASCII letters only, three letters
or more, no `##` continuation pieces. Redaction sits below the memory package, so it reads this derived copy rather
than the tokenizer itself.

    python scripts/redaction_words.py          # rewrite the file
    python scripts/redaction_words.py --check  # exit 1 if the file is not what the vocabulary gives
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT / "mtl_graph" / "memory" / "engine" / "model_data" / "tokenizer.json"
WORDS = ROOT / "mtl_graph" / "redaction" / "data" / "words.txt"
HEADER = "# Derived from the bundled WordPiece vocabulary by scripts/redaction_words.py; do not edit by hand.\n"


def words() -> list[str]:
    vocab = json.loads(TOKENIZER.read_text())["model"]["vocab"]
    return sorted({w for w in vocab if w.isascii() and w.isalpha() and len(w) >= 3 and w.islower()})


def main(argv: list[str]) -> int:
    text = HEADER + "\n".join(words()) + "\n"
    if "--check" in argv:
        return 0 if WORDS.read_text() == text else 1
    WORDS.write_text(text)
    print(f"{WORDS.relative_to(ROOT)}: {len(words())} words")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
