"""`make install` hands pip's settings to uv (scripts/uv_args.py): the same packages from
the same places as pip would choose."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "uv_args.py"
_spec = importlib.util.spec_from_file_location("uv_args", SCRIPT)
uv_args = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uv_args)

LISTED = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
"""


def test_pips_sources_and_constraints_become_uv_options_once_each():
    options = uv_args.uv_options(uv_args.pip_settings(LISTED))
    pairs = list(zip(options[::2], options[1::2], strict=True))
    assert pairs == [
        ("--find-links", "/opt/wheels"),
        ("--constraint", "/etc/xdg/pip/constraints.txt"),
        ("--extra-index-url", "file:///opt/pypi/simple"),
        ("--extra-index-url", "file:///opt/pypi-more/simple"),
        ("--index-strategy", "unsafe-best-match"),
    ]


def test_settings_that_choose_no_package_are_left_out():
    listed = "global.timeout='60'\n:env:.cert='/x.pem'\nglobal.no-cache-dir='true'\n"
    assert uv_args.uv_options(uv_args.pip_settings(listed)) == []


def test_without_an_index_setting_uv_keeps_its_own_index_strategy():
    options = uv_args.uv_options(uv_args.pip_settings("global.find-links='/w1 /w2'\n"))
    assert options == ["--find-links", "/w1", "--find-links", "/w2"]
