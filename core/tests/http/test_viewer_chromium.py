"""The history viewer in a real headless Chromium (Debian's ``/usr/bin/chromium``).

Driven by Playwright's Python package pointed at that binary (never ``playwright install``).
The page loads, walks "load older" back to the first message of a 500-message thread, shows
a tool call with its result, reasoning, a "start over" line and run outcomes in place, and
shows nothing of another tenant. Without Chromium the test skips, except under
``THREADKEEP_REQUIRE_SERVICES=1`` (CI installs it), where that is a failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from playwright.sync_api import expect

from threadkeep import Message, Reasoning, Share, ToolCall, open_store
from threadkeep.http import JWTAuthenticator, create_app

CHROMIUM = os.environ.get("THREADKEEP_TEST_CHROMIUM", "/usr/bin/chromium")
# Playwright waits 30 s for a selector and 5 s for an `expect`: too little for a browser and a
# server sharing two loaded cores. Waits are for something to appear, so a long bound costs
# nothing when it does.
UI_TIMEOUT_MS = 120_000
expect.set_options(timeout=UI_TIMEOUT_MS)
AGENT = "support"
SECRET = "gateway-tests-shared-secret-0123456789abcdef"
HOSTILE = (
    '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    '<svg onload="alert(3)"></svg><iframe srcdoc="<script>alert(4)</script>"></iframe>'
)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def chromium() -> str:
    if shutil.which(CHROMIUM) is None:
        if os.environ.get("THREADKEEP_REQUIRE_SERVICES") == "1":
            pytest.fail(f"Chromium is required but not found at {CHROMIUM}")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium chromium-driver)")
    return CHROMIUM


def _long_thread() -> list[Message]:
    """500 messages: user/assistant turns, a tool call and its result, reasoning, two runs."""
    messages = [Message(role="user", content="FIRST MESSAGE of the long thread")]
    messages.append(
        Message(
            role="assistant",
            run_id="run-lookup",
            reasonings=[Reasoning(content="The user wants the booking; look it up.")],
            tool_calls=[
                ToolCall(
                    agui_id="call-lookup",
                    name="get_reservation_details",
                    arguments='{"reservation_id": "ZFA04Y"}',
                    content='{"status": "confirmed", "flight": "HAT170"}',
                )
            ],
        )
    )
    messages.append(
        Message(
            role="tool",
            run_id="run-lookup",
            tool_call_ref="call-lookup",
            content='{"status": "confirmed", "flight": "HAT170"}',
        )
    )
    while len(messages) < 500:
        n = len(messages)
        role = "user" if n % 2 else "assistant"
        messages.append(
            Message(
                role=role,
                content=f"turn {n} <b>not html</b>",
                run_id=("run-last" if n >= 490 and role == "assistant" else None),
            )
        )
    return messages


async def _seed(url: str) -> dict[str, str]:
    async with open_store(url) as store:
        long = await store.create_chat(
            "alice", "long", agent_id=AGENT, tenant_id="acme", name="Long thread"
        )
        await store.append_messages(long.chat_id, _long_thread()[:250])
        await store.start_over(long.chat_id)
        await store.append_messages(long.chat_id, _long_thread()[250:])
        await store.start_run(long.chat_id, "run-lookup", owner="w")
        await store.finish_run(long.chat_id, "run-lookup", owner="w", status="complete")
        await store.start_run(long.chat_id, "run-last", owner="w")
        await store.finish_run(long.chat_id, "run-last", owner="w", status="errored", error="x")
        short = await store.create_chat(
            "alice",
            "short",
            agent_id=AGENT,
            tenant_id="acme",
            name="Short thread",
            share=Share.PRIVATE,
        )
        await store.append_message(short.chat_id, Message(role="user", content="short one"))
        foreign = await store.create_chat(  # chat keys are (user, thread): its own key
            "alice", "long-at-globex", agent_id=AGENT, tenant_id="globex", name="GLOBEX thread"
        )
        await store.append_message(
            foreign.chat_id, Message(role="user", content="GLOBEX-ONLY secret text")
        )
        hostile = await store.create_chat(
            "alice", "hostile", agent_id=AGENT, tenant_id="hostile", name=HOSTILE
        )
        await store.append_messages(
            hostile.chat_id,
            [
                Message(role="user", content=HOSTILE),
                Message(
                    role="assistant",
                    reasonings=[Reasoning(content=HOSTILE)],
                    tool_calls=[
                        ToolCall(agui_id="c1", name=HOSTILE, arguments=HOSTILE, content=HOSTILE)
                    ],
                ),
                Message(role="tool", tool_call_ref="c1", content=HOSTILE),
            ],
        )
        return {"long": str(long.chat_id), "foreign": str(foreign.chat_id)}


@pytest.fixture(scope="module")
def site(tmp_path_factory, serve) -> Iterator[tuple[str, dict[str, str]]]:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('viewer') / 'viewer.db'}"
    ids = asyncio.run(_seed(url))
    app = create_app(url=url, authenticator=JWTAuthenticator.from_secret(SECRET))
    with serve(app) as base:
        yield base, ids


@pytest.fixture
def page(chromium, tmp_path: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),  # a fresh user-data-dir
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_ARGS,
            timeout=UI_TIMEOUT_MS,
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(UI_TIMEOUT_MS)
            yield page
        finally:
            browser.close()


def _open(page: Any, base: str, token: str) -> None:
    page.goto(f"{base}/viewer/#agent={AGENT}&token={token}")
    page.wait_for_selector("#thread-list li")


def test_viewer_walks_a_500_message_thread_back_to_its_first_message(site, page, token):
    base, ids = site
    _open(page, base, token("alice"))
    assert "token=" not in page.url  # the token is taken out of the address bar
    names = page.locator("#thread-list li .name").all_inner_texts()
    assert names == ["Short thread", "Long thread"]
    page.locator(f'#thread-list li[data-thread-id="{ids["long"]}"]').click()
    page.wait_for_selector("#messages article")
    assert page.locator("#messages article").count() == 50
    clicks = 0
    while page.locator("#load-older").is_visible():
        before = page.locator("#messages [data-seq]").count()
        page.locator("#load-older").click()
        expect(page.locator("#messages [data-seq]")).not_to_have_count(before)
        clicks += 1
    assert clicks == 10  # 501 rows (500 messages and a line) at 50 a page: 11 pages
    seqs = [
        int(s)
        for s in page.eval_on_selector_all(
            "#messages [data-seq]", "nodes => nodes.map(n => n.dataset.seq)"
        )
    ]
    assert len(seqs) == 501
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == 501
    first = page.locator("#messages article").first
    assert "FIRST MESSAGE of the long thread" in first.inner_text()

    call = page.locator('.tool-call[data-tool-call-id="call-lookup"]')
    assert "get_reservation_details" in call.inner_text()
    assert '"reservation_id": "ZFA04Y"' in call.locator(".arguments").inner_text()
    assert (
        'result: {"status": "confirmed", "flight": "HAT170"}'
        in call.locator(".result").inner_text()
    )
    reasoning = page.locator(".reasoning").first
    reasoning.locator("summary").click()
    assert "look it up" in reasoning.inner_text()
    assert page.locator(".boundary").count() == 1
    assert "start over" in page.locator(".boundary").inner_text()
    page.wait_for_selector('.run[data-run-id="run-lookup"].complete')
    page.wait_for_selector('.run[data-run-id="run-last"].errored')
    assert page.locator("b").count() == 0  # stored text is shown as text, never as HTML
    assert "turn 300 <b>not html</b>" in page.locator("#messages").inner_text()
    assert "GLOBEX" not in page.content()


def test_viewer_shows_nothing_of_another_tenant(site, page, token):
    base, ids = site
    _open(page, base, token("alice", tenant="globex"))
    assert page.locator("#thread-list li .name").all_inner_texts() == ["GLOBEX thread"]
    assert page.locator("#thread-list li").first.get_attribute("data-thread-id") == ids["foreign"]
    page.locator("#thread-list li").first.click()
    page.wait_for_selector("#messages article")
    text = page.locator("body").inner_text()
    assert "GLOBEX-ONLY secret text" in text
    assert "Long thread" not in text
    assert "FIRST MESSAGE" not in text
    assert "turn " not in text


def test_viewer_without_a_valid_token_shows_the_401(site, page):
    base, _ = site
    page.goto(f"{base}/viewer/#agent={AGENT}&token=forged")
    expect(page.locator("#error")).to_contain_text("401 unauthorized")
    assert page.locator("#thread-list li").count() == 0


def test_viewer_double_clicked_load_older_loads_each_page_once(site, page, token):
    base, ids = site
    _open(page, base, token("alice"))
    page.locator(f'#thread-list li[data-thread-id="{ids["long"]}"]').click()
    expect(page.locator("#messages article")).to_have_count(50)
    page.locator("#load-older").dblclick()
    expect(page.locator("#messages [data-seq]")).not_to_have_count(50)
    page.wait_for_load_state("networkidle")
    seqs = page.eval_on_selector_all(
        "#messages [data-seq]", "nodes => nodes.map(n => n.dataset.seq)"
    )
    assert len(seqs) == len(set(seqs)), "a page of messages was shown twice"


def test_viewer_renders_hostile_names_and_tool_arguments_as_text(site, page, token):
    base, _ = site
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    csp = page.request.get(f"{base}/viewer/").headers["content-security-policy"]
    script_src = next(d for d in csp.split(";") if d.strip().startswith("script-src"))
    assert "'unsafe-inline'" not in script_src, csp  # only the page's own script runs
    _open(page, base, token("alice", tenant="hostile"))
    thread = page.locator("#thread-list li").first
    assert thread.locator(".name").inner_text() == HOSTILE
    thread.click()
    page.wait_for_selector("#messages article")
    call = page.locator(".tool-call").first
    assert HOSTILE in call.locator(".arguments").inner_text()
    assert HOSTILE in call.locator(".result").inner_text()
    assert HOSTILE in page.locator(".message.tool .content").inner_text()
    reasoning = page.locator(".reasoning").first
    reasoning.locator("summary").click()
    assert HOSTILE in reasoning.locator("pre").inner_text()
    assert page.locator("img, iframe, svg, #messages script").count() == 0
    assert dialogs == []


def test_viewer_redirect_keeps_the_mount_prefix():
    async def anyone(_: Any) -> None:
        return None

    parent = FastAPI()
    parent.mount("/chat-api", create_app(url="memory://viewer-mount", authenticator=anyone))

    async def go() -> str:
        transport = httpx.ASGITransport(app=parent)
        async with httpx.AsyncClient(transport=transport, base_url="http://h") as client:
            answer = await client.get("/chat-api/viewer", follow_redirects=False)
            assert answer.status_code in (307, 308), answer.text
            return str(answer.url.join(answer.headers["location"]))

    assert asyncio.run(go()) == "http://h/chat-api/viewer/"
