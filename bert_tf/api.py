"""The Python API: what the command lines do, in a few calls, with their defaults.

For notebooks and scripts. A "model directory" is anything `--init_checkpoint` takes: a
Hugging Face BERT directory (config.json, model.safetensors, vocab.txt), a folder of our or the
original's checkpoints with bert_config.json and vocab.txt beside them (Google's released
models; the output_dir of a training run, which also records the casing and the task's labels
and options: `bert_tf.model.directory`), or a checkpoint prefix in such a folder; config and
vocabulary can also be given.

    from bert_tf import api
    files = api.model_files("uncased_L-12_H-768_A-12")   # config, vocab, casing
    tokenizer = api.load_tokenizer(files)
    encoder = api.load_model(files)                      # BertEncoder, weights loaded
    inputs = api.encode(tokenizer, ["The cat sat."], ["It was tired."], max_seq_length=64)
    vectors = encoder(inputs)["pooled_output"]

    classifier = api.fine_tune_classifier(files, train=[("good film", "pos"), ("dull", "neg")],
                                          labels=["neg", "pos"], output_dir="out")
    classifier.predict(["a good film"])                 # [N, 2] probabilities

Each function is the library code the command lines run (tokenization, the original's packing,
checkpoints, `bert_tf.training.runner.run` with a task), so results are the command lines' results.
"""
import dataclasses
import os

import numpy as np
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.errors import InputError, arg, argument_error
from bert_tf.model import directory
from bert_tf.model.checkpoints import load_checkpoint
from bert_tf.model.load_report import require_complete
from bert_tf.model.config import BertConfig
from bert_tf.model.pooling import check_pooling, embedding_options
from bert_tf.tasks import registry
from bert_tf.tasks.classification import task as classification
from bert_tf.tasks.classification.json_lines import JsonLinesProcessor
from bert_tf.tasks.classification.reader import InputExample
from bert_tf.text.fast_tokenization import FastTokenizer
from bert_tf.text.packing import pack_texts
from bert_tf.text.vocabulary import same_vocabulary
from bert_tf.training import fine_tuning
from bert_tf.training.pretraining_evaluation import driver, suite
from bert_tf.training.pretraining_evaluation import models as candidates
from bert_tf.training.settings import RunSettings


def __getattr__(name):
    """TASK_MODELS: the task names (bert_tf.tasks.registry), found when first asked for."""
    if name == "TASK_MODELS":
        return registry.names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclasses.dataclass
class ModelFiles:
    """Where a model's parts are: `checkpoint` (what load_model reads; None for a fresh
    model), its BertConfig, vocabulary file and casing; `folder`, the model directory they
    were found in (None: given), and `record`, what that directory records of its training
    run (bert_tf.model.directory.RECORD_FILE: task, labels and options; None: nothing)."""
    checkpoint: str
    config: object
    vocab_file: str
    do_lower_case: bool
    folder: str = None
    record: dict = None

    def task_record(self, task):
        """What the directory records of a run of `task` (a registry name): {} when it
        records nothing, or another task's run (whose head this task does not use)."""
        record = self.record or {}
        return record if task and record.get("task") == task else {}


