"""The web console in a real browser: Debian's chromium driven by Playwright, against a live registry
and a real OpenID Provider. Set REGISTRY_SCREENSHOTS=DIR to keep the screenshots the README shows."""

from __future__ import annotations

import base64
import os
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.conftest import (
    OPERATOR_TOKEN,
    LiveServer,
    PgServer,
    _create_database,
    _drop_database,
    free_port,
    start_server,
    stop_server,
    unavailable,
)
from tests.oauth.idp import Provider

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow
CHROMIUM = "/usr/bin/chromium"
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
SHOTS = os.environ.get("REGISTRY_SCREENSHOTS")
# Where a write redirects: the prompt page with its note. The form it came from matches a looser
# pattern already, so waiting on one would return before the write is done.
DONE = re.compile(r"/ui/acme/prompts/support-reply\?message=")
SUPPORT = {
    "name": "support-reply",
    "title": "Support reply",
    "description": "Answers a customer in the team's tone",
    "tags": ["support"],
    "arguments": [
        {"name": "customer", "required": True, "description": "the customer's first name",
         "pattern": "^[A-Z][a-z]+$"},
        {"name": "tone", "enum": ["friendly", "formal"], "default": "friendly"},
    ],
    "messages": [{"role": "user", "text": "Write a {{tone}} reply to {{customer}}."}],
    "commit_message": "first draft",
}  # fmt: skip
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
SKILL = {
    "name": "code-review",
    "files": [{"path": "SKILL.md", "text": "---\nname: code-review\ndescription: How we review\n"
               "---\n# Review\n\n<script>window.__xss = 3</script>\n"}],
}  # fmt: skip
HOSTILE = {
    "name": "hostile",
    "title": "<script>window.__xss = 1</script>",
    "messages": [{"role": "user", "text": '<img src=x onerror="window.__xss = 2">'}],
}


@dataclass
class Console:
    server: LiveServer
    provider: Provider
    keys: dict[str, str]

    def url(self, path: str) -> str:
        return f"{self.server.url}/ui/acme{path}"


@pytest.fixture(scope="module")
def ports() -> tuple[int, int]:
    return free_port(), free_port()


@pytest.fixture(scope="module")
def provider(
    tmp_path_factory: pytest.TempPathFactory, ports: tuple[int, int]
) -> Iterator[Provider]:
    console_client = {
        "client_id": "prompt-registry-console", "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code"], "response_types": ["code"],
        "redirect_uris": [f"http://127.0.0.1:{ports[0]}/ui/callback"],
    }  # fmt: skip
    idp = Provider(tmp_path_factory.mktemp("idp"), port=ports[1], clients=[console_client])
    idp.start()
    yield idp
    idp.stop()


@pytest.fixture(scope="module")
async def console(
    pg_server: PgServer, template_db: str, provider: Provider, ports: tuple[int, int]
) -> AsyncIterator[Console]:
    name = await _create_database(pg_server, template_db)
    live = start_server(
        {
            "REGISTRY_DATABASE_URL": pg_server.plain_url(name),
            "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
            "REGISTRY_PUBLIC_URL": f"http://127.0.0.1:{ports[0]}",
            "REGISTRY_OAUTH_ALLOW_PRIVATE_ISSUERS": "true",
            "REGISTRY_USAGE_FLUSH_SECONDS": "0.2",  # the ledger's counts reach the charts soon
        },
        port=ports[0],
    )
    try:
        keys = _seed(live, provider)
        yield Console(live, provider, keys)
    finally:
        stop_server(live)
        await _drop_database(pg_server, name)


def _seed(live: LiveServer, provider: Provider) -> dict[str, str]:
    """Tenant acme: a key per role, two prompts and sixty more (more than a page), trusting the
    provider (its prompt-publishers are publishers)."""
    keys = live.tenant(
        "acme", roles=("reader", "editor", "publisher", "admin"), prompts=[SUPPORT, HOSTILE]
    )
    for index in range(60):
        body = {"name": f"faq-{index:02}", "messages": [{"role": "user", "text": f"FAQ {index}"}],
                "tags": ["faq"]}  # fmt: skip
        made = httpx.post(f"{live.url}/api/v1/tenants/acme/prompts", json=body, headers=OPERATOR)
        assert made.status_code == 201, made.text
    live.skill("acme", SKILL, label="staging")
    second = {"files": [*SKILL["files"], {"path": "references/STYLE.md", "text": "Short lines.\n"}]}
    made = httpx.post(
        f"{live.url}/api/v1/tenants/acme/skills/code-review/versions", json=second, headers=OPERATOR
    )
    assert made.status_code == 201, made.text
    trusted = httpx.put(
        f"{live.url}/api/v1/tenants/acme/issuers",
        json={"issuers": [{"issuer": provider.issuer, "rules": [
            {"claim": "groups", "equals": "prompt-publishers", "role": "publisher"}]}]},
        headers=OPERATOR,
    )  # fmt: skip
    assert trusted.status_code == 200, trusted.text
    return keys


