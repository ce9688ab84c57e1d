"""Bad input to run_classifier, run_ner, run_squad, run_multiple_choice and export_savedmodel:
one line `error: ...` naming the flag, file or line, exit status 2, no traceback. A table of
cases, each run as the real command line."""
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
    multi = root / "multi_label"
    multi.mkdir()
    (multi / "train.tsv").write_text("a good long movie\tpos,long\nbad\tneg\nso-so\t\n")
    (multi / "dev.tsv").write_text("fine\tpos\nmeh\tneg,boring\n")
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
    (squad / "empty_context.json").write_text(json.dumps({"data": [{"paragraphs": [
        {"context": "", "qas": [{"id": "q3", "question": "Where?"}]},
        {"context": " \t ", "qas": [{"id": "q4", "question": "Where is it?"}]}]}]}))
    # What an earlier run left in run_squad's output dir: a failing run must not touch it.
    (root / "squad_out").mkdir()
    (root / "squad_out" / "eval.tf_record").write_bytes(b"earlier records")
    (root / "squad_out" / "predictions.json").write_text('{"q0": "earlier"}\n')
    # A vocabulary larger than the model: extend_vocab --mode=append's, used with the original
    # checkpoint (ids from 30522 on have no embedding).
    big_vocab = root / "appended_vocab.txt"
    big_vocab.write_text(uncased_vocab.read_text(encoding="utf-8")
                         + "".join(f"domainword{i}\n" for i in range(10)), encoding="utf-8")
    choices = root / "choices"
    choices.mkdir()
    (choices / "train.tsv").write_text("the cat\tsat\tran\t0\na dog\tbarked\tflew\t0\n")
    (choices / "test.tsv").write_text("the cat\tsat\tran\n")
    # An earlier run's output folder (its predictions, a user's notes) that a failing run must
    # leave as it is: no records, no train/.
    (root / "earlier_out").mkdir()
    (root / "earlier_out" / "test_results.tsv").write_text("0.5\t0.5\n")
    (root / "earlier_out" / "notes.txt").write_text("mine")
    # A checkpoint of the encoder alone (no classifier head), in the original naming.
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder
    checkpoint = write_tf1_checkpoint(BertEncoder(BertConfig.from_dict(TINY)),
                                      root / "encoder" / "model.ckpt")
    # Damaged copies of it: the index cut to 10 bytes, the data cut in half.
    damaged = {}
    for part, suffix in (("index", ".index"), ("data", ".data-00000-of-00001")):
        directory = root / f"damaged_{part}"
        directory.mkdir()
        for source in (root / "encoder").glob("model.ckpt.*"):
            content = source.read_bytes()
            if source.name.endswith(suffix):
                content = content[:10] if part == "index" else content[:len(content) // 2]
            (directory / source.name).write_bytes(content)
        damaged[part] = str(directory / "model.ckpt")
    return {"root": root, "vocab": str(uncased_vocab), "config": str(root / "bert_config.json"),
            "encoder_checkpoint": checkpoint, "damaged": damaged, "big_vocab": str(big_vocab)}


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


def export(files, **flags):
    base = {"vocab_file": files["vocab"], "bert_config_file": files["config"],
            "export_dir": files["root"] / "export_out", "task": "encoder",
            "max_seq_length": 32}
    base.update(flags)
    return "run.export_savedmodel", base


def multiple_choice(files, **flags):
    base = {"vocab_file": files["vocab"], "bert_config_file": files["config"],
            "output_dir": files["root"] / "choices_out", "max_seq_length": 16,
            "task_name": "tsv", "context_column": 0, "ending_columns": "1,2",
            "label_column": 3, "data_dir": files["root"] / "choices", "train_batch_size": 2}
    base.update(flags)
    return "run.run_multiple_choice", base


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
     "error: {root}/empty/train.tsv: has no examples"),
    ("multi-label row with a label not in the list",
     lambda f: classifier(f, do_train=True, do_eval=True, multi_label=True,
                          data_dir=f["root"] / "multi_label"),
     "error: {root}/multi_label/dev.tsv:2: label 'boring' is not one of the labels ['long', "
     "'neg', 'pos']"),
    ("threshold outside (0, 1)",
     lambda f: classifier(f, do_train=True, multi_label=True, threshold="0.5,1.2,0.5",
                          data_dir=f["root"] / "multi_label"),
     "error: --threshold: must be in the open interval (0, 1), got 1.2"),
    ("wrong number of thresholds",
     lambda f: classifier(f, do_train=True, multi_label=True, threshold="0.3,0.6",
                          data_dir=f["root"] / "multi_label"),
     "error: --threshold: gives 2 thresholds for 3 labels ['long', 'neg', 'pos']: give one "
     "for all, or one per label"),
    ("doc_stride as long as the window",
     lambda f: classifier(f, do_train=True, doc_stride=30),
     "error: --doc_stride: must be at least 1 and less than the window, max_seq_length - 2 = "
     "30 pieces, got 30"),
    ("doc_stride of 0", lambda f: classifier(f, do_train=True, doc_stride=0),
     "error: flag --doc_stride=0: must be a positive integer"),
    ("max_seq_length beyond the positions", lambda f: classifier(f, do_train=True,
                                                                  max_seq_length=65),
     "error: --max_seq_length: must be in [3, 64] (max_position_embeddings), got 65"),
    ("predict from a checkpoint without the head",
     lambda f: classifier(f, do_predict=True, init_checkpoint=f["encoder_checkpoint"],
                          label_list="pos,neg", output_dir=f["root"] / "predict_only"),
     "error: --init_checkpoint: "),
    ("init_checkpoint with a damaged index",
     lambda f: classifier(f, do_train=True, init_checkpoint=f["damaged"]["index"],
                          output_dir=f["root"] / "damaged_out"),
     "error: {root}/damaged_index/model.ckpt.index: damaged checkpoint index file: cannot be "
     "read (file is too short to be an sstable)"),
    ("init_checkpoint with a truncated data file",
     lambda f: classifier(f, do_train=True, init_checkpoint=f["damaged"]["data"],
                          output_dir=f["root"] / "damaged_out"),
     "error: {root}/damaged_data/model.ckpt.data-00000-of-00001: damaged checkpoint data file: "
     "cannot be read (Read less bytes than requested)"),
    ("predict from a damaged init_checkpoint",
     lambda f: classifier(f, do_predict=True, init_checkpoint=f["damaged"]["data"],
                          label_list="pos,neg", output_dir=f["root"] / "damaged_out"),
     "error: {root}/damaged_data/model.ckpt.data-00000-of-00001: damaged checkpoint data file"),
    ("export a damaged index", lambda f: export(f, init_checkpoint=f["damaged"]["index"]),
     "error: {root}/damaged_index/model.ckpt.index: damaged checkpoint index file: cannot be "
     "read (file is too short to be an sstable)"),
    ("export a truncated data file", lambda f: export(f, init_checkpoint=f["damaged"]["data"]),
     "error: {root}/damaged_data/model.ckpt.data-00000-of-00001: damaged checkpoint data file: "
     "cannot be read (Read less bytes than requested)"),
    # A vocabulary larger than the model, in every command that takes both: refused before
    # any record is written (not a traceback from the embedding lookup once training runs).
    ("classifier train: vocabulary larger than the model",
     lambda f: classifier(f, do_train=True, vocab_file=f["big_vocab"],
                          output_dir=f["root"] / "earlier_out"),
     "error: --vocab_file: {root}/appended_vocab.txt has 30532 entries but the model's "
     "vocab_size is 30522 ({root}/bert_config.json)"),
    ("classifier predict-only: vocabulary larger than the model",
     lambda f: classifier(f, do_predict=True, vocab_file=f["big_vocab"], label_list="pos,neg",
                          init_checkpoint=f["encoder_checkpoint"],
                          output_dir=f["root"] / "earlier_out"),
     "error: --vocab_file: {root}/appended_vocab.txt has 30532 entries"),
    ("multiple choice: vocabulary larger than the model",
     lambda f: multiple_choice(f, do_train=True, vocab_file=f["big_vocab"]),
     "error: --vocab_file: {root}/appended_vocab.txt has 30532 entries"),
    ("export: vocabulary larger than the model",
     lambda f: export(f, init_checkpoint=f["encoder_checkpoint"], vocab_file=f["big_vocab"]),
     "error: --vocab_file: {root}/appended_vocab.txt has 30532 entries"),
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
     "error: {root}/conll/train.txt:4: sentence 2, word 1 ('Peter'): tag 'B-PER' is not in the "
     "label list ['O', 'B-ORG']"),
    ("SQuAD file not JSON", lambda f: squad(f, do_predict=True,
                                            predict_file=f["root"] / "squad" / "malformed.json"),
     "malformed.json:3: malformed JSON"),
    ("SQuAD question without its text",
     lambda f: squad(f, do_predict=True, predict_file=f["root"] / "squad" / "no_question.json"),
     "'q1'"),
    ("SQuAD training question with two answers",
     lambda f: squad(f, do_train=True, train_file=f["root"] / "squad" / "two_answers.json"),
     "exactly 1 answer"),
    ("SQuAD predict file without a window",
     lambda f: squad(f, do_predict=True, init_checkpoint=f["encoder_checkpoint"],
                     predict_file=f["root"] / "squad" / "empty_context.json"),
     "error: --predict_file: {root}/squad/empty_context.json: none of its 2 question(s) has "
     "a window to predict from: every context is empty (or holds no token)"),
    ("SQuAD predict without a file", lambda f: squad(f, do_predict=True),
     "error: --predict_file: is required"),
    ("SQuAD eval without a file", lambda f: squad(f, do_eval=True),
     "error: --predict_file: is required"),
    ("SQuAD window flags", lambda f: squad(f, do_predict=True, max_query_length=64,
                                           predict_file=f["root"] / "squad" / "no_question.json"),
     "error: --max_seq_length: "),
]


@pytest.mark.parametrize("name,make,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_line(files, name, make, expected):
    """One `error:` line, exit status 2, every file that existed before still there with the
    same bytes (a failing run removes or replaces nothing), and nothing new: no records, no
    train/, no export folder (no partial output)."""
    module, flags = make(files)
    before = snapshot(files["root"])
    assert_one_line_error(module, flags, expected.format(root=files["root"]))
    after = snapshot(files["root"])
    assert {path: after.get(path) for path in before} == before
    assert sorted(set(after) - set(before)) == []


def snapshot(root):
    """{path: its bytes (None: a folder)} of everything under root."""
    return {path: path.read_bytes() if path.is_file() else None for path in root.rglob("*")}
