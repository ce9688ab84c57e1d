"""The task contract: what a task (pretraining, classification, tagging, SQuAD) tells the driver.

Every run_* command line is flags plus a `Task`; `bert_tf.training.runner.run(task, settings)` does the
rest once for all of them (strategy, precision, optimizer, checkpoints, train/eval/predict loops,
summaries, export). This follows TF Model Garden's `official/core/base_task.py`: a task builds
its inputs and model, defines its losses and metrics, and turns the per-example outputs of eval
and predict into results; it owns no loop.

The loops call the methods below inside `strategy.run` (one replica's shard of the batch) or on
the host. Tensors in a batch are int32 / float32 (int64 features are cast on read).

Train (see `bert_tf.training.loops`): `outputs(model, batch, training=True)`, then
`train_metrics(batch, outputs, normalizers)` returns "loss" and other scalars, each the shard's
*share* of the global-batch value: sums over the shard divided by `normalizers`, which the loop
has summed over replicas and micro-batches. So 1 device, N replicas and gradient accumulation
give the same loss and gradients for the same global batch.

Eval and predict: `eval_outputs` / `predict_outputs` return per-example tensors ([B, ...] each);
the loop gathers them across replicas in global-batch order and across steps, then hands the
whole arrays (numpy) to `eval_results` / `write_predictions`. Per-example, not sums, because
some results need every prediction (STS-B's Pearson, entity F1 over whole sentences, SQuAD
spans by example id). Eval and predict read their records once, in order; a task pads them to a
multiple of the batch size with the original's padding examples (`is_real_example` = 0), so
fixed-size batches (TPU) see every real example exactly once, and results weigh them out.

Each fine-tuning task module also owns how its raw inputs become records: `prepare_task(...)`
(`classification`, `tagging`, `squad`) reads and checks every split, writes the records into
output_dir and returns a `PreparedTask`; the command lines, the API and the notebook's runs all
go through it.
"""
import abc
import contextlib
import os
import typing


