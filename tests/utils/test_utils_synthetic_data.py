"""`SyntheticDataCategory` and `use_synthetic_data_for`."""

from __future__ import annotations

import pytest

from openipu._src.utils import SyntheticDataCategory, use_synthetic_data_for

ALL = list(SyntheticDataCategory)


def test_the_categories_of_the_original():
    assert [(c.name, c.value) for c in SyntheticDataCategory] == [
        ("Seed", 0),
        ("Infeed", 1),
        ("Outfeed", 2),
        ("HostEmbedding", 3),
        ("Parameters", 4),
    ]


def test_no_flags_means_real_data_everywhere(monkeypatch):
    monkeypatch.delenv("TF_POPLAR_FLAGS", raising=False)
    assert [use_synthetic_data_for(c) for c in ALL] == [False] * 5


def test_use_synthetic_data_covers_every_category(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model --use_synthetic_data")
    assert [use_synthetic_data_for(c) for c in ALL] == [True] * 5


@pytest.mark.parametrize(
    ("value", "selected"),
    [
        ("infeed,outfeed", {"Infeed", "Outfeed"}),
        ("'seed, hostembedding'", {"Seed", "HostEmbedding"}),
        ("parameters", {"Parameters"}),
        ("", set()),
    ],
)
def test_categories_flag_selects_some(monkeypatch, value, selected):
    monkeypatch.setenv("TF_POPLAR_FLAGS", f"--synthetic_data_categories={value}")
    assert {c.name for c in ALL if use_synthetic_data_for(c)} == selected


@pytest.mark.parametrize("value", ["infeed,weights", "Infeed"])
def test_unknown_category_in_the_flags_is_an_error(monkeypatch, value):
    # The original's names are lower case (tools/flags.cc `SyntheticDataCategoryFromName`).
    monkeypatch.setenv("TF_POPLAR_FLAGS", f"--synthetic_data_categories={value}")
    with pytest.raises(ValueError, match=f"unknown synthetic data category in: '{value}'"):
        use_synthetic_data_for(SyntheticDataCategory.Infeed)


@pytest.mark.parametrize("category", ["infeed", 1, None])
def test_needs_an_enum_value(category):
    with pytest.raises(TypeError, match="SyntheticDataCategory"):
        use_synthetic_data_for(category)
