"""Token classification (named entities): run_ner's task (`task`), its records (`preprocessor`)
and its CoNLL files (`reader`)."""
from bert_tf.tasks.ner.preprocessor import (NerPreprocessor, TaggingFeature,
                                            convert_sentences_to_features, record_schema,
                                            tagging_feature_spec, word_pieces,
                                            words_predictions, write_tagging_records)
from bert_tf.tasks.ner.reader import (ConllSentences, label_list_from, read_conll,
                                      read_sentences, write_conll_predictions)
from bert_tf.tasks.ner.task import NerConfig, NerTask, prepare_task

__all__ = [
    "NerPreprocessor", "TaggingFeature", "convert_sentences_to_features", "record_schema",
    "tagging_feature_spec", "word_pieces", "words_predictions",
    "write_tagging_records", "ConllSentences", "label_list_from", "read_conll",
    "read_sentences", "write_conll_predictions", "NerConfig", "NerTask", "prepare_task",
]
