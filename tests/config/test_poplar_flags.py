"""`TF_POPLAR_FLAGS` is parsed as the original parses it (tools/flags.cc through
xla/parse_flags_from_env.cc and core/util/command_line_flags.cc): typed flags, quoted
values, a file of flags, and the original's errors for unknown flags."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

from openipu._src.config import poplar_flags


def _configure():
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()


@pytest.fixture(autouse=True)
def _reset():
    yield
    ipu.config.reset_ipu_configuration()


def test_every_documented_flag_is_accepted(monkeypatch):
    # docs/device_selection.rst's table, each with a value of its type.
    flags = (
        "--dump_schedule_as_dot --executable_cache_path=/tmp/cache --fallback_scheduler "
        "--log_cycle_count=123 --max_compilation_threads=4 --max_infeed_threads=2 "
        "--null_data_feed --tensor_map_file_path=/tmp/maps --use_ipu_model "
        "--while_loop_brute_force_max_trip_count=64 --show_progress_bar=false "
        "--on_demand_device_poll_time=200 --on_demand_device_timeout=5000 "
        "--ipu_model_tiles=8 --sync_replica_start --disable_poplar_version_check "
        "--use_on_demand --enable_hlo_verifier --allow_nans"
    )
    monkeypatch.setenv("TF_POPLAR_FLAGS", flags)
    assert poplar_flags.value("log_cycle_count") == 123
    assert poplar_flags.value("executable_cache_path") == "/tmp/cache"
    assert poplar_flags.value("show_progress_bar") == "false"
    assert poplar_flags.value("ipu_model_tiles") == 8
    assert poplar_flags.value("use_ipu_model") and not poplar_flags.use_synthetic_data()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("--use_synthetic_data", True),
        ("--use_synthetic_data=true", True),
        ("--use_synthetic_data=false", False),
        ("  --use_ipu_model   --use_synthetic_data  ", True),
        # Parsing stops at the first word not starting with "-": the rest is ignored.
        ("--use_ipu_model stop --use_synthetic_data", False),
    ],
)
def test_boolean_flags(monkeypatch, flags, expected):
    monkeypatch.setenv("TF_POPLAR_FLAGS", flags)
    assert poplar_flags.use_synthetic_data() is expected


def test_a_value_of_the_wrong_type_is_logged_and_the_default_kept(monkeypatch, caplog):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--log_cycle_count=abc --use_synthetic_data=yes")
    with caplog.at_level(logging.ERROR, logger="openipu.poplar_flags"):
        assert poplar_flags.value("log_cycle_count") == -1
        assert poplar_flags.use_synthetic_data() is False
    assert "Couldn't interpret value abc for flag log_cycle_count." in caplog.text
    assert "Couldn't interpret value =yes for flag use_synthetic_data." in caplog.text


def test_quoted_values(monkeypatch):
    monkeypatch.setenv(
        "TF_POPLAR_FLAGS",
        "--synthetic_data_categories='infeed, outfeed' --executable_cache_path=\"/tmp/a b\"",
    )
    assert poplar_flags.synthetic_categories() == {"infeed", "outfeed"}
    assert poplar_flags.value("executable_cache_path") == "/tmp/a b"


def test_a_value_not_starting_with_a_dash_names_a_file_of_flags(monkeypatch, tmp_path):
    path = tmp_path / "flags.txt"
    path.write_text("--use_synthetic_data\n--log_cycle_count=7\n")
    monkeypatch.setenv("TF_POPLAR_FLAGS", str(path))
    assert poplar_flags.use_synthetic_data() and poplar_flags.value("log_cycle_count") == 7
    monkeypatch.setenv("TF_POPLAR_FLAGS", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="Could not open file .* to read flags"):
        _configure()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ("--not_a_flag", "Unknown flag in TF_POPLAR_FLAGS: --not_a_flag"),
        ("--use_ipu_model --a=1 --b", "Unknown flags in TF_POPLAR_FLAGS: --a=1 --b"),
        # Listed in the original's usage but never registered: unknown there too.
        ("--save_vertex_graph=/tmp/x", "Unknown flag in TF_POPLAR_FLAGS: --save_vertex_graph"),
        # An integer flag needs "=value".
        ("--log_cycle_count", "Unknown flag in TF_POPLAR_FLAGS: --log_cycle_count"),
        (
            "--synthetic_data_initializer=3",
            'The flag "synthetic_data_initializer" can only be used in combination',
        ),
    ],
)
def test_what_stops_the_original_is_an_error_at_configure(monkeypatch, flags, message):
    monkeypatch.setenv("TF_POPLAR_FLAGS", flags)
    with pytest.raises(ValueError, match=message):
        _configure()


def test_help_logs_every_flag_once(monkeypatch, caplog):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--help")
    monkeypatch.setattr(poplar_flags, "_help_logged", False)
    with caplog.at_level(logging.INFO, logger="openipu.poplar_flags"):
        _configure()
        _configure()
    assert caplog.text.count("Usage for TF_POPLAR_FLAGS is:") == 1
    assert "--use_synthetic_data: If enabled" in caplog.text


def test_a_program_runs_with_documented_flags(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--max_compilation_threads=1 --show_progress_bar=false")
    _configure()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        result = strategy.run(tf.function(lambda: tf.reduce_sum(tf.ones([3, 3]))))
    np.testing.assert_equal(float(result), np.ones([3, 3]).sum())
