"""The dead-letter codes are a contract: the README lists exactly the ones the code uses."""

from __future__ import annotations

import re
from pathlib import Path

from service.contracts import DeadLetterCode

README = Path(__file__).resolve().parents[2] / "README.md"


def _documented() -> set[str]:
    """The codes in the parenthesis after `crawlstream-error-code` in the README's paragraph
    on dead letters (not the backticked words inside each code's own explanation)."""
    text = README.read_text()
    start = text.index("`crawlstream-error-code`", text.index("**Dead letters**"))
    codes: set[str] = set()
    depth = 0
    for token in re.finditer(r"[()]|`([a-z_0-9]+)`", text[start:]):
        if token.group() == "(":
            depth += 1
        elif token.group() == ")":
            depth -= 1
            if depth == 0:
                return codes
        elif depth == 1:
            codes.add(token.group(1))
    return codes


def test_the_readme_lists_every_dead_letter_code_and_no_other():
    assert _documented() == {code.value for code in DeadLetterCode}
