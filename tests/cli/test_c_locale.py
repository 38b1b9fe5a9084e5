"""A non-ASCII output directory under an ASCII-only terminal in the C locale (issue 28): written and reported,
not "input too large". The entry point's error path itself is tested in test_hostile_input.py."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

LLMDASH = Path(sys.executable).with_name("llmdash")


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
