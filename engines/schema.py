"""The shape of an engine catalog as a JSON schema, and its first violation as one line.

Why a schema: which keys a catalog has, their types, the names Prometheus and mtail accept and the
values an enum allows are structure, checked here by `jsonschema` in one declaration (built from the
model's own constants, so the two cannot disagree); what depends on other keys (a source's metric
exists, a bound is a bucket, a version range is ordered) stays in code in `llmdash.engines.catalog`.

A node may carry `x-problem`: the sentence said when that node itself is violated (JSON Schema
ignores keywords it does not know). Missing and unknown keys are always named as the child key.
"""

from __future__ import annotations

import functools
import re

from llmdash.engines.model import COMPONENT_ROLES, EXPORTERS, LOG_COUNTS, METRIC_TYPES, ROLE_TYPES, UNITS
from llmdash.inputs import shorten

# Prometheus's grammars (https://prometheus.io/docs/concepts/data_model/): a name outside them is
# either refused by Prometheus or, placed into PromQL text, changes what the query means.
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
METRIC_PREFIX = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*|")   # what a variant puts before a base name; may be none
# An engine id names a file, a dashboard uid, a Kubernetes object and an mtail string literal.
ENGINE_ID = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
PATTERN_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
# A line break (or other control character) in text that reaches an mtail program becomes program code.
LINE_BREAKING = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")

FORMATS = {
    "label-name": (LABEL_NAME.fullmatch, f"not a Prometheus label name ({LABEL_NAME.pattern})"),
    "metric-name": (METRIC_NAME.fullmatch, f"not a Prometheus metric name ({METRIC_NAME.pattern})"),
    "metric-prefix": (METRIC_PREFIX.fullmatch, f"not the start of a Prometheus metric name ({METRIC_NAME.pattern})"),
    "engine-id": (ENGINE_ID.fullmatch,
                  f"an engine id is lower-case letters, digits and inner '-' ({ENGINE_ID.pattern})"),
    "pattern-name": (PATTERN_NAME.fullmatch, "a pattern name is lower-case letters, digits and '-'"),
    "one-line": (lambda text: not LINE_BREAKING.search(text), "must be one line, without control characters"),
}
# A list of label names is checked whole: one schema node per label was a quarter of the validation time.
LABEL_NAMES = {"type": "array", "format": "label-names"}
TYPE_WORDS = {"object": "a mapping", "array": "a list", "string": "a non-empty string", "boolean": "true or false",
              "number": "a number", "null": "nothing"}


def _mapping(properties: dict, required: tuple[str, ...] = (), **extra) -> dict:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False,
            **extra}


def _string(form: str | None = None, *, blank: bool = False, null: bool = False) -> dict:
    node: dict = {"type": ["string", "null"] if null else "string"}
    if form:
        node["format"] = form
    if not blank:
        node["pattern"] = r"\S"
    return node


TEXT = _string()
LINE = _string("one-line")
LABEL = _string("label-name", blank=True)
ENGINE = _string("engine-id", blank=True)
BOOL = {"type": "boolean"}
VERSION = True   # any value: read as PEP 440 in code, which also takes a YAML number (0.6 is "0.6")
# Each bound's type is checked with its finiteness, in code: a schema node per bound would double the time.
BOUNDS = {"type": "array", "minItems": 1, "x-problem": "expected a list of finite numbers"}
LABEL_VALUES = {"type": "object", "propertyNames": LABEL, "additionalProperties": {"type": "string"},
                "x-problem": "expected a mapping of label name to string value"}
RANGE = _mapping({"from": VERSION, "to": VERSION}, ("from", "to"))

METRIC = _mapping({
    "type": {"enum": list(METRIC_TYPES)},
    "labels": LABEL_NAMES,
    "since": VERSION,
    "help": TEXT,
    "unit": {"enum": list(UNITS)},
    "buckets": BOUNDS,
    "removed_in": VERSION,
    "hidden_in": VERSION,
    "generic": BOOL,
    "labels_since": {"type": "object", "propertyNames": LABEL,
                     "x-problem": "expected a mapping of label to the first version that has it"},
    "buckets_before": {"type": "object", "additionalProperties": BOUNDS,
                       "x-problem": "expected a mapping of version to the bounds exported before it"},
}, ("type", "labels", "since", "help"))

SOURCE = _mapping({
    "metric": {"type": "string"},
    "match": {"type": ["object", "null"], "propertyNames": LABEL,
              "additionalProperties": {"anyOf": [{"type": "string"},
                                                 {"type": "array", "minItems": 1, "items": {"type": "string"}}],
                                       "x-problem": "a label value is a string (quoted), or a list of them"},
              "x-problem": "expected a mapping of label to value"},
    "part": {"enum": ["sum", "count"]},
    "per": {"type": "string"},
}, ("metric",))

SIGNAL = _mapping({"sources": {"type": "array", "items": SOURCE}, "note": _string(null=True), "outside_requests": BOOL,
                   "appears_at_first_increment": BOOL},
                  ("sources",))

LOG_PATTERN = _mapping({
    "prefix": LINE,
    "message": LINE,
    "count": {"enum": list(LOG_COUNTS)},
    "since": VERSION,
    "until": VERSION,
    "source": LINE,
    "example": LINE,
    "note": _string("one-line", null=True),
}, ("prefix", "message", "count", "since", "source", "example"))

RANKS = _mapping({"unit": LABEL_NAMES, "copies": LABEL_NAMES, "note": TEXT})

