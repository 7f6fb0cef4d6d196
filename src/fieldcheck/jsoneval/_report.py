"""The JSON batch report: report.md and report.html (the shared skeleton, every value from the
data escaped), plots of per-field match rates and score distributions, and a glossary of the
metrics with json-evaluation.md's formulas (issue 9, "Reports and gating")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fieldcheck.jsoneval._models import BatchSummary, FieldSummary
from fieldcheck.jsoneval._stream import HISTOGRAM_BINS, HISTOGRAMS, SCORES, Aggregate
from fieldcheck.metrics import Interval
from fieldcheck.reports import (
    OutputFolder,
    Report,
    Term,
    count_axis,
    figure,
    format_fixed,
    label,
    write_report,
)

SCORE_NAMES = {name: "RQS" if name == "rqs" else name for name in SCORES}
PLOT_FIELDS = 30  # the match-rate plot shows at most this many fields (the lowest rates)
ERRORS_SHOWN = 20


def _interval(ci: Interval | None) -> str:
    return "n/a" if ci is None else f"[{ci.low:.3f}, {ci.high:.3f}]"


def fields_by_match_rate(summary: BatchSummary) -> list[tuple[str, FieldSummary]]:
    """Every field, the lowest match rate first; fields never scored (no rate) last, by name."""
    return sorted(
        summary.fields.items(),
        key=lambda nf: (nf[1].match_rate is None, nf[1].match_rate or 0.0, nf[0]),
    )


@dataclass
class ReportData:
    """What the report shows, all of it bounded: the summary, the worst records and a histogram
    over [0, 1] of each score in ``HISTOGRAMS``, accumulated chunk by chunk."""

    summary: BatchSummary
    worst: list[tuple[str, str, float, float, float, float]]
    histograms: dict[str, np.ndarray]

    @classmethod
    def of(cls, summary: BatchSummary, agg: Aggregate) -> ReportData:
        worst = [
            (str(r.id), r.unmatched(), r.scores[4], r.scores[0], r.scores[1], r.scores[2])
            for r in agg.worst()
        ]
        return cls(summary, worst, agg.histograms)


def plotted_fields(summary: BatchSummary) -> tuple[list[tuple[str, FieldSummary]], int]:
    """The scored fields the match-rate plot shows (the PLOT_FIELDS lowest rates, lowest first)
    and how many scored fields it leaves out."""
    rated = [(n, f) for n, f in fields_by_match_rate(summary) if f.match_rate is not None]
    return rated[:PLOT_FIELDS], max(0, len(rated) - PLOT_FIELDS)


def match_rate_title(shown: int, left_out: int) -> str:
    title = "Match rate per field"
    return title + (f" (the {shown} lowest; {left_out} more not shown)" if left_out else "")


def write_plots(batch: ReportData, out: OutputFolder) -> dict[str, Path]:
    """``plot_field_match_rate.png`` (when a field was scored) and ``plot_score_distribution.png``
    (when a record was scored), each saved under a temporary name then renamed."""
    written: dict[str, Path] = {}
    shown, left_out = plotted_fields(batch.summary)
    if shown:
        path = out / "plot_field_match_rate.png"
        with figure(path, figsize=(8, max(2.5, 0.32 * len(shown) + 1.3))) as (_, ax):
            ax.barh(range(len(shown)), [f.match_rate for _, f in shown], color="#4c72b0")
            ax.set_yticks(range(len(shown)), [label(n, 36) for n, _ in shown])
            ax.invert_yaxis()  # the lowest rate on top
            ax.set_xlim(0, 1)
            ax.set_xlabel("match rate (matched / scored)")
            ax.set_title(match_rate_title(len(shown), left_out))
        written["plot_field_match_rate"] = path
    if batch.summary.scored:
        path = out / "plot_score_distribution.png"
        edges = np.linspace(0.0, 1.0, HISTOGRAM_BINS + 1)
        with figure(path, nrows=2, ncols=2, figsize=(9, 6)) as (fig, axes):
            for ax, score in zip(axes.flat, HISTOGRAMS, strict=True):
                counts = batch.histograms[score]
                ax.hist(edges[:-1], bins=edges, weights=counts, color="#4c72b0", edgecolor="white")
                ax.set_title(SCORE_NAMES[score])
                ax.set_xlim(0, 1)
                ax.set_ylabel("records")
                count_axis(ax.yaxis)
            fig.suptitle(f"Per-record scores ({batch.summary.scored} scored records)")
        written["plot_score_distribution"] = path
    return written


def _matcher(settings: dict[str, Any], family: str) -> str:
    described = settings.get(family)
    if not isinstance(described, dict):
        return "the matcher"
    return ", ".join(f"{k}={v}" for k, v in described.items())


def glossary(summary: BatchSummary) -> list[Term]:
    """The metrics with json-evaluation.md's formulas, the weights and thresholds of this run."""
    settings: dict[str, Any] = summary.signature.settings
    w = settings.get("weights", {})
    weights = ", ".join(
        f"w_{k}={w[k]:g}" for k in ("accuracy", "completeness", "hallucination", "safety") if k in w
    )
    fuzzy = settings.get("fuzzy_threshold", "fuzzy_threshold")
    semantic = settings.get("semantic_threshold", "semantic_threshold")
    resamples = settings.get("bootstrap")
    return [
        Term(
            "completeness",
            "completeness = aio_matched_non_null_count / gt_non_null_count",
            "aio_matched_non_null_count = len(both_non_null), gt_non_null_count = len(gt_non_null);"
            " 1.0 when gt_non_null_count == 0 (nothing expected, fully complete). Higher is better."
            " Spec Phase 1.",
        ),
        Term(
            "hallucination",
            "hallucination = hallucination_count / total_distinct",
            "hallucination_count = len(extra_keys) + len(gt_null_aio_has_value); total_distinct ="
            " len(gt_keys ∪ aio_keys), regardless of null status; 0.0 when total_distinct == 0."
            " Lower is better. Spec Phase 2.",
        ),
        Term(
            "accuracy",
            "accuracy = total_acc_score / scorable_count",
            "over both_non_null keys: scorable_count = len(both_non_null) - len(ignored),"
            " total_acc_score = sum of individual field scores (0 or 1 each); 1.0 when"
            " scorable_count == 0 (nothing to score). Spec Phase 3.",
        ),
        Term(
            "safety_score",
            "safety_score in [0, 1]",
            "used by RQS, not defined by the spec: 1.0 unless the record carries its own"
            " safety_score or --safety-check leaks finds a leak (then 0.0).",
        ),
        Term(
            "RQS",
            "rqs = (w_accuracy × accuracy) + (w_completeness × completeness)"
            " + (w_safety × safety_score) - (w_hallucination × hallucination);"
            " rqs = clamp(rqs, 0.0, 1.0)",
            f"Response Quality Score. Weights used: {weights or 'n/a'} (spec defaults"
            " w_accuracy=0.45, w_completeness=0.25, w_hallucination=0.15, w_safety=0.15)."
            " Spec Phase 4.",
        ),
        Term("extra_keys", "Key in AIO but not in GT", "hallucination numerator. Spec Phase 0."),
        Term(
            "gt_null_aio_has_value",
            "Key in GT, GT value is null, key in AIO, AIO value is not null",
            "hallucination numerator. Null: None, empty or whitespace-only string. Spec Phase 0.",
        ),
        Term("gt_non_null", "Key in GT and GT value is not null", "completeness denominator."),
        Term(
            "aio_missing_or_null",
            "Key in gt_non_null but (key not in AIO or AIO value is null)",
            "completeness numerator loss (the 'missing' column).",
        ),
        Term(
            "both_non_null",
            "Key in both GT and AIO, both values are not null",
            "the accuracy candidates.",
        ),
        Term(
            "EXACT",
            "str(gt).lower() == str(aio).lower() (JSON-sorted for dict/list)",
            "score 0 or 1.",
        ),
        Term(
            "FUZZY",
            "LLM fuzzy similarity → score vs fuzzy_threshold",
            f"score 1 when the similarity is >= fuzzy_threshold = {fuzzy} in this run, else 0;"
            f" similarity from {_matcher(settings, 'fuzzy')}.",
        ),
        Term(
            "SEMANTIC",
            "LLM semantic similarity → score vs semantic_threshold",
            f"score 1 when the similarity is >= semantic_threshold = {semantic} in this run,"
            f" else 0; similarity from {_matcher(settings, 'semantic')}.",
        ),
        Term("IGNORE", "Field excluded from accuracy denominator entirely", "no score."),
        Term(
            "failed",
            "a scored record with a field scored below 1, missing, hallucinated or extra, or an"
            " output that is not an object",
            "counted in summary.json's failed, the store's failed items and their filter; the"
            " fields it failed on are its tags in the store.",
        ),
        Term(
            "not scored",
            "a line or record that could not be scored (invalid line or record, judge error)",
            "listed in errors.jsonl; neither failed nor passed; exit status 3. A json run's call"
            " errors give no output and are in call_errors.jsonl, not among the records.",
        ),
        Term(
            "match rate",
            "matched / scored",
            "per field over the batch (fieldcheck's, not the spec's); n/a when never scored.",
        ),
        Term(
            "95% CI",
            "2.5th and 97.5th percentiles of the resampled means",
            f"percentile Poisson bootstrap over the scored records ({resamples} resamples, seed"
            f" {settings.get('seed')}); absent with --bootstrap 0.",
        ),
    ]


