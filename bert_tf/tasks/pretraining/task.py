"""Pretraining as a Task: the original run_pretraining's masked-LM and next-sentence loss and eval
metrics on BertPretrainer outputs, for every record layout
(`bert_tf.data.pretraining.record_layout`; dynamic masks drawn when read, `dynamic_masking`),
each shard's loss its share of the global batch's.
docs/run_pretraining.md.
"""
import dataclasses
import random
import sys
import typing

import numpy as np
import tensorflow as tf

from bert_tf.data import input_pipeline
from bert_tf.data.records import feature_spec
from bert_tf.data.input_pipeline import (check_first_record, check_id_ranges,
                                         first_record_lengths)
from bert_tf.data.pretraining.options import InstanceOptions
from bert_tf.data.pretraining.record_layout import (
    ORIGINAL_LAYOUT, pretraining_layout_of, record_schema)
from bert_tf.errors import InputError, arg, argument_error, file_error
from bert_tf.model import checkpoints
from bert_tf.model.cpu_kernels import cpu_kernels_enabled, picked_log_probs
from bert_tf.model.load_report import LoadReport
from bert_tf.model.models import BertPretrainer
from bert_tf.model.variable_names import Part, original_variable_map
from bert_tf.tasks import registry
from bert_tf.tasks.base import Records, Task, TaskConfig
from bert_tf.tasks.pretraining import dynamic_masking
from bert_tf.tasks.pretraining.masked_text import MaskedTextPreprocessor
from bert_tf.tokenization import load_vocab

MASKED_LM_EPSILON = 1e-5  # the original's denominator guard
MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
PACKED_INPUTS = ("position_ids", "sequence_ids", "next_sentence_positions")
OBJECTIVES = ("mlm_nsp", "mlm")
EVAL_MASKING_SEED = 0  # eval's dynamic masks: the same at every checkpoint
DYNAMIC_MASKED_LM_PROB = InstanceOptions.masked_lm_prob  # create_pretraining_data's default


def pretraining_feature_spec(max_seq_length, max_predictions_per_seq, layout=ORIGINAL_LAYOUT):
    """The tf.io parsing spec of pretraining records of `layout` (`record_schema`)."""
    return feature_spec(record_schema(max_seq_length, max_predictions_per_seq, layout))


def masked_lm_example_loss(masked_lm_log_probs, masked_lm_ids):
    """Per-position negative log-likelihood [B, P] (the original's per_example_loss, reshaped).

    As the original: -sum(log_probs * one_hot(ids)). Picking the entry with a gather gives the
    same number, but its gradient is a scatter into [B, P, V] zeros, slow on CPU; the
    one-hot's is one multiply (with the CPU kernels, one fused pass each way).
    """
    log_probs = tf.cast(masked_lm_log_probs, tf.float32)
    if cpu_kernels_enabled():
        return -picked_log_probs(log_probs, tf.cast(masked_lm_ids, tf.int32))
    one_hot = tf.one_hot(tf.cast(masked_lm_ids, tf.int32), tf.shape(log_probs)[-1])
    return -tf.reduce_sum(log_probs * one_hot, axis=-1)


def next_sentence_example_loss(next_sentence_log_probs, next_sentence_labels):
    """Per-example negative log-likelihood [B] ([B, S] for packed rows' [B, S, 2])."""
    log_probs = tf.cast(next_sentence_log_probs, tf.float32)
    labels = tf.reshape(tf.cast(next_sentence_labels, tf.int32), tf.shape(log_probs)[:-1])
    return -tf.gather(log_probs, labels, batch_dims=log_probs.shape.rank - 1)


def _next_sentence_weights(batch):
    """Packed rows' next_sentence_weights (1 for a real sequence) as float32; None for rows of
    one sequence pair each."""
    if "next_sentence_weights" not in batch:
        return None
    return tf.cast(batch["next_sentence_weights"], tf.float32)


