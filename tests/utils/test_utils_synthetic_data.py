"""`SyntheticDataCategory` and `use_synthetic_data_for`."""

from __future__ import annotations

import pytest
import tensorflow as tf

from openipu._src.utils import SyntheticDataCategory, use_synthetic_data_for

ALL = [
    SyntheticDataCategory.Value(name)
    for name in ("Seed", "Infeed", "Outfeed", "HostEmbedding", "Parameters")
]


def test_the_categories_of_the_original():
    # config.proto's enum: its members are ints, as `config_pb2.Infeed` is.
    assert SyntheticDataCategory.items() == [
        ("Seed", 0),
        ("Infeed", 1),
        ("Outfeed", 2),
        ("HostEmbedding", 3),
        ("Parameters", 4),
        ("Unknown", 5),
    ]
    assert SyntheticDataCategory.Infeed == 1


def test_the_protobuf_enum_values_are_accepted(monkeypatch):
    from tensorflow.compiler.plugin.poplar.driver import config_pb2

    monkeypatch.setenv("TF_POPLAR_FLAGS", "--synthetic_data_categories=infeed")
    assert use_synthetic_data_for(config_pb2.Infeed) is True
    assert use_synthetic_data_for(1) is True
    assert use_synthetic_data_for(config_pb2.Outfeed) is False


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
    assert {SyntheticDataCategory.Name(c) for c in ALL if use_synthetic_data_for(c)} == selected


@pytest.mark.parametrize("value", ["infeed,weights", "Infeed"])
def test_unknown_category_in_the_flags_is_an_error(monkeypatch, value):
    # The original's names are lower case (tools/flags.cc `SyntheticDataCategoryFromName`).
    monkeypatch.setenv("TF_POPLAR_FLAGS", f"--synthetic_data_categories={value}")
    with pytest.raises(ValueError, match=f"unknown synthetic data category in: '{value}'"):
        use_synthetic_data_for(SyntheticDataCategory.Infeed)


@pytest.mark.parametrize("category", ["infeed", 1.0, None])
def test_needs_an_enum_value(category):
    with pytest.raises(TypeError, match="SyntheticDataCategory"):
        use_synthetic_data_for(category)


def test_an_int_outside_the_enum_is_refused():
    # The original's kernel: InvalidArgument "Invalid synthetic data category: 9".
    with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid synthetic data category: 9"):
        use_synthetic_data_for(9)
