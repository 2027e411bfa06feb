"""The Architecture tab's link to the model's source (issue 40, item 18): ``GET
/source/explorer/model/<file>.py`` serves the installed file as plain text, and nothing else."""

from __future__ import annotations

import re

from fastapi import FastAPI
from fastapi.testclient import TestClient

from explorer.ui import source
from explorer.ui.tabs import architecture


def client() -> TestClient:
    app = FastAPI()
    source.add_routes(app)
    return TestClient(app)


def test_the_architecture_tab_links_to_the_attention_source():
    linked = re.search(r"\[`explorer/model/attention\.py`\]\(([^)]+)\)", architecture.ARCHITECTURE)
    assert linked, "the file is named as a link"
    reply = client().get("/" + linked.group(1))
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    assert reply.text == (source.MODEL_DIR / "attention.py").read_text(encoding="utf-8")
    assert "def " in reply.text and reply.headers["x-content-type-options"] == "nosniff"


def test_only_the_models_own_files_are_served():
    web = client()
    for path in ("/source/explorer/model/nothing.py", "/source/explorer/model/..%2Fui%2Fapp.py",
                 "/source/explorer/model/%2Fetc%2Fpasswd", "/source/explorer/model/../ui/app.py"):  # fmt: skip
        reply = web.get(path)
        assert reply.status_code == 404, path
        assert "Traceback" not in reply.text
    assert "model's source files are" in web.get("/source/explorer/model/nothing.py").text
