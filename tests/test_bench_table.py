"""The detection benchmark's table: what each cell says (no promtool needed)."""

from llmdash.config import Config
from llmdash.lab.bench import Outcome
from llmdash.lab.bench import table as bench_table
from llmdash.rules.generate import ITL_HIGH, PREEMPTIONS_HIGH, TTFT_HIGH


def test_bench_table_says_na_for_an_alert_the_engine_does_not_have():
    """Triton has no ITL/TPOT histogram, so no ITL alert: its row is "n/a", not "missed" (which would
    read as a detection failure); its TTFT alert exists and, never firing here, is "missed"."""
    outcomes = [Outcome(engine, "kv-collapse", 0.0, "m", ()) for engine in ("tensorrt-llm-triton", "lmdeploy")]
    rows = {tuple(cell.strip() for cell in line.split("|")[1:3]): line.split("|")[3].strip()
            for line in bench_table(outcomes, ("tensorrt-llm-triton", "lmdeploy"), Config()).splitlines()[2:]}
    assert rows[("tensorrt-llm-triton", ITL_HIGH)] == "n/a (engine has no ITL or TPOT histogram)"
    assert rows[("tensorrt-llm-triton", TTFT_HIGH)] == "missed"
    assert rows[("lmdeploy", PREEMPTIONS_HIGH)] == "n/a (engine has no preemption metric)"
    assert rows[("lmdeploy", ITL_HIGH)] == "missed"
