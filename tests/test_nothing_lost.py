"""Nothing a user owns is lost to a command: every path a command deletes or replaces is checked
before any work (an export folder is replaced only when it is an earlier bert_tf export, never
when it is or holds the output or checkpoint folder; an output file is never one of the
command's inputs), numeric flags out of range and unwritable output folders are refused when
the command starts, and a command that fails while preparing its data leaves no partial
outputs. Each case: one `error:` line naming the flag, exit status 2, every file that existed
before still there with the same bytes, and nothing new written."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import assert_one_line_error, assert_refused, run_command_line, snapshot

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 64, "type_vocab_size": 2}


@pytest.fixture(scope="module")
def files(tmp_path_factory, uncased_vocab):
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertClassifier

    root = tmp_path_factory.mktemp("nothing_lost")
    (root / "bert_config.json").write_text(json.dumps(TINY))
    (root / "wide_config.json").write_text(json.dumps(dict(TINY, hidden_size=48)))
    tsv = root / "tsv"
    tsv.mkdir()
    (tsv / "train.tsv").write_text("a good movie\tpos\nbad\tneg\nfine\tpos\nawful\tneg\n")
    (tsv / "dev.tsv").write_text("fine\tpos\nmeh\tneg\n")
    (tsv / "test.tsv").write_text("nice\tpos\n")
    # A trained run's folder: its classifier checkpoint and result files.
    trained = root / "trained"
    checkpoint = write_tf1_checkpoint(BertClassifier(BertConfig.from_dict(TINY), 2),
                                      trained / "model.ckpt")
    (trained / "eval_results.txt").write_text("eval_accuracy = 0.9\n")
    (trained / "test_results.tsv").write_text("0.9\t0.1\n")
    mine = root / "my_folder"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    return {"root": root, "vocab": str(uncased_vocab), "config": root / "bert_config.json",
            "checkpoint": checkpoint, "trained": trained, "mine": mine, "tsv": tsv}


def classifier(f, **flags):
    base = {"vocab_file": f["vocab"], "bert_config_file": f["config"], "task_name": "tsv",
            "text_a_column": 0, "label_column": 1, "data_dir": f["tsv"], "max_seq_length": 16,
            "output_dir": f["root"] / "classifier_out", "train_batch_size": 2,
            "eval_batch_size": 2, "predict_batch_size": 1}
    base.update(flags)
    return "run.run_classifier", base


def export(f, **flags):
    base = {"init_checkpoint": f["checkpoint"], "bert_config_file": f["config"],
            "vocab_file": f["vocab"], "task": "classifier", "label_list": "neg,pos",
            "max_seq_length": 16}
    base.update(flags)
    return "run.export_savedmodel", base


CASES = [
    # 1. Export targets: a folder of the user's, the checkpoint's folder, the output folder.
    ("export into a folder of the user's",
     lambda f: export(f, export_dir=f["mine"]),
     "error: --export_dir: {mine} is not empty and not an export of bert_tf (it "
     "holds 'thesis.tex'); nothing was deleted"),
    ("export into the checkpoint's folder",
     lambda f: export(f, export_dir=f["trained"]),
     "error: --export_dir: {trained} would replace --init_checkpoint's {trained}"),
    ("export into a folder that holds the checkpoint",
     lambda f: export(f, export_dir=f["root"]),
     "would replace --init_checkpoint's"),
    ("run_classifier: export_dir is output_dir",
     lambda f: classifier(f, do_train=True, do_predict=True, output_dir=f["root"] / "same",
                          export_dir=f["root"] / "same"),
     "error: --export_dir: {root}/same would replace --output_dir's {root}/same"),
    ("run_classifier: export into the init_checkpoint's folder",
     lambda f: classifier(f, do_predict=True, init_checkpoint=f["checkpoint"],
                          label_list="neg,pos", export_dir=f["trained"]),
     "error: --export_dir: {trained} would replace --init_checkpoint's"),
    ("run_classifier: export into a folder of the user's",
     lambda f: classifier(f, do_train=True, export_dir=f["mine"]),
     "error: --export_dir: {mine} is not empty and not an export of bert_tf"),
    ("run_pretraining: export_dir (it would fail after training)",
     lambda f: ("run.run_pretraining", {"bert_config_file": f["config"], "input_file": f["config"],
                                        "output_dir": f["root"] / "pretraining_out",
                                        "do_train": True, "export_dir": f["root"] / "mlm"}),
     "error: --export_dir: run_pretraining does not export"),
    # 2, 3. Numbers that cannot be meant: refused when the flags are parsed.
    ("batch size 0", lambda f: classifier(f, do_train=True, train_batch_size=0),
     "error: flag --train_batch_size=0: must be a positive integer"),
    ("negative learning rate", lambda f: classifier(f, do_train=True, learning_rate=-1),
     "error: flag --learning_rate=-1.0: must be > 0"),
    ("warmup proportion above 1", lambda f: classifier(f, do_train=True, warmup_proportion=1.5),
     "error: flag --warmup_proportion=1.5: must be in [0, 1]"),
    ("negative epochs", lambda f: classifier(f, do_train=True, num_train_epochs=-2),
     "error: flag --num_train_epochs=-2.0: must be >= 0"),
    ("run_pretraining: negative steps",
     lambda f: ("run.run_pretraining", {"bert_config_file": f["config"], "input_file": f["config"],
                                        "output_dir": f["root"] / "pretraining_out",
                                        "do_train": True, "num_train_steps": -5}),
     "error: flag --num_train_steps=-5: must be >= 0"),
    ("create_pretraining_data: masked_lm_prob above 1",
     lambda f: ("data_tools.create_pretraining_data",
                {"input_file": f["tsv"] / "train.tsv", "output_file": f["root"] / "x.tfrecord",
                 "vocab_file": f["vocab"], "masked_lm_prob": 2}),
     "error: flag --masked_lm_prob=2.0: must be in the open interval (0, 1)"),
    ("export_savedmodel: top_k 0", lambda f: export(f, task="pretraining", top_k=0,
                                                    export_dir=f["root"] / "mlm"),
     "error: flag --top_k=0: must be a positive integer"),
    ("loss scale below 1", lambda f: classifier(f, do_train=True, mixed_precision="float16",
                                                initial_loss_scale=0.5),
     "error: flag --initial_loss_scale=0.5: must be >= 1"),
    # float16 asked of a TPU: refused before the strategy connects to it.
    ("run_classifier: float16 with --use_tpu",
     lambda f: classifier(f, do_train=True, use_tpu=True, mixed_precision="float16"),
     "error: --mixed_precision: float16 is for GPUs, not TPUs (--use_tpu): use "
     "--mixed_precision=bfloat16, which TPUs compute natively and which needs no loss scaling"),
    ("run_pretraining: float16 with --distribution_strategy=tpu",
     lambda f: ("run.run_pretraining", {"bert_config_file": f["config"], "input_file": f["config"],
                                        "output_dir": f["root"] / "pretraining_out",
                                        "do_train": True, "distribution_strategy": "tpu",
                                        "mixed_precision": "float16", "max_seq_length": 64}),
     "error: --mixed_precision: float16 is for GPUs, not TPUs (--distribution_strategy=tpu)"),
    # 8. What can be checked before any work is: no record is written.
    ("dev label outside the training labels",
     lambda f: classifier(f, do_train=True, do_eval=True, label_list="pos,neg",
                          data_dir=f["root"] / "bad_dev"),
     "dev.tsv:2: label 'neutral' is not one of the labels"),
    ("config does not match the checkpoint",
     lambda f: classifier(f, do_train=True, init_checkpoint=f["checkpoint"],
                          bert_config_file=f["root"] / "wide_config.json"),
     "shape"),
    ("predict from a checkpoint without the head",
     lambda f: classifier(f, do_predict=True, init_checkpoint=f["encoder"],
                          label_list="neg,pos"),
     "error: --init_checkpoint: "),
    ("run_squad: predict from a checkpoint without the head",
     lambda f: ("run.run_squad", {"vocab_file": f["vocab"], "bert_config_file": f["config"],
                                  "output_dir": f["root"] / "squad_out", "max_seq_length": 48,
                                  "max_query_length": 8, "doc_stride": 16, "do_predict": True,
                                  "predict_file": f["squad"], "init_checkpoint": f["encoder"]}),
     "error: --init_checkpoint: "),
    # Output files that are the command's inputs.
    ("build_vocab: output is the input",
     lambda f: ("data_tools.build_vocab", {"input_file": f["tsv"] / "train.tsv",
                                           "output_file": f["tsv"] / "train.tsv",
                                           "vocab_size": 50}),
     "error: --output_file: {tsv}/train.tsv is also --input_file"),
    ("create_pretraining_data: output is the vocabulary",
     lambda f: ("data_tools.create_pretraining_data",
                {"input_file": f["tsv"] / "train.tsv", "output_file": f["vocab_copy"],
                 "vocab_file": f["vocab_copy"]}),
     "is also --vocab_file"),
]


@pytest.fixture(scope="module")
def more_files(files):
    """The files some cases need besides `files`: a dev set with an unknown label, an encoder
    checkpoint (no head), a SQuAD file, a vocabulary copy."""
    import shutil

    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder

    root = files["root"]
    bad_dev = root / "bad_dev"
    bad_dev.mkdir(exist_ok=True)
    shutil.copy(files["tsv"] / "train.tsv", bad_dev / "train.tsv")
    (bad_dev / "dev.tsv").write_text("fine\tpos\nmeh\tneutral\n")
    encoder = write_tf1_checkpoint(BertEncoder(BertConfig.from_dict(TINY)),
                                   root / "encoder" / "model.ckpt")
    squad = root / "squad.json"
    squad.write_text(json.dumps({"data": [{"paragraphs": [{
        "context": "Paris is the capital of France.",
        "qas": [{"id": "q1", "question": "What is the capital?", "answers": []}]}]}]}))
    shutil.copy(files["vocab"], root / "vocab_copy.txt")
    return dict(files, encoder=encoder, squad=squad, vocab_copy=root / "vocab_copy.txt")


@pytest.mark.slow
@pytest.mark.parametrize("name,make,expected", CASES, ids=[c[0] for c in CASES])
def test_refused_before_any_work_and_nothing_lost(more_files, name, make, expected):
    f = more_files
    module, flags = make(f)
    assert_refused(module, flags, expected.format(**{k: v for k, v in f.items()}), f["root"])


def immutable(path):
    """Makes folder `path` immutable (even root cannot write in it); skips if chattr cannot."""
    result = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if result.returncode:
        pytest.skip(f"chattr +i {path} failed: {result.stderr.strip()}")


@pytest.mark.slow
def test_an_output_dir_that_cannot_be_written_is_refused(files, tmp_path):
    """Item 4: an immutable output folder, and one that cannot be created under an immutable
    parent: one line naming --output_dir, before any work (root ignores permission bits, so
    chattr +i stands in for them)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    immutable(locked)
    try:
        for output_dir, expected in [(locked, f"{locked} is not writable"),
                                     (locked / "new", f"{locked / 'new'} cannot be created")]:
            assert_refused(*classifier(files, do_train=True, output_dir=output_dir),
                           f"error: --output_dir: {expected}", tmp_path)
    finally:
        subprocess.run(["chattr", "-i", str(locked)])


