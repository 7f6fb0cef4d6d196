"""Writing a scored run: metrics.json, CSVs, report.md, report.html (all values escaped), plots."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fieldcheck._util.errors import error_dicts
from fieldcheck._util.jsonio import write_jsonl
from fieldcheck.metrics import Interval
from fieldcheck.reports import (
    LEGEND_OUTSIDE,
    Inline,
    OutputFolder,
    Report,
    Strong,
    Term,
    count_axis,
    figure,
    format_fixed,
    format_seconds,
    format_seconds_joined,
    label,
    write_csv,
    write_report,
)
from fieldcheck.slots._score import (
    CI_METRICS,
    Counts,
    LatencySummary,
    ModelResult,
    ModelScore,
    SlotsRun,
    TopicResult,
    reasons_text,
)
from fieldcheck.slots._summary import (
    Item,
    key_findings,
    not_scored_lines,
    results_summary,
    topic_f1,
)

METRIC_COLUMNS = tuple(ModelResult.model_fields)[:9]
"""The metrics of a model, ``precision`` to ``llm_judge`` (metrics.csv's and the report's order)."""
CSV_COLUMNS = [
    "model",
    *METRIC_COLUMNS,
    *(f"latency_{k}" for k in LatencySummary.model_fields),
    "extra_slots",
    "extra_values",
    *Counts.model_fields,
    *[f"{m}_ci_{end}" for m in CI_METRICS for end in ("low", "high")],
    "sessions_not_scored",
]
TOPIC_COLUMNS = ["model", "topic", *TopicResult.model_fields]
PLOT_TOPICS = 30
"""At most this many topics in a per-topic plot (a figure per topic column would grow without
bound: 3,000 topics made a 594,174 px wide heatmap); tables and CSVs keep every topic."""
PLOTS = {
    "prf1": "plot_prf1.png",
    "topic_f1": "plot_topic_f1_heatmap.png",
    "latency": "plot_latency.png",
    "extra": "plot_extra_slots_by_topic.png",
}


def topic_lines(result: ModelResult) -> list[str]:
    """The spec's per-topic printout: ``  topic  P=0.000 R=0.000 F1=0.000`` sorted by topic."""
    return [
        f"  {topic:20s} P={t.precision:.3f} R={t.recall:.3f} F1={t.f1:.3f}"
        for topic, t in sorted(result.per_topic.items())
    ]


def metrics_rows(run: SlotsRun) -> list[dict[str, Any]]:
    """A row per model in the given order; a model with nothing scored has empty metrics."""
    rows: dict[str, dict[str, Any]] = {}
    for u in run.unscored:
        rows[u.name] = {"model": u.name, "sessions": 0, "sessions_not_scored": u.not_scored}
    for m in run.models:
        r = m.result
        row: dict[str, Any] = {"model": m.name, **{k: getattr(r, k) for k in METRIC_COLUMNS}}
        if r.latency is not None:
            row |= {f"latency_{k}": v for k, v in r.latency.model_dump().items()}
        row |= {
            "extra_slots": r.extra_slots,
            "extra_values": r.extra_values,
            **r.counts.model_dump(),
        }
        for name, ci in r.ci.items():
            if ci is not None:
                row[f"{name}_ci_low"], row[f"{name}_ci_high"] = ci.low, ci.high
        row["sessions_not_scored"] = m.not_scored
        rows[m.name] = row
    return [rows[n] for n in run.names or list(rows) if n in rows]


def topic_rows(run: SlotsRun) -> list[dict[str, Any]]:
    return [
        {"model": m.name, "topic": topic, **t.model_dump()}
        for m in run.models
        for topic, t in m.result.per_topic.items()
    ]


