"""`IPUConfig`: every category and option of spec section 21.7, with its type and default."""

from typing import Any

from google.protobuf.message import Message

from openipu._src.config.config_tree import (
    ConfigCategory,
    ConfigTree,
    LegacyValue,
    Option,
    Subcategory,
)
from openipu._src.config.enums import (
    DeviceConnectionType,
    MergeRemoteBuffersBehaviour,
    SchedulingAlgorithm,
    SelectionOrder,
    StochasticRoundingBehaviour,
)
from openipu._src.config.ipu_options import ipu_options_from_config
from openipu._src.config.validation import validate_ipu_config

_IPU_SELECTION = int | list[int] | tuple[int, ...]

_AVAILABLE_MEMORY_PROPORTION_NOTE = """

Of particular note is the availableMemoryProportion parameter which is the amount of memory
allocated for use for temporary data whilst the operation is executing (for example, for
intermediate calculated values or temporary values passed between tiles on the IPU). The value is
specified as a proportion of available memory on the IPU. So, for example, a value of 0.1 will
constrain the library to use 10% of the total memory for temporary data."""

_FAST_MATH_DOC = """Enables optimizations which allow arbitrary re-associations and
transformations of mathematical operations with no accuracy guarantees. Enabling this option can
result in incorrect output for programs that depend on an exact implementation of IEEE floating
point for maths functions. It may, however, yield faster code for programs that do not require
the guarantees of these specifications."""


class _ConvolutionsConfig(ConfigCategory):
    """Sub-category containing configuration options that affect convolutions."""

    poplar_options = Option(
        dict,
        {},
        """Set the PopLibs convolution options for the session. Must be a dictionary of valid
PopLibs convolution options. See createWeights in the PopLibs API reference for the full list of
options. The options will be applied to all convolution operations in the session graph during
compilation."""
        + _AVAILABLE_MEMORY_PROPORTION_NOTE,
    )


class _DeviceConnectionConfig(ConfigCategory):
    """Sub-category containing configuration options to control when to attach to IPU devices."""

    type = Option(
        DeviceConnectionType,
        DeviceConnectionType.ALWAYS,
        """Configure when to attach to the device. For example, you can use this to compile and
cache a program without attaching to an IPU, and then later run on a real IPU device without
recompiling. Setting the connection type doesn't impact the ability to profile a model. For
possible values, see DeviceConnectionType.""",
    )
    version = Option(
        str,
        "",
        """Version of the IPU architecture to use (string). Must be one of "ipu1", "ipu2",
"ipu21" or "" (default). A specific version is required if the connection type is specified as
DeviceConnectionType.PRE_COMPILE or DeviceConnectionType.NEVER. Do not specify a version
otherwise.""",
    )
    enable_remote_buffers = Option(
        bool,
        False,
        """Default to False. When connection type is DeviceConnectionType.PRE_COMPILE,
DeviceConnectionType.NEVER or DeviceConnectionType.ON_DEMAND, this argument is used to indicate
whether remote buffers are enabled and supported in the system which will eventually be used to
execute the compiled programs. If the connection type is DeviceConnectionType.ALWAYS then this
parameter is ignored because in that case it is possible to query the device.""",
    )


class _SlicesConfig(ConfigCategory):
    """Sub-category containing configuration options that affect slice operations."""

    poplar_options = Option(
        dict,
        {},
        """Set the PopLibs slice options for the session. Must be a dictionary of valid PopLibs
slice options. See embedding::plan in the PopLibs API reference for the full list of options. The
options will be passed to multiSlice, multiUpdate, and multiUpdateAdd poplibs calls. These are
most commonly generated when using embeddings."""
        + _AVAILABLE_MEMORY_PROPORTION_NOTE,
    )


class _MultiReplicaDistributionConfig(ConfigCategory):
    """Sub-category containing configuration options controlling multi replica distribution.

    This will use the Poplar runtime replica subset feature to let multiple processes
    collaborate on executing the same Poplar program by executing a subset of the global
    replicas each. The total global replication factor will be equal to the local replication
    factor multiplied by the process_count.
    """

    process_index = Option(int, 0, "The index of the current process being configured.")
    process_count = Option(
        int,
        0,
        """The total number of processes. When set to 0 (default), multi-replica distribution
will not be used.""",
    )


