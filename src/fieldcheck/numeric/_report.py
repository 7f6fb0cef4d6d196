"""report.md and report.html of a numeric QA run, with their plots (issue 9, "Reports and
gating"), on the shared skeleton ``fieldcheck.reports``. Spec: numeric-qa-evaluation.md; what each
section says and the rules of the readings: docs/numeric.md, "Report"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from fieldcheck.metrics import ABSOLUTE_TOLERANCE, RELATIVE_TOLERANCE, UNIT_FACTORS
from fieldcheck.numeric._scoring import MATCH_KEYS, MAX_TURN_INTERVALS, PLOTS, WORST, NumericResult
from fieldcheck.reports import (
    OutputFolder,
    Report,
    Term,
    count_axis,
    figure,
    format_fixed,
    format_seconds_joined,
    write_report,
)

TITLE = "Numeric QA (ConvFinQA)"
MATCH_TYPES = tuple(
    zip(MATCH_KEYS, ("numerical", "soft", "unit-agnostic", "sign-agnostic", "general"), strict=True)
)
HEADLINE = (
    ("numerical_match_accuracy", "Accuracy, numerical match (baseline)"),
    ("soft_match_accuracy", "Accuracy, soft match"),
    ("unit_agnostic_accuracy", "Accuracy, unit-agnostic"),
    ("sign_agnostic_accuracy", "Accuracy, sign-agnostic"),
    ("general_match_accuracy", "Accuracy, general match"),
    ("avg_logic_recall", "Logic recall"),
    ("avg_logic_precision", "Logic precision"),
    ("avg_logic_order_score", "Logic order score"),
    ("conversation_success_rate", "Conversation success"),
    ("avg_operations_per_turn", "Operations per turn (plan compute steps)"),
)
FAILURE_MEANING = {
    "error": "the prediction reports an error or is missing",
    "no_answer": "no number or yes/no could be read",
    "scale": "right up to a factor of 100 or 0.01 (unit-agnostic match)",
    "sign": "right but for the sign (sign-agnostic match)",
    "rounding": "the gold rounded to the prediction's decimals, or a soft match",
    "wrong": "none of the above",
}
# The spec's reading of a match type that exceeds numerical match (Analysis Workflow 1).
EXCESS_CAUSES = (
    ("unit_agnostic", "Unit-agnostic", "scaling issues (a percentage as a fraction, or 100x off)"),
    ("sign_agnostic", "Sign-agnostic", "sign/direction confusion"),
    ("general", "General match", "percentage points given for a fraction"),
)
# A reading comparing two rates is stated as a finding from this gap on (10 percentage points).
READING_GAP = 0.1
# ... and only between groups of this many scored turns each (one conversation's turn 5 has a
# bootstrap interval of one value: no reading of "apart" or "ceiling" can rest on it).
READING_MIN_TURNS = 10
INPUT_PROBLEMS = 20
_TOO_FEW = f": too few turns to read a change (fewer than {READING_MIN_TURNS} in a group)."


def _compared(counts: Sequence[int], later: str) -> tuple[int, str]:
    """Which group the first is compared with: the last later one with ``READING_MIN_TURNS`` scored
    turns (on the dev split the last turn position and the longest plan have 1 or 2 turns, so
    comparing with those never read anything), else the last; with the note that later groups
    are too small to compare."""
    last = len(counts) - 1
    i = max((i for i, n in enumerate(counts) if i and n >= READING_MIN_TURNS), default=last)
    return i, "" if i == last else f"; {later}: fewer than {READING_MIN_TURNS} a group"


def _interval(ci: Mapping[str, Any] | None) -> str:
    return "" if not ci else f"[{ci['low']:.3f}, {ci['high']:.3f}]"


def estimated_note(statistics: Mapping[str, Any]) -> str:
    """``" (2 turns estimated: characters / 4)"`` beside every token count and cost when some
    turns' tokens are the runner's estimate (predictions ``tokens_estimated``), else ``""``."""
    count = statistics.get("num_turns_tokens_estimated") or 0
    if not count:
        return ""
    return f" ({count:,} turn{'' if count == 1 else 's'} estimated: characters / 4)"


def _points(difference: float) -> str:
    return f"{100 * difference:.1f} percentage points"


def _kept(kept: int | None, drawn: int | None) -> str:
    """``881 of 1000``: the resamples an interval was taken over, of those drawn."""
    if kept is None:
        return ""
    return f"{kept} of {drawn}" if drawn is not None else str(kept)


class TurnPosition(NamedTuple):
    """One turn position (0, 1, 2, ...): scored turns, numerical accuracy, its interval, and the
    average plan operations there."""

    turn: int
    scored: int
    accuracy: float
    low: float | None
    high: float | None
    operations: float | None
    kept: int | None = None  # resamples with a conversation scored here (of those drawn)
    drawn: int | None = None


def turn_positions(statistics: Mapping[str, Any]) -> list[TurnPosition]:
    """statistics.json's by-turn tables joined, in numeric turn order (not as text)."""
    accuracy = statistics.get("accuracy_by_turn_number") or {}
    counts = statistics.get("turns_by_turn_number") or {}
    operations = statistics.get("avg_operations_by_turn") or {}
    intervals = statistics.get("bootstrap_95_ci_by_turn_number") or {}
    out = []
    for key in sorted(accuracy, key=int):
        ci = intervals.get(key)
        out.append(
            TurnPosition(
                turn=int(key),
                scored=int(counts.get(key, 0)),
                accuracy=float(accuracy[key]),
                low=ci["low"] if ci else None,
                high=ci["high"] if ci else None,
                operations=operations.get(key),
                kept=ci.get("resamples") if ci else None,
                drawn=ci.get("drawn") if ci else None,
            )
        )
    return out


