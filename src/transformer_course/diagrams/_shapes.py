"""Boxes by centre and size, and text: escaped for matplotlib, measured, fitted to a box."""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath

SMALL = 9  # points, the smallest text drawn (shapes, notes, legends)


def plain(text: object) -> str:
    """``text`` shown as it is: a "$" in a token must not start matplotlib's math mode."""
    return str(text).replace("$", r"\$")


def text_width(text: str, size: float = SMALL) -> float:
    """The width in inches of ``text`` (no math) set in DejaVu Sans at ``size`` points."""
    width, _, _ = TextToPath().get_text_width_height_descent(
        text, FontProperties(family="DejaVu Sans", size=size), False
    )
    return width / 72


def fits(tokens: list[str], w: float, size: float = SMALL) -> bool:
    """Whether every token fits a box ``w`` inches wide, at the smallest size (``size`` points)."""
    return all(text_width(t, size) <= w - 0.06 for t in tokens)


@dataclass(frozen=True)
class Box:
    """A drawn rectangle by centre and size, in inches, with the points where arrows attach."""

    x: float
    y: float
    w: float
    h: float

    @property
    def top(self) -> tuple[float, float]:
        return (self.x, self.y + self.h / 2)

    @property
    def bottom(self) -> tuple[float, float]:
        return (self.x, self.y - self.h / 2)

    @property
    def left(self) -> tuple[float, float]:
        return (self.x - self.w / 2, self.y)

    @property
    def right(self) -> tuple[float, float]:
        return (self.x + self.w / 2, self.y)

    def at(self, fx: float, fy: float) -> tuple[float, float]:
        """The point at (fx, fy) of the half-sizes from the centre: (1, 0) is the middle of the right side."""
        return (self.x + fx * self.w / 2, self.y + fy * self.h / 2)

    @property
    def rect(self) -> tuple[float, float, float, float]:
        return (self.x - self.w / 2, self.y - self.h / 2, self.x + self.w / 2, self.y + self.h / 2)
