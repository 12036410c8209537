"""Problems found in the inputs, and the one exception that carries them."""
from __future__ import annotations

from dataclasses import dataclass

MAX_LISTED = 50


@dataclass(frozen=True)
class Problem:
    """One broken rule: where (a human label naming the row and its ``id``), the column and the rule.

    ``position`` is the 0-based position of the portfolio row it concerns (None for other inputs).
    """

    position: int | None
    where: str
    column: str | None
    rule: str

    def __str__(self) -> str:
        column = f", column '{self.column}'" if self.column else ""
        return f"{self.where}{column}: {self.rule}"


class InvalidInputError(ValueError):
    """Raised when the inputs break rules of SPEC §1–§4; ``problems`` lists every one found."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        lines = [str(p) for p in self.problems[:MAX_LISTED]]
        if len(self.problems) > MAX_LISTED:
            lines.append(f"... and {len(self.problems) - MAX_LISTED} more")
        super().__init__(f"{len(self.problems)} problem(s) in the input:\n  " + "\n  ".join(lines))
