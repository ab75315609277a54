"""`memory-anchor viewer`: the URL of the local web viewer (with its login token)."""

from __future__ import annotations

import argparse
import urllib.parse

from memory_anchor.cli.main import client, emit


def register(sub) -> None:
    viewer = sub.add_parser("viewer", help="print the web viewer's URL (--open: open it in a browser)")
    viewer.add_argument("--open", action="store_true", help="also open the URL in the default browser")
    viewer.set_defaults(handler=show_viewer)


def viewer_url(url: str, token: str) -> str:
    """The page URL that trades the token for a session cookie (see memory_anchor/worker/api/viewer.py)."""
    return f"{url}/?{urllib.parse.urlencode({'token': token})}"


def show_viewer(args: argparse.Namespace) -> int:
    info = client(args).info()  # starts the worker if it is down
    url = viewer_url(info.url, info.token)
    emit(args, {"url": url}, url)
    if args.open:
        import webbrowser

        if not webbrowser.open(url):
            print("memory-anchor: no browser found; open the URL above yourself")
    return 0
