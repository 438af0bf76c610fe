"""The dead-letter codes are a contract: docs/contracts.md lists exactly the ones the code uses."""

from __future__ import annotations

import re
from pathlib import Path

from service.contracts import DeadLetterCode

CONTRACTS = Path(__file__).resolve().parents[2] / "docs" / "contracts.md"


def _documented() -> set[str]:
    """The codes in the parenthesis after `crawlstream-error-code` in the contracts page's
    paragraph on dead letters (not the backticked words inside each code's own explanation)."""
    text = CONTRACTS.read_text()
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


def test_the_contracts_page_lists_every_dead_letter_code_and_no_other():
    assert _documented() == {code.value for code in DeadLetterCode}
