"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/utils_use_synthetic_data_for_test.py`.

`utils.use_synthetic_data_for(category)` reads TF_POPLAR_FLAGS: no flag, none;
`--use_synthetic_data`, every category; `--synthetic_data_categories=<name>`, that one.
"""

from __future__ import annotations

import os
from unittest import mock

import pytest
from tensorflow.python.ipu import utils
from tensorflow.python.ipu.utils import SyntheticDataCategory

CATEGORIES = [
    SyntheticDataCategory.Seed,
    SyntheticDataCategory.Infeed,
    SyntheticDataCategory.Outfeed,
    SyntheticDataCategory.HostEmbedding,
    SyntheticDataCategory.Parameters,
]


def _synthetic_categories(flags: str) -> list[bool]:
    flags = os.environ.get("TF_POPLAR_FLAGS", "") + " " + flags
    with mock.patch.dict("os.environ", {"TF_POPLAR_FLAGS": flags}):
        return [utils.use_synthetic_data_for(category) for category in CATEGORIES]


def _only(index: int) -> list[bool]:
    return [i == index for i in range(len(CATEGORIES))]


@pytest.mark.follows("testNoFlags")
def test_no_flags():
    assert _synthetic_categories("") == [False] * 5


@pytest.mark.follows("testUseSyntheticData")
def test_use_synthetic_data():
    assert _synthetic_categories("--use_synthetic_data") == [True] * 5


@pytest.mark.follows("testSyntheticDataCategorySeed")
def test_synthetic_data_category_seed():
    assert _synthetic_categories("--synthetic_data_categories=seed") == _only(0)


@pytest.mark.follows("testSyntheticDataCategoryInfeed")
def test_synthetic_data_category_infeed():
    assert _synthetic_categories("--synthetic_data_categories=infeed") == _only(1)


@pytest.mark.follows("testSyntheticDataCategoryOutfeed")
def test_synthetic_data_category_outfeed():
    assert _synthetic_categories("--synthetic_data_categories=outfeed") == _only(2)


@pytest.mark.follows("testSyntheticDataCategoryHostEmbedding")
def test_synthetic_data_category_host_embedding():
    assert _synthetic_categories("--synthetic_data_categories=hostembedding") == _only(3)


@pytest.mark.follows("testSyntheticDataCategoryParameters")
def test_synthetic_data_category_parameters():
    assert _synthetic_categories("--synthetic_data_categories=parameters") == _only(4)