def resolve_model_files(init_checkpoint, bert_config_file=None, vocab_file=None,
                        do_lower_case=True, do_lower_case_given=False, output_dir=None,
                        own_vocabulary=False):
    """The ModelFiles of a run (every command line's rule): config, vocabulary and casing from
    the model directory of the weights it reads (`bert_tf.model.directory.find`:
    init_checkpoint's, or output_dir's when the run continues a checkpoint there), unless given.
    A given config that describes other weights than the directory's, a given vocabulary with
    other tokens than its vocab.txt, or a casing given against the one it records is an
    InputError naming the argument (the run would be silently wrong); so is a vocabulary with
    more entries than the model's vocab_size. `own_vocabulary` (pretraining, on the records'
    vocabulary, which may be the model's extended: `extend_vocab --mode=unused`): vocabulary
    and casing are the given ones, or those of the output_dir a run continues, never taken
    from or compared with init_checkpoint's directory; none is None, not an error."""
    folder = directory.find(init_checkpoint, output_dir)
    where = folder and f"{arg(folder.argument)}={folder.path}"
    # The directory that says the vocabulary and casing.
    vocab_folder = (None if own_vocabulary and folder is not None
                    and folder.argument == "init_checkpoint" else folder)
    if bert_config_file:
        config = BertConfig.from_json_file(bert_config_file)
        if folder is not None and folder.config is not None:
            differences = config.architecture_differences(folder.config)
            if differences:
                raise argument_error("bert_config_file", f"{bert_config_file} is not the config "
                                     f"of the model in {where} (" + ", ".join(
                                         f"{key} {given} vs {found}"
                                         for key, given, found in differences)
                                     + f", {folder.config_file}): leave "
                                       f"{arg('bert_config_file')} out to use the model's own")
    elif folder is not None and folder.config is not None:
        config = folder.config
    else:
        raise argument_error("bert_config_file", f"required (unless {arg('init_checkpoint')} is "
                                                 f"a model directory: a Hugging Face directory, "
                                                 f"or a checkpoint with bert_config.json beside "
                                                 f"it)")
    if vocab_file:
        if (vocab_folder is not None and vocab_folder.vocab_file is not None
                and os.path.isfile(vocab_file)
                and not same_vocabulary(vocab_file, vocab_folder.vocab_file)):
            raise argument_error("vocab_file", f"{vocab_file} is not the vocabulary of the model "
                                               f"in {where} ({vocab_folder.vocab_file} has other "
                                               f"tokens): leave {arg('vocab_file')} out to use "
                                               f"the model's own")
    elif vocab_folder is not None and vocab_folder.vocab_file is not None:
        vocab_file = vocab_folder.vocab_file
    elif own_vocabulary:
        pass
    elif folder is not None and folder.config is not None:
        raise argument_error("vocab_file", f"required: the model directory {where} has no "
                                           f"vocabulary ({folder.vocab_place} not found)")
    else:
        raise argument_error("vocab_file", f"required (unless {arg('init_checkpoint')} is a "
                                           f"model directory with a vocab.txt)")
    if vocab_folder is not None and vocab_folder.do_lower_case is not None:
        if do_lower_case_given and bool(do_lower_case) != bool(vocab_folder.do_lower_case):
            raise argument_error("do_lower_case", f"{do_lower_case} is not the casing of the "
                                                  f"model in {where} (do_lower_case "
                                                  f"{vocab_folder.do_lower_case}): leave "
                                                  f"{arg('do_lower_case')} out to use it")
        do_lower_case = vocab_folder.do_lower_case
    if vocab_file:
        tokenization.check_vocab_fits(vocab_file, config.vocab_size,
                                      bert_config_file or (folder and folder.config_file))
    return ModelFiles(init_checkpoint, config, vocab_file, do_lower_case,
                      folder.path if folder else None, folder.record if folder else None)


def model_files(path, bert_config_file=None, vocab_file=None, do_lower_case=None):
    """The ModelFiles of a model directory or checkpoint prefix (`resolve_model_files`: its
    config, vocabulary and casing unless given; casing True, uncased, when neither)."""
    return resolve_model_files(os.fspath(path), bert_config_file, vocab_file,
                               True if do_lower_case is None else do_lower_case,
                               do_lower_case is not None)


def load_config(path):
    """The BertConfig of a bert_config.json file or a model directory."""
    path = os.fspath(path)
    if os.path.isfile(path) and path.endswith(".json"):
        return BertConfig.from_json_file(path)
    return model_files(path).config


def load_tokenizer(files, do_lower_case=None):
    """The tokenizer (bert_tf.text.fast_tokenization.FastTokenizer: the original's tokens) of a
    ModelFiles, a model directory or a vocab.txt path."""
    if isinstance(files, (str, os.PathLike)) and os.path.isfile(files):
        return FastTokenizer(os.fspath(files),
                             do_lower_case=True if do_lower_case is None else do_lower_case)
    if not isinstance(files, ModelFiles):
        files = model_files(files, do_lower_case=do_lower_case)
    return FastTokenizer(files.vocab_file, do_lower_case=files.do_lower_case)


