"""SQuAD 1.1 / 2.0 question answering: the original run_squad's model and loss as a Task; its
predictions go through the original's post-processing (`postprocess`) and, when the predict
file has answers, the official evaluation (`metrics`). A question without a window is
predicted "empty", as the original (SQuAD 2.0: ""). Beyond the original, eval scores the
predict file's windows the same way (for the best checkpoint and early stopping during
training). docs/fine_tuning.md (run_squad).
"""
import dataclasses
import math
import os
import time

import tensorflow as tf

from bert_tf.model.models import BertSpanLabeler
from bert_tf.progress import log as default_log
from bert_tf.tasks import registry
from bert_tf.tasks.preprocessor import prepare, split_options
from bert_tf.tasks.squad import metrics, postprocess
from bert_tf.tasks.squad.preprocessor import (PADDING_UNIQUE_ID, SquadPreprocessor,
                                           check_query_length, has_answers, squad_feature_spec)
from bert_tf.tasks.base import Task, TaskConfig
from bert_tf.tasks.results import print_results, write_results


@dataclasses.dataclass
class SquadConfig(TaskConfig):
    """Attributes (besides TaskConfig's; max_seq_length defaults to run_squad's 384):
      n_best_size, max_answer_length, do_lower_case, version_2_with_negative,
      null_score_diff_threshold, verbose_logging: the original's post-processing flags.
      max_query_length: the question's pieces kept (run_squad's flag; the records were cut to
        it when written, the `serve_text_pair` signature cuts its questions to it).
    """
    max_seq_length: int = 384
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    do_lower_case: bool = True
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0
    verbose_logging: bool = False