def test_permission_errors_are_one_line():
    """The command lines' net for a path that turns unwritable mid-run (checked outputs are
    refused earlier): Python's and TensorFlow's permission errors become one line naming it."""
    import errno

    import tensorflow as tf

    from bert_tf.cli import permission_error_message
    assert permission_error_message(PermissionError(errno.EACCES, "Permission denied",
                                                    "/x/out.txt")) == "/x/out.txt: permission denied"
    assert permission_error_message(OSError(errno.EROFS, "Read-only file system", "/ro/f")) == (
        "/ro/f: read-only file system")
    tf_error = tf.errors.PermissionDeniedError(None, None, "/x/ckpt; Permission denied\nmore")
    assert permission_error_message(tf_error) == "/x/ckpt; Permission denied"
    assert permission_error_message(ValueError("x")) is None
    assert permission_error_message(OSError(errno.ENOSPC, "No space left", "/x")) is None


COMMAND_LINES = ["data_tools.build_vocab", "data_tools.create_pretraining_data",
                 "data_tools.demo_corpus", "data_tools.extend_vocab", "run.run_pretraining",
                 "run.extract_features", "run.run_classifier", "run.run_ner", "run.run_squad",
                 "run.run_multiple_choice", "run.export_savedmodel", "run.demo",
                 "run.run_glue", "run.evaluate_pretraining"]
