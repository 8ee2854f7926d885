"""`coverage.py` runs, and the suite's `follows` marks name scenarios of the manifest's files."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
# Loaded by path: the name `coverage` is also the coverage.py package's.
_spec = importlib.util.spec_from_file_location("conformance_coverage", HERE / "coverage.py")
conformance_coverage = importlib.util.module_from_spec(_spec)
sys.modules["conformance_coverage"] = conformance_coverage  # dataclasses look it up
_spec.loader.exec_module(conformance_coverage)

MIRRORS = pathlib.Path("/work/.mirror")


def test_the_script_prints_a_table_and_the_totals():
    done = subprocess.run(
        [sys.executable, str(HERE / "coverage.py")], capture_output=True, text=True, check=True
    )
    assert "original test file" in done.stdout
    assert re.search(r"^covered \d+/\d+ \(\d+\.\d%\), passing \d+/\d+", done.stdout, re.M)
    assert "warning" not in done.stdout


def test_the_manifest_counts_its_scenarios():
    for original in conformance_coverage.read_all_manifests():
        names = original.scenarios + original.hardware_only
        assert len(set(names)) == len(names), original.path
        assert original.count == len(original.scenarios), original.path


def test_every_module_follows_one_original_and_only_its_scenarios():
    originals = {o.module: o for o in conformance_coverage.read_all_manifests()}
    modules = sorted(
        p
        for manifest in conformance_coverage.manifests()
        for p in manifest.parent.glob("test_*.py")
        if p.name != pathlib.Path(__file__).name
    )
    assert set(modules) <= set(originals), "a test module without an original in originals.txt"
    for name in modules:
        original = originals[name]
        text = name.read_text()
        assert original.path in text.split('"""')[1], f"{name}: its docstring names {original.path}"
        for test in conformance_coverage.followed_scenarios(name):
            for scenario in test.scenarios:
                assert scenario in original.scenarios, f"{name}::{test.test} follows {scenario}"


def _original_text(original) -> str | None:
    repo = MIRRORS / original.repo.replace("/", "+") / "repo"
    if not repo.exists():
        return None
    done = subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{original.path}"], capture_output=True, text=True
    )
    return done.stdout if done.returncode == 0 else None


def test_the_manifest_names_the_original_test_methods():
    checked = 0
    for original in conformance_coverage.read_all_manifests():
        text = _original_text(original)
        if text is None:
            continue
        methods = set(re.findall(r"^\s*def (test\w*)\(", text, re.M))
        assert set(original.scenarios + original.hardware_only) <= methods, original.path
        assert methods <= set(original.scenarios + original.hardware_only), original.path
        checked += 1
    if not checked:
        pytest.skip("no mirror of the original's sources on this machine")


def test_test_module_names_are_unique_across_the_suite():
    # pytest imports test modules by their base name (the folders have no __init__.py):
    # two modules of one name stop the whole run ("import file mismatch").
    names = [p.name for p in HERE.parent.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
