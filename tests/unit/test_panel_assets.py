"""The web panel's files and how Envoy's config serves them (no browser, no stack)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from batchgate.gateway import panel
from batchgate.gateway.render import render
from batchgate.services.common.loading import load_settings

UI = panel.UI_DIR


def _hcm(config: dict[str, Any]) -> dict[str, Any]:
    return config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]


def _direct_routes(hcm: dict[str, Any]) -> dict[str, dict[str, Any]]:
    routes = hcm["route_config"]["virtual_hosts"][0]["routes"]
    return {r["match"]["path"]: r for r in routes if "direct_response" in r}


def test_every_panel_file_has_a_route_reading_it_from_disk() -> None:
    hcm = _hcm(render(load_settings(environ={})))
    routes = _direct_routes(hcm)
    files = panel.assets()
    assert files is not None, "run `make` (npm ci in gateway/ui) first"
    assert "vendor/papaparse.min.js" in files and "index.html" in files
    assert set(routes) == {"/ui/"} | {f"/ui/{name}" for name in files}
    for name, path in files.items():
        body = routes[f"/ui/{name}"]["direct_response"]["body"]
        assert Path(body["filename"]) == path.resolve()
    assert routes["/ui/"]["direct_response"]["body"]["filename"] == str(files["index.html"])
    largest = max(path.stat().st_size for path in files.values())
    assert hcm["route_config"]["max_direct_response_body_size_bytes"] >= largest
    for route in routes.values():
        headers = {h["header"]["key"]: h["header"]["value"] for h in route["response_headers_to_add"]}
        assert headers == panel.SECURITY_HEADERS
    redirects = {
        r["match"]["path"]: r["redirect"]
        for r in hcm["route_config"]["virtual_hosts"][0]["routes"]
        if "redirect" in r
    }
    assert redirects == {"/": {"path_redirect": "/ui/"}, "/ui": {"path_redirect": "/ui/"}}


def test_each_file_kind_gets_its_content_type_and_keeps_its_body() -> None:
    """Direct responses are local replies: without a mapper Envoy would wrap them in the JSON
    error envelope. Each suffix has a mapper that passes the body through with its type."""
    mappers = _hcm(render(load_settings(environ={})))["local_reply_config"]["mappers"]
    by_type = {
        m["body_format_override"]["content_type"]: m
        for m in mappers
        if "and_filter" in m["filter"]
        and "text_format_source" in m["body_format_override"]
        and m["filter"]["and_filter"]["filters"][0]["status_code_filter"]["comparison"]["value"][
            "default_value"
        ]
        == 200  # the redirects' mapper answers 301s
    }
    assert set(by_type) == {panel.CONTENT_TYPES[s] for s in (".html", ".js", ".css", ".svg")}
    for mapper in by_type.values():
        assert mapper["body_format_override"]["text_format_source"]["inline_string"] == "%LOCAL_REPLY_BODY%"
    js = by_type["text/javascript; charset=utf-8"]["filter"]["and_filter"]["filters"]
    regex = re.compile(js[1]["header_filter"]["header"]["string_match"]["safe_regex"]["regex"])
    assert regex.match("/ui/app.js") and regex.match("/ui/vendor/papaparse.min.js?v=2")
    assert not regex.match("/ui/app.css") and not regex.match("/v1/app.js")
    assert js[0]["status_code_filter"]["comparison"]["value"]["default_value"] == 200
    html = by_type["text/html; charset=utf-8"]["filter"]["and_filter"]["filters"][1]
    html_regex = re.compile(html["header_filter"]["header"]["string_match"]["safe_regex"]["regex"])
    assert html_regex.match("/ui/") and html_regex.match("/ui/index.html")


def test_without_the_npm_packages_the_panel_is_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ui = tmp_path / "ui"
    shutil.copytree(UI, ui, ignore=shutil.ignore_patterns("node_modules"))
    hcm = _hcm(render(load_settings(environ={})))
    before = len(hcm["route_config"]["virtual_hosts"][0]["routes"])
    bare = {
        "route_config": {"virtual_hosts": [{"routes": []}]},
        "local_reply_config": {"mappers": []},
    }
    panel.install(bare, ui)
    assert bare == {
        "route_config": {"virtual_hosts": [{"routes": []}]},
        "local_reply_config": {"mappers": []},
    }
    assert "web panel left out" in caplog.text and "npm ci" in caplog.text
    assert before > len(panel.own_files(ui))  # the real config has them


def test_pages_load_only_files_the_gateway_serves() -> None:
    """Every script, stylesheet and module import names a served file (no typo survives to a
    blank page in the browser), and nothing is loaded from another origin."""
    served = set(panel.assets() or {})
    html = (UI / "index.html").read_text()
    referenced = set(re.findall(r'(?:src|href)="([^"#][^"]*)"', html))
    assert referenced <= served, referenced - served
    for name in panel.own_files():
        if not name.endswith(".js"):
            continue
        for imported in re.findall(r"""^import [^'"]*['"]\./([^'"]+)['"]""", (UI / name).read_text(), re.M):
            assert imported in served, f"{name} imports {imported}"
    assert not re.search(r"https?://", html)


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _schemes() -> dict[str, dict[str, str]]:
    css = (UI / "app.css").read_text()
    light = css[css.index(":root {") : css.index("}")]
    dark_start = css.index("@media (prefers-color-scheme: dark)")
    dark = css[dark_start : css.index("}", dark_start)]
    parse = lambda block: dict(re.findall(r"--([\w-]+):\s*(#[0-9a-fA-F]{6});", block))  # noqa: E731
    return {"light": parse(light), "dark": {**parse(light), **parse(dark)}}


# (foreground, background) pairs the stylesheet puts text on.
TEXT_PAIRS = [
    ("text", "bg"),
    ("text", "surface"),
    ("muted", "bg"),
    ("muted", "surface"),
    ("link", "bg"),
    ("link", "surface"),
    ("accent-text", "accent"),
    ("ok", "surface"),
    ("bad", "surface"),
    ("warn", "surface"),
    ("text", "code-bg"),
    ("muted", "code-bg"),
]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_colours_meet_wcag_aa_contrast(scheme: str) -> None:
    colours = _schemes()[scheme]
    for fg, bg in TEXT_PAIRS:
        ratio = _contrast(colours[fg], colours[bg])
        assert ratio >= 4.5, f"{scheme}: --{fg} on --{bg} is {ratio:.2f}:1"
    # Focus rings and form borders are not text: WCAG asks 3:1 of them.
    for fg in ("focus", "muted"):
        assert _contrast(colours[fg], colours["surface"]) >= 3, f"{scheme}: --{fg}"
