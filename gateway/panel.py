"""The web panel: static files under `gateway/ui/`, served by Envoy itself at `/ui/`.

No web server process: each file becomes a route with a `direct_response` whose body Envoy
reads from the file when it loads its config (so editing a file needs an Envoy restart). The
panel is plain JavaScript modules and CSS that call the public REST API (`/v1/...`) with the
key the user pastes; Envoy only hands out the files.

Envoy treats a direct response as a local reply, which the connection manager's
`local_reply_config` would wrap in the OpenAI error envelope; one mapper per content type
passes the panel's bodies through unchanged and sets their `content-type`.

Third-party browser code comes from npm (`gateway/ui/package-lock.json`, installed by `make`
with `npm ci`) and is served from `node_modules` as installed, never copied by hand. Without
it (npm never ran) the panel is left out and the API works as before.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

UI_DIR = Path(__file__).resolve().parent / "ui"
PREFIX = "/ui/"
INDEX = "index.html"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
READ_METHODS = "GET|HEAD"  # the only methods the panel's routes take (a full-match regex)
# URL path under /ui/ → the installed npm file it serves.
VENDORED = {"vendor/papaparse.min.js": "node_modules/papaparse/papaparse.min.js"}
# The panel runs only its own files and talks only to this origin; it is never framed.
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def own_files(ui_dir: Path = UI_DIR) -> dict[str, Path]:
    """The panel's own files (not npm's): URL path under /ui/ → file."""
    return {
        str(path.relative_to(ui_dir)): path
        for path in sorted(ui_dir.rglob("*"))
        if path.suffix in CONTENT_TYPES and "node_modules" not in path.relative_to(ui_dir).parts
    }


def assets(ui_dir: Path = UI_DIR) -> dict[str, Path] | None:
    """Every file the panel serves (URL path under /ui/ → file), or None when the npm
    packages are not installed."""
    vendored = {url: ui_dir / installed for url, installed in VENDORED.items()}
    missing = [str(path) for path in vendored.values() if not path.is_file()]
    if missing:
        log.warning(
            "web panel left out: %s missing (run `make`, or `npm ci` in %s)", ", ".join(missing), ui_dir
        )
        return None
    return {**own_files(ui_dir), **vendored}


def _header_list(headers: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {"header": {"key": k, "value": v}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
        for k, v in headers.items()
    ]


def _match(path: str) -> dict[str, Any]:
    """A route match for `path`, GET and HEAD only: the panel's files are read, and any other
    method is the 404 `unknown_url` of a path without a route (a POST had the page)."""
    return {
        "path": path,
        "headers": [{"name": ":method", "string_match": {"safe_regex": {"regex": READ_METHODS}}}],
    }


def _routes(files: dict[str, Path]) -> list[dict[str, Any]]:
    routes: list[dict[str, Any]] = [
        {"match": _match("/"), "redirect": {"path_redirect": PREFIX}},
        {"match": _match(PREFIX.rstrip("/")), "redirect": {"path_redirect": PREFIX}},
    ]
    urls = {PREFIX: files[INDEX], **{PREFIX + url: path for url, path in files.items()}}
    for url, path in urls.items():
        routes.append(
            {
                "match": _match(url),
                "direct_response": {"status": 200, "body": {"filename": str(path)}},
                "response_headers_to_add": _header_list(SECURITY_HEADERS),
            }
        )
    return routes


def _reply_mappers(files: dict[str, Path]) -> list[dict[str, Any]]:
    """Pass the files' bodies through the local-reply formatter, with their content type.

    A mapper matches a 200 answer (only the panel's direct responses are local replies with
    that status) to a /ui/ path with its suffix (`/ui/` itself serves index.html)."""
    mappers = []
    for suffix in sorted({path.suffix for path in files.values()}):
        name = f"[^?]*{re.escape(suffix)}"
        if suffix == Path(INDEX).suffix:
            name = f"({name})?"
        path_filter = {
            "header": {
                "name": ":path",
                "string_match": {"safe_regex": {"regex": f"^{re.escape(PREFIX)}{name}(\\?.*)?$"}},
            }
        }
        status_filter = {
            "comparison": {"op": "EQ", "value": {"default_value": 200, "runtime_key": "panel.status"}}
        }
        mappers.append(
            {
                "filter": {
                    "and_filter": {
                        "filters": [{"status_code_filter": status_filter}, {"header_filter": path_filter}]
                    }
                },
                "body_format_override": {
                    "text_format_source": {"inline_string": "%LOCAL_REPLY_BODY%"},
                    "content_type": CONTENT_TYPES[suffix],
                },
            }
        )
    return mappers


def _redirect_mapper() -> dict[str, Any]:
    """The redirects of `/` and `/ui` to `/ui/` are local replies too: an empty body, not the
    envelope of an error that did not happen."""
    path_filter = {"header": {"name": ":path", "string_match": {"safe_regex": {"regex": "^/(ui)?(\\?.*)?$"}}}}
    status_filter = {
        "comparison": {"op": "EQ", "value": {"default_value": 301, "runtime_key": "panel.redirect"}}
    }
    return {
        "filter": {
            "and_filter": {"filters": [{"status_code_filter": status_filter}, {"header_filter": path_filter}]}
        },
        "body_format_override": {"text_format_source": {"inline_string": ""}, "content_type": "text/plain"},
    }


def install(hcm: dict[str, Any], ui_dir: Path = UI_DIR) -> None:
    """Add the panel to the HTTP connection manager config `hcm` (routes, reply mappers, and
    a direct-response size limit that fits the largest file)."""
    files = assets(ui_dir)
    if files is None:
        return
    route_config = hcm["route_config"]
    route_config["virtual_hosts"][0]["routes"].extend(_routes(files))
    route_config["max_direct_response_body_size_bytes"] = max(p.stat().st_size for p in files.values())
    hcm["local_reply_config"]["mappers"][:0] = [_redirect_mapper(), *_reply_mappers(files)]
