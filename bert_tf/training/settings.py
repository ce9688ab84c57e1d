"""The settings of a run: one object for the driver (`bert_tf.training.runner.run`) and the
training loop (`bert_tf.training.loops.train`).

The command lines fill it from their flags (run/common_flags.py maps each field to its flag,
explicitly); Python callers construct it. `validate` checks what no task can run with before
any work.

No TensorFlow import: run_pretraining checks its request (`check_request`) before it imports
TensorFlow.
"""
import dataclasses
import os

from bert_tf.errors import arg, argument_error
from bert_tf.io_utils import check_writable_dir


# Dynamic loss scaling (float16): Keras' and TensorFlow's defaults. The scale halves at every
# step whose loss or gradients are not finite (the step is skipped) and doubles after
# LOSS_SCALE_GROWTH_STEPS finite steps in a row; a step skipped with the scale at
# MIN_LOSS_SCALE stops the run (a smaller scale amplifies nothing: the model or the data is
# broken; DeepSpeed's fp16 loss scaler stops at its minimum of 1 too). bert_tf.training.loops
# applies them.
INITIAL_LOSS_SCALE = 2.0 ** 15
LOSS_SCALE_GROWTH_STEPS = 2000
MIN_LOSS_SCALE = 1.0


@dataclasses.dataclass
class RunSettings:
    """Everything `run` needs besides the task; the command lines' flags of the same names.

    `output_dir` None: a run that only predicts, with the init_checkpoint, and whose task
    writes its files where it was told (extract_features' --output_file)."""
    output_dir: str
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    init_checkpoint: str = None
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_steps: int = 0
    num_warmup_steps: int = 0
    optimizer: str = "adamw"
    weight_decay_rate: float = 0.01
    max_eval_steps: int = 100  # eval steps for tasks that do not count their records
    iterations_per_loop: int = 1000
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    log_steps: int = 100
    gradient_accumulation_steps: int = 1
    # Late dropout: the model's dropout layers are off before this step, on from it (0: on
    # throughout).
    dropout_from_step: int = 0
    eval_during_training: bool = False
    # With eval during training (bert_tf.training.best_checkpoint): keep the checkpoint of the
    # best dev value of `best_metric` (None: the task's main metric) in output_dir/best and
    # evaluate, predict and export from it; stop after `early_stopping_patience` evaluations
    # in a row without an improvement of more than `early_stopping_threshold` (0: never).
    keep_best_checkpoint: bool = False
    best_metric: str = None
    early_stopping_patience: int = 0
    early_stopping_threshold: float = 0.0
    save_original_checkpoint: bool = False
    distribution_strategy: str = "one_device"
    use_tpu: bool = False
    tpu_name: str = None
    tpu_zone: str = None
    gcp_project: str = None
    master: str = None
    num_tpu_cores: int = 8
    num_gpus: int = 0
    num_cpu_devices: int = 1
    mixed_precision: str = "off"
    initial_loss_scale: float = INITIAL_LOSS_SCALE  # float16's dynamic loss scaling
    loss_scale_growth_steps: int = LOSS_SCALE_GROWTH_STEPS
    recompute_layers: bool = False  # bert_tf.model.layers.set_recompute
    jit_compile: bool = False
    cpu_kernels: str = None  # "auto", "on", "off" (bert_tf.model.cpu_kernels); None: as set
    seed: int = None
    # The run's vocabulary and casing: a training run copies and records them in output_dir
    # (a model directory, bert_tf.model.directory); a casing of None is not recorded.
    vocab_file: str = None
    do_lower_case: bool = True

    def validate(self, steps_known=True):
        """InputError naming the field for values no task can run with, and for output paths
        that cannot be written or would replace what is not ours. `steps_known=False`: before
        the command line has counted its data (num_train_steps not set yet)."""
        check_request(self.do_train, self.do_eval, self.do_predict, self.output_dir)
        positive = ["train_batch_size", "eval_batch_size", "predict_batch_size",
                    "iterations_per_loop", "max_eval_steps", "gradient_accumulation_steps",
                    "keep_checkpoint_max", "learning_rate"]
        if self.do_train and steps_known:
            positive.append("num_train_steps")
        for name in positive:
            if getattr(self, name) <= 0:
                raise argument_error(name, "must be positive")
        if self.num_warmup_steps < 0:
            raise argument_error("num_warmup_steps", "must be >= 0")
        if self.dropout_from_step < 0:
            raise argument_error("dropout_from_step", "must be >= 0")
        if self.do_train and steps_known and self.dropout_from_step >= self.num_train_steps > 0:
            raise argument_error("dropout_from_step", f"cannot act: dropout would not turn on "
                                 f"before {arg('num_train_steps')}={self.num_train_steps}")
        if self.train_batch_size % self.gradient_accumulation_steps:
            raise argument_error("gradient_accumulation_steps", f"must divide "
                                 f"{arg('train_batch_size')}={self.train_batch_size}")
        if self.optimizer not in ("adamw", "adam", "lamb"):  # optimization.OPTIMIZERS
            raise argument_error("optimizer", f"must be adamw, adam or lamb, got "
                                              f"{self.optimizer!r}")
        if self.mixed_precision not in ("off", "bfloat16", "float16"):
            raise argument_error("mixed_precision", "must be off, bfloat16 or float16")
        if self.mixed_precision == "float16" and (self.use_tpu
                                                  or self.distribution_strategy == "tpu"):
            tpu = arg("use_tpu") if self.use_tpu else f"{arg('distribution_strategy')}=tpu"
            raise argument_error("mixed_precision", f"float16 is for GPUs, not TPUs ({tpu}): "
                                                    f"use {arg('mixed_precision')}=bfloat16, "
                                                    f"which TPUs compute natively and which "
                                                    f"needs no loss scaling")
        if self.initial_loss_scale < MIN_LOSS_SCALE:
            raise argument_error("initial_loss_scale", f"must be >= {MIN_LOSS_SCALE:g} (the "
                                                       f"smallest loss scale)")
        if self.loss_scale_growth_steps < 1:
            raise argument_error("loss_scale_growth_steps", "must be positive")
        self._check_best_checkpoint()
        if self.output_dir is None:
            if self.do_train or self.do_eval:
                raise argument_error("output_dir", "required to train or evaluate")
            if not self.init_checkpoint:
                raise argument_error("init_checkpoint", f"required without {arg('output_dir')}")
        else:
            check_writable_dir(self.output_dir)

    @property
    def chooses_best(self):
        """Whether the run keeps the best checkpoint or stops early (both choose by a metric)."""
        return self.keep_best_checkpoint or self.early_stopping_patience > 0

    def _check_best_checkpoint(self):
        if self.early_stopping_patience < 0:
            raise argument_error("early_stopping_patience", "must be >= 0 (0: no early stopping)")
        if self.early_stopping_threshold < 0:
            raise argument_error("early_stopping_threshold", "must be >= 0")
        if self.early_stopping_threshold and not self.early_stopping_patience:
            raise argument_error("early_stopping_threshold", f"needs "
                                                             f"{arg('early_stopping_patience')}")
        given = [name for name in ("keep_best_checkpoint", "early_stopping_patience",
                                   "best_metric") if getattr(self, name)]
        if not given:
            return
        if not self.chooses_best:
            raise argument_error("best_metric", f"chooses nothing without "
                                                f"{arg('keep_best_checkpoint')} or "
                                                f"{arg('early_stopping_patience')}")
        if not (self.do_train and self.do_eval and self.eval_during_training):
            raise argument_error(given[0], f"needs {arg('do_train')}, {arg('do_eval')} and "
                                           f"{arg('eval_during_training')}: it chooses by the "
                                           f"evaluations during training")


def check_request(do_train, do_eval, do_predict, output_dir):
    """Something to do, and an output dir that can be one; command lines call it before they
    read any data, `RunSettings.validate` again for Python callers."""
    if not (do_train or do_eval or do_predict):
        raise argument_error("do_train", f"at least one of {arg('do_train')}, {arg('do_eval')} "
                                         f"or {arg('do_predict')} must be set")
    if output_dir is not None and os.path.isfile(output_dir):
        raise argument_error("output_dir", f"{output_dir} is a file, not a directory")