def _error_bars(
    estimates: Sequence[float], intervals: Sequence[Mapping[str, Any] | None]
) -> list[list[float]]:
    """Matplotlib's ``yerr`` (lengths below, above) of each estimate's interval (none: 0). A
    percentile interval of a few resamples need not hold the estimate: a length is never < 0."""
    pairs = zip(estimates, intervals, strict=True)
    bars = [
        (max(0.0, e - i["low"]), max(0.0, i["high"] - e)) if i else (0.0, 0.0) for e, i in pairs
    ]
    return [[below for below, _ in bars], [above for _, above in bars]]


def write_accuracy_plot(statistics: dict[str, Any], path: Path) -> Path:
    """accuracy_by_turn.png: numerical-match accuracy with its 95% interval (left axis) and plan
    operations (right) at the first ``MAX_TURN_INTERVALS`` turn positions, each tick labelled
    with its scored turns (spec "Complexity Ceiling Analysis")."""
    positions = turn_positions(statistics)[:MAX_TURN_INTERVALS]
    turns = [p.turn for p in positions]
    accuracy = [p.accuracy for p in positions]
    operations = [p.operations for p in positions]
    ticks = [f"{p.turn}\n(n={p.scored})" for p in positions]
    intervals = statistics.get("bootstrap_95_ci_by_turn_number") or {}
    with figure(path, figsize=(max(7.0, 0.6 * len(turns) + 2), 4.5)) as (_, ax):
        bars = _error_bars(accuracy, [intervals.get(str(t)) for t in turns])
        ax.errorbar(
            turns,
            accuracy,
            yerr=bars if intervals else None,
            marker="o",
            capsize=4,
            color="tab:blue",
            label="Accuracy (numerical match)" + (", 95% interval" if intervals else ""),
        )
        ax.set_xlabel("Turn number (n = scored turns)")
        ax.set_ylabel("Accuracy (numerical match)", color="tab:blue")
        ax.set_ylim(0, 1.05)
        ax.set_xticks(turns, ticks)
        ax.grid(axis="y", alpha=0.3)
        ops_axis = ax.twinx()
        ops_axis.plot(
            turns,
            [o if o is not None else float("nan") for o in operations],
            marker="s",
            linestyle="--",
            color="tab:orange",
            label="Avg operations per turn",
        )
        ops_axis.set_ylabel("Avg operations per turn (compute steps)", color="tab:orange")
        highest = max((o for o in operations if o is not None), default=0.0)
        ops_axis.set_ylim(0, max(1.0, highest) * 1.1)
        lines, labels = ax.get_legend_handles_labels()
        more, more_labels = ops_axis.get_legend_handles_labels()
        ax.legend(lines + more, labels + more_labels, loc="lower left", fontsize="small")
        if not turns:
            ax.text(0.5, 0.5, "no scored turns", ha="center", va="center", transform=ax.transAxes)
        ax.set_title("Accuracy and operations by turn number")
    return path


