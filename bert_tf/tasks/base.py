"""The task contract: what a task tells the driver (the runner's `run(task, settings)`),
after TF Model Garden's `official/core/base_task.py`. A task is built from a typed config
(`TaskConfig`), builds its inputs and model, defines its losses (each shard's share of the
global batch) and metrics, turns the per-example outputs of eval and predict into results and
files, and says what its SavedModel serves; it owns no loop. Its `Preprocessor` packs raw inputs
for both its records (`prepare`, `PreparedTask`) and its SavedModel's string signatures
(bert_tf.tasks.preprocessor). docs/tasks.md.
"""
import abc
import copy
import dataclasses
import typing

import tensorflow as tf

from bert_tf.data import input_pipeline
from bert_tf.errors import arg, argument_error
from bert_tf.model.checkpoints import load_checkpoint

MODES = ("train", "eval", "predict")


@dataclasses.dataclass(frozen=True)
class Records:
    """The TFRecord files a mode reads, and how many records eval and predict read (padding
    examples included; None: not counted, the driver then runs RunSettings.max_eval_steps
    steps, as pretraining's eval)."""
    paths: tuple
    count: typing.Optional[int] = None


@dataclasses.dataclass
class TaskConfig:
    """What the driver reads of a task, and what every task is built from; each task's config
    extends it with its own fields (`Task.Config`). The run's other inputs (checkpoints, batch
    sizes, steps) are the runner's RunSettings.

    Attributes:
      bert_config: the encoder's BertConfig (None: a task used for its losses only).
      max_seq_length: the records' length, and what the raw-string signatures pack texts to.
      records: {"train"|"eval"|"predict": Records}: what `dataset_fn(mode, ...)` reads (empty
        for a task built for a loaded model: export, the API).
      shuffle_buffer_size: records in the training shuffle buffer (the original: 100).
      bucket_by_length: batches not padded to max_seq_length (bert_tf.data.input_pipeline).
      deterministic_input: training reads the records in file order (repeated), even without
        a seed: a resumed run replays its input to its step, as with a seed.
    """
    bert_config: typing.Any = None
    max_seq_length: int = 128
    records: dict = dataclasses.field(default_factory=dict)
    shuffle_buffer_size: int = 100
    bucket_by_length: bool = False
    deterministic_input: bool = False

    def __post_init__(self):
        unknown = set(self.records) - set(MODES)
        if unknown:
            raise ValueError(f"records of unknown modes {sorted(unknown)}: modes are {MODES}")


