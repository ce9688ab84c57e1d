"""Bad input to run_classifier, run_ner and run_squad: one line `error: ...` naming the flag, file or line,
exit status 2, no traceback. A table of cases, each run as the real command line."""
import json

import pytest

from conftest import assert_one_line_error

pytestmark = pytest.mark.slow

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 64, "type_vocab_size": 2}


@pytest.fixture(scope="module")
def files(tmp_path_factory, uncased_vocab):
    root = tmp_path_factory.mktemp("finetuning_errors")
    (root / "bert_config.json").write_text(json.dumps(TINY))
    tsv = root / "tsv"
    tsv.mkdir()
    (tsv / "train.tsv").write_text("a good movie\tpos\nbad\tneg\n")
    (tsv / "dev.tsv").write_text("fine\tpos\nthis row is ragged\n")
    (tsv / "test.tsv").write_text("nice\tpos\n")
    unknown = root / "unknown_label"
    unknown.mkdir()
    (unknown / "train.tsv").write_text("a good movie\tpos\nbad\tneg\n")
    (unknown / "dev.tsv").write_text("fine\tpos\nmeh\tneutral\n")
    empty = root / "empty"
    empty.mkdir()
    (empty / "train.tsv").write_text("")
    conll = root / "conll"
    conll.mkdir()
    (conll / "train.txt").write_text("EU B-ORG\nrejects O\n\nPeter B-PER\n")
    (conll / "valid.txt").write_text("EU B-ORG\nrejects\n")
    (conll / "test.txt").write_bytes(b"EU\n\xff\n")
    squad = root / "squad"
    squad.mkdir()
    (squad / "malformed.json").write_text('{"data": [\n  {"title": "x",\n  "paragraphs": [}]}')
    (squad / "no_question.json").write_text(json.dumps(
        {"data": [{"paragraphs": [{"context": "Paris is in France.", "qas": [{"id": "q1"}]}]}]}))
    (squad / "two_answers.json").write_text(json.dumps({"data": [{"paragraphs": [{
        "context": "Paris is in France.", "qas": [{"id": "q2", "question": "Where?", "answers": [
            {"text": "France", "answer_start": 12}, {"text": "France", "answer_start": 12}]}]}]}]}))
    # A checkpoint of the encoder alone (no classifier head), in the original naming.
    from bert_tf.checkpoints import write_tf1_checkpoint
    from bert_tf.config import BertConfig
    from bert_tf.encoder import BertEncoder
    checkpoint = write_tf1_checkpoint(BertEncoder(BertConfig.from_dict(TINY)),
                                      root / "encoder" / "model.ckpt")
    return {"root": root, "vocab": str(uncased_vocab), "config": str(root / "bert_config.json"),
            "encoder_checkpoint": checkpoint}


def classifier(files, **flags):
    base = {"vocab_file": files["vocab"], "bert_config_file": files["config"],
            "output_dir": files["root"] / "out", "max_seq_length": 32,
            "task_name": "tsv", "text_a_column": 0, "label_column": 1,
            "data_dir": files["root"] / "tsv"}
    base.update(flags)
    return "run.run_classifier", base


def ner(files, **flags):
    base = {"vocab_file": files["vocab"], "bert_config_file": files["config"],
            "output_dir": files["root"] / "ner_out", "max_seq_length": 32,
            "data_dir": files["root"] / "conll"}
    base.update(flags)
    return "run.run_ner", base


def squad(files, **flags):
    base = {"vocab_file": files["vocab"], "bert_config_file": files["config"],
            "output_dir": files["root"] / "squad_out", "max_seq_length": 64,
            "max_query_length": 16}
    base.update(flags)
    return "run.run_squad", base


CASES = [
    ("unknown task name", lambda f: classifier(f, task_name="glue", do_train=True),
     "error: --task_name: unknown task 'glue'; valid names: cola, "),
    ("missing data file", lambda f: classifier(f, task_name="mrpc", do_train=True,
                                               data_dir=f["root"] / "nowhere",
                                               text_a_column=None, label_column=None),
     "nowhere/train.tsv: "),
    ("ragged TSV row", lambda f: classifier(f, do_eval=True),
     "dev.tsv:2: "),
    ("label not in the list", lambda f: classifier(f, do_train=True, do_eval=True,
                                                    train_batch_size=2,
                                                    data_dir=f["root"] / "unknown_label"),
     "dev.tsv:2: "),
    ("empty training file", lambda f: classifier(f, do_train=True, data_dir=f["root"] / "empty"),
     "train"),
    ("max_seq_length beyond the positions", lambda f: classifier(f, do_train=True,
                                                                  max_seq_length=65),
     "error: --max_seq_length: must be in [3, 64] (max_position_embeddings), got 65"),
    ("predict from a checkpoint without the head",
     lambda f: classifier(f, do_predict=True, init_checkpoint=f["encoder_checkpoint"],
                          label_list="pos,neg", output_dir=f["root"] / "predict_only"),
     "error: --init_checkpoint: "),
    ("nothing to do", lambda f: classifier(f),
     "error: --do_train: at least one of --do_train, --do_eval or --do_predict must be set"),
    ("output_dir is a file", lambda f: classifier(f, do_train=True,
                                                  output_dir=f["config"]),
     "error: --output_dir: "),
    ("CoNLL line without a tag", lambda f: ner(f, do_eval=True, label_list="O,B-ORG,B-PER"),
     "valid.txt:2: "),
    ("CoNLL file not UTF-8", lambda f: ner(f, do_predict=True, label_list="O,B-ORG,B-PER",
                                           init_checkpoint=f["encoder_checkpoint"]),
     "test.txt:2: "),
    ("NER predict without labels", lambda f: ner(f, do_predict=True),
     "error: --label_list: is required without --do_train"),
    ("NER tag not in the label list", lambda f: ner(f, do_train=True, label_list="O,B-ORG"),
     "B-PER"),
    ("SQuAD file not JSON", lambda f: squad(f, do_predict=True,
                                            predict_file=f["root"] / "squad" / "malformed.json"),
     "malformed.json:3: malformed JSON"),
    ("SQuAD question without its text",
     lambda f: squad(f, do_predict=True, predict_file=f["root"] / "squad" / "no_question.json"),
     "'q1'"),
    ("SQuAD training question with two answers",
     lambda f: squad(f, do_train=True, train_file=f["root"] / "squad" / "two_answers.json"),
     "exactly 1 answer"),
    ("SQuAD predict without a file", lambda f: squad(f, do_predict=True),
     "error: --predict_file: is required"),
    ("SQuAD has no eval mode", lambda f: squad(f, do_eval=True),
     "error: --do_eval: run_squad has no eval mode"),
    ("SQuAD window flags", lambda f: squad(f, do_predict=True, max_query_length=64,
                                           predict_file=f["root"] / "squad" / "no_question.json"),
     "error: --max_seq_length: "),
]


@pytest.mark.parametrize("name,make,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_line(files, name, make, expected):
    module, flags = make(files)
    assert_one_line_error(module, flags, expected)