def build_model(task, config, num_labels=None, record=None):
    """A fresh Keras model: "encoder" (BertEncoder), "pretraining" (BertPretrainer),
    "classifier" (BertClassifier, num_labels; 1 = regression), "squad" (BertSpanLabeler),
    "ner" (BertTokenClassifier, num_labels; BertFeatureTagger when the record says its
    feature_layers) or "multiple_choice" (BertMultipleChoice: [B, N, T]
    inputs, a score per choice). `record`: what a model directory records of a run of `task`
    (`ModelFiles.task_record`), which gives the heads' shape: a masked-LM-only pretraining
    objective, the labels' count when num_labels is not given."""
    names = registry.names()
    if task not in names:
        raise InputError(f"task must be one of {', '.join(names)}, got {task!r}")
    record = record or {}
    options = {}
    if task in ("classifier", "ner"):
        if not num_labels:
            num_labels = (len(record["labels"]) if record.get("labels")
                          else 1 if record.get("regression") else None)
        if not num_labels:
            raise InputError(f"a {task} model needs num_labels")
        options["labels"] = [str(i) for i in range(num_labels)]
    if task == "pretraining" and record.get("objective"):
        options["objective"] = record["objective"]
    if task == "ner" and record.get("feature_layers"):
        options["feature_layers"] = record["feature_layers"]
    return registry.build(task, config, **options).build_model()


def load_model(files, task="encoder", num_labels=None, require_all=None):
    """A model of `task` (see build_model) with the weights of `files` (a ModelFiles, model
    directory or checkpoint), its heads shaped as the directory records. `require_all`
    (default: True for task heads) makes a checkpoint that lacks some of the model's
    variables (e.g. the head) an error instead of leaving them freshly initialised."""
    if not isinstance(files, ModelFiles):
        files = model_files(files)
    model = build_model(task, files.config, num_labels, files.task_record(task))
    report = load_checkpoint(model, files.checkpoint)
    if task != "encoder" if require_all is None else require_all:
        require_complete(report, what=f"{task} model")
    return model


def encode(tokenizer, texts, text_pairs=None, max_seq_length=128):
    """The original's packing of texts (and pairs): `[CLS] a [SEP] (b [SEP])`, pairs truncated
    longest first, zero padding (`bert_tf.text.packing`, as the records and the SavedModels).
    Returns {"input_ids", "input_mask", "segment_ids"}: int32 [len(texts), max_seq_length]
    numpy arrays, which every model here takes."""
    if isinstance(texts, str):
        raise InputError("texts must be a list of strings, not one string")
    if text_pairs is not None and len(text_pairs) != len(texts):
        raise InputError(f"{len(texts)} texts but {len(text_pairs)} text pairs")
    return pack_texts(tokenizer, texts, text_pairs, max_seq_length=max_seq_length)


@dataclasses.dataclass
class Classifier:
    """A sentence (pair) classifier with its tokenizer: `predict` takes raw strings.
    `multi_label`: a sigmoid per label, the labels over `threshold` (one for all or one per
    label; None: 0.5) predicted."""
    model: object
    tokenizer: object
    labels: list
    max_seq_length: int = 128
    multi_label: bool = False
    threshold: object = None

    def _task(self):
        return registry.build("classifier", self.model.config, labels=list(self.labels),
                              max_seq_length=self.max_seq_length, multi_label=self.multi_label,
                              threshold=self.threshold)

    def predict(self, texts, text_pairs=None, batch_size=32):
        """Class probabilities [N, num_labels] (regression: scores [N, 1]; multi-label: each
        label's): what the classifier's SavedModel serves
        (`ClassificationTask.serving_outputs`)."""
        task = self._task()
        inputs = encode(self.tokenizer, texts, text_pairs, self.max_seq_length)
        rows = []
        for start in range(0, len(texts), batch_size):
            batch = {k: tf.constant(v[start:start + batch_size]) for k, v in inputs.items()}
            served = task.serving_outputs(task.outputs(self.model, batch, training=False))
            rows.append(np.asarray(served["score"])[:, None] if task.config.regression
                        else np.asarray(served["probabilities"]))
        return np.concatenate(rows) if rows else np.zeros([0, max(len(self.labels), 1)])

    def predict_labels(self, texts, text_pairs=None, batch_size=32):
        """The most probable label of each text (pair); multi-label: the list of the labels
        over their threshold."""
        probabilities = self.predict(texts, text_pairs, batch_size)
        if self.multi_label:
            over = probabilities > np.float32(self._task().config.thresholds)
            return [[label for label, chosen in zip(self.labels, row) if chosen] for row in over]
        return [self.labels[i] for i in probabilities.argmax(axis=1)]