def plot_files(result: NumericResult) -> list[str]:
    """The files ``write_plots`` writes for ``result`` (what a Ctrl-C line names as missing)."""
    stats = result.statistics
    if stats.get("nothing_scored", True):
        return []
    names = [PLOTS["accuracy_by_turn"], PLOTS["match_types"]]
    if stats.get("failure_modes"):
        names.append(PLOTS["failure_modes"])
    if result.tallies.by_operations:
        names.append(PLOTS["operations"])
    return names


def write_plots(result: NumericResult, out: str | Path | OutputFolder) -> dict[str, Path]:
    """The four PNG plots (Agg, imported on first use); none when nothing was scored (a plot of
    zeros would look like a result). Returns key -> path."""
    if not plot_files(result):
        return {}
    stats, folder = result.statistics, OutputFolder.of(out)
    written = {"accuracy_by_turn": write_accuracy_plot(stats, folder / PLOTS["accuracy_by_turn"])}
    ci = stats.get("bootstrap_95_ci") or {}
    names = [name for _, name in MATCH_TYPES]
    values = [float(stats[key]) for key, _ in MATCH_TYPES]
    with figure(folder / PLOTS["match_types"], figsize=(7, 4)) as (_, ax):
        bars = _error_bars(values, [ci.get(k) for k, _ in MATCH_TYPES])
        ax.bar(names, values, color="tab:blue", yerr=bars if ci else None, capsize=4)
        for x, v in enumerate(values):
            ax.text(x, 0.02, f"{v:.3f}", ha="center", va="bottom", color="white", fontsize="small")
        ax.set_ylim(0, 1.1)
        ax.set_ylabel("accuracy over scored turns (0-1)")
        ax.set_title(f"The five match types ({stats['num_scored_turns']} scored turns)")
    written["match_types"] = folder / PLOTS["match_types"]

    modes = stats.get("failure_modes") or {}
    if modes:
        ordered = sorted(modes.items(), key=lambda kv: (-kv[1], kv[0]))
        with figure(folder / PLOTS["failure_modes"], figsize=(7, 4)) as (_, ax):
            ax.bar([m for m, _ in ordered], [n for _, n in ordered], color="tab:red")
            ax.set_ylabel("failed scored turns")
            count_axis(ax.yaxis)
            ax.set_title(f"Failure modes ({sum(modes.values())} failed scored turns)")
        written["failure_modes"] = folder / PLOTS["failure_modes"]

    rows = result.tallies.by_operations
    if rows:
        size = (max(6.0, 0.6 * len(rows) + 2), 4)
        with figure(folder / PLOTS["operations"], figsize=size) as (_, ax):
            accuracy = [r.correct / r.scored for r in rows]
            ax.bar([str(r.operations) for r in rows], accuracy, color="tab:green")
            for x, r in enumerate(rows):
                top = min(accuracy[x] + 0.02, 1.02)
                ax.text(x, top, f"n={r.scored}", ha="center", fontsize="small")
            ax.set_ylim(0, 1.1)
            ax.set_xlabel("operations in the plan (compute steps)")
            ax.set_ylabel("accuracy, numerical match (0-1)")
            ax.set_title("Accuracy by number of plan operations")
        written["operations"] = folder / PLOTS["operations"]
    return written