class Task(abc.ABC):
    """Base class of the tasks; subclasses override what their task needs.

    Attributes:
      name: short name for logs and summaries.
      train_metric_names: the keys of `train_metrics` (the first must be "loss").
      deterministic_input: the training input is in a fixed order even without a seed (file
        order): a resumed run replays it to its step, as with a seed.
      max_seq_length: the records' length, and what the raw-string signatures pack texts to.
      streams_predictions: `write_predictions` gets an iterator over each predict step's
        outputs (dicts of numpy arrays, in the dataset's order) as the model produces them,
        instead of every record's at once: for outputs too large to hold (extract_features).
      record_files: {"train"|"eval"|"predict": TFRecord path} of a task over one file per
        mode (None: the task says its files in `record_paths`).
    """

    name = "task"
    train_metric_names = ("loss",)
    deterministic_input = False
    max_seq_length = 128
    streams_predictions = False
    record_files = None

    @classmethod
    def for_model(cls, bert_config, **options):
        """This task for a model that is loaded rather than trained here (export, the API; no
        records): `options` are what its serving needs (labels, max_seq_length, ...).
        bert_tf.tasks.registry builds tasks by name through it."""
        raise NotImplementedError(f"{cls.__name__} cannot be built for a loaded model")

    # ---- Data.
    def check_inputs(self, settings):
        """Raises InputError naming the file or flag when the task's inputs cannot work with
        the run's `settings` (bert_tf.training.settings.RunSettings; runs before any model is
        built). The default checks nothing."""

    def record_paths(self, mode):
        """The TFRecord files that `dataset_fn(mode, ...)` reads (the driver names the damaged
        one when reading fails). The default: `self.record_files[mode]` if the task has it."""
        files = self.record_files or {}
        return [files[mode]] if mode in files else []

    def num_examples(self, mode):
        """Number of records (padding examples included) that eval/predict read, or None:
        the driver then runs `eval_steps` steps (pretraining's max_eval_steps)."""
        return None

    def dataset_fn(self, mode, global_batch_size, seed=None):
        """A function of the tf.distribute.InputContext returning per-replica batches:
        train shuffled and repeated, eval/predict in file order, once."""
        raise NotImplementedError

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
        from bert_tf.model.checkpoints import load_checkpoint
        report = load_checkpoint(model, init_checkpoint)
        log(f"initialised from {init_checkpoint}: {report}")
        return report

    def restore_foreign(self, model, optimizer, path):
        """Restores a checkpoint in `--output_dir` that is not one of ours (e.g. the original
        release's run_pretraining output, to continue it). Returns True if it did; the default
        knows none."""
        return False

    # ---- Train.
    def outputs(self, model, batch, training):
        """The model's outputs on a batch (a dict of tensors)."""
        return model(self.model_inputs(batch), training=training)

    def model_inputs(self, batch):
        return {name: batch[name] for name in ("input_ids", "input_mask", "segment_ids")}

    def normalizers(self, batch):
        """Float32 sums over the batch that scale each shard's loss to its share."""
        raise NotImplementedError

    def train_metrics(self, batch, outputs, normalizers):
        raise NotImplementedError

    # ---- Eval and predict.
    def eval_outputs(self, batch, outputs):
        """Per-example tensors [B, ...] for `eval_results`."""
        raise NotImplementedError

    def eval_results(self, outputs, global_step, batch_size):
        """The results dict (written to eval_results.txt) from the gathered per-example
        `outputs` (numpy, every eval record in file order); `batch_size` is the eval batch."""
        raise NotImplementedError

    def write_eval_outputs(self, outputs, output_dir):
        """Writes files from the eval outputs besides eval_results.txt (on the chief only);
        returns their paths. The default writes none."""
        return []

    def predict_outputs(self, batch, outputs):
        """Per-example tensors [B, ...] for `write_predictions`; None: the task has no predict."""
        return None

    def write_predictions(self, outputs, output_dir):
        """Writes the prediction files from the gathered `outputs` (or, with
        `streams_predictions`, an iterator over each step's); returns their paths.
        `output_dir` is None in a run without one (bert_tf.training.settings.RunSettings)."""
        raise NotImplementedError

    # ---- Export (bert_tf.serving.export saves what these return).
    def serving_signatures(self, model):
        """{name: tf.function} on token ids to save with the model. The default,
        `serving_default`, serves the model on input_ids, input_mask, segment_ids (int32
        [batch, length]) and returns `serving_outputs`."""
        import tensorflow as tf

        spec = tf.TensorSpec([None, None], tf.int32)

        @tf.function(input_signature=[spec, spec, spec])
        def serve(input_ids, input_mask, segment_ids):
            outputs = self.serving_model_outputs(model, {
                "input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids})
            return self.serving_outputs(outputs)

        return {"serving_default": serve}

    def text_signatures(self, model, tokenizer, max_seq_length):
        """{name: tf.function} on raw strings ([B] tf.string), tokenized and packed in the graph
        by `tokenizer` (bert_tf.text.graph_tokenization.GraphTokenizer). The default:
        `serve_text` (text) and `serve_text_pair` (text_a, text_b), packed as the original's
        convert_single_example, returning `text_serving_outputs`. A task whose answer is not
        per text (tags per word, a span) overrides them."""
        import tensorflow as tf

        text = tf.TensorSpec([None], tf.string)

        def serve(inputs):
            return self.text_serving_outputs(self.serving_model_outputs(model, inputs))

        @tf.function(input_signature=[text])
        def serve_text(text):
            return serve(tokenizer.bert_inputs(text, max_seq_length=max_seq_length))

        @tf.function(input_signature=[text, text])
        def serve_text_pair(text_a, text_b):
            return serve(tokenizer.bert_inputs(text_a, text_b, max_seq_length=max_seq_length))

        return {"serve_text": serve_text, "serve_text_pair": serve_text_pair}

    def serving_model_outputs(self, model, inputs):
        """The model's outputs when served (inference) on packed `inputs`."""
        return self.outputs(model, inputs, training=False)

    def serving_outputs(self, outputs):
        """What the token-id signature returns from the model's outputs."""
        return outputs

    def text_serving_outputs(self, outputs):
        """What the raw-string signatures return; default: the same as `serving_outputs`."""
        return self.serving_outputs(outputs)


def format_results(results):
    """The original's eval_results.txt: `key = value` lines, keys sorted, str() of each value."""
    return "".join("%s = %s\n" % (key, str(results[key])) for key in sorted(results))


def write_results(results, output_dir, filename="eval_results.txt"):
    """Writes `format_results(results)` atomically into output_dir; returns the path."""
    from bert_tf.io_utils import atomic_open
    path = os.path.join(output_dir, filename)
    with atomic_open(path) as f:
        f.write(format_results(results))
    return path


class PreparedTask(typing.NamedTuple):
    """What a task module's `prepare_task` returns: the task over the records it wrote,
    `num_train` (what the training steps are counted from: examples, windows or questions; 0
    without training) and the (num_train_steps, num_warmup_steps) they make."""
    task: Task
    num_train: int = 0
    num_train_steps: int = 0
    num_warmup_steps: int = 0


@contextlib.contextmanager
def preparing(output_dir):
    """The block a `prepare_task` writes its records in: output_dir made, and what the block
    created removed if it fails (no partial outputs; bert_tf.io_utils.removed_on_failure)."""
    import tensorflow as tf

    from bert_tf import io_utils

    with io_utils.removed_on_failure(output_dir):
        tf.io.gfile.makedirs(output_dir)
        yield
