"""Robust parsing of judge replies: JSON objects inside prose, code fences or think blocks, and fallbacks.

Models wrap JSON in Markdown fences, prepend reasoning, write ``"met": "yes"`` or a score out of 10. These
helpers find the first JSON object that looks like a verdict and normalise it; when nothing usable is found
they raise ``JudgeParseError`` with the start of the reply, which the judge turns into an error verdict.
"""

from __future__ import annotations

import json
import re
from typing import Any

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_MET_WORD = re.compile(r'\b(?:verdict|met|criterion met)\b"?\s*[:=]\s*\**\s*"?(yes|no|true|false|met|not met)\b', re.I)
_SCORE_WORD = re.compile(r'\bscore\b"?\s*[:=]\s*\**\s*"?(-?\d+(?:\.\d+)?)\s*(?:/\s*(\d+))?', re.I)
_ECHOED = re.compile(r"\b(?:true or false|yes or no)\b", re.I)
_TRUE = {"true", "yes", "met", "1", "pass", "passed", "y"}
_FALSE = {"false", "no", "not met", "unmet", "0", "fail", "failed", "n"}
_NA = {"n/a", "na", "not applicable", "not_applicable", "inapplicable"}
_NA_WORD = re.compile(
    r'\b(?:verdict|met)\b"?\s*[:=]\s*\**\s*"?(?:n/a|not applicable)(?![\w/])'
    r'|\bapplicable\b"?\s*[:=]\s*\**\s*"?(?:false|no)\b',
    re.I,
)


class JudgeParseError(ValueError):
    """The judge's reply holds no usable verdict."""


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object embedded in ``text``, in order."""
    decoder = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            out.append(obj)
        i = text.find("{", end)
    return out


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value >= 0.5 if 0 <= value <= 1 else None
    if isinstance(value, str):
        v = value.strip().lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    return None


def normalise_score(value: Any, scale: float | None = None) -> float | None:
    """A score in [0, 1] from a number on [0, 1], out of 10 or out of 100 (or ``x/scale``)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    if scale:
        x = x / scale
    elif 1.0 < x <= 10.0:
        x = x / 10.0
    elif 10.0 < x <= 100.0:
        x = x / 100.0
    return x if 0.0 <= x <= 1.0 else None


def _not_applicable(low: dict[str, Any]) -> bool:
    """The reply says N/A: ``"applicable": false`` or a met/verdict of "n/a"."""
    if _as_bool(low.get("applicable", True)) is False:
        return True
    value = low.get("met", low.get("verdict"))
    return isinstance(value, str) and value.strip().lower() in _NA


def parse_verdict(text: str | None) -> dict[str, Any]:
    """``{"applicable", "met", "score", "rationale", "evidence_steps", "quotes"}`` from a judge's reply
    (``met``/``score`` are ``None`` when the judge said the criterion does not apply)."""
    if not text or not text.strip():
        raise JudgeParseError("the judge returned an empty reply")
    body = _THINK.sub("", text)
    for obj in json_objects(body):
        low = {str(k).lower(): v for k, v in obj.items()}
        if _not_applicable(low):
            return {
                "applicable": False,
                "met": None,
                "score": None,
                "evidence_steps": [],
                "quotes": [],
                "rationale": str(low.get("rationale") or low.get("reasoning") or low.get("explanation") or ""),
            }
        met = _as_bool(low.get("met", low.get("verdict", low.get("satisfied"))))
        score = normalise_score(low["score"]) if "score" in low else None
        if met is None and score is None:
            continue
        if met is None:
            met = score is not None and score >= 0.5
        if score is None:
            score = 1.0 if met else 0.0
        if (met and score == 0.0) or (not met and score == 1.0):
            raise JudgeParseError(f"contradictory verdict (met={met}, score={score:g}): {text.strip()[:160]!r}")
        steps = low.get("evidence_steps") or low.get("steps") or []
        quotes = low.get("quotes") or low.get("evidence") or []
        return {
            "applicable": True,
            "met": met,
            "score": score,
            "rationale": str(low.get("rationale") or low.get("reasoning") or low.get("explanation") or ""),
            "evidence_steps": [int(s) for s in steps if isinstance(s, int) or (isinstance(s, str) and s.isdigit())]
            if isinstance(steps, list)
            else [],
            "quotes": [str(q) for q in quotes] if isinstance(quotes, list) else [str(quotes)],
        }
    if _ECHOED.search(body):
        raise JudgeParseError(f"the judge echoed the answer template instead of deciding: {text.strip()[:160]!r}")
    if _NA_WORD.search(body):
        return {
            "applicable": False,
            "met": None,
            "score": None,
            "rationale": body.strip()[:500],
            "evidence_steps": [],
            "quotes": [],
        }
    met_match = _MET_WORD.search(body)
    score_match = _SCORE_WORD.search(body)
    if met_match or score_match:
        score = None
        if score_match:
            score = normalise_score(score_match.group(1), float(score_match.group(2)) if score_match.group(2) else None)
        met = _as_bool(met_match.group(1)) if met_match else None
        if met is None and score is not None:
            met = score >= 0.5
        if met is not None and score is not None and ((met and score == 0.0) or (not met and score == 1.0)):
            raise JudgeParseError(f"contradictory verdict (met={met}, score={score:g}): {text.strip()[:160]!r}")
        if met is not None:
            return {
                "applicable": True,
                "met": met,
                "score": score if score is not None else float(met),
                "rationale": body.strip()[:500],
                "evidence_steps": [],
                "quotes": [],
            }
    raise JudgeParseError(f"no verdict found in the judge's reply: {text.strip()[:200]!r}")


def parse_scores(text: str | None, keys: list[str]) -> dict[str, Any]:
    """The first JSON object in ``text`` that contains every key of ``keys`` (used by the pairwise judge)."""
    if not text or not text.strip():
        raise JudgeParseError("the judge returned an empty reply")
    for obj in json_objects(_THINK.sub("", text)):
        if all(k in obj for k in keys):
            return obj
    raise JudgeParseError(f"no JSON object with {keys} in the judge's reply: {text.strip()[:200]!r}")