def readings(result: NumericResult) -> list[str]:
    """The spec's "Analysis Workflows" readings that apply, each stated from the numbers (rules in
    docs/numeric.md, "Report"). Empty when nothing was scored."""
    stats = result.statistics
    if stats.get("nothing_scored", True):
        return []
    scored = int(stats["num_scored_turns"])
    numerical = float(stats["numerical_match_accuracy"])
    extra = result.tallies.extra
    modes = stats.get("failure_modes") or {}
    out = []
    for key, name, cause in EXCESS_CAUSES:
        if extra[key]:
            out.append(
                f"{name} exceeds numerical by {_points(extra[key] / scored)} "
                f"({extra[key]} of {scored} scored turns): {cause}."
            )
    rounding = int(modes.get("rounding", 0))
    if rounding:
        out.append(
            f"{rounding} of {scored} scored turns ({_points(rounding / scored)}) fail only by "
            "rounding: rounding precision issues (soft match never exceeds numerical here, so "
            "the rounding failure mode carries the spec's soft-match reading)."
        )
    positions = [p for p in turn_positions(stats) if p.scored]
    if len(positions) >= 2:
        i, note = _compared([p.scored for p in positions], "later turns")
        first, last = positions[0], positions[i]
        change = last.accuracy - first.accuracy
        text = (
            f"Accuracy is {first.accuracy:.3f} at turn {first.turn} (n={first.scored}) and "
            f"{last.accuracy:.3f} at turn {last.turn} (n={last.scored}{note})"
        )
        if first.low is None or first.high is None or last.low is None or last.high is None:
            text += " (no intervals: bootstrap off)."
        elif min(first.scored, last.scored) < READING_MIN_TURNS:
            text += _TOO_FEW
        elif last.high < first.low:
            text += (
                f", {_points(-change)} lower, their 95% intervals apart: "
                "later turns are harder (complexity ceiling)."
            )
        elif last.low > first.high:
            text += f", {_points(change)} higher, their 95% intervals apart."
        else:
            text += ": their 95% intervals overlap, so no change between them is shown."
        out.append(text)
    by_ops = result.tallies.by_operations
    if len(by_ops) >= 2:
        i, note = _compared([row.scored for row in by_ops], "longer plans")
        few, many = by_ops[0], by_ops[i]
        a, b = few.correct / few.scored, many.correct / many.scored
        out.append(
            f"Turns whose plan has {few.operations} operation(s) are right {a:.3f} of the time "
            f"(n={few.scored}), {many.operations} operations {b:.3f} (n={many.scored}{note})"
            + (
                _TOO_FEW
                if min(few.scored, many.scored) < READING_MIN_TURNS
                else f": {_points(a - b)} lower with {many.operations} operations (complexity "
                "ceiling)."
                if a - b >= READING_GAP
                else "."
            )
        )
    recall = stats.get("avg_logic_recall")
    if recall is not None and recall - numerical >= READING_GAP:
        out.append(
            f"Logic recall ({recall:.3f}) exceeds numerical accuracy ({numerical:.3f}) by "
            f"{_points(recall - numerical)}: the model often chooses the right operations but "
            "the wrong numbers (extraction or arithmetic)."
        )
    return out


def _headline_rows(stats: Mapping[str, Any]) -> list[list[str]]:
    ci = stats.get("bootstrap_95_ci") or {}
    rows = [
        [label, format_fixed(stats.get(key)), _interval(ci.get(key))] for key, label in HEADLINE
    ]
    tokens = (stats["total_input_tokens"], stats["total_output_tokens"], stats["total_tokens"])
    usage = [
        ("Tokens (input / output / total)", " / ".join(map(str, tokens))),
        (
            "Cost per correct answer: tokens per successful conversation",
            format_fixed(stats.get("cost_per_correct_answer"), 1),
        ),
        ("Tokens per correct turn", format_fixed(stats.get("tokens_per_correct_turn"), 1)),
    ]
    if "cost_per_correct_answer_usd" in stats:
        usd = format_fixed(stats.get("cost_per_correct_answer_usd"), 6)
        usage.append(("Cost per correct answer: USD per successful conversation", usd))
        usage.append(("Total cost (USD)", format_fixed(stats.get("total_cost_usd"), 6)))
    note = estimated_note(stats)
    rows += [[label + note, value, ""] for label, value in usage]
    latency = stats.get("latency_s")
    if latency:
        shown = format_seconds_joined([latency[k] for k in ("mean", "median", "p95")])
        rows.append(["Latency per turn, mean / median / p95", shown, ""])
    return rows


def _count_rows(stats: Mapping[str, Any], input_problems: int) -> list[list[str]]:
    kinds = stats.get("turns_not_scored_call_errors") or {}
    call_errors = str(stats["num_turns_not_scored_call_errors"])
    if kinds:
        call_errors += " (" + ", ".join(f"{k}={v}" for k, v in kinds.items()) + ")"
    return [
        ["Conversations", str(stats["num_conversations"])],
        ["Turns", str(stats["num_turns"])],
        ["Scored turns", str(stats["num_scored_turns"])],
        ["Failed turns (scored, not a numerical match)", str(stats["num_failed_turns"])],
        ["Turns not scored: no gold answer", str(stats["num_turns_not_scored_no_gold"])],
        ["Turns not scored: model call failed", call_errors],
        ["Successful conversations", str(stats["num_successful_conversations"])],
        ["Turns without a prediction", str(stats["num_missing_predictions"])],
        ["Turns whose prediction reports an error", str(stats["num_prediction_errors"])],
        ["Input problems", str(input_problems)],
    ]