@pytest.fixture(scope="module")
def browser(console: Console) -> Iterator[object]:
    """Playwright's sync API runs its own loop in this thread: the live server (set up on the
    tests' loop) comes first, and is torn down after the browser."""
    del console
    if not Path(CHROMIUM).is_file():
        unavailable("Debian's chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )  # fmt: skip
        yield launched
        launched.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})  # type: ignore[attr-defined]
    tab = context.new_page()
    yield tab
    context.close()


def shot(page: object, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=False)  # type: ignore[attr-defined]


def expect(target: object) -> Any:
    """Playwright's web-first assertions: each waits for the page to show what it checks (a click
    that submits a form returns before the answer is on the page)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)  # type: ignore[call-overload]


def sign_in(page: object, console: Console, role: str) -> None:
    page.goto(console.url("/prompts"))  # type: ignore[attr-defined]
    assert "/login" in page.url  # type: ignore[attr-defined]
    page.get_by_label("API key").fill(console.keys[role])  # type: ignore[attr-defined]
    page.get_by_role("button", name="Sign in with the key").click()  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"/ui/acme/prompts$"))  # type: ignore[attr-defined]


# --- the tests ----------------------------------------------------------------------------------


def test_sign_in_search_and_page(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    sign_in(page, console, "reader")
    cookie = next(c for c in page.context.cookies() if c["name"] == "registry_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    assert console.keys["reader"] not in str(page.context.cookies())
    storage = page.evaluate("JSON.stringify(localStorage) + JSON.stringify(sessionStorage)")
    assert console.keys["reader"] not in storage
    shot(page, "prompts")
    rows = page.locator("tbody tr")
    assert rows.count() == 50  # one page
    page.get_by_role("link", name="Next page").click()
    expect(rows).to_have_count(12)  # 62 prompts in all
    page.get_by_label("Search").fill("team's tone")
    page.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(1)
    expect(page.get_by_role("link", name="support-reply")).to_be_visible()
    page.get_by_label("Tag").fill("faq")
    page.get_by_label("Search").fill("")
    page.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(50)
    # A reader sees no editing and no administration.
    assert page.get_by_role("link", name="New prompt").count() == 0
    assert page.get_by_role("link", name="API keys").count() == 0
    page.goto(console.url("/keys"))
    assert "needs the admin role" in page.content()


def test_prompt_text_is_escaped_everywhere(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    sign_in(page, console, "reader")
    page.get_by_label("Search").fill("hostile")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("<script>window.__xss = 1</script>")).to_be_visible()
    page.goto(console.url("/prompts/hostile/versions/1"))
    expect(page.get_by_text('<img src=x onerror="window.__xss = 2">')).to_be_visible()
    page.goto(console.url("/prompts/hostile/preview"))
    page.get_by_role("button", name="Render").click()
    expect(page.get_by_role("heading", name="What prompts/get returns")).to_be_visible()
    assert page.evaluate("window.__xss") is None
    headers = httpx.get(console.url("/login")).headers
    policy = headers["content-security-policy"]
    assert "script-src 'self';" in policy and "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy
    assert headers["x-frame-options"] == "DENY"


def test_edit_with_live_validation_then_save_and_conflict(
    page: Page, console: Console, tmp_path: Path
) -> None:
    sign_in(page, console, "editor")
    page.goto(console.url("/prompts/support-reply/edit"))
    editor = page.get_by_label(re.compile("^Prompt"))
    text = editor.input_value()
    editor.fill(text.replace("{{customer}}.", "{{#customer}}."))
    status = page.locator("#check")
    status.filter(has_text="line").wait_for()
    assert "unclosed" in status.inner_text() or "close" in status.inner_text()
    shot(page, "edit-error")
    editor.fill(text.replace("{{customer}}.", "{{customer}} about {{order}}."))
    status.filter(has_text="order").wait_for()  # an undeclared variable, named
    editor.fill(text.replace("Write a", "Please write a"))
    status.filter(has_text="✓ Valid").wait_for()
    page.get_by_label("Commit message").fill("politer")
    page.get_by_role("button", name="Save new version").click()
    page.wait_for_url(DONE)  # the prompt page with its note, not the form still shown
    assert "version 2 written" in page.content()
    expect(page.get_by_role("cell", name="politer")).to_be_visible()
    # Two people edit version 2 at once: the second save is a conflict with the first's changes.
    page.goto(console.url("/prompts/support-reply/edit"))
    other = httpx.post(
        f"{console.server.url}/api/v1/tenants/acme/prompts/support-reply/versions",
        json={**{k: SUPPORT[k] for k in ("arguments", "title")},
              "messages": [{"role": "user", "text": "Reply kindly to {{customer}}."}],
              "commit_message": "someone else"},
        headers={"Authorization": f"Bearer {console.keys['editor']}", "If-Match": '"2"'},
    )  # fmt: skip
    assert other.status_code == 201, other.text
    editor = page.get_by_label(re.compile("^Prompt"))
    editor.fill(editor.input_value().replace("Please write", "Kindly write"))
    page.get_by_role("button", name="Save new version").click()
    expect(page.get_by_role("heading", name=re.compile("Someone saved version 3"))).to_be_visible()
    assert "Reply kindly to {{customer}}." in page.content()  # their change, shown
    assert "Kindly write" in editor.input_value()  # my text, kept
    shot(page, "conflict")
    page.get_by_role("button", name="Save new version").click()  # on top of theirs, knowingly
    page.wait_for_url(DONE)  # the prompt page with its note, not the form still shown
    assert "version 4 written" in page.content()
    # An image message: uploaded as a blob, its message added to the text, shown on the version.
    page.goto(console.url("/prompts/support-reply/edit"))
    picture = tmp_path / "dot.png"
    picture.write_bytes(base64.b64decode(PNG))
    page.get_by_label("Add an image or audio message").set_input_files(str(picture))
    page.locator("#check").filter(has_text="✓ Valid").wait_for()
    assert "type: image" in page.get_by_label(re.compile("^Prompt")).input_value()
    page.get_by_role("button", name="Save new version").click()
    page.wait_for_url(DONE)  # the prompt page with its note, not the form still shown
    page.goto(console.url("/prompts/support-reply/versions/5"))
    image = page.get_by_role("img", name="image 2")
    image.wait_for()
    assert image.evaluate("node => node.complete && node.naturalWidth") == 1


def test_preview_form_and_diff(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    sign_in(page, console, "reader")
    page.goto(console.url("/prompts/support-reply/preview?version=1"))
    assert page.get_by_label("tone").input_value() == "friendly"  # the default, filled
    assert page.get_by_label("tone").locator("option").count() == 2  # the enum, as choices
    assert page.get_by_label(re.compile("customer")).get_attribute("pattern") == "^[A-Z][a-z]+$"
    page.get_by_label(re.compile("customer")).fill("Ada")
    page.get_by_label("tone").select_option("formal")
    page.get_by_role("button", name="Render").click()
    expect(page.get_by_text("Write a formal reply to Ada.")).to_be_visible()
    shot(page, "preview")
    page.goto(console.url("/prompts/support-reply/diff?a=1&b=2"))
    expect(page.get_by_text("+Please write a {{tone}} reply to {{customer}}.")).to_be_visible()
    expect(page.get_by_role("heading", name="Version 1", exact=True)).to_be_visible()
    shot(page, "diff")
    # Version 3 (written through the API by "someone else") has no description: said as such.
    page.goto(console.url("/prompts/support-reply/diff?a=2&b=3"))
    removed = page.get_by_text("description: Answers a customer in the team's tone → (none)")
    expect(removed).to_be_visible()
    # Preview from the prompt's page shows the latest version (just saved), and picks others.
    page.goto(console.url("/prompts/support-reply"))
    page.get_by_role("link", name="Preview").click()
    latest = httpx.get(
        f"{console.server.url}/api/v1/tenants/acme/prompts/support-reply", headers=OPERATOR
    ).json()
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"v{latest['latest_version']}")
    page.get_by_label("Label").select_option("production")
    page.get_by_role("button", name="Show label").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(
        f"v{latest['labels']['production']} (production)"
    )
    page.get_by_label("Version").select_option("1")
    page.get_by_role("button", name="Show version").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("v1")


def test_label_moves_refused_for_an_editor_done_by_a_publisher(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    sign_in(page, console, "editor")
    page.goto(console.url("/prompts/support-reply"))
    page.get_by_label("Move label").fill("production")
    page.get_by_label("to version").fill("2")
    page.get_by_role("button", name="Review the move").click()
    expect(page.locator("body")).to_contain_text("needs the publisher role")
    page.context.clear_cookies()
    sign_in(page, console, "publisher")
    page.goto(console.url("/prompts/support-reply"))
    page.get_by_label("Move label").fill("production")
    page.get_by_label("to version").fill("2")
    page.get_by_role("button", name="Review the move").click()
    expect(page.get_by_role("heading", name=re.compile("Move production"))).to_be_visible()
    assert "It serves version 1 now." in page.content()
    expect(page.get_by_text("+Please write a {{tone}} reply to {{customer}}.")).to_be_visible()
    shot(page, "publish")
    page.get_by_role("button", name="Move production").click()
    page.wait_for_url(DONE)  # the prompt page with its note, not the form still shown
    assert "production now serves version 2" in page.content()
    served = httpx.get(
        f"{console.server.url}/api/v1/tenants/acme/prompts/support-reply/labels",
        headers={"Authorization": f"Bearer {console.keys['reader']}"},
    ).json()
    assert served["production"] == 2


def test_keys_are_created_once_and_revoked(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    sign_in(page, console, "admin")
    page.get_by_role("link", name="API keys").click()
    page.get_by_label("Name").fill("from the console")
    page.get_by_label("Role").select_option("reader")
    page.get_by_role("button", name="Create a key").click()
    secret = page.get_by_label("Secret").input_value()
    assert secret.startswith("prk_")
    shot(page, "keys")
    assert httpx.get(f"{console.server.url}/api/v1/tenants/acme/prompts",
                     headers={"Authorization": f"Bearer {secret}"}).status_code == 200  # fmt: skip
    page.goto(console.url("/keys"))
    assert secret not in page.content()
    page.get_by_role("button", name="Revoke from the console").click()
    expect(page.get_by_role("button", name="Revoke from the console")).to_have_count(0)
    assert httpx.get(f"{console.server.url}/api/v1/tenants/acme/prompts",
                     headers={"Authorization": f"Bearer {secret}"}).status_code == 403  # fmt: skip
    page.get_by_role("link", name="Audit log").click()
    page.get_by_label("Action").fill("key.revoke")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("tbody tr")).to_have_count(1)
    page.get_by_role("link", name="Connect a client").click()
    expect(page.locator("body")).to_contain_text(f"{console.server.url}/mcp/acme")


def test_csrf_and_other_origins_are_refused(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    sign_in(page, console, "admin")
    cookie = next(c for c in page.context.cookies() if c["name"] == "registry_console")
    jar = {"registry_console": cookie["value"]}
    target = console.url("/keys")
    no_token = httpx.post(target, data={"role": "admin"}, cookies=jar)
    assert no_token.status_code == 403
    assert "CSRF" in no_token.text
    wrong = httpx.post(target, data={"role": "admin", "csrf": "guess"}, cookies=jar)
    assert wrong.status_code == 403
    token = page.locator("input[name=csrf]").first.get_attribute("value")
    elsewhere = httpx.post(target, data={"role": "admin", "csrf": token}, cookies=jar,
                           headers={"Origin": "https://evil.example"})  # fmt: skip
    assert elsewhere.status_code == 403
    assert "cross-origin" in elsewhere.text
    same = httpx.post(target, data={"role": "reader", "csrf": token, "name": "csrf-ok"}, cookies=jar,
                      headers={"Origin": console.server.url})  # fmt: skip
    assert same.status_code == 200 and "csrf-ok" in same.text


def test_sign_in_with_the_identity_provider(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    page.goto(console.url("/login"))
    page.get_by_role("link", name=f"Sign in with {console.provider.issuer}").click()
    page.locator("input[name=login]").fill("alice")
    page.locator("input[name=password]").fill("anything")
    page.locator("button[type=submit]").click()
    page.locator("button[type=submit]").click()  # consent
    page.wait_for_url(re.compile(r"/ui/acme/prompts$"))
    expect(page.get_by_text("acme · publisher")).to_be_visible()
    # A phone-sized screen still shows the list.
    page.set_viewport_size({"width": 390, "height": 800})
    page.reload()
    expect(page.get_by_role("link", name="faq-00")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    shot(page, "phone")


def test_keyboard_reaches_the_sign_in_form(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    page.goto(console.url("/login"))
    for _ in range(6):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "key":
            break
    assert page.evaluate("document.activeElement.id") == "key"
    page.keyboard.type(console.keys["reader"])
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/ui/acme/prompts$"))


def test_settings_and_bad_input_answer_with_pages(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    sign_in(page, console, "admin")
    page.get_by_role("link", name="Settings").click()
    page.get_by_label("Instructions for MCP clients").fill("Prefer <b>short</b> prompts.")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("Saved.")).to_be_visible()
    tenant = httpx.get(f"{console.server.url}/api/v1/tenants/acme", headers=OPERATOR).json()
    assert tenant["instructions"] == "Prefer <b>short</b> prompts."
    page.get_by_label("Default label").fill("NOT a label!")
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator(".error")).to_be_visible()  # named, not a 500
    for path, status in (
        ("/prompts/nothing-here", 404),
        ("/prompts/support-reply/versions/99999999999999999999", 404),
        ("/prompts/support-reply/versions/abc", 404),
        ("/prompts/support-reply/diff?a=1&b=999", 404),
        ("/prompts/support-reply/preview?version=12345678", 404),
    ):
        answer = page.goto(console.url(path))
        assert answer.status == status, (path, answer.status)
        expect(page.locator(".error")).to_be_visible()
    page.goto(console.url("/prompts"))
    token = page.locator("input[name=csrf]").first.get_attribute("value")
    cookie = next(c for c in page.context.cookies() if c["name"] == "registry_console")
    bad_yaml = httpx.post(console.url("/save"), cookies={"registry_console": cookie["value"]},
                          data={"csrf": token, "name": "support-reply", "base": "1",
                                "text": "messages: [unclosed"})  # fmt: skip
    assert bad_yaml.status_code == 422
    assert "invalid YAML" in bad_yaml.text


def test_the_sign_in_page_shows_only_the_servers_words(console: Console) -> None:
    """Its address is anyone's to write: a `why` the server did not choose shows nothing."""
    planted = "Your account is locked: call +1 555 0100 and read them your key"
    page = httpx.get(console.url("/login"), params={"why": planted})
    assert page.status_code == 200 and planted not in page.text
    sent = httpx.get(console.url("/prompts"))  # not signed in: sent to sign in, with a code
    assert sent.status_code == 303
    assert "why=first" in sent.headers["location"]
    shown = httpx.get(f"{console.server.url}{sent.headers['location']}")
    assert "sign in to this tenant first" in shown.text


