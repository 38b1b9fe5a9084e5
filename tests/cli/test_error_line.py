"""Every error the `llmdash` command prints goes through one path (redact.error_line): scrubbed, one line, and
saying what happened (issue 28)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmdash.cli import main as cli_main
from llmdash.errors import LlmdashError

LLMDASH = Path(sys.executable).with_name("llmdash")


def _main_raising(monkeypatch, capsys, exc):
    def fail(*_, **__):
        raise exc
    monkeypatch.setattr(cli_main.cli, "main", fail)
    with pytest.raises(SystemExit) as exited:
        cli_main.main()
    return exited.value.code, capsys.readouterr().err


def test_an_error_from_any_module_is_scrubbed_and_escaped(monkeypatch, capsys):
    code, err = _main_raising(monkeypatch, capsys, LlmdashError("x.yaml: got 'https://ops:PW-1@wiki/x'\nsecond"))
    assert (code, err) == (2, "error: x.yaml: got 'https://***@wiki/x'\\x0asecond\n")


def test_a_text_encoding_failure_says_so_rather_than_input_too_large(monkeypatch, capsys):
    failure = UnicodeEncodeError("ascii", "g\xe9n", 1, 2, "ordinal not in range(128)")
    code, err = _main_raising(monkeypatch, capsys, failure)
    assert (code, err) == (2, "error: text that ascii cannot carry (UnicodeEncodeError); "
                              "use a UTF-8 locale such as LANG=C.UTF-8\n")


@pytest.mark.process
def test_a_non_ascii_out_under_an_ascii_only_terminal_is_written_and_reported(tmp_path):
    out = os.fsencode(tmp_path) + b"/g\xc3\xa9n"
    environment = {"PATH": os.environ["PATH"], "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0",
                   "PYTHONIOENCODING": "ascii:strict"}
    result = subprocess.run([os.fsencode(LLMDASH), b"rules", b"--out", out], env=environment, capture_output=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr and result.stderr == b""
    assert result.stdout.startswith(b"rule files under ") and b" written, " in result.stdout.splitlines()[0]
    assert os.path.isdir(out + b"/rules")