def write_outputs(run: SlotsRun, out_dir: str | Path | OutputFolder) -> dict[str, Path]:
    """Write every output file of a run into ``out_dir``, each under a temporary name then
    renamed, metrics.json last with ``complete: true``; returns name -> path."""
    out = OutputFolder.of(out_dir)
    names = ("metrics.csv", "per_topic.csv", "errors.jsonl", "report.md", "report.html")
    out.expect(*names, "metrics.json")
    files = {name: out / name for name in ("metrics.json", *names)}
    with out.atomic("metrics.csv") as tmp:
        write_csv(tmp, metrics_rows(run), CSV_COLUMNS)
    with out.atomic("per_topic.csv") as tmp:
        write_csv(tmp, topic_rows(run), TOPIC_COLUMNS)
    with out.atomic("errors.jsonl") as tmp:
        write_jsonl(tmp, error_dicts(run.errors))
    images = write_plots(run, out)
    files |= {p.name: p for p in images.values()}
    write_report(out, build_report(run, images))
    out.write_summary("metrics.json", run.metrics_json())
    return files


# The spec's metrics (slot-extraction-benchmark.md, sections 1-15), quoted as it writes them.
GLOSSARY = (
    Term("Precision", "Precision = TP / (TP + FP)", "share of predicted gold slots that are true positives (spec 1)"),
    Term("Recall", "Recall = TP / (TP + FN)", "share of gold slots the model predicted (spec 2)"),
    Term("F1", "F1 = 2 × (Precision × Recall) / (Precision + Recall)", "harmonic mean, computed from the counts (spec 3)"),
    Term("Exact match", "Exact Match = (Number of slots with exact match) / (Total slots)", "value sets equal after canonicalisation, over all gold slots, missed ones included (spec 4)"),
    Term("LLM judge", "mean judge score in [0, 1]", "a judge model's score of each predicted gold slot; absent without a judge, never 0 (spec 5)"),
    Term("Token precision / recall / F1", "Matched Tokens / Total Predicted Tokens; Matched Tokens / Total Ground Truth Tokens", "token overlap of the values, F1 as above (spec 6-8)"),
    Term("BLEU-1", "BLEU-1 = Precision × Brevity Penalty", "unigram precision times exp(1 - r/c) when the prediction is shorter (spec 9)"),
    Term("Latency", "mean, median, p95 = sorted[max(int(n × 0.95) - 1, 0)], total", "time per session (spec 10-13), shown in ms below a second and in s above; the files keep seconds"),
    Term("Extra slots / values", "predicted slots (values) absent from the gold", "hallucinated slots and values (spec 14-15)"),
    Term("95% interval", "percentile bootstrap over sessions", "seeded (--seed), --bootstrap resamples; paired p-values resample both models' sessions together"),
)  # fmt: skip


def _ci(ci: Interval | None) -> str:
    return "" if ci is None else f" [{ci.low:.3f}, {ci.high:.3f}]"


_SCORES = ["Precision", "Recall", "F1", "Exact match"]  # the first four METRIC_COLUMNS
_EXTRA = ["Extra slots", "Extra values"]


def _metric_table(run: SlotsRun) -> tuple[list[str], list[list[str]]]:
    head = [
        "Model",
        *_SCORES,
        "Token P",
        "Token R",
        "Token F1",
        "BLEU-1",
        "LLM judge",
        "Latency mean / median / p95 / total",
        *_EXTRA,
    ]
    rows = []
    for m in run.models:
        r = m.result
        lat = (
            "n/a"
            if r.latency is None
            else format_seconds_joined(list(r.latency.model_dump().values()))
        )
        rows.append(
            [
                m.name,
                *(format_fixed(getattr(r, name)) + _ci(r.ci.get(name)) for name in METRIC_COLUMNS),
                lat,
                str(r.extra_slots),
                str(r.extra_values),
            ]
        )
    return head, rows


def _topic_table(run: SlotsRun) -> tuple[list[str], list[list[str]]]:
    head = ["Model", "Topic", *_SCORES, *_EXTRA]
    rows = [
        [
            m.name,
            topic,
            *(format_fixed(getattr(t, name)) for name in METRIC_COLUMNS[:4]),
            str(t.extra_slots),
            str(t.extra_values),
        ]
        for m in run.models
        for topic, t in m.result.per_topic.items()
    ]
    return head, rows


def _phrases(items: Sequence[Item]) -> Inline:
    """A summary cell: its phrases joined by commas, the spec's verdicts in bold; "-" if none."""
    cell: list[str | Strong] = []
    for item in items:
        cell += [", "] if cell else []
        cell.append(Strong(item.text) if item.bold else item.text)
    return cell or "-"


