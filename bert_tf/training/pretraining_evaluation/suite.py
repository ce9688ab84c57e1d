"""The suite's tasks: where each reads its data, the slice the protocol trains on, how its
records are prepared (the task's own `prepare_task`, as its command line calls it) and the
dev score the table reports (0-100, the paper's scale)."""
import dataclasses
import os
import typing

from bert_tf.errors import argument_error
from bert_tf.model.models import FEATURE_LAYERS
from bert_tf.tasks.classification import glue, reader
from bert_tf.tasks.classification import task as classification
from bert_tf.tasks.ner import task as tagging
from bert_tf.tasks.preprocessor import read_splits
from bert_tf.tasks.squad import task as squad
from bert_tf.training.pretraining_evaluation import data, models


@dataclasses.dataclass(frozen=True)
class SuiteTask:
    """name: the table's column; source: the data argument it reads ("data_dir": a GLUE
    folder, "conll_dir": CoNLL-2003's train.txt and valid.txt, "squad_file": a SQuAD v1.1 json);
    train_slice: what the protocol trains on (rows, sentences or articles; None: all), `unit`
    says which; metric: the eval_results key reported; scale: to 0-100;
    max_seq_length: the records' length; options: the task config's fields that this variant
    sets (CoNLL-2003/<layers>: the feature-based tagger on those layers)."""
    name: str
    source: str
    train_slice: typing.Optional[int]
    unit: str
    metric: str
    scale: float = 100.0
    max_seq_length: int = 128
    options: tuple = ()

    @property
    def data_name(self):
        """The task whose data and records it shares (its name without the variant)."""
        return self.name.split("/")[0]

    def data_files(self, sources, target):
        """The slice's folder under `target`, written from `sources` ({source: path})."""
        source = sources[self.source]
        if self.source == "data_dir":
            layout = reader.get_processor(self.data_name).layouts["train"]
            return data.glue_slice(os.path.join(source, self.data_name), target,
                                   self.train_slice, layout.has_header)
        if self.source == "conll_dir":
            return data.conll_slice(source, target, self.train_slice)
        return data.squad_split(source, target, self.train_slice)

    def check_files(self, sources):
        """The files the slice reads exist (and a SQuAD file has articles left to score), or an
        InputError naming the data argument or the file: checked before anything is written."""
        source = sources.get(self.source)
        if source is None:
            raise argument_error(self.source, f"required by task {self.name}")
        models.check_local(source, self.source)
        if self.source == "data_dir":
            paths = [os.path.join(source, self.data_name, name)
                     for name in ("train.tsv", "dev.tsv")]
        elif self.source == "conll_dir":
            paths = [os.path.join(source, name) for name in ("train.txt", "valid.txt")]
        else:
            paths = [source]
        for path in paths:
            if not os.path.isfile(path):
                raise argument_error(self.source, f"{path}: not found (task {self.name})")
        if self.source == "squad_file":
            data.check_squad_split(source, self.train_slice)

    def prepare(self, files, tokenizer, data_dir, records_dir, options):
        """The PreparedTask over records written to `records_dir` (train and dev) from the
        slice in `data_dir`, for the model of `files` (bert_tf.api.ModelFiles)."""
        config = files.config
        if self.source == "data_dir":
            processor = reader.get_processor(self.name)
            labels = processor.get_labels(data_dir)
            return classification.prepare_task(
                config, read_splits(processor, data_dir, ("train", "eval")), labels, tokenizer,
                self.max_seq_length, records_dir, task_name=self.name,
                multi_label=processor.is_multi_label, **options)
        if self.source == "conll_dir":
            return tagging.prepare_task(config, tokenizer, self.max_seq_length, records_dir,
                                        data_dir=data_dir, train_file="train.txt",
                                        dev_file="valid.txt", **options)
        return squad.prepare_task(
            config, tokenizer, self.max_seq_length, records_dir,
            train_file=os.path.join(data_dir, "train.json"),
            predict_file=os.path.join(data_dir, "eval.json"), evaluate=True,
            do_lower_case=files.do_lower_case, **options)


def _glue(name, train_slice=None):
    metric = glue.GLUE_METRICS[reader.PROCESSORS[name.lower()].task_metric][0]
    return SuiteTask(name, "data_dir", train_slice, "rows", metric)


SUITE = {task.name: task for task in (
    _glue("SST-2", 8000), _glue("MRPC"), _glue("STS-B"), _glue("RTE"), _glue("CoLA"),
    SuiteTask("CoNLL-2003", "conll_dir", 4000, "sentences", "eval_f1"),
    SuiteTask("SQuAD", "squad_file", 36, "articles", "f1", scale=1.0, max_seq_length=256))}


def suite_task(name, argument="tasks"):
    """The SuiteTask `name`: one of SUITE, or CoNLL-2003/<layers> (FEATURE_LAYERS: the paper's
    feature-based NER); anything else is an InputError naming `argument`."""
    base, _, layers = name.partition("/")
    if base in SUITE and not layers:
        return SUITE[base]
    if base == "CoNLL-2003" and layers in FEATURE_LAYERS:
        return dataclasses.replace(SUITE[base], name=name,
                                   options=(("feature_layers", layers),))
    raise argument_error(argument, f"unknown task {name!r} (one of {', '.join(SUITE)}, or "
                                   f"CoNLL-2003/<layers> with <layers> one of "
                                   f"{', '.join(FEATURE_LAYERS)})")


def suite_tasks(names=None, train_slices=None):
    """The SuiteTasks of `names` (default: SUITE's), each with its slice from `train_slices`
    ({task of SUITE: count}; a variant shares its task's data) where given; an unknown name is
    an InputError naming the argument."""
    tasks = [suite_task(name) for name in (names or SUITE)]
    slices = dict(train_slices or {})
    for name, count in slices.items():
        if not isinstance(count, int) or count < 1:
            raise argument_error("train_slices", f"{name}={count}: a positive integer")
        if name not in SUITE:
            suite_task(name, "train_slices")  # a variant: named as such
            raise argument_error("train_slices", f"{name}: give the slice of "
                                                 f"{name.split('/')[0]}, whose data it shares")
    return [dataclasses.replace(task, train_slice=slices.get(task.data_name, task.train_slice))
            for task in tasks]