def glossary(stats: Mapping[str, Any]) -> list[Term]:
    """Every metric of the report with the spec's formula, tolerances as implemented."""
    rel, tol = RELATIVE_TOLERANCE, ABSOLUTE_TOLERANCE
    factors = ", ".join(f"{f:g}" for f in UNIT_FACTORS)
    intervals = [ci for ci in (stats.get("bootstrap_95_ci") or {}).values() if ci]
    resamples = intervals[0].get("drawn") or intervals[0]["resamples"] if intervals else None
    return [
        Term(
            "Numerical match (baseline)",
            f"|p - r| < {tol} or |p - r| <= {rel} * |r|",
            "p is the parsed prediction, r the gold (executed_answers; percentages as fractions); "
            "yes/no answers match only the same yes/no.",
        ),
        Term(
            "Soft match",
            f"|p - r| <= {rel} * |r|",
            "The spec's formula with no absolute tolerance, so every soft match is a numerical "
            "match.",
        ),
        Term(
            "Unit-agnostic match",
            f"numerical(q * f, r) for f in ({factors}), q any reading of p",
            "Readings: as parsed, percent sign ignored, scale word ignored. Forgives 10% vs 0.10.",
        ),
        Term("Sign-agnostic match", "numerical(|p|, |r|)", "Forgives the sign: -33.3 vs 33.3."),
        Term(
            "General match",
            "numerical(q, r) or numerical(q' / 100, r)",
            "q any reading of p, q' a reading without a percent sign: percentage points for a "
            "fraction gold (14.1 for 0.141).",
        ),
        Term(
            "Accuracy (each match type)",
            "matching scored turns / scored turns",
            "A scored turn has a gold answer and a model call that did not fail.",
        ),
        Term(
            "Logic recall",
            "shared operations / ground-truth operations",
            "Operations of the plan's compute steps against the gold turn_program's, as "
            "multisets (order ignored); extract-only gold: 1 if the plan is extract-only, else 0. "
            "Averaged over turns with a plan and a parsable gold program.",
        ),
        Term("Logic precision", "shared operations / plan operations", "Both empty: 1."),
        Term(
            "Logic order score",
            "LCS(plan operations, gold operations) / max(len(plan), len(gold))",
            "Only the same sequence scores 1.",
        ),
        Term(
            "Operations per turn",
            "compute steps in the turn's plan",
            "Averaged over turns with a plan.",
        ),
        Term(
            "Conversation success",
            "conversations whose every scored turn is a numerical match / conversations with a scored turn",
            "A conversation with no scored turn is left out.",
        ),
        Term(
            "Cost per correct answer",
            "total tokens (input + output) / successful conversations",
            "The spec's formula and name (statistics.json cost_per_correct_answer): tokens per "
            "successful conversation, not per correct turn; the tokens of failed model calls "
            "count (they were spent); n/a when no conversation succeeded.",
        ),
        Term(
            "Tokens per correct turn",
            "total tokens (input + output) / turns that are a numerical match",
            "The same tokens per correct turn (statistics.json tokens_per_correct_turn); n/a "
            "when no turn is a numerical match.",
        ),
        Term(
            "Failed turn",
            "a scored turn that is not a numerical match",
            "It has a failure mode and an errors.csv row; the store's failed items and filter "
            "count the same turns.",
        ),
        Term(
            "Turn not scored",
            "no gold answer, or a model call that failed (a call error)",
            "Neither failed nor correct: left out of every metric, counted apart.",
        ),
        Term(
            "95% interval",
            f"percentile bootstrap over conversations, {resamples or 'no'} resamples, seeded",
            "Each resample draws the conversations with replacement and recomputes the statistic "
            "from their summed counts; the interval is its 2.5th to 97.5th percentile. A resample "
            "that draws no item of a statistic (no conversation scored at that turn position) is "
            "left out of its interval: statistics.json's resamples says how many were kept of "
            "those drawn.",
        ),
        Term(
            "Failure mode",
            "error > no_answer > scale > sign > rounding > wrong",
            "The first that applies to a failed scored turn.",
        ),
    ]


