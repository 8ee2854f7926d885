"""Every documented public name of the four API families resolves and is used by a test.

The count (`api_coverage.py`) is the README's figure: a name that stops resolving, or that no
behavioural test uses any longer, fails here; names of open issues are counted apart.
"""

from __future__ import annotations

import pathlib

import api_coverage as coverage  # tests/manifest/api_coverage.py
import pytest

README = pathlib.Path(__file__).parents[2] / "README.md"


@pytest.mark.parametrize("family", sorted(coverage.FAMILIES))
def test_every_name_resolves_and_is_exercised(family):
    names = coverage.manifest_names(coverage.FAMILIES[family])
    unresolved = [n for n in names if n not in coverage.PENDING and not coverage.resolves(n)]
    assert unresolved == []
    unexercised = [
        n for n in names if n not in coverage.PENDING and not coverage.exercising_tests(n)
    ]
    assert unexercised == []


def test_pending_names_are_manifest_names_that_do_not_resolve():
    names = {n for file in coverage.FAMILIES.values() for n in coverage.manifest_names(file)}
    assert coverage.PENDING <= names
    assert [n for n in sorted(coverage.PENDING) if coverage.resolves(n)] == []


def test_the_readme_quotes_the_current_figure():
    assert coverage.figure() in README.read_text()