@registry.register
class SquadTask(Task):
    """run_squad's task over records written by `prepare_task`, or for a loaded model.

    Args:
      config: a SquadConfig.
      predict_data: (dataset, examples, features): the predict file's parsed "data" list, its
        SquadExamples and InputFeatures (bert_tf.tasks.squad.preprocessor), for post-processing.
      log: where post-processing reports (its time, verbose_logging lines).
    """

    name = "squad"
    Config = SquadConfig
    Preprocessor = SquadPreprocessor

    predicts_eval_outputs = True

    def __init__(self, config, predict_data=None, log=print):
        super().__init__(config)
        self.predict_data = predict_data
        self.log = log
        # (outputs, answers) of the last post-processing: predict's files from the final
        # eval's outputs are written without post-processing them again.
        self._processed = (None, None)

    @classmethod
    def serving_options(cls, options, vocab_file, record):
        """The served windows leave room for the question's pieces (run_squad's rule)."""
        check_query_length(options.get("max_seq_length", SquadConfig.max_seq_length),
                           options.get("max_query_length", SquadConfig.max_query_length))
        return options

    # ---- Data.
    def feature_spec(self, mode):
        return squad_feature_spec(self.config.max_seq_length, mode == "train")

    # ---- Model.
    def build_model(self):
        return BertSpanLabeler(self.config.bert_config)

    # ---- Train.
    def normalizers(self, batch):
        return {"examples": tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)}

    def train_metrics(self, batch, outputs, normalizers):
        def cross_entropy(logits, positions):
            log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
            one_hot = tf.one_hot(positions, tf.shape(logits)[1], dtype=tf.float32)
            return -tf.reduce_sum(one_hot * log_probs, axis=-1)

        per_example = (cross_entropy(outputs["start_logits"], batch["start_positions"])
                       + cross_entropy(outputs["end_logits"], batch["end_positions"])) / 2.0
        return {"loss": tf.reduce_sum(per_example) / normalizers["examples"]}

    # ---- Eval: the predict file's windows (the same records), scored as predict scores them.
    def eval_outputs(self, batch, outputs):
        return self.predict_outputs(batch, outputs)

    def eval_results(self, outputs, global_step, batch_size):
        predictions, _, null_odds = self._predictions(outputs)
        return dict(self._score(predictions, null_odds), global_step=global_step)

    def main_metric(self):
        return "f1"

    def eval_metric_names(self):
        """The official script's keys for the predict file (SQuAD 2.0's HasAns_* / NoAns_*
        are there when it has such questions): those of its score of empty answers."""
        if self.predict_data is None:
            return None
        empty = {qid: "" for qid in metrics.make_qid_to_has_ans(self.predict_data[0])}
        return set(self._score(empty, dict.fromkeys(empty, 0.0))) | {"global_step"}

    def _score(self, predictions, null_odds):
        """The official evaluation script's numbers for the predict file."""
        dataset = self.predict_data[0]
        if self.config.version_2_with_negative:
            return metrics.evaluate_v2(dataset, predictions, na_probs=null_odds)
        return metrics.evaluate_v1(dataset, predictions)

    # ---- Predict.
    def predict_outputs(self, batch, outputs):
        return {"unique_ids": batch["unique_ids"],
                "start_logits": tf.cast(outputs["start_logits"], tf.float32),
                "end_logits": tf.cast(outputs["end_logits"], tf.float32)}

    def _predictions(self, outputs, paths=None):
        """(predictions, nbest, null_odds) of the predict file from the outputs of its records
        (padding left out) by the original's post-processing; with `paths`, also written
        there (the original's three files)."""
        config = self.config
        _, examples, features = self.predict_data
        if not features:  # nothing ran: no window to take logits from
            raise ValueError("no predict window: check the predict file with bert_tf.tasks."
                             "squad.preprocessor.require_windows before running predict")
        if self._processed[0] is outputs:
            answers = self._processed[1]
        else:
            real = outputs["unique_ids"] != PADDING_UNIQUE_ID
            started = time.perf_counter()
            answers = postprocess.compute_predictions(
                examples, features, outputs["unique_ids"][real], outputs["start_logits"][real],
                outputs["end_logits"][real], config.n_best_size, config.max_answer_length,
                config.do_lower_case, version_2_with_negative=config.version_2_with_negative,
                null_score_diff_threshold=config.null_score_diff_threshold,
                log=self.log if config.verbose_logging else None)
            self.log(f"post-processing: {len(examples)} questions, {len(features)} windows in "
                     f"{time.perf_counter() - started:.1f} s")
            self._processed = (outputs, answers)
        if paths is not None:
            postprocess.write_files(answers, *paths, config.version_2_with_negative)
        return answers

    def write_predictions(self, outputs, output_dir):
        """The original's three prediction files, then eval_results.txt if the file has
        answers (the official script's numbers) and the run did not evaluate (its eval wrote
        eval_results.txt, with the best checkpoint's keys when it chose one)."""
        config = self.config
        paths = [os.path.join(output_dir, name) for name in (
            postprocess.PREDICTIONS_FILE, postprocess.NBEST_FILE,
            postprocess.NULL_ODDS_FILE)]
        predictions, _, null_odds = self._predictions(outputs, paths)
        self._processed = (None, None)  # the run's last use of them
        if not config.version_2_with_negative:
            paths.pop()
        if "eval" not in config.records and has_answers(self.predict_data[0]):
            results = self._score(predictions, null_odds)
            paths.append(write_results(results, output_dir))
            print_results(results)
        return paths

    # ---- Serving.
    def export_description(self):
        """The options of the answer `serve_text_pair` finds, and whether questions may have
        none (SQuAD 2.0)."""
        config = self.config
        return {"max_query_length": config.max_query_length, "n_best_size": config.n_best_size,
                "max_answer_length": config.max_answer_length,
                "version_2_with_negative": config.version_2_with_negative}

    def serving_outputs(self, outputs, from_text=False):
        return {"start_logits": tf.cast(outputs["start_logits"], tf.float32),
                "end_logits": tf.cast(outputs["end_logits"], tf.float32)}

    def text_preprocessor(self, tokenizer):
        return self.Preprocessor(tokenizer, self.config.max_seq_length,
                                 max_query_length=self.config.max_query_length)

    def text_signatures(self, model, preprocessor):
        """`serve_text_pair` (text_a: question, text_b: context): one window packed as
        run_squad's first (`SquadPreprocessor.question_context_inputs`), and its best span as
        the original's post-processing of one window: among the `n_best_size` best starts and
        ends, both in the context, end >= start, at most `max_answer_length` pieces, the
        highest start + end logit. The best starts and ends are taken among the context's
        positions (the original takes them among all, padding included, and then drops those
        outside the context): the answer does not depend on the padding, so a batch cut to its
        longest text answers as one padded to max_seq_length; its text de-tokenized as the
        original's `tok_text` (pieces joined with spaces, " ##" and "##" removed): no mapping
        back to the context's own words. No valid span: "empty" with logits 0, as the
        original. `serve_text` as the base's (the logits of a single text)."""
        signatures = super().text_signatures(model, preprocessor)
        tokenizer = preprocessor.tokenizer
        n_best_size, max_answer_length = self.config.n_best_size, self.config.max_answer_length

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2, autograph=False)
        def serve_text_pair(text_a, text_b):
            inputs, query_length = preprocessor.question_context_inputs(text_a, text_b)
            outputs = self.serving_outputs(self.outputs(model, inputs, training=False))
            start_logits, end_logits = outputs["start_logits"], outputs["end_logits"]
            # The context: segment 1 without its closing [SEP].
            doc_start = tf.cast(query_length + 2, tf.int32)[:, None]
            doc_end = tf.reduce_sum(inputs["input_mask"], axis=1)[:, None] - 1
            position = tf.range(tf.shape(start_logits)[1])[None, :]
            in_context = (position >= doc_start) & (position < doc_end)
            k = tf.minimum(n_best_size, tf.shape(start_logits)[1])
            starts = tf.math.top_k(tf.where(in_context, start_logits, -float("inf")),
                                   k).indices  # [B, k], best first
            ends = tf.math.top_k(tf.where(in_context, end_logits, -float("inf")), k).indices
            doc_start, doc_end = doc_start[:, :, None], doc_end[:, :, None]
            s, e = starts[:, :, None], ends[:, None, :]
            valid = ((s >= doc_start) & (s < doc_end) & (e >= doc_start) & (e < doc_end)
                     & (e >= s) & (e - s + 1 <= max_answer_length))
            start_best = tf.gather(start_logits, starts, batch_dims=1)
            end_best = tf.gather(end_logits, ends, batch_dims=1)
            score = start_best[:, :, None] + end_best[:, None, :]
            score = tf.reshape(tf.where(valid, score, -float("inf")), [-1, k * k])
            best = tf.argmax(score, axis=-1, output_type=tf.int32)  # first of ties, start-major
            found = tf.reduce_any(tf.reshape(valid, [-1, k * k]), axis=-1)
            start = tf.gather(starts, best // k, batch_dims=1)
            end = tf.gather(ends, best % k, batch_dims=1)
            length = tf.where(found, end - start + 1, 0)
            positions = tf.ragged.range(start, start + length)
            pieces = tf.gather(inputs["input_ids"], positions, batch_dims=1)
            text = tf.strings.reduce_join(tokenizer.id_to_token(pieces), axis=-1, separator=" ")
            text = tf.strings.regex_replace(tf.strings.regex_replace(text, " ##", ""), "##", "")
            text = tf.strings.reduce_join(tf.strings.split(text), axis=-1, separator=" ")
            start_logit = tf.where(found, tf.gather(start_logits, start, batch_dims=1), 0.0)
            end_logit = tf.where(found, tf.gather(end_logits, end, batch_dims=1), 0.0)
            return {"answer": tf.where(found, text, "empty"), "score": start_logit + end_logit,
                    "start_logit": start_logit, "end_logit": end_logit}

        signatures["serve_text_pair"] = serve_text_pair
        return signatures


def prepare_task(bert_config, tokenizer, max_seq_length, output_dir, *, train_file=None,
                 predict_file=None, doc_stride=128, max_query_length=64,
                 version_2_with_negative=False, verbose_logging=False, evaluate=False,
                 **options):
    """Reads the SQuAD files, writes their records (`SquadPreprocessor`, by
    `bert_tf.tasks.preprocessor.prepare`) and returns the PreparedTask (a SquadTask; num_train
    counts the training questions, as the original counts its steps).

    Args:
      bert_config: the encoder's BertConfig.
      tokenizer: FullTokenizer or FastTokenizer.
      max_seq_length, doc_stride, max_query_length: the original's windows.
      output_dir: where train.tf_record and (predict) eval.tf_record go, as the original.
      train_file: SQuAD json to train on (None: no training); its questions shuffled with the
        original's random.Random(12345).
      predict_file: SQuAD json to predict (None: no predict); windows padded to a multiple of
        predict_batch_size (if given).
      version_2_with_negative, verbose_logging: the original's flags.
      evaluate: eval reads the predict file's records too, and scores them (the file must
        have answers); they are then padded to a multiple of both eval_batch_size and
        predict_batch_size.
      options: `prepare`'s (predict_batch_size, training steps, check_model, log) and
        SquadConfig's post-processing fields (n_best_size, max_answer_length, do_lower_case,
        null_score_diff_threshold).
    """
    prepare_options, task_options = split_options(options)
    log = prepare_options["log"] = prepare_options.get("log") or default_log
    eval_batch_size = prepare_options.pop("eval_batch_size", None)
    if evaluate and eval_batch_size:
        prepare_options["predict_batch_size"] = math.lcm(
            eval_batch_size, prepare_options.get("predict_batch_size") or eval_batch_size)
    preprocessor = SquadPreprocessor(
        tokenizer, max_seq_length, train_file, predict_file, doc_stride, max_query_length,
        version_2_with_negative, verbose_logging, log, evaluate=evaluate)
    config = SquadConfig(bert_config=bert_config, max_seq_length=max_seq_length,
                         max_query_length=max_query_length,
                         version_2_with_negative=version_2_with_negative,
                         verbose_logging=verbose_logging, **task_options)

    def make_task(records):
        if evaluate and "predict" in records:
            records = dict(records, eval=records["predict"])
        return SquadTask(dataclasses.replace(config, records=records), preprocessor.predict_data,
                         log=log)

    return prepare(preprocessor, make_task, output_dir, **prepare_options)