class _ExperimentalConfig(ConfigCategory):
    """Sub-category containing experimental configuration options that may be changed or
    removed with short or no notice."""

    always_rearrange_copies_on_the_host = Option(
        bool,
        False,
        """The data which is streamed to/from the device might be stored in different layouts on
the device and on the host. If so, rearrangement is performed on the device by default. By
enabling this option the rearrangement will be performed on the host at the expense of
latency.""",
    )
    enable_remote_buffer_embedding = Option(
        bool,
        False,
        """When set to true, HostEmbedding will make use of Poplar remote buffers. The creation
of this remote buffer may take several minutes. The remote buffer will be synchronised with every
IPU execution, so we recommend that you use a high value of n in repeat() for your training
loop.""",
    )
    enable_prng_stability = Option(
        bool,
        False,
        """Enable prng seed management. This aims to reduce divergence of weights when running
models across multiple replicas with stochastic rounding.""",
    )
    multi_replica_distribution = Subcategory(_MultiReplicaDistributionConfig)


def _stochastic_rounding_from_bool(enabled: bool) -> StochasticRoundingBehaviour:
    return StochasticRoundingBehaviour.ON if enabled else StochasticRoundingBehaviour.OFF


class _FloatingPointBehaviourConfig(ConfigCategory):
    """Sub-category containing configuration options that affect the floating point behaviour
    of the IPU devices, including stochastic rounding and behaviour when an overflow is
    encountered during execution."""

    inv = Option(
        bool,
        False,
        "If True, a floating point invalid operation (defined by IEEE 754) will cause an "
        "exception.",
    )
    div0 = Option(
        bool, False, "If True, a floating point divide by zero operation will cause an exception."
    )
    oflo = Option(bool, False, "If True, a floating point overflow will cause an exception.")
    esr = Option(
        StochasticRoundingBehaviour,
        StochasticRoundingBehaviour.OFF,
        """A StochasticRoundingBehaviour. If StochasticRoundingBehaviour.OFF (default) then
stochastic rounding will be disabled. Otherwise it's enabled with the semantics of the particular
option.""",
        legacy_value=LegacyValue(
            bool,
            _stochastic_rounding_from_bool,
            "setting it to a bool is deprecated; True means StochasticRoundingBehaviour.ON and "
            "False means StochasticRoundingBehaviour.OFF. Use a StochasticRoundingBehaviour.",
        ),
    )
    nanoo = Option(bool, False, "If True, Not-a-Number (NaN) on overflow mode will be enabled.")
    set_all = Option(
        bool,
        False,
        """If True, unconditionally enables all floating point behaviour options (inv, div0,
oflo, esr, nanoo) when the IPUConfig is configured.""",
    )


class _IOTilesConfig(ConfigCategory):
    """Sub-category containing configuration options that affect parallel I/O on a subset of
    tiles."""

    num_io_tiles = Option(int, 0, "Number of tiles to reserve for I/O.")
    place_ops_on_io_tiles = Option(
        bool, False, "Whether to place TensorFlow I/O operations on the I/O tiles."
    )
    available_memory_proportion = Option(
        float,
        0.9,
        """Proportion of I/O tiles' memory which can be used to store data in, with the
remaining memory assumed to be used by code. If the size of data which is to be stored on I/O
tiles exceeds the total I/O tiles memory multiplied by this proportion, then a warning message
will appear and the operations will not be placed on I/O tiles.""",
    )


class _IPUModelConfig(ConfigCategory):
    """Sub-category containing configuration options related to the IPU model. Note that these
    will only have an effect if you are running with the IPU model enabled."""

    compile_ipu_code = Option(bool, True, "Whether or not to compile IPU code for modelling.")
    tiles_per_ipu = Option(
        int,
        0,
        """The number of tiles per IPU Model device. When set to 0 (the default), Poplar will
use the standard number of tiles for the chosen version.""",
    )
    version = Option(
        str,
        "ipu2",
        'Specify the IPU version to be used by the IPU Model. Options are "ipu1" or "ipu2" '
        "(default).",
    )


class _MatmulsConfig(ConfigCategory):
    """Sub-category containing configuration options that affect matmuls."""

    clear_pass_type = Option(
        bool,
        False,
        """Controls whether or not the "Pass" type of the MatMul is passed to PopLibs. When set
to True, PopLibs will not be told about the type of the MatMuls in the graph. This can save
memory in some circumstances, such as large batch ResNet models.""",
    )
    poplar_options = Option(
        dict,
        {},
        """Set the PopLibs matrix multiplication options for the session. Must be a dictionary
of valid PopLibs matrix multiplication options. See matMul in the PopLibs API reference for the
full list of options. The options will be applied to all matmul operations in the session graph
during compilation."""
        + _AVAILABLE_MEMORY_PROPORTION_NOTE,
    )