def pretraining_loss(outputs, batch, normalizers=None):
    """(loss, masked_lm_loss, next_sentence_loss) exactly as the original for a whole batch
    (next_sentence_loss None without a next-sentence head).

    `normalizers` (see `PretrainingTask.normalizers`) replaces this batch's sum(w) and example
    count by those of the global batch when `batch` is one shard of it.
    """
    weights = tf.cast(batch["masked_lm_weights"], tf.float32)
    mlm_nll = masked_lm_example_loss(outputs["masked_lm_log_probs"], batch["masked_lm_ids"])
    weight_total = (tf.reduce_sum(weights) if normalizers is None
                    else normalizers["masked_lm_weight"])
    masked_lm_loss = tf.reduce_sum(weights * mlm_nll) / (weight_total + MASKED_LM_EPSILON)
    if "next_sentence_log_probs" not in outputs:
        return masked_lm_loss, masked_lm_loss, None
    nsp_nll = next_sentence_example_loss(outputs["next_sentence_log_probs"],
                                         batch["next_sentence_labels"])
    nsp_weights = _next_sentence_weights(batch)
    if nsp_weights is not None:
        example_total = (tf.reduce_sum(nsp_weights) if normalizers is None
                         else normalizers["examples"])
        next_sentence_loss = tf.reduce_sum(nsp_weights * nsp_nll) / tf.maximum(example_total,
                                                                               1.0)
    else:
        example_total = (tf.cast(tf.size(nsp_nll), tf.float32) if normalizers is None
                         else normalizers["examples"])
        next_sentence_loss = tf.reduce_sum(nsp_nll) / example_total
    return masked_lm_loss + next_sentence_loss, masked_lm_loss, next_sentence_loss


def _correct(log_probs, labels):
    predictions = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
    return tf.cast(tf.equal(predictions, tf.cast(labels, tf.int32)), tf.float32)


def eval_outputs(outputs, batch):
    """Per-example values [B] from which `eval_results` rebuilds the original's metrics."""
    weights = tf.cast(batch["masked_lm_weights"], tf.float32)
    mlm_nll = masked_lm_example_loss(outputs["masked_lm_log_probs"], batch["masked_lm_ids"])
    result = {
        "masked_lm_weight": tf.reduce_sum(weights, axis=-1),
        "masked_lm_loss_sum": tf.reduce_sum(weights * mlm_nll, axis=-1),
        "masked_lm_correct": tf.reduce_sum(
            weights * _correct(outputs["masked_lm_log_probs"], batch["masked_lm_ids"]), axis=-1),
    }
    if "next_sentence_log_probs" not in outputs:
        return result
    log_probs = outputs["next_sentence_log_probs"]
    nsp_weights = _next_sentence_weights(batch)
    if nsp_weights is not None:  # packed: sums over each row's sequences
        labels = batch["next_sentence_labels"]
        nll = next_sentence_example_loss(log_probs, labels)
        result.update(next_sentence_loss=tf.reduce_sum(nsp_weights * nll, axis=-1),
                      next_sentence_correct=tf.reduce_sum(
                          nsp_weights * _correct(log_probs, labels), axis=-1),
                      next_sentence_weight=tf.reduce_sum(nsp_weights, axis=-1))
        return result
    labels = tf.reshape(batch["next_sentence_labels"], [-1])
    result.update(next_sentence_loss=next_sentence_example_loss(log_probs, labels),
                  next_sentence_correct=_correct(log_probs, labels))
    return result


