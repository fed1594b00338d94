"""DiagGym's reward (arXiv 2510.24654): ``0.1·[diagnosis issued] + accuracy + 0.5·F1(ordered exams, key exams)``.

An ordered exam counts towards precision when it covers a key exam (it is that exam, or a panel reporting all of
the key exam's analytes); recall is the share of key exams covered. With no key exams, ordering nothing is a
perfect F1 and ordering anything scores precision 0.
"""

from __future__ import annotations

ISSUED_WEIGHT = 0.1
F1_WEIGHT = 0.5
MAX_REWARD = ISSUED_WEIGHT + 1.0 + F1_WEIGHT


def exam_f1(covers: list[list[str]], key_exams: list[str]) -> tuple[float, float, float]:
    """(precision, recall, F1) of the distinct orders (each given as the key exams it covers) against the keys."""
    if not key_exams:
        return (1.0, 1.0, 1.0) if not covers else (0.0, 1.0, 0.0)
    if not covers:
        return 0.0, 0.0, 0.0
    precision = sum(1 for c in covers if c) / len(covers)
    recall = len({k for c in covers for k in c} & set(key_exams)) / len(key_exams)
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


def diaggym_reward(issued: bool, correct: bool, covers: list[list[str]], key_exams: list[str]) -> dict[str, float]:
    """The reward and its parts (``diaggym`` is in [0, 1.6]; ``diaggym_norm`` divides by 1.6)."""
    precision, recall, f1 = exam_f1(covers, key_exams)
    total = ISSUED_WEIGHT * issued + float(correct) + F1_WEIGHT * f1
    return {
        "issued": float(issued),
        "accuracy": float(correct),
        "exam_precision": precision,
        "exam_recall": recall,
        "exam_f1": f1,
        "diaggym": total,
        "diaggym_norm": total / MAX_REWARD,
        "reward": env_reward(correct, f1, bool(key_exams)),
    }


def env_reward(correct: bool, f1: float, has_key_exams: bool) -> float:
    """The env's terminal reward in [0, 1]: DiagGym's parts with the 0.1 "issued" term paid only with a correct
    diagnosis (a well-formed wrong answer earns nothing), and the F1 term only when the case has key exams."""
    if not has_key_exams:
        return float(correct)
    return ((ISSUED_WEIGHT + 1.0) * correct + F1_WEIGHT * f1) / MAX_REWARD