# Numeric flags that may take any value of their type.
UNBOUNDED = {"null_score_diff_threshold"}


def test_every_numeric_flag_has_a_range():
    """Item 3, one check in one place: every integer or float flag of every command line is
    in bert_tf.cli.FLAG_RANGES (or deliberately unbounded), so a new flag cannot skip it."""
    from bert_tf.cli import FLAG_RANGES
    script = ("import importlib, sys; from absl import flags; "
              "m = importlib.import_module(sys.argv[1]); "
              "getattr(m, 'define_flags', lambda: None)(); "
              "print(' '.join(sorted(n for n, f in flags.FLAGS._flags().items() "
              "if type(f.parser).__name__ in ('IntegerParser', 'FloatParser'))))")
    unranged = {}
    for module in COMMAND_LINES:
        result = subprocess.run([sys.executable, "-c", script, module], capture_output=True,
                                text=True, timeout=120, cwd=os.path.dirname(os.path.dirname(
                                    os.path.abspath(__file__))))
        assert result.returncode == 0, result.stderr[-2000:]
        names = set(result.stdout.split())
        assert names, module
        missing = names - set(FLAG_RANGES) - UNBOUNDED
        if missing:
            unranged[module] = sorted(missing)
    assert not unranged, unranged


@pytest.mark.slow
def test_a_failed_data_preparation_leaves_no_output_dir(files):
    """Item 2 and 8: a run that fails while preparing its data (here: its epochs make no
    training step, known once the data is counted) leaves no records and no output folder."""
    out = files["root"] / "never_made"
    assert_one_line_error(*classifier(files, do_train=True, output_dir=out, num_train_epochs=0),
                          "error: --num_train_epochs: 0.0 epochs of 4 examples")
    assert not out.exists()
    assert not re.search("never_made", " ".join(os.listdir(files["root"])))


