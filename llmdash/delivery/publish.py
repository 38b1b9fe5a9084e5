"""Publish built dashboards to Grafana without version churn and without losing UI edits.

The algorithm: health, folder, validate everything, then per
dashboard GET, normalise both sides and skip when equal; otherwise POST with
`id: null`, the live version and `overwrite: false`.

Telling a UI edit from a generator change: every dashboard we save carries a tag
`llmdash-sha:<12 hex>`, the hash of the normalised model we sent. On the next run the
live model (stamp removed, normalised) must still hash to its stamp; if it does not,
or the stamp is gone, someone changed it in Grafana since our last publish and we
refuse unless `--force`. A tag survives UI saves (unknown top-level keys would not:
the frontend drops them), needs no state file, and works from any checkout or CI
runner. The live version sent with `overwrite: false` catches the remaining race,
an edit between our GET and our POST, as a 412 (on the resource API, the
`resourceVersion` read with the GET turns the same race into a 409).

Exit codes: 0 all published or unchanged, 1 a dashboard was refused (edited in
Grafana, provisioned, title clash, concurrent edit), 2 usage/config/invalid dashboard,
3 Grafana or network error.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time
from dataclasses import dataclass
from typing import Callable

from llmdash.review.compare import diff_dashboard, normalise
from llmdash.review.render import render_text
from llmdash.vocabulary import FLEET
from llmdash.dashboards import v2
from llmdash.dashboards.validate import looks_recorded, validate_dashboard
from llmdash.delivery.backend import (GrafanaBackend, GrafanaError, Refused, RemoteDashboard, UnconfirmedSave,
                                      VersionMismatch)
from llmdash.engines.catalog import load_engine
from llmdash.errors import EXIT_DRIFT, EXIT_OK, EXIT_USAGE, LlmdashError

STAMP_PREFIX = "llmdash-sha:"
FOLDER_UID = re.compile(r"^[a-zA-Z0-9_-]{1,40}$")

CREATED, UPDATED, UNCHANGED, REFUSED = "created", "updated", "unchanged", "refused"
WOULD_CREATE, WOULD_UPDATE, WOULD_REFUSE = "would create", "would update", "would refuse"


@dataclass(frozen=True)
class PublishOptions:
    folder_uid: str
    folder_title: str
    force: bool = False
    dry_run: bool = False
    annotate: bool = False
    revision: str = "unknown"


@dataclass(frozen=True)
class PublishResult:
    name: str
    uid: str
    result: str
    version: int | None = None
    detail: str = ""


# ---------------------------------------------------------------- stamp


def content_hash(dashboard: dict) -> str:
    """12 hex of the normalised model without its stamp: what the stamp of a published copy must equal."""
    canonical = json.dumps(normalise(unstamped(dashboard)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def unstamped(dashboard: dict) -> dict:
    tags = [t for t in dashboard.get("tags") or [] if not str(t).startswith(STAMP_PREFIX)]
    return {**dashboard, "tags": tags}


def stamped(dashboard: dict) -> dict:
    return {**unstamped(dashboard), "tags": unstamped(dashboard)["tags"] + [STAMP_PREFIX + content_hash(dashboard)]}


def stamp_of(dashboard: dict) -> str | None:
    return next((str(t)[len(STAMP_PREFIX):] for t in dashboard.get("tags") or [] if str(t).startswith(STAMP_PREFIX)),
                None)


def edited_since_publish(remote: dict) -> bool:
    """True when the live model no longer matches the stamp of what llmdash sent (or has no stamp)."""
    return stamp_of(remote) != content_hash(remote)


# ---------------------------------------------------------------- validation


def check_all(dashboards: dict[str, dict]) -> None:
    """Refuse the whole publish when any dashboard is invalid, before the first request.

    Dashboard stems are engine ids, each checked against its engine's catalog, or `fleet`, which reads
    only recorded series.
    """
    bad = {name: problems for name, d in sorted(dashboards.items())
           if (problems := validate_dashboard(d, None if name == FLEET else load_engine(name), looks_recorded))}
    if bad:
        name, problems = next(iter(bad.items()))
        more = sum(len(p) for p in bad.values()) - 1
        raise LlmdashError(f"dashboard {name} is invalid: {problems[0]}"
                           f"{f' (and {more} more problems)' if more else ''}; nothing was written", EXIT_USAGE)
    uids = [d["uid"] for d in dashboards.values()]
    if len(uids) != len(set(uids)):
        raise LlmdashError("two dashboards share a uid; nothing was written", EXIT_USAGE)


def check_options(options: PublishOptions) -> None:
    if not FOLDER_UID.match(options.folder_uid):
        raise LlmdashError(f"grafana.folder_uid {options.folder_uid!r} must be 1-40 characters of [a-zA-Z0-9_-]",
                           EXIT_USAGE)
    if not options.folder_title.strip():
        raise LlmdashError("grafana.folder_title must not be empty", EXIT_USAGE)


# ---------------------------------------------------------------- publish


def publish(dashboards: dict[str, dict], backend: GrafanaBackend, options: PublishOptions,
            echo: Callable[[str], None] = print) -> int:
    """Publish every dashboard; returns 0 or 1, raises LlmdashError for 2 and 3."""
    check_options(options)
    check_all(dashboards)
    schema = backend.schema
    if schema == "v2":
        dashboards = {name: as_v2(d) for name, d in dashboards.items()}
    version = backend.health()
    echo(f"Grafana {version or '(version hidden)'}: publishing {len(dashboards)} dashboards "
         f"{'in schema v2 ' if schema == 'v2' else ''}to folder "
         f"{options.folder_uid!r}{' (dry run, nothing is written)' if options.dry_run else ''}")
    _ensure_folder(backend, options, echo)

    outcomes: list[PublishResult] = []
    total = len(dashboards)
    try:
        for index, (name, dashboard) in enumerate(sorted(dashboards.items()), start=1):
            outcome, diff_text = _publish_one(name, dashboard, backend, options, schema)
            outcomes.append(outcome)
            version_note = f" v{outcome.version}" if outcome.version else ""
            echo(f"[{index}/{total}] {name} ({outcome.uid}): {outcome.result}{version_note}"
                 f"{' - ' + outcome.detail if outcome.detail else ''}")
            if diff_text:
                echo(diff_text.rstrip("\n"))
    finally:
        if outcomes:
            echo(summary_table(outcomes))

    written = [o for o in outcomes if o.result in (CREATED, UPDATED)]
    if options.annotate and written and not options.dry_run:
        names = ", ".join(f"{o.name} {o.result}" for o in written)
        backend.annotate(text=f"llmdash publish {options.revision}: {names}",
                         tags=["llmdash", "publish", options.revision], time_ms=int(time.time() * 1000))
        echo(f"annotation posted: llmdash publish {options.revision}")
    refused = [o for o in outcomes if o.result in (REFUSED, WOULD_REFUSE)]
    if refused:
        echo(f"{len(refused)} dashboard(s) refused, reasons above; --force overwrites edits made in Grafana")
        return EXIT_DRIFT
    return EXIT_OK


def as_v2(dashboard: dict) -> dict:
    """What publish sends and compares in schema v2: the checked v2 rendering's spec, with the uid beside it
    (the backend moves it to metadata.name), so stamps, equality and the diff work on it as on v1."""
    resource = v2.rendered(dashboard)
    return {**resource["spec"], "uid": resource["metadata"]["name"]}


def schema_family(api_version: str) -> str:
    """v2alpha1, v2beta1, v2 -> "v2"; v0alpha1, v1beta1, v1 -> "v1" (their spec is the classic model)."""
    return "v2" if api_version.startswith("v2") else "v1"


def _ensure_folder(backend: GrafanaBackend, options: PublishOptions, echo) -> None:
    """Create the target folder before any dashboard (grizzly #143/#585 show the other order failing)."""
    if backend.get_folder(options.folder_uid) is not None:
        return
    if options.dry_run:
        echo(f"folder {options.folder_uid!r} ({options.folder_title}) would be created")
        return
    folder = backend.create_folder(options.folder_uid, options.folder_title)
    echo(f"folder {options.folder_uid!r} ({folder.get('title', options.folder_title)}) ready")


def _publish_one(name: str, dashboard: dict, backend: GrafanaBackend, options: PublishOptions,
                 schema: str = "v1") -> tuple[PublishResult, str]:
    uid = dashboard["uid"]
    message = f"llmdash publish {options.revision}"
    remote = backend.get_dashboard(uid)

    if remote is None:
        if options.dry_run:
            return PublishResult(name, uid, WOULD_CREATE), ""
        return _save(name, dashboard, backend, options, version=0, created=True, message=message), ""

    live = unstamped(remote.dashboard)
    moved = remote.folder_uid != options.folder_uid
    # Stored in the other schema (Grafana converted it for this read): publishing replaces that model, so it is
    # never done unasked, even when the conversion reads the same, and the same uid means one dashboard, never
    # a second copy beside it.
    stored = schema_family(remote.stored_version) if remote.stored_version else schema
    crossed = stored != schema
    if normalise(live) == normalise(dashboard) and not moved and not crossed:
        return PublishResult(name, uid, UNCHANGED, remote.version), ""

    changes = render_text(name, diff_dashboard(live, dashboard))
    if moved:
        changes += f"folder: {remote.folder_title!r} ({remote.folder_uid or 'root'}) -> {options.folder_uid!r}\n"
    if remote.provisioned:
        return _refused(options, name, uid, remote,
                        "provisioned from files in Grafana (allowUiUpdates: false); remove it from the "
                        "provisioning directory or use `llmdash provision` instead of publish"), ""

    drifted = edited_since_publish(remote.dashboard) or moved or crossed
    if drifted and not options.force:
        why = _cross_reason(remote, stored, schema) if crossed else _drift_reason(remote, moved)
        return _refused(options, name, uid, remote, f"{why}; publishing would lose (- live, + this build):"), changes
    if options.dry_run:
        over = f"replacing its schema {stored} model" if crossed else "over edits made in Grafana"
        return PublishResult(name, uid, WOULD_UPDATE, remote.version, over if drifted else ""), changes
    outcome = _save(name, dashboard, backend, options, version=remote.version, created=False, message=message,
                    resource_version=remote.resource_version)
    if drifted and outcome.result == UPDATED:
        detail = (f"--force: replaced the schema {stored} dashboard with schema {schema}" if crossed
                  else "--force: overwrote edits made in Grafana")
        outcome = PublishResult(name, uid, UPDATED, outcome.version, detail)
    return outcome, changes


def _cross_reason(remote: RemoteDashboard, stored: str, schema: str) -> str:
    other = "--schema v1" if stored == "v1" else "--schema v2"
    return (f"stored in Grafana as schema {stored} (dashboard.grafana.app/{remote.stored_version}), read converted "
            f"to {schema}; publishing schema {schema} replaces that model: use --force to do so, or {other}")


def _drift_reason(remote: RemoteDashboard, moved: bool) -> str:
    if stamp_of(remote.dashboard) is None:
        return "live dashboard was not published by llmdash (no llmdash-sha tag)"
    if moved and not edited_since_publish(remote.dashboard):
        return "moved to another folder in Grafana since the last publish"
    return f"edited in Grafana since the last llmdash publish (live version {remote.version})"


def _refused(options: PublishOptions, name: str, uid: str, remote: RemoteDashboard, why: str) -> PublishResult:
    return PublishResult(name, uid, WOULD_REFUSE if options.dry_run else REFUSED, remote.version, why)


def _save(name: str, dashboard: dict, backend: GrafanaBackend, options: PublishOptions, *, version: int,
          created: bool, message: str, resource_version: str = "") -> PublishResult:
    uid = dashboard["uid"]
    result = CREATED if created else UPDATED
    try:
        saved = backend.save_dashboard(stamped(dashboard), folder_uid=options.folder_uid, version=version,
                                       overwrite=options.force, message=message, resource_version=resource_version)
    except GrafanaError as failure:
        # A save Grafana applied but answered 5xx or reset is retried and then meets its own
        # write (UnconfirmedSave), or gives up: what Grafana now holds decides whether it was saved.
        if isinstance(failure, Refused) and not isinstance(failure, VersionMismatch):
            return PublishResult(name, uid, REFUSED, None, str(failure))
        landed = _landed(backend, dashboard, options)
        if landed is not None:
            # The conflict of a retry that met our own first attempt is not news: report that attempt.
            cause = failure.cause if isinstance(failure, UnconfirmedSave) else str(failure)
            return PublishResult(name, uid, result, landed.version,
                           f"saved (re-reading Grafana shows this build), although the save got: {cause}")
        if isinstance(failure, VersionMismatch):
            return PublishResult(name, uid, REFUSED, None, str(failure))
        raise
    return PublishResult(name, uid, result, saved.version)


def _landed(backend: GrafanaBackend, dashboard: dict, options: PublishOptions) -> RemoteDashboard | None:
    """The live dashboard when it is exactly what this publish sent (our stamp, unedited, our folder)."""
    try:
        remote = backend.get_dashboard(dashboard["uid"])
    except GrafanaError:
        return None
    if (remote is None or remote.folder_uid != options.folder_uid
            or stamp_of(remote.dashboard) != content_hash(dashboard) or edited_since_publish(remote.dashboard)):
        return None
    return remote


# ---------------------------------------------------------------- reporting


def summary_table(outcomes: list[PublishResult]) -> str:
    rows = [("dashboard", "uid", "result", "version")]
    rows += [(o.name, o.uid, o.result, str(o.version) if o.version else "-") for o in outcomes]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    counts = {}
    for o in outcomes:
        counts[o.result] = counts.get(o.result, 0) + 1
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(", ".join(f"{n} {result}" for result, n in counts.items()))
    return "\n".join(lines)


def git_revision() -> str:
    """Short commit of the checkout (with -dirty), for the save message and the annotation tag."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], capture_output=True,
                             text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"