def build_report(batch: ReportData, images: dict[str, Path]) -> Report:
    """The report of a scored batch (plots already written; ``images`` by key)."""
    s = batch.summary
    report = Report("JSON evaluation", signature=s.signature.format())
    report.heading("Scores")
    if s.scored:
        given = ", with 95% bootstrap intervals" if s.signature.settings.get("bootstrap") else ""
        report.paragraph(f"Means over {s.scored} scored records{given}.")
        report.table(
            ["score", "mean", "95% CI"],
            [
                [SCORE_NAMES[k], format_fixed(s.means[k]), _interval(s.ci.get(k))]
                for k in SCORE_NAMES
            ],
            text_columns=1,
        )
    else:
        report.paragraph("No record was scored: no means, intervals or plots.")
    report.bullets(
        [
            f"records: {s.records}",
            f"scored: {s.scored}",
            f"failed: {s.failed}",
            f"not scored: {s.not_scored}",
            f"not an object: {s.not_an_object}",
            f"safety leaks: {s.safety_flagged}",
        ]
    )
    report.heading("Fields")
    fields = fields_by_match_rate(s)
    if fields:
        report.paragraph("Every field, the lowest match rate first.")
        counts = ("expected", "scored", "matched", "match_rate", "missing", "hallucinated")
        report.table(
            ["field", "strategies", *(c.replace("_", " ") for c in counts)],
            [
                [name, ",".join(f.strategies)]
                + [
                    format_fixed(f.match_rate) if c == "match_rate" else str(getattr(f, c))
                    for c in counts
                ]
                for name, f in fields
            ],
            text_columns=2,
        )
    else:
        report.paragraph("No field in any scored record.")
    if "plot_field_match_rate" not in images:
        report.paragraph("No field was scored: no match-rate plot.")
    worst = batch.worst
    if worst:
        report.heading("Worst records")
        report.paragraph(f"The {len(worst)} lowest RQS.")
        report.table(
            ["id", "fields not matched", "RQS", "completeness", "hallucination", "accuracy"],
            [[rid, unmatched, *map(format_fixed, scores)] for rid, unmatched, *scores in worst],
            text_columns=2,
        )
    if s.errors:
        report.heading("Input problems")
        items = list(s.errors[:ERRORS_SHOWN])
        if max(s.not_scored, len(s.errors)) > ERRORS_SHOWN:
            items.append(f"{max(s.not_scored, len(s.errors)) - ERRORS_SHOWN} more in errors.jsonl")
        report.bullets(items)
    report.images(images)
    report.glossary(glossary(s))
    return report


def write_batch_report(out: str | Path | OutputFolder, batch: ReportData) -> dict[str, Path]:
    """Plots, report.md and report.html of a scored batch into ``out``: their paths by key."""
    folder = OutputFolder.of(out)
    images = write_plots(batch, folder)
    written = write_report(folder, build_report(batch, images))
    return {**images, "report_md": written["report.md"], "report_html": written["report.html"]}
