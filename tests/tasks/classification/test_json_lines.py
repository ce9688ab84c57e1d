"""bert_tf.tasks.classification.json_lines: classification from JSON Lines files
(run_classifier --task_name=jsonl; the API's in test_api.py).

Oracles: the reference release's MrpcProcessor on the real MRPC files, whose rows (read by the
reference's own `_read_tsv`) are written here as JSON Lines with Python's json module; the
TSV reader's bad-input rules.
"""
import json

import pytest

from bert_tf.errors import InputError
from bert_tf.tasks.classification import JsonLinesProcessor, get_processor
from conftest import assert_refused

TINY = {"vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 32, "max_position_embeddings": 64}


@pytest.fixture(scope="module")
def rc(refbert):
    return refbert.import_reference("run_classifier")


def write_json_lines(path, objects):
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    return path


def as_tuple(example):
    return example.guid, example.text_a, example.text_b, example.label


def test_json_lines_of_mrpc_read_as_the_original_reads_its_tsv(rc, shared_data, tmp_path):
    """MRPC's train, dev and test files as JSON Lines (the quality an integer, as datasets
    write it; test objects without a label): the examples are the reference processor's."""
    mrpc = shared_data / "glue_data" / "MRPC"
    reference = rc.MrpcProcessor()
    for split, read in (("train", reference.get_train_examples),
                        ("dev", reference.get_dev_examples),
                        ("test", reference.get_test_examples)):
        rows = rc.DataProcessor._read_tsv(str(mrpc / f"{split}.tsv"))[1:]
        write_json_lines(tmp_path / f"{split}.jsonl", [
            {"idx": i, "text": row[3], "text_b": row[4],
             **({} if split == "test" else {"label": int(row[0])})}
            for i, row in enumerate(rows)])
        processor = get_processor("jsonl", text_b_column="text_b", label_list="0,1")
        ours = getattr(processor, f"get_{split}_examples")(tmp_path)
        assert [as_tuple(e) for e in ours] == [as_tuple(e) for e in read(str(mrpc))]


def test_labels_multi_label_lists_regression_and_field_names(tmp_path):
    write_json_lines(tmp_path / "train.jsonl", [
        {"sentence": "a fine short film", "tags": ["positive", "short"]},
        {"sentence": "dull", "tags": []}])
    examples = JsonLinesProcessor(text_a_column="sentence", label_column="tags",
                                  multi_label=True).get_train_examples(tmp_path)
    assert [(e.text_a, e.label) for e in examples] == [("a fine short film",
                                                         ("positive", "short")), ("dull", ())]
    write_json_lines(tmp_path / "dev.jsonl", [{"text": "close", "label": 4.25},
                                              {"text": "far", "label": 0}])
    processor = JsonLinesProcessor(regression=True)
    assert [e.label for e in processor.get_dev_examples(tmp_path)] == [4.25, 0.0]
    # A boolean label reads as JSON writes it; CRLF lines read as LF ones.
    (tmp_path / "train.jsonl").write_text('{"text": "no", "label": false}\r\n'
                                          '{"text": "yes", "label": true}\r\n')
    assert [e.label for e in JsonLinesProcessor().get_train_examples(tmp_path)] == ["false",
                                                                                    "true"]


@pytest.mark.parametrize("lines,expected", [
    (['{"text": "a", "label": "x"}', '{"text": "b"}'],
     r"train.jsonl:2: has no field 'label' \(label_column\)"),
    (['{"text": "a", "label": "x"}', '{"text": "b", "label": "x"'],
     r"train.jsonl:2: is not a JSON object: "),
    (['{"text": "a", "label": "x"}', '', '{"text": "b", "label": "x"}'],
     r"train.jsonl:2: is not a JSON object: "),
    (['["a", "x"]'], r"train.jsonl:1: is not a JSON object"),
    (['{"text": 3, "label": "x"}'], r"train.jsonl:1: holds 3 where a text is"),
    (['{"text": "a", "label": ["x", "y"]}'],
     r"train.jsonl:1: holds \[\"x\", \"y\"\] where a label is"),
    (['{"text": "a", "label": null}'], r"train.jsonl:1: holds null where a label is"),
    (['{"text": "a", "label": {"k": 1}}'], r"train.jsonl:1: holds \{\"k\": 1\} where a label is"),
    (['{"text": "a", "label": "z"}'],
     r"train.jsonl:1: label 'z' is not one of the labels \['x', 'y'\]"),
])
def test_a_bad_line_is_an_error_naming_it(tmp_path, lines, expected):
    (tmp_path / "train.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=expected):
        JsonLinesProcessor(label_list=["x", "y"]).get_train_examples(tmp_path)


@pytest.mark.parametrize("options,expected", [
    ({"skip_header": True}, "skip_header: is for TSV and CSV files, not JSON Lines"),
    ({"delimiter": ","}, "delimiter: is for TSV and CSV files, not JSON Lines"),
])
def test_options_that_cannot_act_on_json_lines_are_refused(options, expected):
    with pytest.raises(InputError, match=expected):
        JsonLinesProcessor(**options)


def test_multi_label_lists(tmp_path):
    """A list's labels are the labels, each whole: one holding the separator, a list in the
    list or a null is an error naming the line."""
    for labels, expected in ((["x,y", "z"], "a label holds the label_separator ','"),
                             ([["x"], "z"], r"holds \[\[\"x\"\], \"z\"\] where a label is"),
                             ([None], r"holds \[null\] where a label is")):
        write_json_lines(tmp_path / "train.jsonl", [{"text": "a", "label": ["x"]},
                                                    {"text": "b", "label": labels}])
        with pytest.raises(InputError, match=f"train.jsonl:2: {expected}"):
            JsonLinesProcessor(multi_label=True).get_train_examples(tmp_path)
    # An index is no field name: JSON objects have none.
    write_json_lines(tmp_path / "train.jsonl", [{"text": "a", "label": ["x"]}])
    with pytest.raises(InputError, match=r"train.jsonl:1: has no field 2 \(text_a_column\)"):
        JsonLinesProcessor(text_a_column="2", multi_label=True).get_train_examples(tmp_path)


@pytest.mark.slow
def test_run_classifier_names_the_line_and_writes_nothing(tmp_path, uncased_vocab):
    data = tmp_path / "data"
    data.mkdir()
    write_json_lines(data / "train.jsonl", [{"text": "fun", "label": "pos"},
                                            {"text": "dull", "label": "neg"}, {"text": "long"}])
    (tmp_path / "bert_config.json").write_text(json.dumps(TINY))
    assert_refused("run.run_classifier", {
        "task_name": "jsonl", "data_dir": data, "vocab_file": uncased_vocab,
        "bert_config_file": tmp_path / "bert_config.json", "output_dir": tmp_path / "out",
        "do_train": True, "max_seq_length": 16},
        f"error: {data / 'train.jsonl'}:3: has no field 'label' (--label_column)", tmp_path)
