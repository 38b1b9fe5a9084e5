"""Named mutants of the code an on-call relies on, and the unit tests that must kill each (`make mutate`).

Each mutant is (name, file, the exact original snippet, its replacement, the test files to run). The runner
copies the tracked tree to a temporary directory (the working tree is never touched), applies one mutant there,
runs the mutant's tests with `-m unit`, and reports it killed (a test failed) or survived (all passed). Those
tests build what they check in-process (rule files, dashboards) and read nothing under generated/
(tests/mutation/test_mutants.py checks that), so the copy's generated/ needs no rebuild per mutant. A snippet
that is not in its file exactly once stops the run with the mutant's name: the table is anchored on small
distinctive snippets, so a refactor that moves one is a one-line update here; tests/mutation/test_mutants.py
checks every anchor in milliseconds.

`--write` puts the score table into docs/testing.md between the mutation-score markers, with the commit, date
and run time. `--only NAME` runs the named mutants alone.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.docmarks import revision, write_between

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "testing.md"
BEGIN, END = "<!-- mutation-score:begin (make mutate WRITE=1) -->", "<!-- mutation-score:end -->"
# The top-level folders installed as llmdash subpackages (pyproject's package-dir): linked into the copy's
# llmdash/ so that `import llmdash.rules` there reads the copy, not the editable install's tree.
LAYERS = ("engines", "panels", "dashboards", "rules")

RULES = ("tests/rules/test_alert_golden.py",)
GROUPING = ("tests/rules/test_alert_golden.py", "tests/dashboards/test_two_clusters.py")
FLEET = ("tests/dashboards/test_two_clusters.py", "tests/dashboards/test_fleet_dashboards.py")
FLOAT = ("tests/panels/test_prometheus3_float.py",)
REDACT = ("tests/test_redact.py", "tests/test_redact_table.py", "tests/test_redact_leaks.py")
MANIFEST = ("tests/test_atomic.py",)
SAFEPATH = ("tests/test_safepath.py", "tests/test_atomic.py")
INHIBIT = ("tests/rules/test_alert_golden.py",)
UNIT = ("tests/rules/test_alert_golden.py", "tests/rules/test_lifecycle.py")


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    issue: bool = False     # one of issue 27's item-1 mutations: a unit test must kill it


G, C, S = "rules/generate.py", "llmdash/config.py", "panels/signals.py"
ID, V, SLO = "rules/identity.py", "llmdash/vocabulary.py", "rules/slo.py"   # severities/inhibitions, SLO pairs
MUTANTS = [
    # --- the rule generator: the page ---
    Mutant("page: share thresholds swapped (short >= 2 %, long >= 3 %)", G,
           "({short} >= {p.page_share:g}) and ({long} >= {p.confirm_share:g})",
           "({short} >= {p.confirm_share:g}) and ({long} >= {p.page_share:g})", RULES, issue=True),
    Mutant("page: >= flipped to <= on the short-window share", G,
           "({short} >= {p.page_share:g})", "({short} <= {p.page_share:g})", RULES, issue=True),
    Mutant("page: >= flipped to > on the long-window share", G,
           "({long} >= {p.confirm_share:g})", "({long} > {p.confirm_share:g})", RULES),
    Mutant("page: default page_share 3 % -> 4 %", C, "page_share: float = 0.03", "page_share: float = 0.04", RULES),
    Mutant("page: default confirm_share 2 % -> 1 %", C,
           "confirm_share: float = 0.02", "confirm_share: float = 0.01", RULES),
    Mutant("page: long window read as the short one", G,
           "long = read.preemption_share(read.unit_group, p.long_window)",
           "long = read.preemption_share(read.unit_group, p.short_window)", RULES),
    Mutant("page: default long_window 3m -> 5m", C, 'long_window: str = "3m"', 'long_window: str = "5m"', RULES),
    Mutant("page: min events over the long window", G,
           "min_rate = p.min_events / seconds(p.short_window)", "min_rate = p.min_events / seconds(p.long_window)",
           RULES),
    Mutant("page: default min_events 6 -> 5", C, "min_events: float = 6", "min_events: float = 5", RULES),
    Mutant("page: default min_finished 20 -> 10", C, "min_finished: float = 20", "min_finished: float = 10", RULES),
    Mutant("page: for = the divergence's for", G, "Alert.PREEMPTIONS_HIGH, expr, p.alert_for,",
           "Alert.PREEMPTIONS_HIGH, expr, config.divergence.alert_for,", RULES),
    Mutant("page: severity warning", ID, "Alert.PREEMPTIONS_HIGH: CRITICAL,", "Alert.PREEMPTIONS_HIGH: WARNING,",
           RULES),
    Mutant("page: no keep_firing_for", G, "        keep_firing_for=p.keep_firing_for)\n\n\ndef preemptions_chronic",
           "        keep_firing_for=None)\n\n\ndef preemptions_chronic", RULES),
    Mutant("page: default keep_firing_for 5m -> 10m", C,
           '    keep_firing_for: str = "5m"', '    keep_firing_for: str = "10m"', RULES),
    Mutant("paused page: shares swapped", G,
           "({short} >= {p.paused_share:g}) and ({long} >= {p.paused_confirm_share:g})",
           "({short} >= {p.paused_confirm_share:g}) and ({long} >= {p.paused_share:g})", RULES),
    # --- chronic ---
    Mutant("chronic: window = long window", G, "share = sig.preemption_share(sig.unit_group, p.chronic_window)",
           "share = sig.preemption_share(sig.unit_group, p.long_window)", RULES),
    Mutant("chronic: >= flipped to >", G, 'f"({share} >= {p.chronic_share:g}) and on',
           'f"({share} > {p.chronic_share:g}) and on', RULES),
    Mutant("chronic: default chronic_share 0.5 % -> 1 %", C,
           "chronic_share: float = 0.005", "chronic_share: float = 0.01", RULES),
    Mutant("chronic: for = chronic window", G, "Alert.PREEMPTIONS_CHRONIC, expr, p.chronic_for,",
           "Alert.PREEMPTIONS_CHRONIC, expr, p.chronic_window,", RULES),
    Mutant("chronic: not joined with the unit's raw series (a deleted pod keeps its warning)", G,
           "and on ({unit}) {sig.scraped(Role.PREEMPTIONS)} ", "", RULES),
    Mutant("chronic: a page that healed still gets the warning", G,
           ' "\n            f"unless on ({unit}) ({_healed_page(sig, config)})")', '")', RULES),
    Mutant("chronic: the short-window rates averaged over the short window", "panels/recorded.py",
           'f"[{window}])" for signal in ("preemption_rate", "requests")',
           'f"[{short}])" for signal in ("preemption_rate", "requests")', RULES),
    Mutant("groups: the page evaluated once a minute with the warnings", G,
           'rule.get("labels", {}).get(SEVERITY_LABEL) == PAGE_SEVERITY',
           'rule.get("labels", {}).get(SEVERITY_LABEL) != PAGE_SEVERITY', ("tests/rules/test_group_interval.py",)),
    Mutant("groups: a page's inputs evaluated once a minute", G,
           'needed |= recorded & set(RECORD_NAME.findall(rule["expr"]))', "needed |= set()",
           ("tests/rules/test_group_interval.py",)),
    Mutant("short share: the recorded rates' window, not the share's", "panels/recorded.py",
           'rates = [Key(signal, None, key.window, level=Level.INSTANCE)',
           'rates = [Key(signal, None, b.config.preemption.short_window, level=Level.INSTANCE)',
           ("tests/rules/test_group_interval.py",)),
    Mutant("chronic after a page: share outside the page >= flipped to >", G,
           'f"unless on ({unit}) ({outside} >= {p.chronic_share:g})"',
           'f"unless on ({unit}) ({outside} > {p.chronic_share:g})"', RULES),
    Mutant("chronic after a page: outside share over the short window, not the chronic one", G,
           "[{p.chronic_window}:{OUTSIDE_PAGE_STEP}]", "[{p.short_window}:{OUTSIDE_PAGE_STEP}]", RULES),
    Mutant("chronic after a page: paged within the short window, not the chronic one", G,
           "(max_over_time({page}[{p.chronic_window}]))", "(max_over_time({page}[{p.short_window}]))", RULES),
    # --- divergence ---
    Mutant("divergence: latency factor >= flipped to >", S,
           'latency_up = f"{self.latency_vs_baseline(group)} >= {self.latency_factor:g}"',
           'latency_up = f"{self.latency_vs_baseline(group)} > {self.latency_factor:g}"', RULES),
    Mutant("divergence: default latency_factor 2 -> 1.5", C,
           "latency_factor: float = 2.0", "latency_factor: float = 1.5", RULES),
    Mutant("divergence: default mean_latency_factor 1.5 -> 2", C,
           "mean_latency_factor: float = 1.5", "mean_latency_factor: float = 2.0", RULES),
    Mutant("divergence: throughput band <= flipped to <", S,
           "- 1) <= {d.throughput_band:g}", "- 1) < {d.throughput_band:g}", RULES),
    Mutant("divergence: default throughput_band 20 % -> 30 %", C,
           "throughput_band: float = 0.2", "throughput_band: float = 0.3", RULES),
    Mutant("divergence: default min_tokens_per_second 1 -> 2", C,
           '    min_tokens_per_second: float = 1.0\n    alert_for: str = "3m"',
           '    min_tokens_per_second: float = 2.0\n    alert_for: str = "3m"', RULES),
    Mutant("divergence: waits without the page's for", G,
           "+ seconds(p.short_window) + seconds(p.alert_for)", "+ seconds(p.short_window)", RULES),
    Mutant("divergence: default alert_for 3m -> 4m", C, '    alert_for: str = "3m"', '    alert_for: str = "4m"',
           RULES),
    Mutant("divergence: always a warning", ID,
           "if alert == Alert.DIVERGENCE and not spec.has(Role.PREEMPTIONS):\n        return CRITICAL",
           "if alert == Alert.DIVERGENCE and not spec.has(Role.PREEMPTIONS):\n        return WARNING", RULES),
    # --- TTFT / ITL static thresholds ---
    Mutant("TTFT/ITL: threshold at the warning level", G,
           "({sig.quantile(role, HEADLINE_QUANTILE)} > {levels.critical:g})",
           "({sig.quantile(role, HEADLINE_QUANTILE)} > {levels.warning:g})", RULES),
    Mutant("TTFT/ITL: > flipped to >=", G, "({sig.quantile(role, HEADLINE_QUANTILE)} > {levels.critical:g})",
           "({sig.quantile(role, HEADLINE_QUANTILE)} >= {levels.critical:g})", RULES),
    Mutant("TTFT: default critical 5 s -> 6 s", C, "ttft_p99_seconds: Levels = Levels(2.0, 5.0)",
           "ttft_p99_seconds: Levels = Levels(2.0, 6.0)", RULES),
    Mutant("ITL: default critical 0.25 s -> 0.3 s", C, "itl_p99_seconds: Levels = Levels(0.1, 0.25)",
           "itl_p99_seconds: Levels = Levels(0.1, 0.3)", RULES),
    Mutant("TTFT capped: tail share 1 % -> 2 %", G, "CAPPED_TAIL_SHARE = 0.01", "CAPPED_TAIL_SHARE = 0.02", RULES),
    Mutant("TTFT/ITL: traffic floor >= flipped to >", G,
           'floor = f"{sig.throughput(window=w)} >= {config.divergence.min_tokens_per_second:g}"',
           'floor = f"{sig.throughput(window=w)} > {config.divergence.min_tokens_per_second:g}"', RULES),
    Mutant("TTFT/ITL: default for 10m -> 5m", C, 'latency_alert_for: str = "10m"', 'latency_alert_for: str = "5m"',
           RULES),
    Mutant("warnings: default keep_firing_for 5m -> 0", C,
           'warning_keep_firing_for: str = "5m"', 'warning_keep_firing_for: str = "0s"', RULES),
    # --- straggler, signal missing, log page ---
    Mutant("straggler: factor 3 -> 2", C, "    factor: float = 3.0", "    factor: float = 2.0", RULES),
    Mutant("straggler: min seconds > flipped to >=", G, "({mine} > {s.min_seconds:g})", "({mine} >= {s.min_seconds:g})",
           RULES),
    Mutant("straggler: default for 10m -> 15m", C, '    alert_for: str = "10m"', '    alert_for: str = "15m"', RULES),
    Mutant("signal missing: for 15m -> 10m", G, 'MISSING_FOR = "15m"', 'MISSING_FOR = "10m"', RULES),
    Mutant("log page: >= flipped to >", G, '">= {config.logs.min_events:g}")', '"> {config.logs.min_events:g}")',
           RULES),
    Mutant("log page: default min_events 2 -> 3", C, "min_events: float = 2 ", "min_events: float = 3 ", RULES),
    # --- SLO burn-rate pairs ---
    Mutant("SLO: fast pair 14.4x -> 14x", V, 'BurnPair(14.4, "1h", "5m")', 'BurnPair(14, "1h", "5m")', RULES),
    Mutant("SLO: fast pair short window 5m -> 30m", V, 'BurnPair(14.4, "1h", "5m")', 'BurnPair(14.4, "1h", "30m")',
           RULES),
    Mutant("SLO: 6x pair short window 30m -> 1h", V, 'BurnPair(6, "6h", "30m")', 'BurnPair(6, "6h", "1h")', RULES),
    Mutant("SLO: slow pair 3x -> 2x", V, 'BurnPair(3, "1d", "2h")', 'BurnPair(2, "1d", "2h")', RULES),
    Mutant("SLO: 1x pair long window 3d -> 1d", V, 'BurnPair(1, "3d", "6h")', 'BurnPair(1, "1d", "6h")', RULES),
    Mutant("SLO: fast burn is a ticket", ID, "Alert.SLO_BURN_FAST: CRITICAL,", "Alert.SLO_BURN_FAST: WARNING,", RULES),
    Mutant("SLO: min bad events >= flipped to >", SLO, "and ({bad} >= {o.min_bad_events:g})",
           "and ({bad} > {o.min_bad_events:g})", RULES),
    Mutant("SLO: bad events counted over the short window", SLO, 'bad = sig.slo("slo_errors", ind.name, pair.long)',
           'bad = sig.slo("slo_errors", ind.name, pair.short)', RULES),
    Mutant("SLO: the bad-event floor compares the error ratio, not the count", SLO,
           'bad = sig.slo("slo_errors", ind.name, pair.long)', 'bad = sig.slo("slo_error_ratio", ind.name, pair.long)',
           RULES),
    Mutant("SLO: for 0s -> 5m", SLO, 'FOR = "0s"', 'FOR = "5m"', RULES),
    Mutant("SLO coverage: warns below half the replicas, not below all", SLO,
           "{sig.slo('slo_coverage', ind.name)} < 1\"", "{sig.slo('slo_coverage', ind.name)} < 0.5\"", RULES),
    Mutant("SLO coverage: < flipped to <= (warns at full coverage)", SLO,
           "{sig.slo('slo_coverage', ind.name)} < 1\"", "{sig.slo('slo_coverage', ind.name)} <= 1\"", RULES),
    Mutant("SLO coverage: for 15m -> 5m", SLO, 'COVERAGE_FOR = "15m"', 'COVERAGE_FOR = "5m"', RULES),
    Mutant("SLO coverage: a page, not a ticket", ID, "Alert.SLO_COVERAGE_LOW: WARNING,",
           "Alert.SLO_COVERAGE_LOW: CRITICAL,", RULES),
    # --- grouping, in the rules and the fleet dashboard ---
    Mutant("grouping: per-model results drop the fleet labels", S,
           "return tuple(config.fleet.group_by) + (spec.model_label,)", "return (spec.model_label,)", GROUPING),
    Mutant("grouping: the page is no longer per data-parallel rank", S,
           "self.unit_group = self.instance_group + spec.ranks.unit", "self.unit_group = self.instance_group",
           GROUPING),
    Mutant("grouping: warnings wait for a page of any cluster", G,
           'where = ", ".join((ENGINE_LABEL, *config.fleet.group_by, MODEL_LABEL))',
           'where = ", ".join((ENGINE_LABEL, MODEL_LABEL))', GROUPING),
    Mutant("grouping: inhibitions across clusters", ID, "equal = [ENGINE_LABEL, MODEL_LABEL, *config.fleet.group_by]",
           "equal = [ENGINE_LABEL, MODEL_LABEL]", GROUPING),
    # --- fleet shapes (issue 29): the KV-cache unit per catalog, frontends ---
    Mutant("unit: Ray Serve's page merges the replicas of a node (no ReplicaId)", "engines/ray-serve-vllm.yaml",
           "  unit: [ReplicaId, engine]", "  unit: [engine]", UNIT),
    Mutant("inhibitions: the same-unit rule ignores the catalogs' unit labels", ID,
           '"equal": [*equal, config.fleet.instance_label, *units],', '"equal": [*equal, config.fleet.instance_label],',
           INHIBIT),
    Mutant("inhibitions: no frontend rule (a worker's page and its frontend's page both notify)", ID,
           "    if frontends:\n", "    if False:\n", INHIBIT),
    Mutant("inhibitions: the frontend rule within one llm_engine", ID,
           '"equal": [MODEL_LABEL, *config.fleet.group_by],',
           '"equal": [ENGINE_LABEL, MODEL_LABEL, *config.fleet.group_by],', INHIBIT),
    Mutant("inhibitions: the frontend rule across clusters", ID, '"equal": [MODEL_LABEL, *config.fleet.group_by],',
           '"equal": [MODEL_LABEL],', INHIBIT),
    Mutant("grouping: the log page merges clusters", S, "        self.group = tuple(config.fleet.group_by)\n",
           "        self.group = ()\n", GROUPING),
    Mutant("fleet: per-model aggregation drops cluster and namespace", "dashboards/fleet.py",
           "model_labels = (ENGINE_LABEL, *groups, MODEL_LABEL)", "model_labels = (ENGINE_LABEL, MODEL_LABEL)", FLEET,
           issue=True),
    # --- the Prometheus 3 float text ---
    Mutant("prometheus3_float: %e from 1e7, not 1e6", "panels/promql.py",
           "if exponent < -4 or exponent >= 6:", "if exponent < -4 or exponent >= 7:", FLOAT, issue=True),
    Mutant("prometheus3_float: %e below 1e-5, not 1e-4", "panels/promql.py",
           "if exponent < -4 or exponent >= 6:", "if exponent < -5 or exponent >= 6:", FLOAT, issue=True),
    Mutant("prometheus3_float: no .0 on integers", "panels/promql.py",
           'return sign + (text if "." in text else text + ".0")', "return sign + text", FLOAT, issue=True),
    Mutant("prometheus3_float: one-digit exponent", "panels/promql.py", "{abs(exponent):02d}", "{abs(exponent):d}",
           FLOAT, issue=True),
    Mutant("prometheus3_float: NaN not handled", "panels/promql.py",
           '    if math.isnan(value):\n        return "NaN"\n', "", FLOAT),
    # --- redaction ---
    Mutant("redact: Bearer/Basic scrub removed", "llmdash/redact.py",
           "for shape in (_URL_USERINFO, _BEARER, _KEY_VALUE):", "for shape in (_URL_USERINFO, _KEY_VALUE):", REDACT,
           issue=True),
    Mutant("redact: URL userinfo scrub removed", "llmdash/redact.py",
           "for shape in (_URL_USERINFO, _BEARER, _KEY_VALUE):", "for shape in (_BEARER, _KEY_VALUE):", REDACT),
    Mutant("redact: key=value scrub removed", "llmdash/redact.py",
           "for shape in (_URL_USERINFO, _BEARER, _KEY_VALUE):", "for shape in (_URL_USERINFO, _BEARER):", REDACT),
    Mutant("redact: known secrets case-sensitive", "llmdash/redact.py",
           "re.finditer(pattern, view.text, flags=re.IGNORECASE)", "re.finditer(pattern, view.text)", REDACT),
    Mutant("redact: \\uXXXX escapes not decoded (Go's \\u0026)", "llmdash/redact.py",
           "_WRAPPING = re.compile(r'\\\\u((?:", "_WRAPPING = re.compile(r'(?!)((?:", REDACT),
    Mutant("redact: short JSON escapes not decoded (\\n)", "llmdash/redact.py",
           "|\\\\([nrt\"/\\\\])|", "|(?!)([nrt\"/\\\\])|", REDACT),
    Mutant("redact: line breaks not joined", "llmdash/redact.py", "if char not in _LINE_BREAKS:", "if True:", REDACT),
    Mutant("redact: credential query parameters (auth=, key=, sig=, ...) not masked", "llmdash/redact.py",
           'r"|(?<![a-z0-9])(?:auth|key|sig|', 'r"|(?!)(?:auth|key|sig|', REDACT),
    Mutant("redact: a surrogate pair decoded one half at a time", "llmdash/redact.py",
           "(?:[dD][89abAB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2})|", "", REDACT),
    Mutant("redact: no percent-encoded form", "llmdash/redact.py", 'quote(secret, safe=""), ', "", REDACT),
    Mutant("redact: no form-encoded form", "llmdash/redact.py", "quote_plus(secret), ", "", REDACT),
    Mutant("redact: no JSON-escaped form", "llmdash/redact.py", "json.dumps(secret)[1:-1],", "", REDACT),
    Mutant("redact: no base64 form", "llmdash/redact.py", "            base64.b64encode(raw).decode(), ",
           "            ", REDACT),
    Mutant("redact: no URL-safe base64 form", "llmdash/redact.py",
           "            base64.urlsafe_b64encode(raw).decode().rstrip(\"=\"))", "            )", REDACT),
    Mutant("redact: a Bearer token needs 20 characters", "llmdash/redact.py", "[A-Za-z0-9._~+/=-]{8,}",
           "[A-Za-z0-9._~+/=-]{20,}", REDACT),
    Mutant("redact: safe_line does not scrub", "llmdash/redact.py",
           'flat = " ".join(scrub(str(text), secrets).split())', 'flat = " ".join(str(text).split())', REDACT),
    Mutant("redact: controls sent raw", "llmdash/redact.py", 'if char.isprintable() or char == " ":', "if True:",
           REDACT),
    # --- the output manifest ---
    Mutant("manifest: an edited file is removed (digest not checked)", "llmdash/atomic.py",
           "(removed if _digest_of_file(root / rel) == digest else edited)", "(removed if True else edited)", MANIFEST),
    Mutant("manifest: removes entries outside the run's scopes", "llmdash/atomic.py",
           "if rel in files or rel in diverted or not _within(rel, scopes) or",
           "if rel in files or rel in diverted or", MANIFEST),
    Mutant("manifest: other scopes' entries dropped", "llmdash/atomic.py",
           "manifest = {rel: digest for rel, digest in recorded.items() if not _within(rel, scopes)}",
           "manifest = {}", MANIFEST),
    Mutant("manifest: files it did not write are not counted", "llmdash/atomic.py",
           "foreign = [rel for rel in _present(root, scopes) if rel not in left]", "foreign = []", MANIFEST),
    Mutant("manifest: '..' entries trusted", "llmdash/atomic.py", "if rel == MANIFEST or safepath.problem(rel) or ",
           "if rel == MANIFEST or ", MANIFEST),
    Mutant("manifest: digests not validated", "llmdash/atomic.py",
           " or not isinstance(digest, str) or not SHA256.fullmatch(digest):", ":", MANIFEST),
    Mutant("manifest: symlinked directories followed", "llmdash/atomic.py",
           "        if (root / directory).is_symlink():\n", "        if False:\n", MANIFEST),
    Mutant("manifest: a user's file at an aside path overwritten", "llmdash/atomic.py",
           "            files[instead] = files.pop(rel)\n", "            pass\n", MANIFEST),
    Mutant("manifest: directories opened through symlinks (a swap after the plan redirects the run)",
           "llmdash/atomic.py", "_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC",
           "_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC", MANIFEST),
    Mutant("manifest: a file saved during the run is removed (digest not checked again)", "llmdash/atomic.py",
           "if raw is None or hashlib.sha256(raw).hexdigest() != digest:", "if raw is None:", MANIFEST),
    # --- the one check of names llmdash did not choose (git entries, manifest entries) ---
    Mutant("safepath: '..' components accepted", "llmdash/safepath.py", 'if part in ("", ".", ".."):',
           'if part in ("", "."):', SAFEPATH),
    Mutant("safepath: absolute names accepted", "llmdash/safepath.py",
           '    if name.startswith("/"):\n        return "is absolute"\n', "", SAFEPATH),
    Mutant("safepath: NUL bytes accepted", "llmdash/safepath.py",
           '    if "\\0" in name:\n        return "holds a NUL byte"\n', "", SAFEPATH),
    Mutant("safepath: a component of 256 bytes accepted", "llmdash/safepath.py", "NAME_MAX = 255 ", "NAME_MAX = 256 ",
           SAFEPATH),
    Mutant("safepath: a name of 1025 bytes accepted", "llmdash/safepath.py", "MAX_NAME_BYTES = 1024 ",
           "MAX_NAME_BYTES = 1025 ", SAFEPATH),
    Mutant("safepath: a name of exactly 1024 bytes refused (> flipped to >=)", "llmdash/safepath.py",
           "if size > MAX_NAME_BYTES:", "if size >= MAX_NAME_BYTES:", SAFEPATH),
    Mutant("safepath: a name resolving outside its directory through a symlink accepted", "llmdash/safepath.py",
           "if os.path.commonpath([top, os.path.realpath(target)]) != top:", "if False:", SAFEPATH),
]


def apply(tree: Path, mutant: Mutant) -> str:
    """Apply `mutant` in `tree`; returns the file's original text. Refuses a snippet not found exactly once."""
    path = tree / mutant.file
    text = path.read_text()
    count = text.count(mutant.original)
    if count != 1:
        raise SystemExit(f"mutant {mutant.name!r}: its snippet occurs {count} times in {mutant.file}, not once: "
                         f"update tests/mutation/mutants.py\n  snippet: {mutant.original!r}")
    path.write_text(text.replace(mutant.original, mutant.replacement))
    return text


