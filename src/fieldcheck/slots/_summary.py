"""The report's "Results Summary" and "Key findings", generated from the numbers by the fixed rules
of docs/slots.md ("How the summary is written"); numbers are rounded only here."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from functools import partial

from fieldcheck.reports import format_pvalue, format_seconds
from fieldcheck.slots._score import ModelScore, SlotsRun, reasons_text

BALANCE_GAP = 0.15
"""Recall above precision by this much is "High recall" / "Low precision" (and vice versa)."""
PROSE_TOPICS = 10
"""Topics named at most in one phrase of the summary or the findings (the tables name them all):
3,000 topics made a summary cell of 3,000 names and a ranking of 3,000 bullets."""


@dataclass(frozen=True)
class Item:
    """A phrase of the summary; ``bold`` marks the spec's emphasised verdicts."""

    text: str
    bold: bool = False


@dataclass
class SummaryRow:
    model: str
    f1: float
    best_f1: bool
    latency_mean: float | None
    fastest: bool
    strengths: list[Item] = field(default_factory=list)
    weaknesses: list[Item] = field(default_factory=list)


@dataclass
class Finding:
    title: str
    bullets: list[str] = field(default_factory=list)


def _extremes(
    models: Sequence[ModelScore], value: Callable[[ModelScore], float | None]
) -> tuple[set[str], set[str]]:
    """Names holding the max and the min of ``value``; empty when fewer than two models have
    a value or all values are equal (nobody is best when everyone is the same)."""
    known = [(m.name, v) for m in models if (v := value(m)) is not None]
    if len(known) < 2:
        return set(), set()
    values = [v for _, v in known]
    hi, lo = max(values), min(values)
    if hi == lo:
        return set(), set()
    return {n for n, v in known if v == hi}, {n for n, v in known if v == lo}


def compared_latency(models: Sequence[ModelScore]) -> tuple[dict[str, float], int | None]:
    """Mean latency per model as compared, over the sessions timed for every model (issue 9), and
    that session count; the models' own means and None when they were timed on the same ones."""
    timed = [m for m in models if m.result.latency is not None]
    own = {m.name: m.result.latency.mean for m in timed if m.result.latency is not None}
    if len(timed) < 2 or any(not m.session_seconds for m in timed):
        return own, None
    common = set(timed[0].session_seconds).intersection(*(m.session_seconds for m in timed[1:]))
    if all(set(m.session_seconds) == common for m in timed):
        return own, None
    if not common:
        return {}, 0
    keys = sorted(common)  # latency_stats' mean: an exact sum over the count
    means = {m.name: math.fsum(m.session_seconds[k] for k in keys) / len(keys) for m in timed}
    return means, len(keys)


def topic_f1(m: ModelScore, topic: str) -> float | None:
    """The model's F1 in ``topic``; None where it has no gold and no prediction there."""
    t = m.result.per_topic.get(topic)
    return None if t is None else t.f1


def gold_topics(run: SlotsRun) -> list[str]:
    """Topics with at least one gold slot (topics seen only in extra slots are left out)."""
    # every model: a model may have sessions left out (call errors)
    return sorted({t for m in run.models for t, n in m.topic_gold_slots.items() if n})


def _named(topics: Sequence[str], gold: dict[str, int]) -> str:
    """``topics`` joined by ", ", at most PROSE_TOPICS of them (those with the most gold slots,
    in topic order) and how many more."""
    if len(topics) <= PROSE_TOPICS:
        return ", ".join(topics)
    shown = sorted(sorted(topics, key=lambda t: (-gold.get(t, 0), t))[:PROSE_TOPICS])
    return f"{', '.join(shown)} and {len(topics) - PROSE_TOPICS:,} more topics"


