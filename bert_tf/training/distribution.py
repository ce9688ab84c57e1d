"""tf.distribute strategy from the command-line choices (the original's TPU flags included).

    one_device              one CPU or GPU (GPU 0 when num_gpus > 0)
    mirrored                all local GPUs (num_gpus), or `num_cpu_devices` logical CPUs
    multi_worker_mirrored   several machines, each with its TF_CONFIG (synchronous all-reduce)
    tpu                     a Cloud TPU (the original's --use_tpu/--tpu_name/--tpu_zone/
                            --gcp_project/--master)

`--use_tpu` implies tpu, as in the original.
"""
import tensorflow as tf

from bert_tf.errors import arg, argument_error

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def strategy_name(distribution_strategy, use_tpu=False):
    """The strategy to use: `tpu` when the original's --use_tpu is set, else the flag's value."""
    if use_tpu:
        if distribution_strategy not in (None, "", "one_device", "tpu"):
            raise argument_error("distribution_strategy", f"{arg('use_tpu')} asks for tpu, but "
                                                          f"{distribution_strategy!r} was given")
        return "tpu"
    name = distribution_strategy or "one_device"
    if name not in STRATEGIES:
        raise argument_error("distribution_strategy", f"must be one of "
                                                      f"{', '.join(STRATEGIES)}, got {name!r}")
    return name


def tpu_resolver_kwargs(tpu_name=None, tpu_zone=None, gcp_project=None, master=None):
    """TPUClusterResolver arguments from the original's flags.

    The original passes --tpu_name (a Cloud TPU name or grpc:// address) with zone and project,
    and --master as the TF master URL; without --tpu_name, --master is the TPU address.
    """
    tpu = tpu_name or master or ""
    return {"tpu": tpu, "zone": tpu_zone, "project": gcp_project}


def split_cpu(num_cpu_devices):
    """Splits the CPU into logical devices (to run Mirrored on one CPU); before TF starts."""
    cpus = tf.config.list_physical_devices("CPU")
    current = tf.config.get_logical_device_configuration(cpus[0])
    if current and len(current) == num_cpu_devices:
        return
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(num_cpu_devices)])


_STRATEGIES = {}  # one strategy per process and arguments: see create_strategy


def create_strategy(name, num_gpus=0, num_cpu_devices=1, tpu_kwargs=None, _tpu_api=None):
    """The tf.distribute.Strategy `name` (one of STRATEGIES), built once per process for the
    same arguments: MultiWorkerMirrored (and Mirrored on logical CPUs) must be built before
    TensorFlow runs any op, so a command line that writes records first builds it at start-up
    (run/common_flags.start_strategy) and the runner gets the same object later.

    Args:
      num_gpus: GPUs to use for one_device (>0: GPU 0) and mirrored.
      num_cpu_devices: mirrored without GPUs: logical CPU devices to mirror over.
      tpu_kwargs: TPUClusterResolver arguments (see `tpu_resolver_kwargs`).
      _tpu_api: for tests: (resolver_class, connect_fn, initialize_fn, strategy_class).
    """
    key = (name, num_gpus, num_cpu_devices, tuple(sorted((tpu_kwargs or {}).items())))
    if _tpu_api is None and key in _STRATEGIES:
        return _STRATEGIES[key]
    strategy = _create_strategy(name, num_gpus, num_cpu_devices, tpu_kwargs, _tpu_api)
    if _tpu_api is None:
        _STRATEGIES[key] = strategy
    return strategy


def _create_strategy(name, num_gpus, num_cpu_devices, tpu_kwargs, _tpu_api):
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if num_gpus > 0 else "/cpu:0")
    if name == "mirrored":
        if num_gpus > 0:
            return tf.distribute.MirroredStrategy([f"/gpu:{i}" for i in range(num_gpus)])
        if num_cpu_devices > 1:
            split_cpu(num_cpu_devices)
        return tf.distribute.MirroredStrategy(
            [f"/cpu:{i}" for i in range(max(num_cpu_devices, 1))],
            cross_device_ops=tf.distribute.ReductionToOneDevice() if num_cpu_devices > 1 else None)
    if name == "multi_worker_mirrored":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver_class, connect, initialize, strategy_class = _tpu_api or (
            tf.distribute.cluster_resolver.TPUClusterResolver,
            tf.config.experimental_connect_to_cluster,
            tf.tpu.experimental.initialize_tpu_system,
            tf.distribute.TPUStrategy)
        resolver = resolver_class(**(tpu_kwargs or {}))
        connect(resolver)
        initialize(resolver)
        return strategy_class(resolver)
    raise argument_error("distribution_strategy", f"unknown strategy {name!r}")


def is_chief(strategy):
    """True on the worker that writes checkpoints, summaries and results."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None:
        return True
    if "chief" in resolver.cluster_spec().as_dict():
        return task_type == "chief"
    return task_type == "worker" and task_id == 0
