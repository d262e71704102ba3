"""Script and normalisation rules: the one owner of every text-folding rule.

Every module that folds, classifies or stems text calls this module instead
of writing the rule again (NFKC, case folding, CJK ranges, plural forms,
stemmers). Imports nothing from the package.
"""

from __future__ import annotations

import unicodedata


def id_fold(text: str) -> str:
    """The identity of a node id on case-insensitive, normalising file systems.

    NFC (what macOS writes) and case folding (what Windows and macOS compare
    by): ``Foo``/``foo`` and the NFC/NFD spellings of ``café`` fold alike, so
    two such ids would collide on those file systems.
    """
    return unicodedata.normalize("NFC", text).casefold()
