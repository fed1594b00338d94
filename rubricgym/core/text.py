"""Text in a Gymnasium env: a space that holds any Unicode string, and truncation that says what it dropped."""

from __future__ import annotations

from typing import Any

from gymnasium import spaces

# Printable ASCII, whitespace and a spread of non-ASCII letters and symbols: what ``sample`` draws from.
# ``contains`` accepts any Unicode string, so this only shapes the random strings used for fuzzing.
SAMPLE_CHARSET = (
    "".join(chr(c) for c in range(32, 127)) + "\n\t" + "éèüößñçøåæœÆØÅ" + "αβγδλπΩ" + "中文日本語한국어" + "…—“”€£→✓"
)
TRUNCATION_MARKER = "\n[... truncated {n} characters ...]"


class UnicodeText(spaces.Text):
    """A text space that contains any Unicode string up to ``max_length`` characters.

    Gymnasium's ``Text`` only contains strings drawn from its charset (alphanumeric by default), which rejects
    the newlines and non-ASCII text that LLM envs produce; sampling still uses a broad explicit charset.
    """

    def __init__(self, max_length: int, seed: int | None = None):
        super().__init__(max_length=max_length, min_length=0, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a marker that says how much was dropped."""
    if len(text) <= limit:
        return text
    marker_room = len(TRUNCATION_MARKER.format(n=len(text)))
    keep = max(0, limit - marker_room)
    return text[:keep] + TRUNCATION_MARKER.format(n=len(text) - keep)