def eval_results(outputs, global_step, batch_size):
    """The original's eval_results dict from the per-example outputs of all eval batches.

    "loss" is the mean over eval batches (of `batch_size` examples, in order) of each batch's
    loss, as TPUEstimator.evaluate averages the model_fn's loss. The values are numpy float32
    (global_step int64) like TPUEstimator.evaluate's, so that `format_results` prints them as
    the original does. Without next-sentence outputs (objective "mlm") there are no
    next_sentence_* keys; packed rows' next-sentence values are per sequence.
    """
    values = {k: np.asarray(v, np.float64) for k, v in outputs.items()}
    count = len(values["masked_lm_weight"])
    next_sentence = "next_sentence_loss" in values
    packed = "next_sentence_weight" in values
    batch_losses = []
    for start in range(0, count, batch_size):
        part = {k: v[start:start + batch_size] for k, v in values.items()}
        loss = (part["masked_lm_loss_sum"].sum()
                / (part["masked_lm_weight"].sum() + MASKED_LM_EPSILON))
        if packed:
            loss += part["next_sentence_loss"].sum() / max(part["next_sentence_weight"].sum(),
                                                           1.0)
        elif next_sentence:
            loss += part["next_sentence_loss"].mean()
        batch_losses.append(loss)
    totals = {k: v.sum() for k, v in values.items()}

    def ratio(num, den):
        return np.float32(totals[num] / totals[den]) if totals[den] else np.float32(0.0)

    results = {
        "global_step": np.int64(global_step),
        "loss": np.float32(np.mean(batch_losses)) if batch_losses else np.float32(0.0),
        "masked_lm_accuracy": ratio("masked_lm_correct", "masked_lm_weight"),
        "masked_lm_loss": ratio("masked_lm_loss_sum", "masked_lm_weight"),
    }
    if packed:
        results.update(next_sentence_accuracy=ratio("next_sentence_correct",
                                                    "next_sentence_weight"),
                       next_sentence_loss=ratio("next_sentence_loss", "next_sentence_weight"))
    elif next_sentence:
        results.update(
            next_sentence_accuracy=np.float32(totals["next_sentence_correct"] / count)
            if count else np.float32(0.0),
            next_sentence_loss=np.float32(totals["next_sentence_loss"] / count)
            if count else np.float32(0.0))
    return results


@dataclasses.dataclass
class PretrainingConfig(TaskConfig):
    """Attributes (besides TaskConfig's; `records` holds the same files for train and eval):
      max_predictions_per_seq: the records' masked positions.
      mask_id: the vocabulary's [MASK] id, which serving needs (export only).
      top_k: serving returns the top_k most probable tokens at each [MASK].
      objective: "mlm_nsp" (the original's masked-LM + next-sentence) or "mlm" (masked-LM
        only: no next-sentence head).
      layout: the records' PretrainingLayout (None: read from their first records by
        `check_inputs`; the original's until then).
      masked_lm_prob, vocab_size_for_masking: dynamic masks (also need mask_id): the share of
        tokens masked (None: DYNAMIC_MASKED_LM_PROB; given for records with static masks, which
        it cannot change, an error), and the range of random replacement ids (the vocabulary's
        size).
      dropout: the hidden and attention dropout of the model trained (None: bert_config's);
        bert_config, which the model directory keeps for fine-tuning, is unchanged.
    """
    max_predictions_per_seq: int = 20
    mask_id: typing.Optional[int] = None
    top_k: int = 5
    objective: str = "mlm_nsp"
    layout: typing.Any = None
    masked_lm_prob: typing.Optional[float] = None
    vocab_size_for_masking: typing.Optional[int] = None
    dropout: typing.Optional[float] = None


def masking_vocabulary(vocab_file):
    """(the [MASK] id, the number of ids) of the vocabulary that masks are drawn and served
    with; (None, None) without one. A vocabulary without [MASK] is an InputError naming
    vocab_file."""
    if not vocab_file:
        return None, None
    vocab = load_vocab(vocab_file)
    if "[MASK]" not in vocab:
        raise argument_error("vocab_file", f"{vocab_file} has no [MASK] token")
    return vocab["[MASK]"], len(vocab)


def pretraining_records(input_files):
    """The records of a pretraining run: the same files for training and eval (the
    original's --input_file), not counted (eval runs max_eval_steps steps)."""
    return {mode: Records(tuple(input_files)) for mode in ("train", "eval")}