class _NormsExperimentalConfig(ConfigCategory):
    """Sub-category containing experimental configuration options for normalizations that may be
    changed or removed with short or no notice."""

    distributed_batch_norm_replica_group_size = Option(
        int,
        1,
        """When executing fused batch-norms for training, this option specifies how many
replicas to aggregate the batch statistics across. For example, if a model is being executed
across four replicas and this option is set to two, replicas 0 and 1 will be grouped together and
replicas 2 and 3 will be grouped together and the batch norm statistics will be synchronously
all-reduced every time the layer is executed (including any recomputation) across the replicas
within a group. This option should not be used when using model parallelism (pipelining) and it
is not supported with I/O tiles.""",
    )


class _NormsConfig(ConfigCategory):
    """Sub-category containing configuration options that affect normalizations. Note that these
    options will be applied to all normalisation operations encountered (Fused Batch Norm, IPU
    Specific Group Norm, IPU Specific Layer Norm and IPU Specific Instance Norm)."""

    use_stable_statistics = Option(
        bool,
        False,
        """If True, computes the mean minus the activations first before computing the variance.
The implementation with this flag set to True is slower than when set to False.""",
    )
    experimental = Subcategory(_NormsExperimentalConfig)


class _MathConfig(ConfigCategory):
    """Sub-category containing configuration options related to simplifying algebraic
    mathematical expressions."""

    fast = Option(bool, False, _FAST_MATH_DOC)
    dot_strength = Option(
        bool,
        True,
        """Enable dot strength optimization. When set to True, the graph optimizer will convert
a dot product where either the LHS or the RHS contains only batch and/or contracting dimensions
to an elementwise matrix multiplication.""",
    )


class _OptimizationsConfig(ConfigCategory):
    """Sub-category containing configuration options that control a variety of optimizations
    made when lowering the TensorFlow graph to Poplar."""

    math = Subcategory(_MathConfig)
    prefetch_data_streams = Option(
        bool,
        True,
        """If True (default), prefetching of data for data streams on the host will be
overlapped with execution on the IPU.""",
    )
    combine_embedding_lookups = Option(
        bool,
        False,
        """If True, fuse embedding lookups which are on the same tensor. This might improve
performance but increase memory usage.""",
    )
    combine_matmuls = Option(
        bool,
        False,
        "If True, fuse matmul operations if they share the same weights or the same input.",
    )
    enable_graph_outlining = Option(
        bool,
        True,
        """If True (default), operations in the graph which are the same but with different
input tensors may be outlined. This means the same code will be re-used to execute them, reducing
the amount of program code, but their inputs will be exchanged into a common memory location to
do so, increasing execution time. If you care more about speed than memory, these optimizations
can be disabled by setting this option to False.""",
    )
    merge_infeed_io_copies = Option(
        bool,
        True,
        """If True, this flag will merge the streamed host to device input copies into one
larger copy. This may reduce the time to copy data from the host, at the expense of increasing
the live tensor memory on the device.""",
    )
    maximum_cross_replica_sum_buffer_size = Option(
        int,
        0,
        """The maximum number of bytes that can be waiting before a cross replica sum op is
scheduled. 0 (default) means that they are scheduled immediately. Increasing it leads to larger
temporary buffers in the cross replica sums, but fewer cross replica sums overall and therefore
less control code.""",
    )
    maximum_reduce_scatter_buffer_size = Option(
        int,
        0,
        "The maximum number of bytes that can be waiting before a reduce scatter op is scheduled.",
    )
    maximum_inter_ipu_copies_buffer_size = Option(
        int,
        0,
        "The maximum number of bytes that can be waiting before an inter IPU copy between IPUs "
        "is scheduled.",
    )
    maximum_send_recv_cluster_size = Option(
        int,
        0,
        """The maximum number of bytes that can be waiting before a cluster of send/recv
instructions to/from the host is scheduled. These are lowered to stream copies that can be merged
by Poplar.""",
    )
    maximum_reduce_many_buffer_size = Option(
        int,
        0,
        """The maximum size (in bytes) a cluster of reduce operations can reach before it is
scheduled. These clusters are lowered to popops ReduceMany operations.""",
    )
    maximum_all_gather_buffer_size = Option(
        int,
        0,
        """The maximum size (in bytes) a cluster of all gather operations can reach before it is
scheduled. These clusters are lowered to popops AllGather operations.""",
    )
    minimum_remote_tensor_size = Option(
        int,
        128,
        "The minimum size (in bytes) a tensor must be in order to be considered for being "
        "stored in remote memory.",
    )
    merge_remote_buffers = Option(
        MergeRemoteBuffersBehaviour,
        MergeRemoteBuffersBehaviour.IF_BENEFICIAL,
        """Whether to merge compatible remote buffers. Merging of remote buffers can allow for
more code re-use if the only difference between computations are the remote buffers being
accessed. Must be a MergeRemoteBuffersBehaviour.""",
    )
    enable_gather_simplifier = Option(
        bool,
        True,
        "If True (default), more aggressive optimizations will be done on embedding lookups.",
    )
    triangular_solve_expander_block_size = Option(
        int,
        0,
        """Defines the block size for the triangular solver expander. The processing within each
block is performed on a single tile. For a matrix of rank N and block size B, there are
log2(N/B) iterations of the control code. A value of 0 (default) selects an implementation
defined default.""",
    )
    cholesky_block_size = Option(
        int,
        0,
        """Defines the block size for the Cholesky factoriser. The processing within each block
is performed on a single tile. For a matrix of rank N and block size B, there are N/B iterations
of the control code. A value of 0 (default) selects an implementation defined default.""",
    )
    enable_fast_math = Option(
        bool,
        False,
        "DEPRECATED: 'enable_fast_math' has been moved to 'optimizations.math.fast'.\n\n"
        + _FAST_MATH_DOC,
        deprecated_msg="'enable_fast_math' has been moved to 'optimizations.math.fast'. It will "
        "be removed from this location in a future release.",
        also_sets="math.fast",
    )
    enable_dynamic_slice_replacement = Option(
        bool,
        True,
        """Control whether or not we replace dynamicSlice/Update with multiSlice/Update. This
can increase parallelism and provide better memory usage since multiSlice/Update can be
planned.""",
    )