def copy_tree(target: Path) -> None:
    """The tracked and untracked (not ignored) files of the checkout, with the layers linked under llmdash/."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        source = ROOT / rel
        if source.is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / rel)
    for layer in LAYERS:
        (target / "llmdash" / layer).symlink_to(Path("..") / layer)


def environment(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}


def check_imports_the_copy(tree: Path) -> None:
    probe = subprocess.run([sys.executable, "-c", "import llmdash.rules.generate as g; print(g.__file__)"],
                           cwd=tree, env=environment(tree), capture_output=True, text=True, check=True)
    if not Path(probe.stdout.strip()).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the copy imports llmdash from {probe.stdout.strip()}, not from {tree}")


def run(tree: Path, mutant: Mutant) -> tuple[str, list[str]]:
    """('killed', failing tests) or ('survived', []) for one mutant; ('error', output) when the run broke."""
    original = apply(tree, mutant)
    try:
        env = environment(tree)
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-m", "unit", "-p", "no:cacheprovider",
                                "-rf", *mutant.tests], cwd=tree, env=env, capture_output=True, text=True)
        failed = [line.split(" ", 1)[1].split(" - ")[0] for line in tests.stdout.splitlines()
                  if line.startswith("FAILED ")]
        if tests.returncode == 1:
            return "killed", failed
        if tests.returncode == 0:
            return "survived", []
        return "error", tests.stdout.splitlines()[-5:] + tests.stderr.splitlines()[-5:]
    finally:
        (tree / mutant.file).write_text(original)


# Why each known survivor survives (a mutant named here and killed is reported, so this list stays true).
SURVIVORS: dict[str, str] = {}


def table(results: list[tuple[Mutant, str, list[str]]], seconds: float, commit: str) -> str:
    killed = sum(status == "killed" for _, status, _ in results)
    lines = [f"Score: **{killed}/{len(results)} killed** (`make mutate`, commit {commit}, "
             f"{datetime.date.today().isoformat()}, {seconds / 60:.0f} min on the 2-core machine).", "",
             "| mutant | file | result | the unit tests that fail |", "| --- | --- | --- | --- |"]
    for mutant, status, detail in results:
        why = SURVIVORS.get(mutant.name, "") if status == "survived" else \
            (detail[0] if detail else "") + (f" (and {len(detail) - 1} more)" if len(detail) > 1 else "")
        lines.append(f"| {mutant.name}{' (issue 27)' if mutant.issue else ''} | `{mutant.file}` | {status} | "
                     f"{why.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write the score table into {DOC.relative_to(ROOT)}")
    parser.add_argument("--only", action="append", default=[], help="run only the mutant with this name")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    if not chosen:
        raise SystemExit(f"no mutant named {args.only}")
    started = time.monotonic()
    results = []
    with tempfile.TemporaryDirectory(prefix="llmdash-mutants-") as tmp:
        tree = Path(tmp) / "tree"
        commit = revision(ROOT)
        copy_tree(tree)
        check_imports_the_copy(tree)
        for number, mutant in enumerate(chosen, 1):
            status, detail = run(tree, mutant)
            print(f"[{number}/{len(chosen)}] {status:8} {mutant.name}" + (f"  ({detail[0]})" if detail else ""),
                  flush=True)
            results.append((mutant, status, detail))
    elapsed = time.monotonic() - started
    report = table(results, elapsed, commit)
    print("\n" + report)
    if args.write:
        write_between(DOC, BEGIN, END, report)
    errors = [m.name for m, status, _ in results if status == "error"]
    unkilled = [m.name for m, status, _ in results if status == "survived" and (m.issue or m.name not in SURVIVORS)]
    if errors:
        print(f"error: {len(errors)} mutant(s) did not run: {', '.join(errors)}", file=sys.stderr)
    if unkilled:
        print(f"survived without a known reason: {', '.join(unkilled)}", file=sys.stderr)
    return 1 if errors or unkilled else 0


if __name__ == "__main__":
    sys.exit(main())