def results_summary(run: SlotsRun) -> list[SummaryRow]:
    """One row per model: F1, mean latency, strengths and weaknesses by the documented rules."""
    models = run.models
    best_f1, _ = _extremes(models, lambda m: m.result.f1)
    hi_p, lo_p = _extremes(models, lambda m: m.result.precision)
    hi_r, lo_r = _extremes(models, lambda m: m.result.recall)
    compared, _ = compared_latency(models)
    slowest, fastest = _extremes(models, lambda m: compared.get(m.name))
    most_extra, fewest_extra = _extremes(models, lambda m: m.result.extra_slots)
    hi_j, lo_j = _extremes(models, lambda m: m.result.llm_judge)
    topics = gold_topics(run)
    best_in_topic = {t: _extremes(models, partial(topic_f1, topic=t))[0] for t in topics}

    rows = []
    for m in models:
        r = m.result
        p, rc = f"{r.precision:.2f}", f"{r.recall:.2f}"
        mean = None if r.latency is None else r.latency.mean
        row = SummaryRow(m.name, r.f1, m.name in best_f1, mean, m.name in fastest)
        s, w = row.strengths, row.weaknesses
        if m.name in best_f1:
            s.append(Item("Best overall", bold=True))
        s += _extreme("highest", m.name in hi_p, m.name in hi_r, p, rc)
        if r.recall - r.precision >= BALANCE_GAP and m.name not in hi_r | lo_r:
            s.append(Item(f"High recall ({rc})"))
        if r.precision - r.recall >= BALANCE_GAP and m.name not in hi_p | lo_p:
            s.append(Item(f"High precision ({p})"))
        if m.name in fastest:
            s.append(Item("Fastest", bold=True))
        if m.name in fewest_extra:
            s.append(Item(f"fewest hallucinations ({r.extra_slots} extra slots)"))
        if m.name in hi_j and r.llm_judge is not None:
            s.append(Item(f"highest LLM judge score ({_judge(m)})"))
        won = [t for t in topics if m.name in best_in_topic[t]]
        if topics and len(won) == len(topics):
            s.append(Item("best per-topic performance"))
        elif won:
            s.append(Item(f"best F1 on {_named(won, run.topic_gold_slots)}"))

        w += _extreme("Lowest", m.name in lo_p, m.name in lo_r, p, rc)
        if r.recall - r.precision >= BALANCE_GAP and m.name not in lo_p | hi_p:
            w.append(Item(f"Low precision ({p})"))
        if r.precision - r.recall >= BALANCE_GAP and m.name not in lo_r | hi_r:
            w.append(Item(f"Low recall ({rc})"))
        if m.name in slowest:
            w.append(Item("slowest"))
        if m.name in most_extra:
            w.append(Item(f"most hallucinations ({r.extra_slots} extra slots)"))
        elif most_extra and m.name not in fewest_extra:
            w.append(Item(f"moderate hallucinations ({r.extra_slots} extra slots)"))
        if m.name in lo_j and r.llm_judge is not None:
            w.append(Item(f"lowest LLM judge score ({_judge(m)})"))
        if m.not_scored:
            w.append(Item(f"{m.not_scored} session(s) not scored (call errors)", bold=True))
        rows.append(row)
    return rows


def _judge(m: ModelScore) -> str:
    """A model's LLM judge score, with how many of its judge calls failed (their slots are left
    out of the mean, so the score depends on which failed)."""
    failed = f"; {m.judge_failed:,} judge call(s) failed, left out" if m.judge_failed else ""
    return f"{m.result.llm_judge:.2f}{failed}"


def _extreme(word: str, precision: bool, recall: bool, p: str, rc: str) -> list[Item]:
    """``word`` precision and recall (``highest precision (0.90) & recall (0.80)``), or one."""
    named = [f"precision ({p})"] * precision + [f"recall ({rc})"] * recall
    return [Item(f"{word} {' & '.join(named)}")] if named else []


def _pct(x: float) -> str:
    """``x`` as a whole percentage, a half rounded up as by hand (``3.125``: 313%, where
    Python's half-to-even format gave 312%)."""
    if not math.isfinite(x):
        return f"{x * 100:.0f}%"
    return f"{Decimal(repr(x)).scaleb(2).quantize(Decimal(1), ROUND_HALF_UP)}%"


