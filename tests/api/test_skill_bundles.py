"""Skills travel in bundles: an export holds each skill's versions (SKILL.md as written, files by
digest, their bytes among the blobs) and labels; importing it into another tenant writes them
(partial tags resolved there), and importing it again writes nothing."""

from __future__ import annotations

import base64

from tests.api.conftest import Api, auth

SKILL_MD = "---\nname: review\ndescription: How we review\n---\n# Review\n\n{{> checklist}}\n"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(32)).decode()


async def test_skills_export_and_import_idempotently(api: Api) -> None:
    source = await api.tenant("source")
    target = await api.tenant("target")
    publisher = auth(source["publisher"])
    checklist = {"name": "checklist", "labels": ["production"],
                 "messages": [{"role": "user", "content": {"type": "text", "text": "1. Tests."}}]}  # fmt: skip
    made = await api.client.post(
        "/api/v1/tenants/source/prompts", json=checklist, headers=publisher
    )
    assert made.status_code == 201, made.text
    skill = {
        "name": "review", "labels": ["production"],
        "files": [{"path": "SKILL.md", "text": SKILL_MD},
                  {"path": "assets/logo.png", "base64": PNG, "mime_type": "image/png"}],
    }  # fmt: skip
    made = await api.client.post("/api/v1/tenants/source/skills", json=skill, headers=publisher)
    assert made.status_code == 201, made.text
    exported = await api.client.get("/api/v1/tenants/source/export", headers=publisher)
    assert exported.status_code == 200, exported.text
    bundle = exported.json()
    (item,) = bundle["skills"]
    assert item["labels"] == {"production": 1}
    assert item["versions"][0]["source"] == SKILL_MD
    logo = next(f for f in item["versions"][0]["files"] if f["path"] == "assets/logo.png")
    assert bundle["blobs"][logo["sha256"]]["data"] == PNG

    into = auth(target["publisher"])
    first = await api.client.post("/api/v1/tenants/target/import", json=bundle, headers=into)
    assert first.status_code == 200, first.text
    assert (first.json()["skills_created"], first.json()["skill_versions_created"]) == (1, 1)
    got = (await api.client.get("/api/v1/tenants/target/skills/review", headers=into)).json()
    assert got["labels"] == {"latest": 1, "production": 1}
    served = await api.client.get(
        "/api/v1/tenants/target/skills/review/versions/1/files/SKILL.md", headers=into
    )
    assert "1. Tests." in served.text  # the partial resolved in the target tenant
    again = await api.client.post("/api/v1/tenants/target/import", json=bundle, headers=into)
    assert again.status_code == 200, again.text
    assert again.json()["skill_versions_created"] == 0 and again.json()["skill_labels_moved"] == 0

    broken = {**bundle, "blobs": {}}
    refused = await api.client.post("/api/v1/tenants/target/import", json=broken, headers=into)
    assert refused.status_code == 422 and "lacks" in refused.text