class Task(abc.ABC):
    """Base class of the tasks, built from its `Config` (a TaskConfig); subclasses override
    what their task needs.

    Class attributes:
      name: the task's name (registry, logs, summaries, the export's marker).
      Config: its config class.
      Preprocessor: its preprocessor class (a bert_tf.tasks.preprocessor.Preprocessor): its
        records and its SavedModel's raw strings (`text_preprocessor`).
      train_metric_names: the keys of `train_metrics` (the first must be "loss").
      sequence_features: the [T] features of its records, cut to the longest example of a
        batch when `config.bucket_by_length` (None: the task cannot bucket).
      streams_predictions: `write_predictions` gets an iterator over each predict step's
        outputs (dicts of numpy arrays, in the dataset's order) as the model produces them,
        instead of every record's at once: for outputs too large to hold (extract_features).
      predicts_eval_outputs: `eval_outputs` are `predict_outputs` (SQuAD scores its predict
        file): when eval and predict read the same records, a run that does both infers once
        and hands eval's outputs to `write_predictions`.
      token_id_rank: the rank of the token ids the model takes, and `serving_default` serves:
        2 ([batch, length]), or 3 for multiple choice ([batch, choices, length]).
    """

    name = "task"
    Config = TaskConfig
    Preprocessor = None
    train_metric_names = ("loss",)
    sequence_features = None
    streams_predictions = False
    predicts_eval_outputs = False
    token_id_rank = 2

    def __init__(self, config):
        if not isinstance(config, self.Config):
            raise TypeError(f"{type(self).__name__} takes a {self.Config.__name__}, got "
                            f"{type(config).__name__}")
        self.config = config

    def for_encoder(self, bert_config, **options):
        """This task, over the same records, for an encoder of `bert_config` and with `options`
        (other fields of its config) changed: records do not depend on them, so one preparation
        serves every model of the same vocabulary."""
        task = copy.copy(self)
        task.config = dataclasses.replace(self.config, bert_config=bert_config, **options)
        return task

    @classmethod
    def serving_options(cls, options, vocab_file, record):
        """The options of this task's config for a model exported for serving
        (`registry.build_for_serving`): `options` completed from the model's files (its
        vocabulary file; `record`, what its folder records of a run of this task). The default
        takes them as given, but a task whose config has labels needs them: given, or recorded
        by the folder of its run (a classifier recorded as a regression has none)."""
        del vocab_file
        has_labels = "labels" in {field.name for field in dataclasses.fields(cls.Config)}
        if has_labels and not options.get("labels") and not record.get("regression"):
            raise argument_error("label_list", f"required for {arg('task')}={cls.name} (unless "
                                               f"{arg('init_checkpoint')} is the folder of a "
                                               f"{cls.name} run, which records them)")
        return options

    # ---- Data.
    def check_inputs(self, settings):
        """Raises InputError naming the file or argument when the task's inputs cannot work
        with the run's `settings` (the runner's RunSettings; runs before any model
        is built). The default checks nothing."""

    def feature_spec(self, mode):
        """The records' features (for tf.io.parse_single_example) of `mode`."""
        raise NotImplementedError(f"{self.name} reads no records")

    def dataset_fn(self, mode, global_batch_size, seed=None):
        """A function of the tf.distribute.InputContext returning per-replica batches of
        `config.records[mode]`: train shuffled (every record once per epoch, repeated by the
        loop's steps), eval/predict in file order, once. The default reads the records with
        `feature_spec(mode)` (bert_tf.data.input_pipeline)."""
        config, records = self.config, self.config.records[mode]
        sequence_features = self.sequence_features if config.bucket_by_length else None
        return input_pipeline.dataset_fn(
            records.paths, self.feature_spec(mode), global_batch_size,
            shuffle=mode == "train" and not config.deterministic_input,
            # In file order: counted records are read once, others as many steps as the loop
            # takes (training; pretraining's eval, as the original's).
            repeat=mode == "train" or records.count is None, seed=seed,
            shuffle_buffer_size=config.shuffle_buffer_size, sequence_features=sequence_features)

    # ---- Model.
    @abc.abstractmethod
    def build_model(self):
        """The keras model, called under the strategy's scope. It must implement
        `original_variable_parts()` (bert_tf.model.models) so that checkpoints and the weight-decay
        exclusions use the original variable names."""
        raise NotImplementedError

    def initialize(self, model, init_checkpoint, log):
        """Loads --init_checkpoint into a fresh model (no checkpoint in the output dir yet).

        Returns the LoadReport. The default loads whatever of the model the checkpoint has
        (the encoder of a pretrained model; a new task head stays initialised).
        """
        report = load_checkpoint(model, init_checkpoint)
        log(f"initialised from {init_checkpoint}: {report}")
        return report

    def restore_foreign(self, model, optimizer, path):
        """Restores a checkpoint in `--output_dir` that is not one of ours (e.g. the original
        release's run_pretraining output, to continue it). Returns True if it did; the default
        knows none."""
        return False

    def outputs(self, model, batch, training):
        """The model's outputs on a batch of records (training, eval, predict) or of packed
        inputs (serving): a dict of tensors."""
        return model({name: batch[name] for name in ("input_ids", "input_mask", "segment_ids")},
                     training=training)

    # ---- Train.
    # The units the training progress line counts per second besides steps (`throughput`);
    # () counts rows, shown as "examples".
    throughput_units = ()

    def throughput(self, batch):
        """{unit of `throughput_units`: float32 count in `batch` (a replica's)}."""
        return {}

    def normalizers(self, batch):
        """Float32 sums over the batch that scale each shard's loss to its share."""
        raise NotImplementedError(f"{self.name} does not train")

    def train_metrics(self, batch, outputs, normalizers):
        """{"loss": ..., ...} (`train_metric_names`), each the shard's share of the global
        batch's value: sums over the shard divided by `normalizers`."""
        raise NotImplementedError(f"{self.name} does not train")

    # ---- Eval and predict.
    def eval_outputs(self, batch, outputs):
        """Per-example tensors [B, ...] for `eval_results`."""
        raise NotImplementedError(f"{self.name} does not evaluate")

    def eval_results(self, outputs, global_step, batch_size):
        """The results dict (written to eval_results.txt) from the gathered per-example
        `outputs` (numpy, every eval record in file order); `batch_size` is the eval batch."""
        raise NotImplementedError(f"{self.name} does not evaluate")

    def write_eval_outputs(self, outputs, output_dir):
        """Writes files from the eval outputs besides eval_results.txt (on the chief only);
        returns their paths. The default writes none."""
        return []

    def main_metric(self):
        """The key of `eval_results` that chooses the best checkpoint unless the run names one
        (RunSettings.best_metric; losses are lower-is-better, every other key higher:
        the runner's best checkpoint). The default: None (the run must name one)."""
        return None

    def eval_metric_names(self):
        """The keys `eval_results` returns, known before any evaluation (a named best_metric
        is checked against them before any work), or None when they depend on the data. The
        default: None."""
        return None

    def predict_outputs(self, batch, outputs):
        """Per-example tensors [B, ...] for `write_predictions`."""
        raise NotImplementedError(f"{self.name} does not predict")

    def write_predictions(self, outputs, output_dir):
        """Writes the prediction files from the gathered `outputs` (or, with
        `streams_predictions`, an iterator over each step's); returns their paths.
        `output_dir` is None in a run without one (the runner's RunSettings)."""
        raise NotImplementedError(f"{self.name} does not predict")

    # ---- Serving (bert_tf.serving.export saves the signatures).
    def export_description(self):
        """What an export records of the task beside its name and length (the export marker,
        assets/bert_tf_export.json, and LiteRT's), and what a training run records in its
        model directory (bert_tf.model.directory.RECORD_FILE), where predict and export find
        the labels and options again: the default, nothing."""
        return {}

    def serving_outputs(self, outputs, from_text=False):
        """What a signature returns from the model's `outputs` on packed inputs: on token ids
        (`serving_default`), and with `from_text` on raw strings (the default
        `text_signatures`; a task may add what only text callers need, such as label names).
        The default: the outputs as they are."""
        return outputs

    def text_preprocessor(self, tokenizer):
        """The task's `Preprocessor` over `tokenizer` (a GraphTokenizer) with the task's
        options, for `text_signatures`."""
        if self.Preprocessor is None:
            raise NotImplementedError(f"{self.name} serves no raw strings: it names no "
                                      f"Preprocessor")
        return self.Preprocessor(tokenizer, self.config.max_seq_length)

    def text_signatures(self, model, preprocessor):
        """{name: tf.function} on raw strings ([B] tf.string), packed in the graph by
        `preprocessor` (`text_preprocessor`'s). The default: `serve_text` (text) and
        `serve_text_pair` (text_a, text_b), packed as the records (`Preprocessor.text_inputs`),
        returning `serving_outputs(..., from_text=True)`. A task whose answer is not per text
        (tags per word, a span) overrides them. Batches are cut to their longest text: the
        model masks padding, so the outputs are the padded ones, for less work. Serving
        functions here and in the tasks are traced with `autograph=False`: they are graph code
        with no Python control flow on tensors, and AutoGraph's source conversion would add
        to every export's time."""
        text = tf.TensorSpec([None], tf.string)

        def serve(inputs):
            return self.serving_outputs(self.outputs(model, inputs, training=False),
                                        from_text=True)

        @tf.function(input_signature=[text], autograph=False)
        def serve_text(text):
            return serve(preprocessor.text_inputs(text))

        @tf.function(input_signature=[text, text], autograph=False)
        def serve_text_pair(text_a, text_b):
            return serve(preprocessor.text_inputs(text_a, text_b))

        return {"serve_text": serve_text, "serve_text_pair": serve_text_pair}