@registry.register
class PretrainingTask(Task):
    """Masked-LM + next-sentence pretraining on create_pretraining_data's records.

    Eval reads the first max_eval_steps * eval_batch_size records in file order (repeating
    the files if they hold fewer), as the original. An output dir that holds a checkpoint of
    the original's run_pretraining is continued from it (`restore_foreign`).

    Served (bert_tf.serving.export), the masked-LM head answers at every `[MASK]` of the input:
    `token_ids` int32 and `probabilities` float32 [B, masks, top_k], `positions` int32 and
    `mask` int32 (1: a real [MASK]) [B, masks], padded to the batch's most masks with 0; the
    raw-string `serve_text` takes the literal "[MASK]" in a text as the mask token and adds the
    top-k `tokens`.
    """

    name = "pretraining"
    Config = PretrainingConfig
    Preprocessor = MaskedTextPreprocessor
    train_metric_names = ("loss", "masked_lm_loss", "next_sentence_loss", "masked_lm_accuracy",
                          "next_sentence_accuracy")

    def __init__(self, config=None):
        super().__init__(config if config is not None else PretrainingConfig())
        if self.config.objective not in OBJECTIVES:
            raise argument_error("objective", f"{self.config.objective!r} is not one of "
                                              f"{', '.join(OBJECTIVES)}")
        self.next_sentence = self.config.objective == "mlm_nsp"
        if not self.next_sentence:
            self.train_metric_names = ("loss", "masked_lm_loss", "masked_lm_accuracy")

    @classmethod
    def serving_options(cls, options, vocab_file, record):
        """The masked LM serves with its vocabulary's [MASK] id, its heads the recorded
        objective's."""
        if not vocab_file:
            raise argument_error("vocab_file", f"required for {arg('task')}=pretraining (the "
                                               f"[MASK] id)")
        options = dict(options, mask_id=masking_vocabulary(vocab_file)[0])
        if record.get("objective"):
            options["objective"] = record["objective"]
        return options

    @property
    def layout(self):
        """The records' PretrainingLayout, as far as this task reads them (no next-sentence
        features for objective "mlm")."""
        layout = self.config.layout or ORIGINAL_LAYOUT
        if not self.next_sentence:
            layout = dataclasses.replace(layout, next_sentence=False)
        return layout

    def feature_spec(self, mode):
        return pretraining_feature_spec(self.config.max_seq_length,
                                        self.config.max_predictions_per_seq, self.layout)

    def detect_layout(self, input_files):
        """Sets config.layout from the first record of each file: one layout for all, fit for
        the objective; InputError naming the file otherwise."""
        found = None
        for path in input_files:
            try:
                lengths = first_record_lengths(path)
            except InputError:  # a later file damaged: where, if that can be told
                if path == input_files[0]:
                    raise
                raise input_pipeline.find_bad_record([path]) or sys.exc_info()[1] from None
            layout = pretraining_layout_of(lengths)
            if layout is None:
                raise file_error(path, "record 1 is not a pretraining record (no input_ids, "
                                       "input_mask, segment_ids with masked_lm_positions or "
                                       "masked_lm_candidates)")
            if found is None:
                found, first = layout, path
            elif layout != found:
                raise file_error(path, f"its records hold {layout.describe()}, those of "
                                       f"{first} {found.describe()}: one layout per run")
        if self.next_sentence and not found.next_sentence:
            raise argument_error("objective", f"mlm_nsp needs next_sentence_labels, which the "
                                              f"records of {first} do not hold "
                                              f"({found.describe()}): use "
                                              f"{arg('objective')}=mlm")
        self.config.layout = found
        return found

    def check_inputs(self, settings):
        config = self.config
        input_files = config.records["train"].paths
        if config.layout is None:
            self.detect_layout(input_files)
        if self.layout.masking == "dynamic":
            if config.mask_id is None or config.vocab_size_for_masking is None:
                raise argument_error("vocab_file", f"required for records with dynamic masks "
                                                   f"({input_files[0]}): the [MASK] id and the "
                                                   f"range of random words")
            if config.masked_lm_prob is not None and not 0 < config.masked_lm_prob < 1:
                raise argument_error("masked_lm_prob", f"must be in (0, 1), got "
                                                       f"{config.masked_lm_prob}")
        elif config.masked_lm_prob is not None:
            raise argument_error("masked_lm_prob", f"cannot act on {input_files[0]}: its "
                                                   f"records hold static masks, drawn when they "
                                                   f"were written (create_pretraining_data "
                                                   f"{arg('masked_lm_prob')}); leave it out, or "
                                                   f"make records with {arg('masking')}=dynamic")
        check_first_record(
            input_files[0], self.feature_spec("train"),
            hint=f" (do {arg('max_seq_length')}={config.max_seq_length} and "
                 f"{arg('max_predictions_per_seq')}={config.max_predictions_per_seq} match the "
                 f"data?)")
        if config.bert_config is not None:
            bert_config = config.bert_config
            where = arg("bert_config_file")
            vocab_size = (bert_config.vocab_size, f"vocab_size {bert_config.vocab_size} in "
                                                  f"{where}")
            check_id_ranges(input_files,
                            {"input_ids": vocab_size, "masked_lm_ids": vocab_size,
                             "segment_ids": (bert_config.type_vocab_size, f"type_vocab_size "
                                             f"{bert_config.type_vocab_size} in {where}")},
                            hint=f": were the records made with another {arg('vocab_file')}?")
        latest = tf.train.latest_checkpoint(settings.output_dir)
        if (settings.do_train and settings.optimizer != "adamw" and latest
                and checkpoints.is_original_checkpoint(latest)):
            raise argument_error(
                "optimizer", f"{settings.optimizer}: {arg('output_dir')} holds a checkpoint of "
                             f"the original run_pretraining ({latest}), which trains with adamw; "
                             f"continue it with {arg('optimizer')}=adamw, or pass it as "
                             f"{arg('init_checkpoint')} with a new {arg('output_dir')}")

    def training_bert_config(self):
        """The BertConfig the model trains with: bert_config with `dropout` where given."""
        config, dropout = self.config.bert_config, self.config.dropout
        if dropout is not None:
            config = config.replace(hidden_dropout_prob=dropout,
                                    attention_probs_dropout_prob=dropout)
        return config

    def build_model(self):
        return BertPretrainer(self.training_bert_config(), next_sentence=self.next_sentence)

    def export_description(self):
        """Objective "mlm" is recorded (its model has no next-sentence head); the original's
        is the default."""
        return {} if self.next_sentence else {"objective": self.config.objective}

    def dataset_fn(self, mode, global_batch_size, seed=None):
        """The default's, with masks drawn for records with dynamic masks: training's from
        (seed, the example's place in its pipeline's stream) (a run without a seed draws a
        seed, unless its input is deterministic), eval's from (EVAL_MASKING_SEED, the record's
        place)."""
        if self.layout.masking != "dynamic":
            return super().dataset_fn(mode, global_batch_size, seed)
        config, records = self.config, self.config.records[mode]
        if mode != "train":
            masking_seed = EVAL_MASKING_SEED
        elif seed is not None:
            masking_seed = seed
        else:
            masking_seed = 0 if config.deterministic_input else random.SystemRandom().randrange(
                2 ** 31)
        options = dict(vocab_size=config.vocab_size_for_masking, mask_id=config.mask_id,
                       masked_lm_prob=(DYNAMIC_MASKED_LM_PROB if config.masked_lm_prob is None
                                       else config.masked_lm_prob),
                       max_predictions_per_seq=config.max_predictions_per_seq)

        def transform(index, example, pipeline_id):
            return dynamic_masking.mask_example(
                example, index, dynamic_masking.stream_seed(masking_seed, pipeline_id),
                **options)

        return input_pipeline.dataset_fn(
            records.paths, self.feature_spec(mode), global_batch_size,
            shuffle=mode == "train" and not config.deterministic_input,
            repeat=mode == "train" or records.count is None, seed=seed,
            shuffle_buffer_size=config.shuffle_buffer_size, transform=transform)

    def restore_foreign(self, model, optimizer, path):
        """Continues the original run_pretraining from its checkpoint: weights, Adam moments and
        global_step (`load_original_training_state`)."""
        if not checkpoints.is_original_checkpoint(path):
            return False
        load_original_training_state(model, optimizer, path)
        return True

    def outputs(self, model, batch, training):
        """The heads' outputs only: the model then skips the last layer's work at positions
        that neither head reads. Packed inputs without `masked_lm_positions` (serving) are
        read at their `[MASK]` tokens (`masked_positions`)."""
        if "masked_lm_positions" not in batch:
            return self.serving_model_outputs(model, batch)
        names = MODEL_INPUTS + PACKED_INPUTS
        return model({name: batch[name] for name in names if name in batch},
                     training=training, return_encoder_outputs=False)

    @property
    def throughput_units(self):
        """Packed rows hold several sequences: the progress line counts sequences and real
        tokens, not rows."""
        return ("sequences", "tokens") if self.layout.packed else ()

    def throughput(self, batch):
        if not self.layout.packed:
            return {}
        # A row's sequences are numbered 1, 2, ... (0 in padding): its largest id counts them.
        return {"sequences": tf.cast(tf.reduce_sum(tf.reduce_max(batch["sequence_ids"], -1)),
                                     tf.float32),
                "tokens": tf.cast(tf.reduce_sum(batch["input_mask"]), tf.float32)}

    def normalizers(self, batch):
        """The batch's masked-LM weight and next-sentence terms: its rows, or the real
        sequences of packed rows (next_sentence_weights)."""
        nsp_weights = _next_sentence_weights(batch)
        if nsp_weights is not None:
            examples = tf.reduce_sum(nsp_weights)
        else:
            examples = tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)
        return {"masked_lm_weight": tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32)),
                "examples": examples}

    def train_metrics(self, batch, outputs, normalizers):
        loss, masked_lm_loss, next_sentence_loss = pretraining_loss(outputs, batch, normalizers)
        weights = tf.cast(batch["masked_lm_weights"], tf.float32)
        mlm_correct = weights * _correct(outputs["masked_lm_log_probs"], batch["masked_lm_ids"])
        metrics = {
            "loss": loss,
            "masked_lm_loss": masked_lm_loss,
            "masked_lm_accuracy": tf.reduce_sum(mlm_correct) / tf.maximum(
                normalizers["masked_lm_weight"], MASKED_LM_EPSILON),
        }
        if next_sentence_loss is not None:
            labels = batch["next_sentence_labels"]
            log_probs = outputs["next_sentence_log_probs"]
            nsp_correct = _correct(log_probs, tf.reshape(labels, tf.shape(log_probs)[:-1]))
            nsp_weights = _next_sentence_weights(batch)
            if nsp_weights is not None:
                nsp_correct *= nsp_weights
            metrics.update(next_sentence_loss=next_sentence_loss,
                           next_sentence_accuracy=tf.reduce_sum(nsp_correct) / tf.maximum(
                               normalizers["examples"], 1.0))
        return metrics

    def eval_outputs(self, batch, outputs):
        return eval_outputs(outputs, batch)

    def eval_results(self, outputs, global_step, batch_size):
        return eval_results(outputs, global_step, batch_size)

    # ---- Serving: the masked-LM head at the inputs' [MASK] tokens.
    def serving_model_outputs(self, model, inputs):
        """The model's outputs at the [MASK] tokens of packed inputs (inference), with their
        `masked_lm_positions` and `masked_lm_mask` (1: a real [MASK]), padded to the batch's
        most masks."""
        if self.config.mask_id is None:
            raise InputError("serving the masked LM needs the vocabulary's [MASK] id (mask_id)")
        ids = inputs["input_ids"]
        where = tf.where(tf.equal(ids, self.config.mask_id)
                         & tf.not_equal(inputs["input_mask"], 0))
        found = tf.RaggedTensor.from_value_rowids(
            tf.cast(where[:, 1], tf.int32), where[:, 0], nrows=tf.shape(ids, tf.int64)[0])
        positions = found.to_tensor(0)
        model_inputs = {name: inputs[name] for name in MODEL_INPUTS[:3]}
        outputs = dict(model(dict(model_inputs, masked_lm_positions=positions), training=False))
        outputs["masked_lm_positions"] = positions
        outputs["masked_lm_mask"] = tf.ones_like(found).to_tensor(0)
        return outputs

    def serving_outputs(self, outputs, from_text=False):
        mask = outputs["masked_lm_mask"]
        probabilities = tf.exp(tf.cast(outputs["masked_lm_log_probs"], tf.float32))
        top = tf.math.top_k(probabilities, min(self.config.top_k,
                                               self.config.bert_config.vocab_size))
        real = tf.cast(mask, tf.bool)[:, :, None]
        return {"token_ids": tf.where(real, top.indices, 0),
                "probabilities": tf.where(real, top.values, 0.0),
                "positions": outputs["masked_lm_positions"], "mask": mask}

    def text_preprocessor(self, tokenizer):
        return self.Preprocessor(tokenizer, self.config.max_seq_length, self.config.mask_id)

    def text_signatures(self, model, preprocessor):
        """`serve_text` only, on texts where the literal "[MASK]" is the mask token
        (`MaskedTextPreprocessor.masked_text_inputs`). Adds `tokens`, the top-k token strings
        ("" in padding)."""

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        def serve_text(text):
            inputs = preprocessor.masked_text_inputs(text)
            served = self.serving_outputs(self.outputs(model, inputs, training=False))
            real = tf.cast(served["mask"], tf.bool)[:, :, None]
            served["tokens"] = tf.where(
                real, preprocessor.tokenizer.id_to_token(served["token_ids"]), "")
            return served

        return {"serve_text": serve_text}


