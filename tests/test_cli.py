"""The ``crawlstore`` command."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlstore import cli


def test_bench_outside_a_checkout_says_what_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "_CHECKOUT", tmp_path)
    assert cli.main(["bench", "--quick"]) == 2
    assert "source checkout" in capsys.readouterr().err


def test_bench_runs_the_suite_of_the_checkout(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "--help"])  # the suite's own help: it was found and started
    assert exit_.value.code == 0
    assert "--quick" in capsys.readouterr().out


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "bench" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["frobnicate"])