def _summary_rows(run: SlotsRun) -> list[list[Inline]]:
    """The Results Summary: a row per scored model, then the models with nothing scored (no F1,
    the reason instead)."""
    rows: list[list[Inline]] = []
    for row in results_summary(run):
        name, f1 = row.model, f"{row.f1:.3f}"
        lead = [Strong(name), Strong(f1)] if row.best_f1 else [name, f1]
        latency = format_seconds(row.latency_mean)
        rows.append([*lead, latency, _phrases(row.strengths), _phrases(row.weaknesses)])
    for u in run.unscored:
        why = f"({reasons_text(u.sessions_not_scored)})"
        why = f"nothing scored: the call failed for all {u.not_scored} session(s) {why}"
        rows.append([u.name, "not scored", "n/a", "-", why])
    return rows


_NOT_SCORED_NOTE = (
    "A session whose model call failed (rate_limited, server_error, timeout, connection, "
    "bad_request, context_length, bad_response) is not scored for that model: its gold slots are not counted as missed. "
    "An invalid reply is the model's failure and is scored (its gold slots are missed)."
)


def build_report(run: SlotsRun, images: Mapping[str, Path]) -> Report:
    """The report: Results Summary, Key findings, metric tables, input problems, plots, glossary."""
    report = Report("Slot extraction benchmark", signature=run.signature.format())
    report.heading("Results Summary")
    report.table(["Model", "F1", "Latency", "Strengths", "Weaknesses"], _summary_rows(run))
    report.paragraph(
        "Latency is the mean time per session (ms below a second). The rules that write "
        "Strengths, Weaknesses and Key findings are listed in docs/slots.md."
    )
    lines = not_scored_lines(run)
    if lines:
        report.heading("Sessions not scored", level=3)
        report.bullets(lines)
        report.paragraph(_NOT_SCORED_NOTE)
    report.heading("Key findings", level=3)
    report.numbered([(Strong(f.title), f.bullets) for f in key_findings(run)])
    report.heading("Metrics")
    if run.signature.settings.get("bootstrap"):
        report.paragraph("Brackets: 95% bootstrap interval over sessions.")
    else:
        report.paragraph("No intervals (--bootstrap 0).")
    report.table(*_metric_table(run), text_columns=1)
    report.heading("Per topic")
    report.table(*_topic_table(run), text_columns=2)
    if run.errors or run.warnings:
        report.heading("Input problems")
        problems = [f"warning: {w}" for w in run.warnings]
        problems += [f"error: {e.one_line()}" for e in run.errors[:50]]
        if len(run.errors) > 50:
            problems.append(f"... {len(run.errors) - 50} more errors in errors.jsonl")
        report.bullets(problems)
    report.images(images)
    report.glossary(GLOSSARY)
    return report


def render_markdown(run: SlotsRun, images: Mapping[str, Path] | None = None) -> str:
    """report.md's text."""
    return build_report(run, images or {}).markdown()


def plot_topics(run: SlotsRun, *, by: str) -> list[str]:
    """The topics a per-topic plot shows, in topic order: the ``PLOT_TOPICS`` with the most gold
    (``by="gold"``) or extra slots, ties by the other count (docs/slots.md "Plots of many
    topics")."""
    topics = run.topics
    if len(topics) <= PLOT_TOPICS:
        return list(topics)
    gold = run.topic_gold_slots
    extra = {t: sum(_extra(m, t) for m in run.models) for t in topics}
    first, second = (gold, extra) if by == "gold" else (extra, gold)
    ranked = sorted(topics, key=lambda t: (-first.get(t, 0), -second.get(t, 0), t))
    return sorted(ranked[:PLOT_TOPICS])


def _extra(m: ModelScore, topic: str) -> int:
    t = m.result.per_topic.get(topic)
    return 0 if t is None else t.extra_slots


def topics_title(title: str, shown: int, total: int, ranked_by: str) -> str:
    if shown == total:
        return title
    return (
        f"{title}: the {shown} of {total:,} topics with the most {ranked_by}\n"
        f"({total - shown:,} left out; every topic is in per_topic.csv and the report's table)"
    )