ROUTER = _mapping({"title": LINE, "label": LABEL, "note": TEXT,
                   "series": {"type": "array", "minItems": 1, "items": {"type": "string"}}},
                  ("title", "label", "series", "note"))

CATALOG = _mapping({
    "engine": ENGINE,
    "title": LINE,
    "exporter": {"enum": list(EXPORTERS)},
    "model_label": LABEL,
    "supported": RANGE,
    "slo_defaults": _mapping({name: {"type": "number", "exclusiveMinimum": 0,
                                     "x-problem": "expected a positive number of seconds"}
                              for name in ("ttft_seconds", "itl_seconds")}),
    "metrics": {"type": "object", "minProperties": 1, "propertyNames": _string("metric-name", blank=True),
                "additionalProperties": METRIC, "x-problem": "expected a non-empty mapping of series name to metric"},
    "signals": {"type": "object", "additionalProperties": SIGNAL, "x-problem": "expected a mapping of role to signal",
                "propertyNames": {"enum": list(ROLE_TYPES),
                                  "x-problem": f"unknown role (known: {', '.join(ROLE_TYPES)})"}},
    "model_label_from_scrape": BOOL,
    "selectors": LABEL_VALUES,
    "ranks": RANKS,
    "role": {"enum": list(COMPONENT_ROLES)},
    "routers": {"type": "object", "minProperties": 1, "propertyNames": _string("pattern-name", blank=True),
                "additionalProperties": ROUTER,
                "x-problem": "expected a mapping of router id to what it exports under this engine's names"},
    "logs": {"type": ["object", "null"], "minProperties": 1, "propertyNames": _string("pattern-name", blank=True),
             "additionalProperties": LOG_PATTERN,
             "x-problem": "expected a non-empty mapping of pattern name to log line"},
}, ("engine", "title", "exporter", "model_label", "supported", "slo_defaults", "metrics", "signals"))

VARIANT = _mapping({
    "engine": ENGINE,
    "title": LINE,
    "releases": TEXT,
    "derive": _mapping({
        "from": ENGINE,
        "rename": {"type": "array", "minItems": 1,
                   "items": _mapping({"prefix": {"type": "string"}, "to": _string("metric-prefix", blank=True)},
                                     ("prefix", "to")),
                   "x-problem": "expected a list of {prefix: old, to: new}, newest first"},
        "versions": RANGE,
        "drop": {"type": "array", "items": {"type": "string"}},
        "generic": BOOL,
        "add_labels": LABEL_NAMES,
        "buckets": {"type": "object", "additionalProperties": BOUNDS},
    }, ("from", "rename")),
    "selectors": LABEL_VALUES,
    "ranks": RANKS,
    "notes": {"type": "object", "propertyNames": {"type": "string"}, "additionalProperties": TEXT,
              "x-problem": "expected a mapping of role to note"},
}, ("engine", "title", "derive", "releases"))


@functools.cache
def _validator(kind: str):
    """Compiled once per process. jsonschema is imported here, on the first catalog a process reads."""
    from jsonschema import Draft202012Validator, FormatChecker

    checker = FormatChecker(formats=())
    for name, (check, _) in FORMATS.items():
        checker.checks(name)(lambda value, check=check: not isinstance(value, str) or bool(check(value)))
    checker.checks("label-names")(lambda value: not isinstance(value, list) or _bad_label(value) is None)
    return Draft202012Validator({"catalog": CATALOG, "variant": VARIANT}[kind], format_checker=checker)


def first_problem(data, kind: str) -> tuple[str, str] | None:
    """(key, problem) of the first violation of the `kind` ("catalog" or "variant") schema, or None."""
    error = next(_validator(kind).iter_errors(data), None)   # the first: a broken catalog stops there
    return None if error is None else (_key(data, error), _problem(error))


def _bad_label(labels: list):
    """The first item of `labels` that is not a label name, or None."""
    return next((label for label in labels if not isinstance(label, str) or not LABEL_NAME.fullmatch(label)), None)


def _key(data, error) -> str:
    """The violating key as catalog errors name it: `signals.kv_usage.sources[0].match.tp_rank`."""
    key, node = "", data
    for step in error.absolute_path:
        key += f"[{step}]" if isinstance(node, list) else f"{'.' if key else ''}{step}"
        node = node[step]
    if error.validator == "required":
        child = next(name for name in error.validator_value if name not in error.instance)
    elif error.validator == "additionalProperties":
        child = next(name for name in error.instance if name not in error.schema.get("properties", {}))
    elif len(error.schema_path) > 1 and error.schema_path[-2] == "propertyNames":
        child = error.instance if isinstance(error.instance, str) else shorten(error.instance)
    else:
        return key or "catalog"
    return f"{key}.{child}" if key else str(child)


def _problem(error) -> str:
    if error.validator == "required":
        return "missing"
    if error.validator == "additionalProperties":
        return "unknown key"
    if "x-problem" in error.schema:
        return error.schema["x-problem"]
    if error.validator == "format" and error.validator_value == "label-names":
        return f"{shorten(_bad_label(error.instance))} is not a Prometheus label name ({LABEL_NAME.pattern})"
    if error.validator == "format":
        return FORMATS[error.validator_value][1]
    if error.validator == "enum":
        allowed = ", ".join(str(value) for value in error.validator_value if value is not None)
        return f"expected one of {allowed}, got {shorten(error.instance)}"
    if error.validator == "type":
        types = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"expected {' or '.join(TYPE_WORDS[t] for t in types)}, got {shorten(error.instance)}"
    if error.validator == "pattern":
        return "expected a non-empty string"
    return error.message[:200]
