"""A session's random state: the seed of its random ops, and the RNG state of its device.

The seed lives on the device (a variable next to the weights) and moves on by one every
batch, so consecutive batches and runs draw new numbers; `getRandomSeed` reads it back, and
`setRandomSeed` with that value replays what follows. Random ops take their seeds from it
through the lowering's stateless RNG (one stream per op), so compiled and eager runs agree.

The RNG state is the hardware generator's state, which on the IPU drives stochastic
rounding. It belongs to the device, not to a session: every session on one DeviceInfo reads
and writes the same state (session_api_tests/rng_test.py: an inference session run between
two training runs changes what the second draws). `setRandomSeed` derives it from the seed.
A run with stochastic rounding rounds with a seed drawn from it (`rounding_seed`) and moves
it on, so restoring a state repeats the rounding.
"""

from __future__ import annotations

import hashlib
import random
import weakref
from collections.abc import Iterable, Sized

import numpy as np
import tensorflow as tf

from openipu._src.engine import replication
from openipu._src.popart.errors import OptionTypeError, popart_exception, popart_runtime_error

_SEED_RANGE = 1 << 64
_RNG_WORDS_PER_WORKER = 4  # the hardware generator's state: four 32-bit words per worker


def _as_signed(seed: int) -> int:
    return seed - _SEED_RANGE if seed >= 1 << 63 else seed


def _check_seed(seed: object) -> int:
    # setRandomSeed(uint64_t) is a pybind11 binding (python/popart/popart_core/popart.cpp):
    # it takes a bool as an int, and refuses a value outside uint64 with a TypeError.
    if not isinstance(seed, (int, np.integer)):
        raise OptionTypeError(
            f"The random seed must be an int, got {seed!r} ({type(seed).__name__})"
        )
    if not 0 <= int(seed) < _SEED_RANGE:
        raise OptionTypeError(f"The random seed must be in [0, 2**64), got {seed}")
    return int(seed)


class _DeviceRngState:
    """The RNG state words of one device, shared by the sessions on it."""

    def __init__(self, words: list[int]) -> None:
        self.words = words


# Keyed by the DeviceInfo object the sessions were given.
_device_states: weakref.WeakKeyDictionary[object, _DeviceRngState] = weakref.WeakKeyDictionary()


