"""Sentence (pair) classification and regression: run_classifier's task (`task`), its records
(`preprocessor`) and the files they are read from (`reader`; the GLUE tasks' in `glue`, JSON
Lines in `json_lines`: every reader is registered by importing this package)."""
from bert_tf.tasks.classification.glue import (ColaProcessor, MnliMismatchedProcessor,
                                               MnliProcessor, MrpcProcessor, QnliProcessor,
                                               QqpProcessor, RteProcessor, Sst2Processor,
                                               StsbProcessor, WnliProcessor, XnliProcessor)
from bert_tf.tasks.classification.json_lines import JsonLinesProcessor
from bert_tf.tasks.classification.preprocessor import (InputFeatures, PaddingInputExample,
                                                       convert_examples_to_features,
                                                       convert_single_example, iter_features,
                                                       pad_examples, write_classifier_records,
                                                       write_features)
from bert_tf.tasks.classification.reader import (PROCESSORS, DataProcessor, FileLayout,
                                                 InputExample, TsvProcessor, get_processor,
                                                 read_rows)
from bert_tf.tasks.classification.task import ClassificationConfig, ClassificationTask, prepare_task
from bert_tf.tasks.preprocessor import read_splits

__all__ = [
    "PROCESSORS", "ColaProcessor", "MnliMismatchedProcessor", "MnliProcessor", "MrpcProcessor",
    "QnliProcessor", "QqpProcessor", "RteProcessor", "Sst2Processor", "StsbProcessor",
    "WnliProcessor", "XnliProcessor", "JsonLinesProcessor", "get_processor", "InputFeatures",
    "PaddingInputExample",
    "convert_examples_to_features", "convert_single_example", "iter_features", "pad_examples",
    "write_classifier_records", "write_features", "DataProcessor", "FileLayout", "InputExample",
    "TsvProcessor", "read_rows", "ClassificationConfig", "ClassificationTask", "prepare_task",
    "read_splits",
]