def load_original_training_state(model, optimizer, path):
    """Continues a training run of the original release from its checkpoint `path`.

    Loads the weights, the original AdamWeightDecayOptimizer's moments (`<name>/adam_m`,
    `<name>/adam_v`) into the slots of our `AdamWeightDecay` (same names, same update), and
    `global_step` into `optimizer.iterations`, so the learning-rate schedule continues where the
    original stopped. The moments are mapped through `original_variable_map`, as the weights:
    the slot of our fused QKV kernel is the concatenation of the query, key and value slots.
    `optimizer` (maybe inside a LossScaleOptimizer) must be built on model.trainable_variables.
    Returns a LoadReport; InputError if a weight, a moment or global_step is missing, or if the
    optimizer is not AdamWeightDecay (the original has no other; `continues_original_run`).
    """
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if not getattr(inner, "continues_original_run", False):
        raise file_error(path, f"is a checkpoint of the original run_pretraining, whose optimizer "
                               f"is AdamWeightDecay (adamw); it cannot continue with "
                               f"{type(inner).__name__}")
    values = checkpoints.ReaderValues(checkpoints.open_checkpoint(path))
    if "global_step" not in values:
        raise file_error(path, "has no global_step: not a training checkpoint of the original "
                               "run_pretraining (use it to initialise a new run instead)")
    parts = original_variable_map(model)
    slot_parts = []
    for slot_name, slots in zip(inner.slot_names, (inner._m, inner._v)):
        slot_parts += [Part(f"{p.name}/{slot_name}", slots[inner._get_variable_index(p.variable)],
                            p.index, p.count) for p in parts]
    loaded, used = [], set()
    for kind, kind_parts in (("weight", parts), ("Adam moment", slot_parts)):
        kind_loaded, new, kind_used = checkpoints.assign_parts(kind_parts, values, path)
        if new:
            raise file_error(path, f"has no {kind} {new[0]} ({len(new)} missing): cannot continue "
                                   f"this run from it")
        loaded += kind_loaded
        used |= kind_used
    inner.iterations.assign(int(values["global_step"]))
    unused = sorted(n for n in values if n not in used and n not in checkpoints.SKIPPED_NAMES)
    return LoadReport(path, "tf1 training state", loaded, [], unused, skipped=1)