@pytest.mark.slow
def test_an_earlier_export_is_replaced_only_while_it_holds_nothing_else(files, tmp_path):
    """An empty folder is used, and our own export replaced; one holding a user's
    file at any depth (assets/, a folder of its own inside variables/, beside saved_model.pb)
    is refused by export_savedmodel and by run_classifier --export_dir (before any work: no
    output folder made), naming the file, and the export and the file stay as they were;
    without the file, the export is ours again (replaceable)."""
    from bert_tf.errors import InputError
    from bert_tf.serving.export_folders import EXPORT_MARKER, check_export_dir, is_bert_tf_export
    target = tmp_path / "exported"
    target.mkdir()
    for _ in range(2):
        status, output = run_command_line(*export(files, export_dir=target))
        assert status == 0, output[-3000:]
        assert is_bert_tf_export(str(target))
    marker = json.loads((target / "assets" / EXPORT_MARKER).read_text())
    assert marker["task"] == "classifier" and "serve_text" in marker["signatures"]

    (target / "assets" / "my_extra.txt").write_text("mine")
    message = (f"error: --export_dir: {target} is an export of bert_tf but also "
               f"holds 'assets/my_extra.txt', which the export did not write; nothing was "
               f"deleted")
    assert_refused(*export(files, export_dir=target), message, tmp_path)
    assert_refused(*classifier(files, do_train=True, output_dir=tmp_path / "out",
                               export_dir=target), message, tmp_path)
    (target / "assets" / "my_extra.txt").unlink()
    # The same check in Python, at the other depths (the command lines call it as above).
    for extra, shown in (("variables/notes/readme.txt", "variables/notes/"),
                         ("notes.txt", "notes.txt")):
        path = target / extra
        path.parent.mkdir(exist_ok=True)
        path.write_text("mine")
        with pytest.raises(InputError, match=f"also holds {shown!r}, which the export did not"):
            check_export_dir(target)
        path.unlink()
        if path.parent != target:
            path.parent.rmdir()
    check_export_dir(target)  # ours again: replaceable


