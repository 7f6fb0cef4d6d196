"""The options every run command shares: models, URLs and keys are checked before any call."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from fieldcheck._cli._runopts import model_specs


def _specs(**kw: object) -> list[str]:
    specs = model_specs(**{"models": None, "models_file": None, "base_url": None, **kw})  # type: ignore[arg-type]
    return [s.name for s in specs]


@pytest.mark.parametrize(
    ("base_url", "says"),
    [
        ("127.0.0.1:8000/v1", "http:// or https:// URL with a host"),
        ("ftp://host/v1", "http:// or https:// URL with a host"),
        ("http://me:hunter2@host/v1", "must not carry a user or password"),
        ("http://host/v1?api-key=hunter2", "must not carry a query string"),
    ],
)
def test_bad_base_urls_are_usage_errors(base_url: str, says: str) -> None:
    with pytest.raises(typer.BadParameter) as error:
        _specs(models=["m"], base_url=base_url)
    assert says in str(error.value) and "hunter2" not in str(error.value)


def test_models_and_names() -> None:
    assert _specs(models=["a=x", "y"], base_url="http://127.0.0.1:1/v1") == ["a", "y"]
    with pytest.raises(typer.BadParameter, match="unique"):
        _specs(models=["a=x", "a=y"], base_url="http://127.0.0.1:1/v1")
    with pytest.raises(typer.BadParameter, match="needs --base-url"):
        _specs(models=["m"])
    with pytest.raises(typer.BadParameter, match="give --model"):
        _specs(base_url="http://127.0.0.1:1/v1")


def test_models_file_errors_name_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text("- just-a-string\n")
    with pytest.raises(typer.BadParameter) as error:
        _specs(models_file=path)
    assert "#1: each model is an object {name, model, base_url, ...}" in str(error.value)
    path.write_text("- {name: a, model: x, base_url: 'http://u:secret@h/v1'}\n")
    with pytest.raises(typer.BadParameter) as error:
        _specs(models_file=path)
    assert "field 'base_url'" in str(error.value) and "secret" not in str(error.value)


def test_an_unset_api_key_env_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "models.json"
    path.write_text(
        '[{"name": "a", "model": "x", "base_url": "https://h/v1", "api_key_env": "MY_KEY"}]'
    )
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(typer.BadParameter, match=r"\$MY_KEY \(its api_key_env\) is not set"):
        _specs(models_file=path)
    monkeypatch.setenv("MY_KEY", "k")
    assert _specs(models_file=path) == ["a"]


def test_no_key_for_a_remote_endpoint_warns_once(capsys: pytest.CaptureFixture[str]) -> None:
    _specs(models=["a=x", "b=y"], base_url="https://api.example.invalid/v1")
    err = capsys.readouterr().err
    assert err.count("warning: no API key set") == 1 and "a, b" in err
    _specs(models=["a=x"], base_url="http://127.0.0.1:8000/v1")
    assert capsys.readouterr().err == ""  # a local server takes any key