def _examples(rows, split, labels, multi_label, fields):
    """InputExamples from (text, label) or (text_a, text_b, label) tuples (a multi-label
    row's label: a list of labels), or of a JSON Lines file (JsonLinesProcessor, `fields` its
    column options)."""
    if isinstance(rows, (str, os.PathLike)):
        return JsonLinesProcessor(label_list=labels, multi_label=multi_label, **fields,
                                  **{f"{split}_file": os.fspath(rows)}).read_split("", split)
    examples = []
    for i, row in enumerate(rows):
        if len(row) not in (2, 3):
            raise InputError(f"{split} row {i}: expected (text, label) or (text_a, text_b, "
                             f"label), got {row!r}")
        text_a, text_b, label = row if len(row) == 3 else (row[0], None, row[1])
        if isinstance(label, list):
            label = tuple(label)
        examples.append(InputExample(f"{split}-{i}", text_a, text_b, label))
    return examples


def fine_tune_classifier(files, train, labels, output_dir, dev=None, max_seq_length=128,
                         num_train_epochs=3.0, train_batch_size=32, eval_batch_size=8,
                         learning_rate=5e-5, warmup_proportion=0.1, bucket_by_length=True,
                         seed=None, multi_label=False, threshold=None, export_dir=None,
                         fields=None, **settings):
    """run_classifier from Python: fine-tunes `files`' model on `train` ((text, label) or
    (text_a, text_b, label) tuples, or a JSON Lines file: run_classifier --task_name=jsonl,
    `fields` its field options, e.g. {"text_b_column": "text_b"}; `labels` in output order),
    evaluates on `dev` if given (eval_results.txt in output_dir), and returns the trained
    Classifier. `multi_label`: each
    row's label is a list of labels (run_classifier --multi_label, --threshold). `export_dir`:
    also the classifier's SavedModel there, with run_classifier's signatures and label names
    (run_classifier --export_dir). Other RunSettings (bert_tf.training.settings) by keyword,
    e.g. mixed_precision="bfloat16"."""
    if not isinstance(files, ModelFiles):
        files = model_files(files)
    # The run's vocabulary and casing: output_dir's (a model directory) and, with export_dir,
    # the SavedModel's string signatures'.
    settings.setdefault("vocab_file", files.vocab_file)
    settings.setdefault("do_lower_case", files.do_lower_case)
    run_settings = RunSettings(
        output_dir=os.fspath(output_dir), do_train=True, do_eval=bool(dev),
        init_checkpoint=files.checkpoint, train_batch_size=train_batch_size,
        eval_batch_size=eval_batch_size, learning_rate=learning_rate, seed=seed, **settings)
    fine_tuning.start(run_settings, export_dir)
    fine_tuning.check_model_files(files, run_settings, max_seq_length)
    examples = {"train": _examples(train, "train", labels, multi_label, fields or {})}
    if dev:
        examples["eval"] = _examples(dev, "dev", labels, multi_label, fields or {})
    # run_classifier's records and task (bert_tf.tasks.classification), written quietly.
    tokenizer = load_tokenizer(files)
    prepared = classification.prepare_task(
        files.config, examples, labels, tokenizer, max_seq_length, output_dir,
        bucket_by_length=bucket_by_length, multi_label=multi_label, threshold=threshold,
        **fine_tuning.preparation_options(run_settings, num_train_epochs, warmup_proportion,
                                          log=fine_tuning.quiet))
    fine_tuning.run(prepared, run_settings, export_dir)
    trained = dataclasses.replace(files, checkpoint=os.fspath(output_dir))
    return Classifier(load_model(trained, "classifier", len(labels)), tokenizer, list(labels),
                      max_seq_length, multi_label, threshold)


def load_classifier(files, labels=None, max_seq_length=None, multi_label=None, threshold=None):
    """A Classifier from a checkpoint that holds the head: a fine_tune_classifier or
    run_classifier output_dir (a model directory: its labels, max_seq_length, multi_label and
    thresholds are the defaults), or ModelFiles with `checkpoint` replaced and the labels
    given (default max_seq_length 128, single-label)."""
    if not isinstance(files, ModelFiles):
        files = model_files(files)
    record = files.task_record("classifier")
    if labels is None:
        labels = record.get("labels")
        if not labels:
            raise argument_error("labels", f"required: {files.checkpoint} records no labels of "
                                           f"a classifier")
    elif "labels" in record and directory.differs(list(labels), record["labels"]):
        raise directory.disagreement("labels", labels, files.folder, "labels", record["labels"])
    if multi_label is None:
        multi_label = record.get("multi_label", False)
    if threshold is None and multi_label:
        threshold = record.get("thresholds")
    max_seq_length = max_seq_length or record.get("max_seq_length", 128)
    return Classifier(load_model(files, "classifier", len(labels)), load_tokenizer(files),
                      list(labels), max_seq_length, multi_label, threshold)