@pytest.mark.slow
def test_tfhub_and_litert_exports_holding_a_users_file_at_any_depth_are_kept(files, tmp_path):
    """The other formats through the same check: a user's file in a TF Hub part's
    assets/ or variables/, beside its two parts, beside model.tflite or in a folder there is
    named and nothing is deleted, from Python (formats.save, export_folders.check_export_dir) and
    from export_savedmodel; the export without it is replaceable."""
    from bert_tf.errors import InputError
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder
    from bert_tf.serving import formats
    from bert_tf.serving.export_folders import check_export_dir
    from bert_tf.tasks import registry

    config = BertConfig.from_dict(TINY)
    encoder = BertEncoder(config)
    task = registry.build("encoder", config, max_seq_length=16)
    exports = {"tfhub": tmp_path / "hub", "litert": tmp_path / "lite"}
    for export_format, path in exports.items():
        formats.save(export_format, task, encoder, path, files["vocab"], log=lambda m: None)
    cases = [("tfhub", "encoder/assets/my_extra.txt", "encoder/assets/my_extra.txt"),
             ("tfhub", "preprocessor/variables/notes/x.txt", "preprocessor/variables/notes/"),
             ("tfhub", "README.md", "README.md"),
             ("litert", "notes.txt", "notes.txt"),
             ("litert", "mine/model.tflite", "mine/")]
    for export_format, extra, shown in cases:
        path = exports[export_format]
        (path / extra).parent.mkdir(exist_ok=True)
        (path / extra).write_text("mine")
        before = snapshot(tmp_path)
        expected = (f"export_dir: {path} is an export of bert_tf but also holds {shown!r}, "
                    f"which the export did not write; nothing was deleted")
        for refuse in (lambda: check_export_dir(path),
                       lambda: formats.save(export_format, task, encoder, path, files["vocab"],
                                            log=lambda m: None)):
            with pytest.raises(InputError) as refused:
                refuse()
            assert str(refused.value).startswith(expected), str(refused.value)
        assert snapshot(tmp_path) == before
        (path / extra).unlink()
        if (path / extra).parent != path and not os.listdir((path / extra).parent):
            (path / extra).parent.rmdir()
        check_export_dir(path)  # ours again: replaceable
    # The command line: one line naming the file, the export intact.
    (exports["litert"] / "notes.txt").write_text("mine")
    checkpoint = write_tf1_checkpoint(encoder, tmp_path / "encoder" / "model.ckpt")
    assert_refused("run.export_savedmodel", {
        "init_checkpoint": checkpoint, "bert_config_file": files["config"],
        "vocab_file": files["vocab"], "task": "encoder", "format": "litert",
        "max_seq_length": 16, "export_dir": exports["litert"]},
        f"error: --export_dir: {exports['litert']} is an export of bert_tf but also holds "
        f"'notes.txt'", tmp_path)


@pytest.mark.slow
def test_an_export_of_any_format_replaces_an_earlier_export_of_any_format(files, tmp_path):
    """docs/export.md: --export_dir may hold an earlier export of any format, which is
    replaced. Every ordered pair of SavedModel, Hugging Face, keras-hub and TF Hub exports, in
    one folder: each export leaves exactly its own files (its marker's list), none of the
    earlier format's."""
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder
    from bert_tf.serving import formats
    from bert_tf.serving.export_folders import any_export_unexpected_entries
    from bert_tf.tasks import registry

    config = BertConfig.from_dict(TINY)
    encoder = BertEncoder(config)
    task = registry.build("encoder", config, max_seq_length=16)
    own_file = {"saved_model": "saved_model.pb", "huggingface": "model.safetensors",
                "keras_hub": "model.weights.h5", "tfhub": "encoder/saved_model.pb"}
    # Each ordered pair once: S H S K S T H K H T K T S.
    order = ["saved_model", "huggingface", "saved_model", "keras_hub", "saved_model", "tfhub",
             "huggingface", "keras_hub", "huggingface", "tfhub", "keras_hub", "tfhub",
             "saved_model"]
    path = tmp_path / "exported"
    for export_format in order:
        formats.save(export_format, task, encoder, path, files["vocab"], log=lambda m: None)
        assert any_export_unexpected_entries(str(path)) == [], export_format
        present = {name for name, file in own_file.items() if (path / file).exists()}
        assert present == {export_format}, (export_format, present)
