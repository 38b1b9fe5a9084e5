"""The detection benchmark's table: what each cell says (no promtool needed)."""

from llmdash.config import Config
from llmdash.lab.bench import ScenarioRun
from llmdash.lab.bench import table as bench_table
from llmdash.vocabulary import Alert


def test_bench_table_lists_only_the_alerts_an_engine_has_and_never_calls_them_missed():
    """Triton has no ITL/TPOT histogram, so no ITL alert: it gets no row (a "missed" would read as a
    detection failure); its TTFT alert exists and, never firing here, is "missed"."""
    outcomes = [ScenarioRun(engine, "kv-collapse", 0.0, "m", ()) for engine in ("tensorrt-llm-triton", "lmdeploy")]
    rows = {tuple(cell.strip() for cell in line.split("|")[1:3]): line.split("|")[3].strip()
            for line in bench_table(outcomes, ("tensorrt-llm-triton", "lmdeploy"), Config()).splitlines()
            if line.startswith("| ") and "---" not in line and not line.startswith("| engine")}
    assert ("tensorrt-llm-triton", Alert.ITL_HIGH) not in rows
    assert rows[("tensorrt-llm-triton", Alert.TTFT_HIGH)] == "missed"
    assert ("lmdeploy", Alert.PREEMPTIONS_HIGH) not in rows
    assert rows[("lmdeploy", Alert.ITL_HIGH)] == "missed"