def key_findings(run: SlotsRun) -> list[Finding]:
    """Best overall, fastest, most and fewest hallucinations, topic difficulty, F1 differences."""
    models = run.models
    out: list[Finding] = [
        Finding(
            f"Nothing scored for {u.name}: the call failed for all {u.not_scored} session(s) "
            f"({reasons_text(u.sessions_not_scored)}); it has no metrics"
        )
        for u in run.unscored
    ]
    if not models:
        return out
    topics = gold_topics(run)

    by_f1 = sorted(models, key=lambda m: m.result.f1, reverse=True)
    best = by_f1[0]
    tied = [m.name for m in by_f1 if m.result.f1 == best.result.f1]
    if len(tied) == 1:
        if len(by_f1) == 1:  # "best" compares models; one model is only described
            f = Finding(f"{best.name}: F1 {best.result.f1:.3f} (the only model)")
        else:
            f = Finding(f"{best.name} is the best overall (F1 {best.result.f1:.3f})")
            second = by_f1[1]
            if second.result.f1 > 0:
                gain = (best.result.f1 - second.result.f1) / second.result.f1
                f.bullets.append(
                    f"{_pct(gain)} better F1 than the next best, {second.name} ({second.result.f1:.3f})"
                )
        if f1s := [f1 for t in topics if (f1 := topic_f1(best, t)) is not None]:
            f.bullets.append(f"per-topic F1 from {min(f1s):.2f} to {max(f1s):.2f}")
        f.bullets.append(f"{_pct(best.result.exact_match_rate)} exact match coverage")
        if best.not_scored:
            f.bullets.append(
                f"scored on {best.result.counts.sessions} session(s); {best.not_scored} not "
                f"scored (call errors: {reasons_text(best.result.sessions_not_scored)})"
            )
        out.append(f)
    else:
        out.append(
            Finding(f"No single best model: {', '.join(tied)} tie at F1 {best.result.f1:.3f}")
        )

    compared, n_common = compared_latency(models)
    timed = sorted((m for m in models if m.name in compared), key=lambda m: compared[m.name])
    n_timed = sum(1 for m in models if m.result.latency is not None)
    if n_common == 0:
        out.append(Finding("Latency not compared: no session is timed for every model"))
    elif len(timed) >= 2 and compared[timed[0].name] != compared[timed[-1].name]:
        fast_s = compared[timed[0].name]
        fast = [m.name for m in timed if compared[m.name] == fast_s]  # a tie names every one
        where = ""
        if n_common is not None:
            where = f" on the {n_common} session(s) timed for {'both' if n_timed == 2 else 'all'} models"
        verb = "is" if len(fast) == 1 else "are"
        f = Finding(
            f"{', '.join(fast)} {verb} the fastest ({format_seconds(fast_s)} mean per session{where})"
        )
        f.bullets.append(
            ", ".join(
                f"{_pct(1 - fast_s / (compared[o.name] or 1.0))} faster than {o.name}"
                for o in timed[len(fast) :]
            )
        )
        out.append(f)

    most, fewest = _extremes(models, lambda m: m.result.extra_slots)
    if most:
        fewest_m = min(models, key=lambda m: m.result.extra_slots)
        for m in (m for m in models if m.name in most):
            f = Finding(
                f"{m.name} has the most hallucinations ({m.result.extra_slots} extra slots)"
            )
            if fewest_m.result.extra_slots > 0:
                more = m.result.extra_slots / fewest_m.result.extra_slots - 1
                f.bullets.append(
                    f"{_pct(more)} more than {fewest_m.name} ({fewest_m.result.extra_slots})"
                )
            f.bullets.append(
                f"{m.result.extra_values} extra values; precision {m.result.precision:.3f}"
            )
            out.append(f)
        for m in models:
            if m.name in fewest:
                out.append(
                    Finding(
                        f"{m.name} has the fewest hallucinations ({m.result.extra_slots} extra slots, "
                        f"{m.result.extra_values} extra values)"
                    )
                )

    if topics:
        f1s_of = {t: [f1 for m in models if (f1 := topic_f1(m, t)) is not None] for t in topics}
        mean_f1 = {t: sum(f1s) / len(f1s) for t, f1s in f1s_of.items()}
        ranked = sorted(topics, key=lambda t: (-mean_f1[t], t))
        f = Finding("Topic difficulty ranking (by mean F1 over models, easiest first)")
        half = PROSE_TOPICS // 2
        for i, t in enumerate(ranked):
            if len(ranked) > PROSE_TOPICS and half <= i < len(ranked) - half:
                if i == half:  # the easiest and the hardest few are named, the middle counted
                    f.bullets.append(
                        f"... {len(ranked) - 2 * half:,} more topics between them (every topic "
                        "is in the per-topic table and per_topic.csv)"
                    )
                continue
            label = "Easiest" if i == 0 else "Hardest" if i == len(ranked) - 1 else "Moderate"
            if len(ranked) == 1:
                label = "Only topic"
            f1s = f1s_of[t]
            spread = f"{min(f1s):.2f}-{max(f1s):.2f}" if len(f1s) > 1 else f"{f1s[0]:.2f}"
            f.bullets.append(f"{label}: {t} (mean F1 {mean_f1[t]:.2f}; F1 {spread})")
        out.append(f)

    if run.paired_f1:
        f = Finding("F1 differences (paired bootstrap over sessions, two-sided)")
        scored = {m.name: m.sessions for m in models}
        for pair in run.paired_f1:
            common = ""
            if pair.sessions != scored[pair.model_a] or pair.sessions != scored[pair.model_b]:
                common = f" on the {pair.sessions} session(s) both were scored on"
            f.bullets.append(
                f"{pair.model_a} - {pair.model_b}: {pair.difference:+.3f}{common} "
                f"({format_pvalue(pair.p_value)})"
            )
        out.append(f)
    return out


def not_scored_lines(run: SlotsRun) -> list[str]:
    """A line per model with sessions left out because their call failed (none: no lines)."""
    lines = []
    for name in run.names or [m.name for m in run.models]:
        m = next((m for m in run.models if m.name == name), None)
        if m is not None and m.not_scored:
            reasons = reasons_text(m.result.sessions_not_scored)
            lines.append(
                f"{name}: {m.not_scored} session(s) not scored, the call failed ({reasons}); "
                f"its metrics cover the other {m.result.counts.sessions} session(s)"
            )
        u = next((u for u in run.unscored if u.name == name), None)
        if u is not None:
            lines.append(
                f"{name}: nothing scored, the call failed for all {u.not_scored} session(s) "
                f"({reasons_text(u.sessions_not_scored)}); no metrics"
            )
    return lines