class _PoolingConfig(ConfigCategory):
    """Sub-category containing configuration options that affect pooling operations."""

    poplar_options = Option(
        dict,
        {},
        """Set the PopLibs pooling compilation options for the session. Must be a dictionary of
valid PopLibs pooling options. See pool in the PopLibs API reference for the full list of
options. The options will be applied to all pooling operations in the session graph during
compilation.""",
    )


class _SchedulingConfig(ConfigCategory):
    """Sub-category containing configuration options that affect the scheduling of operations
    in the graph during compilation."""

    algorithm = Option(
        SchedulingAlgorithm,
        SchedulingAlgorithm.CHOOSE_BEST,
        """A SchedulingAlgorithm. If SchedulingAlgorithm.CHOOSE_BEST (default), several
schedules will be created and the one with the lowest predicted liveness chosen. Setting this to
a specific scheduling algorithm forces the compiler to use that algorithm when ordering the
instructions.""",
    )
    maximum_scheduler_lookahead_depth = Option(
        int,
        5,
        """Controls how far the LOOK_AHEAD scheduling algorithm can look beyond a given
scheduling decision to understand the max-liveness implications. Only for
SchedulingAlgorithm.LOOK_AHEAD.""",
    )
    maximum_scheduler_search_space_size = Option(
        int,
        64,
        """The upper-limit to the size of the LOOK_AHEAD scheduling algorithm's search space to
guarantee that it will terminate in a reasonable amount of time. Only for
SchedulingAlgorithm.LOOK_AHEAD.""",
    )