def write_plots(run: SlotsRun, out: str | Path | OutputFolder) -> dict[str, Path]:
    """PNG plots (``reports.figure``: Agg, imported on first use); returns key -> path."""
    import numpy as np

    folder = OutputFolder.of(out)  # the prepared folder when ``out`` is its path
    written: dict[str, Path] = {}
    if not run.models:
        return written
    names = [label(m.name) for m in run.models]
    x = np.arange(len(names))

    def plot(key: str, size: tuple[float, float]) -> Any:
        written[key] = folder / PLOTS[key]
        return figure(written[key], figsize=size)

    with plot("prf1", (max(6.5, 1.6 * len(names) + 1.5), 4)) as (_, ax):
        width = 0.27
        for i, key in enumerate(("precision", "recall", "f1")):
            values = [getattr(m.result, key) for m in run.models]
            ax.bar(x + (i - 1) * width, values, width, label=key)
        ax.set_xticks(x, names, rotation=20, ha="right")
        ax.set_ylim(0, 1)
        ax.set_ylabel("score (0-1)")
        ax.set_title("Precision, recall and F1 per model")
        ax.legend(**LEGEND_OUTSIDE)

    if run.topics:
        topics = plot_topics(run, by="gold")
        # None -> NaN (drawn blank, labelled "-"): the model has no gold and no prediction in the topic
        grid = np.array([[topic_f1(m, t) for t in topics] for m in run.models], dtype=float)
        # room for the longest model name on the left and the slanted topic names below
        wide = 0.09 * max(len(n) for n in names)
        tall = 0.05 * max(len(label(t)) for t in topics)
        per = 1.8 if len(topics) <= 10 else 1.0
        size = (max(5, per * len(topics) + wide + 1.5), max(3, 0.7 * len(names) + 1.5 + tall))
        with plot("topic_f1", size) as (fig, ax):
            image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
            ax.set_xticks(
                np.arange(len(topics)), [label(t) for t in topics], rotation=20, ha="right"
            )
            ax.set_yticks(x, names)
            for (i, j), value in np.ndenumerate(grid):
                color = "w" if value < 0.6 else "k"
                text = "-" if np.isnan(value) else f"{value:.2f}"
                ax.text(j, i, text, ha="center", va="center", color=color)
            fig.colorbar(image, ax=ax, label="F1")
            ax.set_title(topics_title("F1 per topic", len(topics), len(run.topics), "gold slots"))

        topics = plot_topics(run, by="extra")
        with plot("extra", (max(6.5, per * len(topics) + 1.5), 4)) as (_, ax):
            tx = np.arange(len(topics))
            width = 0.8 / len(run.models)
            for i, m in enumerate(run.models):
                extra = [_extra(m, t) for t in topics]
                ax.bar(tx + i * width - 0.4 + width / 2, extra, width, label=names[i])
            ax.set_xticks(tx, [label(t) for t in topics], rotation=20, ha="right")
            ax.set_ylabel("extra slots")
            count_axis(ax.yaxis)
            ranked_by = "extra slots over all models"
            title = "Extra (hallucinated) slots per topic"
            ax.set_title(topics_title(title, len(topics), len(run.topics), ranked_by))
            ax.legend(title="model", **LEGEND_OUTSIDE)

    seconds = [list(m.session_seconds.values()) for m in run.models]  # in the order scored
    timed = [(names[i], secs) for i, secs in enumerate(seconds) if secs]
    if not timed:
        return written
    with plot("latency", (max(5, 1.6 * len(timed)), 4)) as (_, ax):
        in_ms = max(max(secs) for _, secs in timed) < 1  # the report's units: ms below a second
        scale = 1000 if in_ms else 1
        ax.boxplot([[s * scale for s in secs] for _, secs in timed], showmeans=True)
        ax.set_xticks(np.arange(1, len(timed) + 1), [n for n, _ in timed], rotation=20, ha="right")
        ax.set_ylabel("ms per session" if in_ms else "seconds per session")
        ax.set_title("Latency per session (line: median, triangle: mean)")
    return written
