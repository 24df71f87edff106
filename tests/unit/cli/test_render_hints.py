"""Hints are text, not rich markup: an extra's install command survives, with the from-a-clone spelling beside it."""

from __future__ import annotations

import pytest

from gpukit.cli import render
from gpukit.errors import BackendUnavailable


def test_extra_install_hint_keeps_its_brackets_and_names_the_clone(capsys: pytest.CaptureFixture[str]) -> None:
    # rich read "[export]" as a style tag: the hint printed "pip install 'gpukit'"
    render.error("onnxruntime is not installed", "pip install 'gpukit[export]'")
    err = " ".join(capsys.readouterr().err.split())
    assert "hint: pip install 'gpukit[export]'" in err
    assert "from a clone of the repository: pip install -e '.[export]'" in err


def test_markup_in_messages_is_printed_literally(capsys: pytest.CaptureFixture[str]) -> None:
    render.error("bad value [bold]x[/bold] in [red]", "use -e '.[torch]' (already a clone command)")
    err = capsys.readouterr().err
    assert "bad value [bold]x[/bold] in [red]" in err
    assert "-e '.[torch]'" in err and "from a clone" not in err  # no second spelling when it already is one


def test_the_cli_edge_renders_library_hints_escaped(monkeypatch: pytest.MonkeyPatch, run_cli) -> None:
    from gpukit.plan import models

    def boom(*a: object, **k: object) -> None:
        raise BackendUnavailable("--measure needs PyTorch", hint="pip install 'gpukit[torch]'")

    monkeypatch.setattr(models, "load_model", boom)
    r = run_cli("plan", "gpt2")
    assert r.exit_code == 1 and "pip install 'gpukit[torch]'" in r.stderr and "-e '.[torch]'" in r.stderr


def test_hint_text_is_unchanged_without_an_extra() -> None:
    assert render.hint_text("pip install numba") == "pip install numba"
    assert render.hint_markup("a [b] c") == "a \\[b] c"