class IPUConfig(ConfigTree):
    """Configuration of the IPU system, as a tree of typed options in nested categories.

    Options are read and set as attributes, e.g. `config.auto_select_ipus = 2` or
    `config.device_connection.type = DeviceConnectionType.ON_DEMAND`. A value of the wrong type
    raises a TypeError and an unknown name raises a ValueError that suggests the closest valid
    name. `validate()` checks the rules that involve several options; `configure_ipu_system()`
    applies the configuration.
    """

    allow_recompute = Option(
        bool,
        False,
        """Whether or not to recompute instructions during training. If this is enabled then we
will attempt to pattern match instructions/pipeline stages in the forward pass and recompute
them in the backward pass to avoid having to preserve activations which increase the maximum
memory liveness. Enabling this option can reduce memory usage at the expense of extra
computation. Stateful operations cannot be recomputed.""",
    )
    selection_order = Option(
        SelectionOrder,
        SelectionOrder.AUTO,
        """The order in which IPUs are selected and mapped to physical IPU devices when using
multi-IPU devices. Must be one of SelectionOrder.""",
    )
    serialization_output_folder = Option(
        str,
        "",
        """Specifies the directory in which serialized Poplar executables will be saved. The
value must be a valid path. The default ("") disables executable serialization.""",
    )
    compilation_poplar_options = Option(
        dict,
        {},
        """Set the Poplar compilation options for the session. Must be a dictionary of valid
Poplar compilation flags. See the Engine class in the Poplar API reference for the full list of
options.""",
    )
    gcl_poplar_options = Option(
        dict,
        {},
        """Set the IPU options for the Graphcore Communication Library. Must be a dictionary of
valid GCL options. The options will be applied to all applicable GCL collective operations in the
graph during compilation.""",
    )
    auto_select_ipus = Option(
        _IPU_SELECTION,
        [],
        """Configure the IPUs to be used by the session. The configuration describes a system
consisting of multiple TensorFlow devices, each with control of one of more IPUs. The devices
will be labelled /device:IPU:0, /device:IPU:1 and so on. The system will automatically select
IPU configurations from the available IPUs, where they match the desired number of IPUs.

    config = IPUConfig()
    # Create a single TensorFlow device, with one IPU
    config.auto_select_ipus = 1
    # Create two TensorFlow devices, with two IPUs per device.
    config.auto_select_ipus = [2, 2]
    # Create two TensorFlow devices, with one IPU in the first device and two
    # IPUs in the second device.
    config.auto_select_ipus = [1, 2]
""",
    )
    select_ipus = Option(
        _IPU_SELECTION,
        [],
        """Configure the IPUs to be used by the session. The configuration describes a system
consisting of multiple TensorFlow devices, each with control of one of more IPUs. The TensorFlow
devices will be labelled /device:IPU:0, /device:IPU:1 and so on.

Each TensorFlow device uses a specific configuration consisting of one or more IPUs from the list
of devices, given by its index in the `gc-info -l` listing. On a 16-IPU system, indices 0 to 15
are single IPUs, 16 to 23 pairs, 24 to 27 groups of four, 28 and 29 groups of eight and 30 all
sixteen IPUs.

    config = IPUConfig()
    # Create a single TensorFlow device with 1 IPU, using IPU configuration index 0
    config.select_ipus = 0
    # Create two TensorFlow devices, with one IPU each, being devices at indices 0 and 1
    config.select_ipus = [0, 1]
    # Create two TensorFlow devices, with four IPUs each (configurations 24 and 25)
    config.select_ipus = [24, 25]
""",
    )

    convolutions = Subcategory(_ConvolutionsConfig)
    device_connection = Subcategory(_DeviceConnectionConfig)
    slices = Subcategory(_SlicesConfig)
    experimental = Subcategory(_ExperimentalConfig)
    floating_point_behaviour = Subcategory(_FloatingPointBehaviourConfig)
    io_tiles = Subcategory(_IOTilesConfig)
    ipu_model = Subcategory(_IPUModelConfig)
    matmuls = Subcategory(_MatmulsConfig)
    norms = Subcategory(_NormsConfig)
    optimizations = Subcategory(_OptimizationsConfig)
    pooling = Subcategory(_PoolingConfig)
    scheduling = Subcategory(_SchedulingConfig)

    def validate(self) -> None:
        """Checks the rules that involve several options; raises a ValueError listing every
        broken rule, each naming the option, its value and what is allowed."""
        validate_ipu_config(self)

    def _create_protobuf(self) -> Message:
        """The `IpuOptions` protobuf of this config, as the original's backend receives it,
        after checking the rules that involve several options."""
        return ipu_options_from_config(self)

    def configure_ipu_system(self, device: str = "cpu") -> Any:
        """Configure the IPU system with this config.

        Args:
          device: The CPU device which is local to the IPU hardware.
        """
        # Imported here: the system package depends on this one, not the other way round.
        from openipu._src.system.configure import configure_ipu_system

        return configure_ipu_system(self, device)
