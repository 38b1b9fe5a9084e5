"""What the publish tests share: the token and folder they publish with, fresh copies of the real
built dashboards to publish, the ITL p99 query a "UI edit" changes, and a client that races an edit."""

from __future__ import annotations

import copy

from llmdash.delivery.publish import PublishOptions
from tests.support.builds import default_dashboards

TOKEN = "glsa_good"
FOLDER = PublishOptions(folder_uid="llm-serving", folder_title="LLM serving")


def panel_in(model: dict, row: str, title: str) -> dict:
    """The panel titled `title` under row `row` (titles repeat across rows, e.g. ITL p99)."""
    current = None
    for panel in model["panels"]:
        if panel["type"] == "row":
            current = panel["title"]
        elif current == row and panel["title"] == title:
            return panel
    raise KeyError(f"{row} / {title}")


def make_dashboard(stem: str, itl_description: str | None = None) -> dict:
    """A fresh copy of the real built dashboard; `itl_description` stands in for a generator change."""
    model = copy.deepcopy(default_dashboards()[stem])
    if itl_description is not None:
        panel_in(model, "Throughput vs latency", "ITL p99")["description"] = itl_description
    return model


def built(*stems: str) -> dict[str, dict]:
    return {stem: make_dashboard(stem) for stem in stems}


def itl_query(model: dict) -> dict:
    return panel_in(model, "Throughput vs latency", "ITL p99")["targets"][0]


def edit_itl_query(model: dict) -> None:
    itl_query(model)["expr"] = "edited_during_incident"


class RacesAnEdit:
    """Mixed into a Grafana client: someone saves in the UI right after our GET, so only Grafana's own
    version check (412 on /api, a stale resourceVersion on /apis) can notice."""

    def __init__(self, fake, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fake = fake

    def get_dashboard(self, uid):
        remote = super().get_dashboard(uid)
        if remote is not None:
            self.fake.ui_save(uid, edit_itl_query)
        return remote