def test_a_breaking_move_not_ticked_stays_on_the_review(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    """Moving production to a version that breaks its callers without ticking the box: the person
    stays on the review, told in the console's words (never REST's), and can tick it there."""
    breaking = {"arguments": [{"name": "ticket", "required": True}],
                "messages": [{"role": "user", "text": "Only {{ticket}}."}]}  # fmt: skip
    written = httpx.post(
        f"{console.server.url}/api/v1/tenants/acme/prompts/support-reply/versions",
        json=breaking, headers=OPERATOR,
    )  # fmt: skip
    assert written.status_code == 201, written.text
    version = str(written.json()["version"])
    sign_in(page, console, "publisher")
    page.goto(console.url("/prompts/support-reply"))
    page.get_by_label("Move label").fill("production")
    page.get_by_label("to version").fill(version)
    page.get_by_role("button", name="Review the move").click()
    page.get_by_role("button", name="Move production").click()  # the box not ticked
    expect(page.get_by_role("alert")).to_contain_text("breaks the arguments its callers send")
    expect(page.get_by_role("alert")).to_contain_text("Tick “Move it anyway”")
    assert "Send force" not in page.content() and "force=true" not in page.content()
    expect(page.get_by_role("heading", name=re.compile("Move production"))).to_be_visible()
    page.get_by_label(re.compile("Move it anyway")).check()
    page.get_by_role("button", name="Move production").click()
    page.wait_for_url(DONE)
    assert f"production now serves version {version}" in page.content()
    # Who moved it reads as a name, and the audit shows the move as forced, with its breaks.
    history = page.locator("main").inner_text()
    assert "key:" not in history and re.search(r"publisher-\w+ \(key \w+…\)", history), history
    page.context.clear_cookies()
    sign_in(page, console, "admin")
    page.goto(console.url("/audit?action=label.move"))
    row = page.locator("tr", has_text="forced").first
    expect(row).to_contain_text("breaks")
    expect(row).to_contain_text(re.compile(r"publisher-\w+ \(key \w+…\)"))


def test_connect_shows_configurations_that_work(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    sign_in(page, console, "reader")
    page.get_by_role("link", name="Connect a client").click()
    text = page.locator("main").inner_text()
    assert f"{console.server.url}/mcp/acme" in text
    assert '"command": "/' in text  # the registry command by absolute path
    assert "REGISTRY_DATABASE_URL" in text and "postgresql://…" not in text
    # acme trusts an identity provider and the registry has its public address: OAuth is shown.
    expect(page.get_by_role("heading", name=re.compile("identity provider"))).to_be_visible()


def test_small_screens_and_small_things(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    """A phone-sized screen scrolls tables inside themselves (the page never runs wider than the
    screen); the site has an icon; a prompt without a title is listed with its description; a
    name that breaks the pattern says which pattern; no console error on the sign-in pages."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{console.server.url}/ui")
    page.goto(console.url("/login"))
    assert errors == [], errors
    assert httpx.get(f"{console.server.url}/favicon.ico").headers["content-type"] == "image/svg+xml"
    sign_in(page, console, "editor")
    page.set_viewport_size({"width": 420, "height": 800})
    for path in ("/prompts", "/prompts/support-reply", "/prompts/support-reply/versions/1",
                 "/prompts/support-reply/diff?a=1&b=2", "/connect"):  # fmt: skip
        page.goto(console.url(path))
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 420, f"{path} is {wide} px wide at 420"
    untitled = {"name": "untitled-one", "description": "Only a description",
                "messages": [{"role": "user", "text": "Hi"}]}  # fmt: skip
    made = httpx.post(
        f"{console.server.url}/api/v1/tenants/acme/prompts", json=untitled, headers=OPERATOR
    )
    assert made.status_code == 201, made.text
    page.goto(console.url("/prompts?text=untitled"))
    expect(page.locator("tr", has_text="untitled-one")).to_contain_text("Only a description")
    page.goto(console.url("/new"))
    page.get_by_label("Name").fill("no/slash")
    message = page.get_by_label("Name").evaluate("e => (e.checkValidity(), e.validationMessage)")
    assert "no / or @" in message, message


def test_the_editor_points_at_its_own_lines_and_lists_every_problem(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    sign_in(page, console, "editor")
    page.goto(console.url("/new"))
    page.get_by_label("Name").fill("two-problems")
    editor = page.get_by_label(re.compile("^Prompt"))
    editor.fill(
        "title: Two problems\n"  # 1
        "arguments:\n"  # 2
        "  - name: topic\n"  # 3
        "messages:\n"  # 4
        "  - role: user\n"  # 5
        "    text: |\n"  # 6
        "      First line.\n"  # 7
        "      About {{#topic}} here.\n"  # 8: an unclosed section, at column 13
        "  - role: assistant\n"  # 9
        "    text: 'Ok {{'\n"  # 10: an unclosed tag, at column 15
    )
    status = page.locator("#check")
    problems = status.locator(".problem")
    expect(problems).to_have_count(2)
    assert "messages[0].text" in problems.nth(0).inner_text()
    assert "(line 8, column 13)" in problems.nth(0).inner_text()
    assert "messages[1].text" in problems.nth(1).inner_text()
    assert "(line 10, column 15)" in problems.nth(1).inner_text()
    # What only the registry can tell (an undeclared variable) is placed in the editor too.
    editor.fill(
        "messages:\n"  # 1
        "  - role: user\n"  # 2
        "    text: |\n"  # 3
        "      Hello.\n"  # 4
        "      About {{nobody}}.\n"  # 5: column 13
    )
    expect(problems).to_have_count(1)
    expect(problems.first).to_contain_text("messages[0].text: unknown variable 'nobody'")
    expect(problems.first).to_contain_text("(line 5, column 13)")


def test_skills_browse_diff_and_publish(page: Page, console: Console) -> None:
    sign_in(page, console, "publisher")
    page.get_by_role("link", name="Skills").click()
    page.get_by_role("link", name="code-review").click()
    page.get_by_text("staging: v1").wait_for()
    page.get_by_role("link", name="v1", exact=True).click()
    shown = page.locator("pre")
    assert "<script>window.__xss = 3</script>" in shown.inner_text()  # shown as text, never run
    assert page.evaluate("window.__xss") is None
    page.go_back()
    page.get_by_role("link", name="diff").click()
    page.get_by_role("cell", name="references/STYLE.md").wait_for()
    assert page.get_by_role("cell", name="added").is_visible()
    page.go_back()
    page.get_by_label("Label").fill("production")
    page.get_by_label("Version", exact=True).fill("2")
    page.get_by_role("button", name="Publish").click()
    page.get_by_text("production now serves version 2").wait_for()
    assert page.get_by_text("production: v2").is_visible()


def test_a_change_request_is_reviewed_and_approved_in_the_page(
    page: Page, console: Console
) -> None:
    """A tenant of its own (its approvals would gate the other tests' moves): the author reads the
    review page (the move's diff, its tests, no approve button for the author), a publisher
    approves it there and the release applies."""
    base = f"{console.server.url}/api/v1/tenants"
    assert httpx.post(base, json={"slug": "rel"}, headers=OPERATOR).status_code == 201
    keys = {}
    for role in ("editor", "publisher"):
        made = httpx.post(f"{base}/rel/keys", json={"role": role}, headers=OPERATOR)
        keys[role] = {"Authorization": f"Bearer {made.json()['secret']}"}, made.json()["secret"]
    first = {"name": "notice", "labels": ["production"],
             "messages": [{"role": "user", "text": "Closed on Monday."}],
             "tests": [{"name": "mentions-the-day", "expect": {"contains": ["day"]}}]}  # fmt: skip
    assert httpx.post(f"{base}/rel/prompts", json=first, headers=OPERATOR).status_code == 201
    second = {"messages": [{"role": "user", "text": "Closed on Tuesday."}]}
    written = httpx.post(f"{base}/rel/prompts/notice/versions", json=second, headers=OPERATOR)
    assert written.status_code == 201, written.text
    gated = httpx.patch(f"{base}/rel", json={"approvals": {"production": 1}}, headers=OPERATOR)
    assert gated.status_code == 200, gated.text
    body = {"description": "<script>window.__xss = 4</script> Tuesday closing",
            "moves": [{"prompt": "notice", "label": "production", "version": 2}]}  # fmt: skip
    opened = httpx.post(f"{base}/rel/change-requests", json=body, headers=keys["editor"][0])
    assert opened.status_code == 201, opened.text

    def sign_in_rel(role: str) -> None:
        page.goto(f"{console.server.url}/ui/rel/prompts")
        page.get_by_label("API key").fill(keys[role][1])
        page.get_by_role("button", name="Sign in with the key").click()
        page.wait_for_url(re.compile(r"/ui/rel/prompts$"))

    sign_in_rel("editor")
    page.get_by_role("link", name="Change requests").click()
    page.get_by_role("link", name="1", exact=True).click()
    expect(page.locator("#state")).to_have_text("open")
    assert "-Closed on Monday." in page.locator("pre").first.inner_text()
    assert "+Closed on Tuesday." in page.locator("pre").first.inner_text()
    expect(page.get_by_text("ok mentions-the-day")).to_be_visible()
    expect(page.get_by_role("heading", name="Approvals: 0 of 1")).to_be_visible()
    assert page.get_by_role("button", name="Approve").count() == 0  # the author's own
    assert page.evaluate("window.__xss") is None
    shot(page, "change-request")
    page.context.clear_cookies()

    sign_in_rel("publisher")
    page.goto(f"{console.server.url}/ui/rel/change-requests/1")
    page.get_by_label("Comment").fill("Tuesday it is")
    page.get_by_role("button", name="Approve").click()
    page.get_by_text("approved: the request is applied").wait_for()
    expect(page.locator("#state")).to_have_text("applied")
    expect(page.locator("#reviews")).to_contain_text("approve: Tuesday it is")
    served = httpx.get(f"{base}/rel/prompts/notice/labels", headers=keys["editor"][0]).json()
    assert served["production"] == 2
    # The prompt's test cases are part of the editor's document, and a save runs them.
    page.goto(f"{console.server.url}/ui/rel/prompts/notice/edit")
    editor = page.get_by_label(re.compile("^Prompt"))
    assert "mentions-the-day" in editor.input_value()
    editor.fill(editor.input_value().replace("Tuesday", "Wednesday"))
    page.locator("#check").filter(has_text="✓ Valid").wait_for()
    page.get_by_role("button", name="Save new version").click()
    page.wait_for_url(re.compile(r"/ui/rel/prompts/notice\?message="))
    assert "tests: 1 passed, 0 failed" in page.content()


def _ledger_holds(console: Console, query: dict[str, str], answers: int) -> list[dict[str, Any]]:
    """The ledger's rows for ``query`` once they add up to ``answers`` (the worker writes its
    counts every 0.2 s here: this waits for that write, checked by reading, up to a minute)."""
    reader = {"Authorization": f"Bearer {console.keys['reader']}"}
    deadline = time.monotonic() + 60
    while True:
        got = httpx.get(console.url("").replace("/ui/", "/api/v1/tenants/") + "/usage",
                        params=query, headers=reader)  # fmt: skip
        assert got.status_code == 200, got.text
        rows: list[dict[str, Any]] = got.json()["rows"]
        if sum(r["answers"] for r in rows) >= answers or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def test_usage_charts_draw_what_the_ledger_answers(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    """Answers served over REST show on the prompt's page as a chart of answers per version
    (drawn by the vendored Chart.js under the console's CSP, with the REST answer's numbers),
    per client and per caller, at 420 px wide; the tenant's overview charts them too."""
    reader = {"Authorization": f"Bearer {console.keys['reader']}", "User-Agent": "chart-test/1"}
    render = console.url("").replace("/ui/", "/api/v1/tenants/") + "/prompts/faq-07/render"
    for _ in range(5):
        rendered = httpx.post(render, json={"version": 1}, headers=reader)
        assert rendered.status_code == 200, rendered.text
    rows = _ledger_holds(console, {"name": "faq-07", "by": "version,hour"}, 5)
    # One row per hour: an hour may turn between the five answers (two rows then, 5 in all).
    assert {r["version"] for r in rows} == {1} and sum(r["answers"] for r in rows) == 5, rows
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    sign_in(page, console, "reader")
    page.set_viewport_size({"width": 420, "height": 800})
    page.goto(console.url("/prompts/faq-07"))
    canvas = page.locator("#versions-chart")
    expect(canvas).to_have_attribute("data-drawn", "1")
    drawn = page.evaluate(
        "() => { const c = Chart.getChart(document.getElementById('versions-chart'));"
        " return {labels: c.data.labels, sets: c.data.datasets.map(d => [d.label, d.data])}; }"
    )
    ((name, data),) = drawn["sets"]
    assert name == "v1" and sum(data) == 5
    for row in rows:  # each hour's answers where the chart puts them
        hour = row["at"][5:13].replace("T", " ") + ":00"  # as the chart labels its hours
        assert data[drawn["labels"].index(hour)] == row["answers"]
    assert canvas.bounding_box()["width"] > 300  # drawn to the screen's width, not hidden
    panel = page.locator("#usage").locator("..")
    expect(panel).to_contain_text("chart-test/1")
    expect(panel).to_contain_text("reader")  # the caller, by its key's name
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= 420, f"the prompt page is {wide} px wide at 420"
    canvas.scroll_into_view_if_needed()
    shot(page, "usage-prompt")
    page.goto(console.url("/usage?days=1"))
    expect(page.locator("#usage-chart")).to_have_attribute("data-drawn", re.compile(r"^[1-9]"))
    expect(page.get_by_role("link", name="prompt faq-07")).to_be_visible()
    expect(page.get_by_role("link", name="prompt faq-08")).to_be_visible()  # idle: never served
    assert page.evaluate("document.documentElement.scrollWidth") <= 420
    shot(page, "usage-overview")
    assert errors == [], errors  # no script refused by the Content-Security-Policy


def test_a_library_offer_made_and_withdrawn_in_the_page(page, console: Console) -> None:  # type: ignore[no-untyped-def]
    sign_in(page, console, "admin")
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text))
    page.get_by_role("link", name="Libraries").click()
    expect(page.get_by_text("This tenant reads no library.")).to_be_visible()
    page.get_by_label("Offer to the tenant (or * for every tenant)").fill("*")
    page.get_by_role("button", name="serves").click()
    expect(page.get_by_role("status")).to_contain_text("offered production to *")
    expect(page.get_by_text("accepted by nobody yet")).to_be_visible()
    shot(page, "libraries")
    page.get_by_role("button", name="Withdraw the offer to *").click()
    expect(page.get_by_role("status")).to_contain_text("withdrew the offer to *")
    expect(page.get_by_text("accepted by nobody yet")).to_have_count(0)
    assert not [v for v in violations if "Content Security Policy" in v], violations