def build_report(result: NumericResult, images: Mapping[str, Path]) -> Report:
    """The report of a scored run (everything from ``result``; ``images`` from ``write_plots``)."""
    stats = result.statistics
    report = Report(TITLE, signature=str(stats.get("signature", "")))
    nothing = bool(stats.get("nothing_scored", True))
    if nothing:
        report.paragraph(
            "NOTHING SCORED: "
            + str(stats.get("nothing_scored_reason") or "no turn was scored")
            + ". No metric exists for this run, so none is shown."
        )
    else:
        report.heading("Headline")
        report.table(["Metric", "Value", "95% interval"], _headline_rows(stats), text_columns=0)
    report.heading("Counts")
    report.table(["What", "Count"], _count_rows(stats, len(result.input_errors)), text_columns=0)
    if not nothing:
        positions = turn_positions(stats)
        report.heading("Accuracy by turn")
        report.paragraph(
            "Numerical-match accuracy of the scored turns at each turn position, with its 95% "
            "bootstrap interval, and the average number of operations in the plans there. A "
            "resample that draws no conversation scored at a position says nothing about it and "
            "is left out of that position's interval: Resamples says how many were kept."
        )
        report.table(
            ["Turn", "Scored turns", "Accuracy", "95% interval", "Resamples", "Avg operations"],
            [
                [
                    str(p.turn),
                    str(p.scored),
                    f"{p.accuracy:.3f}",
                    "" if p.low is None or p.high is None else f"[{p.low:.3f}, {p.high:.3f}]",
                    _kept(p.kept, p.drawn),
                    format_fixed(p.operations, 2),
                ]
                for p in positions[:MAX_TURN_INTERVALS]
            ],
            text_columns=0,
        )
        if len(positions) > MAX_TURN_INTERVALS:
            report.paragraph(
                f"{len(positions) - MAX_TURN_INTERVALS} later turn positions are left out of "
                "this table and the plot (statistics.json has them all)."
            )
        report.heading("Match types")
        numerical = float(stats["numerical_match_accuracy"])
        ci = stats.get("bootstrap_95_ci") or {}
        report.table(
            ["Match type", "Accuracy", "95% interval", "Above numerical"],
            [
                [name, f"{stats[key]:.3f}", _interval(ci.get(key)), _points(stats[key] - numerical)]
                for key, name in MATCH_TYPES
            ],
            text_columns=0,
        )
        modes = stats.get("failure_modes") or {}
        report.heading("Failure modes")
        failed = sum(modes.values())
        if failed:
            report.table(
                [
                    "Failure mode",
                    "Turns",
                    "Share of failed turns",
                    "Share of scored turns",
                    "Meaning",
                ],
                [
                    [
                        mode,
                        str(count),
                        f"{count / failed:.3f}",
                        f"{count / stats['num_scored_turns']:.3f}",
                        FAILURE_MEANING.get(mode, ""),
                    ]
                    for mode, count in sorted(modes.items(), key=lambda kv: (-kv[1], kv[0]))
                ],
                text_columns=0,
            )
        else:
            report.paragraph("No scored turn failed.")
        by_ops = result.tallies.by_operations
        if by_ops:
            report.heading("Operations and accuracy")
            report.paragraph(
                "Numerical-match accuracy by the number of operations in the model's plan (the "
                "spec's operations per turn; its Analysis Workflow 2 groups turns.csv this way)."
            )
            report.table(
                ["Plan operations", "Scored turns", "Accuracy"],
                [[str(r.operations), str(r.scored), f"{r.correct / r.scored:.3f}"] for r in by_ops],
                text_columns=0,
            )
        report.heading("What the numbers say")
        found = readings(result)
        if found:
            report.bullets(found)
        else:
            report.paragraph("None of the spec's analysis readings applies.")
        report.heading("Worst conversations")
        worst = result.tallies.worst[:WORST]
        if worst:
            report.table(
                ["Conversation", "Turns", "Scored", "Accuracy", "First failure"],
                worst,
                text_columns=1,
            )
        else:
            report.paragraph("Every scored conversation is a numerical match on every turn.")
    report.heading("Input problems")
    if result.input_errors:
        shown = [e.one_line() for e in result.input_errors[:INPUT_PROBLEMS]]
        more = len(result.input_errors) - len(shown)
        report.paragraph(
            f"{len(result.input_errors)} input problem(s)"
            + (f"; the first {len(shown)}:" if more else ":")
            + " every one is in input_errors.csv."
        )
        report.bullets(shown)
    else:
        report.paragraph("None.")
    report.images(images)
    report.glossary(glossary(stats))
    return report


def write_numeric_report(result: NumericResult, out: str | Path | OutputFolder) -> dict[str, Path]:
    """The plots (none when nothing was scored), report.md and report.html in ``out``, each
    under a temporary name; returns file name -> path."""
    images = write_plots(result, out)
    written = {path.name: path for path in images.values()}
    written |= write_report(out, build_report(result, images))
    return written