@dataclasses.dataclass
class Embedder:
    """Sentence embeddings of raw strings: an encoder's last layer pooled over each text's
    real tokens (`bert_tf.model.pooling.pool`, as extract_features --pooling and the export's
    embed_text; the task is EncoderTask's)."""
    encoder: object
    tokenizer: object
    pooling: str = "mean"
    normalize: bool = False
    max_seq_length: int = 128

    def embed(self, texts, batch_size=32):
        """float32 [len(texts), hidden] embeddings, each text packed as `[CLS] text [SEP]`."""
        task = registry.build("encoder", self.encoder.config, pooling=self.pooling,
                              normalize=self.normalize, max_seq_length=self.max_seq_length)
        inputs = encode(self.tokenizer, texts, max_seq_length=self.max_seq_length)
        rows = []
        for start in range(0, len(texts), batch_size):
            # Cut to the batch's longest text: padding is masked out of attention and pooling.
            length = int(inputs["input_mask"][start:start + batch_size].sum(axis=1).max())
            batch = {k: tf.constant(v[start:start + batch_size, :length])
                     for k, v in inputs.items()}
            outputs = task.outputs(self.encoder, batch, training=False)
            rows.append(task.embeddings(outputs, batch["input_mask"]).numpy())
        return (np.concatenate(rows) if rows
                else np.zeros([0, self.encoder.config.hidden_size], np.float32))


def load_embedder(files, pooling="mean", normalize=None, max_seq_length=None):
    """An Embedder of a model directory (or ModelFiles): `normalize` and `max_seq_length`
    default to what a sentence-transformers directory declares (its Normalize module, its
    sentence_bert_config), else False and 128; an unknown pooling is an InputError."""
    check_pooling(pooling)
    if not isinstance(files, ModelFiles):
        files = model_files(files)
    normalize, max_seq_length = embedding_options(files.checkpoint, normalize, max_seq_length)
    return Embedder(load_model(files), load_tokenizer(files), pooling, normalize,
                    max_seq_length)


def evaluate_pretraining(models, output_dir, tasks=None, data_dir=None, conll_dir=None,
                         squad_file=None, steps=None, train_slices=None, learning_rate=1e-4,
                         train_batch_size=32, num_train_epochs=3.0, seeds=(0,), baseline=True,
                         mixed_vocabularies=False, log=None):
    """run.evaluate_pretraining from Python: every checkpoint of each pretraining output folder
    in `models` (those of `steps` only, when given), or any model directory, and a randomly
    initialised copy of each config (`baseline`), fine-tuned on the suite's `tasks` (default:
    all of bert_tf.training.pretraining_evaluation.suite.SUITE, reading the GLUE `data_dir`,
    the CoNLL-2003 `conll_dir` and the SQuAD v1.1 `squad_file`; `train_slices` {task: count}
    replaces the protocol's slices) with each of `seeds`; writes results.tsv, results.md and
    downstream.png into output_dir and returns the rows (dicts of results.tsv's columns)."""
    chosen = suite.suite_tasks(tasks, train_slices)
    found = candidates.candidates(models if not isinstance(models, (str, os.PathLike))
                                  else [models], model_files, steps)
    protocol = driver.Protocol(learning_rate, train_batch_size, num_train_epochs,
                               seeds=tuple(seeds))
    return driver.evaluate(found, chosen, {"data_dir": data_dir, "conll_dir": conll_dir,
                                           "squad_file": squad_file}, output_dir, protocol,
                           baseline, mixed_vocabularies, **({"log": log} if log else {}))


__all__ = ["ModelFiles", "model_files", "resolve_model_files", "load_config", "load_tokenizer",
           "build_model", "load_model", "encode", "Classifier", "fine_tune_classifier",
           "load_classifier", "Embedder", "load_embedder", "evaluate_pretraining"]
