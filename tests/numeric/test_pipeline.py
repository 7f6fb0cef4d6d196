"""Numeric QA through the one pipeline (``core.score``, issue 27 item 2): the stored settings
are checked by the system before anything is written, and the outcome carries the numbers of
statistics.json, the files at their place and the values ``--fail-under`` gates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fieldcheck import core
from fieldcheck._util.errors import UsageProblem
from fieldcheck.reports import PARTIAL

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "numeric"

INPUTS = [
    ("data", EXAMPLES / "data.json"),
    ("predictions", EXAMPLES / "predictions_model_a.jsonl"),
]


@pytest.mark.parametrize(
    ("settings", "param", "message"),
    [
        ({"price_in": 1.0}, "--price-in/--price-out", "give --price-in and --price-out together"),
        ({"sample_size": 0}, "--sample-size", "greater than or equal to 1 (got 0)"),
        ({"seed": True}, "--seed", "must be a whole number >= 0 (got True)"),
        ({"seed": -1}, "--seed", "must be a whole number >= 0 (got -1)"),
        ({"bootstrap": -1}, "--bootstrap", "must be a whole number >= 0 (got -1)"),
    ],
)
def test_bad_stored_settings_are_a_usage_problem_naming_the_option_before_any_write(
    tmp_path: Path, settings: dict[str, Any], param: str, message: str
) -> None:
    out = tmp_path / "out"
    with pytest.raises(UsageProblem) as bad:
        core.score("numeric", INPUTS, settings, out=out, command="numeric score", store=False)
    assert bad.value.param == param and message in bad.value.message
    assert not out.exists() and not Path(f"{out}{PARTIAL}").exists()


def test_missing_input_role_is_a_usage_problem(tmp_path: Path) -> None:
    with pytest.raises(UsageProblem, match="missing input"):
        core.score("numeric", INPUTS[:1], {}, out=tmp_path / "o", command="x", store=False)


def test_the_outcome_holds_the_numbers_of_statistics_json(tmp_path: Path) -> None:
    out = tmp_path / "out"
    outcome = core.score(
        "numeric", INPUTS, {"bootstrap": 0}, out=out, command="numeric score", store=False
    )
    statistics = json.loads((out / "statistics.json").read_text())
    scored = outcome.scored
    assert statistics["numerical_match_accuracy"] == pytest.approx(44 / 51)  # 51 turns, 7 failed
    assert scored.summary == statistics and statistics["complete"] is True
    assert scored.metrics["numerical_match_accuracy"] == statistics["numerical_match_accuracy"]
    assert scored.gate[""]["conversation_success_rate"] == statistics["conversation_success_rate"]
    assert scored.failed is False and outcome.run_id is None
    assert scored.files["statistics.json"] == out / "statistics.json"
    assert scored.files["turns.csv"].read_text().startswith("conversation_id,")
    assert json.loads((out / "run.json").read_text())["complete"] is True


def test_the_sample_size_a_signature_shows_is_a_setting_it_takes(tmp_path: Path) -> None:
    """A run without a sample shows ``sample_size: "all"`` in its signature; passed back as a
    setting it was refused (``must be a valid integer``): it is the same run as none."""

    def signature(out: str, settings: dict[str, Any]) -> dict[str, Any]:
        core.score("numeric", INPUTS, settings, out=tmp_path / out, command="x", store=False)
        stats = json.loads((tmp_path / out / "statistics.json").read_text())
        return dict(stats["signature_settings"]["settings"])

    shown = signature("none", {"bootstrap": 0})
    assert shown["sample_size"] == "all"
    passed_back = signature("all", {"bootstrap": 0, "sample_size": shown["sample_size"]})
    assert passed_back == shown


def test_a_sample_size_of_every_conversation_is_recorded_as_no_sample(
    tmp_path: Path, chat_server: Any
) -> None:
    """``--sample-size 1000`` of the 12 conversations of the split scores them all, and says so:
    `numeric score` and `numeric evaluate` record it as a run without it does (signature, stored
    settings, a model run's key), so `runs compare` sees one setting (it recorded
    ``sample_size: 1000``: a tester's finding)."""
    from typer.testing import CliRunner

    from fieldcheck._cli.main import app
    from fieldcheck.store import Store

    data, preds = (str(path) for _, path in INPUTS)
    server = chat_server(lambda body: "{}")

    def run(out: str, *args: str) -> tuple[str, str]:
        """The command's stderr, and the signature of its statistics.json."""
        result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / out), "--bootstrap", "0"])
        assert result.exit_code == 0, result.output
        stats = json.loads((tmp_path / out / "statistics.json").read_text())
        return result.stderr, stats["signature"]

    score = ["numeric", "score", "--data", data, "--predictions", preds]
    evaluate = ["numeric", "evaluate", "--data", data, "--model", "m", "--base-url"]
    evaluate += [server.base_url, "--no-progress"]
    said = "--sample-size 1000: the dev split has 12 conversations; all are scored, as without"
    for command in (score, evaluate):
        name = command[1]
        err, big = run(f"{name}-1000", *command, "--sample-size", "1000")
        assert run(f"{name}-all", *command)[1] == big
        assert said in err
        assert "sample_size:all" in big
    runs = {Path(r.out_dir or "").name: r for r in Store().list_runs()}
    assert runs["score-1000"].settings == runs["score-all"].settings
    assert runs["evaluate-1000"].settings == runs["evaluate-all"].settings
    assert runs["evaluate-1000"].run_key == runs["evaluate-all"].run_key
    assert runs["evaluate-all"].settings["sample_size"] is None