class RandomState:
    def __init__(self, rng_state_size: int, device: object) -> None:
        self._rng_state_size = rng_state_size
        self._seed = random.getrandbits(63)
        state = _device_states.get(device)
        if state is None or len(state.words) != rng_state_size:
            state = _DeviceRngState(self._derived_rng_state(self._seed))
            _device_states[device] = state
        self._device_state = state
        self._variable: tf.Variable | None = None
        self._rounding: tf.Variable | None = None

    def place_on(self, host_device: str) -> None:
        """Creates the device copy of the seed (when the session prepares its device; in a
        replicated session's scope, one copy per replica)."""
        with tf.init_scope(), tf.device(host_device):
            self._variable = tf.Variable(
                _as_signed(self._seed), dtype=tf.int64, trainable=False, name="randomSeed___"
            )
            self._rounding = tf.Variable(
                [0, 0], dtype=tf.int64, trainable=False, name="roundingSeed"
            )

    def batch_seed(self) -> tf.Tensor:
        """Inside a step: the [2] seed of this batch's random ops; moves the seed on."""
        if self._variable is None:
            raise popart_exception("The random seed is not on the device yet (prepareDevice)")
        before = self._variable.assign_add(1, read_value=True) - 1
        # Replicas draw different numbers (each has its own copy of the seed variable).
        replica = tf.constant(replication.current_replica_index(), tf.int64)
        return tf.stack([before, replica])

    def batch_seed_at(self, index: tf.Tensor) -> tf.Tensor:
        """Inside a step whose seed moves on once per step (`advance`): the [2] seed of its
        batch `index`, the same as `batch_seed` gives that batch."""
        if self._variable is None:
            raise popart_exception("The random seed is not on the device yet (prepareDevice)")
        value = self._variable.read_value() + tf.cast(index, tf.int64)
        replica = tf.constant(replication.current_replica_index(), tf.int64)
        return tf.stack([value, replica])

    def rounding_seed(self, index: tf.Tensor | None = None) -> tf.Tensor:
        """Inside a step: the [2] stochastic rounding seed of its batch `index` (None: of the
        next batch, moving on per batch). The run's first one comes from the device's RNG
        state (`start_rounding`); replicas round differently."""
        if self._rounding is None:
            raise popart_exception("The random seed is not on the device yet (prepareDevice)")
        if index is None:
            value = self._rounding.assign_add([1, 0], read_value=True) - [1, 0]
        else:
            value = self._rounding.read_value() + tf.stack([tf.cast(index, tf.int64), 0])
        replica = tf.constant(replication.current_replica_index(), tf.int64)
        return tf.random.experimental.stateless_fold_in(value, replica)

    def start_rounding(self) -> None:
        """Before a run with stochastic rounding: its rounding seed from the device's RNG
        state, which then moves on (the generator draws as the run rounds)."""
        if self._rounding is None:
            raise popart_exception("The random seed is not on the device yet (prepareDevice)")
        words = np.asarray(self._device_state.words, np.uint32).tobytes()
        digest = hashlib.blake2b(words, digest_size=16).digest()
        key = np.frombuffer(digest, np.int64)
        self._rounding.assign(key)
        following = int.from_bytes(digest[:8], "little")
        self._device_state.words = self._derived_rng_state(following)

    def advance(self, batches: int) -> tf.Operation:
        """After a step read its seeds with `batch_seed_at`: moves the seed on past them."""
        if self._variable is None:
            raise popart_exception("The random seed is not on the device yet (prepareDevice)")
        return self._variable.assign_add(batches, read_value=False)

    @property
    def seed(self) -> int:
        if self._variable is not None:
            self._seed = int(self._variable.numpy()) % _SEED_RANGE
        return self._seed

    @seed.setter
    def seed(self, value: object) -> None:
        self._seed = _check_seed(value)
        self._device_state.words = self._derived_rng_state(self._seed)
        if self._variable is not None:
            self._variable.assign(_as_signed(self._seed))

    @property
    def rng_state(self) -> list[int]:
        return list(self._device_state.words)

    @rng_state.setter
    def rng_state(self, state: object) -> None:
        if (
            isinstance(state, (str, bytes))
            or not isinstance(state, Sized)
            or not isinstance(state, Iterable)
        ):
            raise OptionTypeError(
                f"The RNG state must be a list of ints, got {type(state).__name__}"
            )
        values = list(state)
        for value in values:
            # std::vector<uint32_t> in the binding: pybind11 takes bools as ints and refuses
            # a value outside uint32 with a TypeError.
            if not isinstance(value, (int, np.integer)):
                raise OptionTypeError(f"RNG state values must be ints, got {value!r}")
            if not 0 <= int(value) < 1 << 32:
                raise OptionTypeError(f"RNG state values are 32-bit unsigned, got {value}")
        if len(values) != self._rng_state_size:
            # willow/src/popx/devicex.cpp, setRngStateValue (its words first).
            raise popart_runtime_error(
                f"Devicex::setRngStateValue received rngState of size {len(values)}; was "
                f"expecting size {self._rng_state_size}"
            )
        self._device_state.words = [int(value) for value in values]

    def _derived_rng_state(self, seed: int) -> list[int]:
        words = np.random.default_rng(seed).integers(0, 1 << 32, self._rng_state_size)
        words_list: list[int] = words.tolist()  # Python ints, ten times faster than int() each
        return words_list


def rng_state_size(num_ipus: int, tiles_per_ipu: int, workers_per_tile: int) -> int:
    return num_ipus * tiles_per_ipu * workers_per_tile * _RNG_WORDS_PER_WORKER
