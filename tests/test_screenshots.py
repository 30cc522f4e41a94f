"""scripts/screenshots.py's page table (``make screenshots`` itself, a demo site seeded and
photographed, is too long for the suite): every page it lists is a page of the site."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.urls import Resolver404, resolve

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "screenshots.py"


@pytest.fixture(scope="module")
def screenshots():
    spec = importlib.util.spec_from_file_location("screenshots", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["screenshots"] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["screenshots"]


def test_every_listed_page_resolves_and_has_one_name(screenshots):
    names = [page.name for page in screenshots.PAGES]
    assert len(names) == len(set(names))
    assert {"board", "submission", "login", "submit", "admin"} <= set(names)
    for page in screenshots.PAGES:
        assert page.login in (None, "user", "staff"), page
        path = urlsplit(screenshots.fill(page.path, {"submission": 1, "other": 2})).path
        try:
            resolve(path)
        except Resolver404:
            assert page.optional, f"{page.name}: {path} is not a page of the site"


def test_the_index_links_both_widths_of_each_page(screenshots, tmp_path):
    board = screenshots.PAGES[0]
    submit = next(page for page in screenshots.PAGES if page.login == "user")
    screenshots.write_index([(board, "/"), (submit, "/submissions/new/")], out_dir=tmp_path)
    index = (tmp_path / "README.md").read_text()
    assert "[desktop](board-desktop.png) | [phone](board-phone.png)" in index
    assert "(signed in) | `/submissions/new/`" in index
