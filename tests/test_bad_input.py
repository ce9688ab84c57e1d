"""Bad input to every data and run command line: one line `error: ...` naming the flag,
file, line or byte offset, exit status 2, no traceback. A table of cases, each run as the real
command line on tiny files; then the cases that need more than one command (leftover temporary
files, the demo's output folder) and `--help`."""
import json
import os
import pathlib
import re
import struct
import subprocess
import sys
import types

import pytest

from conftest import assert_one_line_error, assert_refused, run_command_line

SEQ, PREDICTIONS = 16, 3
WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "ran", "far", "home", "red", "big"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
TINY = {"vocab_size": len(VOCAB), "hidden_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 32,
        "type_vocab_size": 2}


def write_records(path, num_records, max_id):
    """Pretraining records (create_pretraining_data's features) with token ids below max_id."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(num_records):
            ids = rng.integers(5, max_id, SEQ)
            features = {
                "input_ids": ints(ids), "input_mask": ints([1] * SEQ),
                "segment_ids": ints([0] * (SEQ // 2) + [1] * (SEQ - SEQ // 2)),
                "masked_lm_positions": ints([1, 2, 3]), "masked_lm_ids": ints(ids[1:4]),
                "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
                    value=[1.0] * PREDICTIONS)),
                "next_sentence_labels": ints([int(rng.integers(0, 2))])}
            writer.write(tf.train.Example(
                features=tf.train.Features(feature=features)).SerializeToString())


def record_starts(data):
    """Byte offsets of the TFRecord frames in `data` (8-byte length, 4 CRC, data, 4 CRC)."""
    starts, offset = [], 0
    while offset + 8 <= len(data):
        starts.append(offset)
        offset += 16 + struct.unpack("<Q", data[offset:offset + 8])[0]
    return starts


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_input")
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (root / "bert_config.json").write_text(json.dumps(TINY))
    (root / "small_vocab_config.json").write_text(json.dumps(dict(TINY, vocab_size=8)))
    (root / "corpus.txt").write_text("the cat sat on the mat.\nthe dog ran far.\n\n"
                                     "a big red dog ran home.\nthe cat sat.\n")
    (root / "latin1.txt").write_bytes(b"the cat sat\ncaf\xe9 on the mat\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "a_directory").mkdir()
    (root / "a_directory" / "file.txt").write_text("the cat\n")
    good = root / "good.tfrecord"
    write_records(good, 200, len(VOCAB))
    data = good.read_bytes()
    starts = record_starts(data)
    assert len(starts) == 200
    middle = len(data) // 2 + 37  # inside a record (all records have one size)
    (root / "truncated.tfrecord").write_bytes(data[:middle])
    flipped = bytearray(data)
    for i in range(middle, middle + 8):
        flipped[i] ^= 0xFF
    (root / "flipped.tfrecord").write_bytes(bytes(flipped))
    damaged_record = max(s for s in starts if s <= middle)
    # Only leftover temporary files (of a killed run) in a folder: an input glob skips them.
    temporaries = root / "only_temporaries"
    temporaries.mkdir()
    (temporaries / ".records.tfrecord.tmp-12345-0123abcd").write_bytes(data)
    (temporaries / "records.tfrecord.tmp-12345-89abcdef").write_bytes(data)  # older naming
    # A checkpoint of the encoder in the original naming (for extract_features).
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder
    checkpoint = write_tf1_checkpoint(BertEncoder(BertConfig.from_dict(TINY)),
                                      root / "encoder" / "model.ckpt")
    return {"root": root, "vocab": root / "vocab.txt", "config": root / "bert_config.json",
            "checkpoint": checkpoint, "damaged_record": damaged_record}


def pretraining(f, **flags):
    base = {"bert_config_file": f["config"], "input_file": f["root"] / "good.tfrecord",
            "output_dir": f["root"] / "pretraining_out", "do_train": True,
            "max_seq_length": SEQ, "max_predictions_per_seq": PREDICTIONS,
            "train_batch_size": 8, "eval_batch_size": 8, "num_train_steps": 10,
            "num_warmup_steps": 0, "iterations_per_loop": 10, "max_eval_steps": 40}
    base.update(flags)
    return "run.run_pretraining", base


def features(f, **flags):
    base = {"input_file": f["root"] / "corpus.txt", "output_file": f["root"] / "out.jsonl",
            "vocab_file": f["vocab"], "bert_config_file": f["config"],
            "init_checkpoint": f["checkpoint"], "layers": "-1", "max_seq_length": SEQ}
    base.update(flags)
    return "run.extract_features", base


def vocab(f, **flags):
    base = {"input_file": f["root"] / "corpus.txt", "output_file": f["root"] / "learned.txt",
            "vocab_size": 40}
    base.update(flags)
    return "data_tools.build_vocab", base


def records(f, **flags):
    base = {"input_file": f["root"] / "corpus.txt", "output_file": f["root"] / "made.tfrecord",
            "vocab_file": f["vocab"], "max_seq_length": SEQ,
            "max_predictions_per_seq": PREDICTIONS}
    base.update(flags)
    return "data_tools.create_pretraining_data", base


CASES = [
    # 1. Input text that is not UTF-8.
    ("features: input not UTF-8", lambda f: features(f, input_file=f["root"] / "latin1.txt"),
     "latin1.txt:2: not valid UTF-8"),
    # 2. TFRecords valid at the start, damaged later: the file and the offset.
    ("pretraining: truncated file in training",
     lambda f: pretraining(f, input_file=f["root"] / "truncated.tfrecord",
                           output_dir=f["root"] / "truncated_out"),
     "truncated.tfrecord: damaged TFRecord file: truncated record at byte offset "),
    ("pretraining: flipped bytes in eval, second file",
     lambda f: pretraining(f, input_file=f"{f['root'] / 'good.tfrecord'},"
                                         f"{f['root'] / 'flipped.tfrecord'}",
                           do_train=None, do_eval=True, output_dir=f["root"] / "flipped_out"),
     "flipped.tfrecord: damaged TFRecord file: corrupted record at byte offset "),
    # 3. Token ids beyond the model's vocabulary.
    ("pretraining: token ids >= vocab_size",
     lambda f: pretraining(f, bert_config_file=f["root"] / "small_vocab_config.json"),
     "good.tfrecord: record 1: input_ids holds"),
    ("features: vocabulary larger than vocab_size",
     lambda f: features(f, bert_config_file=f["root"] / "small_vocab_config.json"),
     "vocab.txt has 17 entries but the model's vocab_size is 8 ("),
    # 4, 5. run_pretraining's output_dir a file, input_file a directory.
    ("pretraining: output_dir is a file", lambda f: pretraining(f, output_dir=f["vocab"]),
     "error: --output_dir: "),
    ("pretraining: input_file is a directory",
     lambda f: pretraining(f, input_file=f["root"] / "a_directory"),
     "a_directory is a directory, not a file"),
    # 6. extract_features' input a directory or empty.
    ("features: input is a directory",
     lambda f: features(f, input_file=f["root"] / "a_directory"),
     "error: --input_file: "),
    ("features: input is empty", lambda f: features(f, input_file=f["root"] / "empty.txt"),
     "empty.txt: input file is empty"),
    # 7. --output_file an existing directory: refused before any work.
    ("features: output is a directory",
     lambda f: features(f, output_file=f["root"] / "a_directory"),
     "error: --output_file: "),
    ("build_vocab: output is a directory",
     lambda f: vocab(f, output_file=f["root"] / "a_directory"),
     "error: --output_file: "),
    ("create_pretraining_data: output is a directory",
     lambda f: records(f, output_file=f"{f['root'] / 'x.tfrecord'},{f['root'] / 'a_directory'}"),
     "error: --output_file: "),
    # 9. An input glob never matches a killed run's temporary files.
    ("pretraining: glob over temporary files only",
     lambda f: pretraining(f, input_file=f"{f['root'] / 'only_temporaries'}/*"),
     "error: --input_file: no file matches"),
    ("build_vocab: glob over temporary files only",
     lambda f: vocab(f, input_file=f"{f['root'] / 'only_temporaries'}/*"),
     "error: --input_file: no file matches"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,make,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_line(files, name, make, expected):
    module, flags = make(files)
    line = assert_one_line_error(module, flags, expected)
    if "record at byte offset" in expected:  # the damaged record's header or its data
        offset = int(re.search(r"at byte offset (\d+)", line).group(1))
        assert files["damaged_record"] <= offset <= files["damaged_record"] + 12, line
    if "output is a directory" in name:  # refused before the work: nothing written
        assert os.listdir(files["root"] / "a_directory") == ["file.txt"], line
    if module == "run.extract_features":  # no partial output
        assert not os.path.exists(flags["output_file"]) or os.path.isdir(flags["output_file"])


def dead_pid():
    """The id of a process that has exited."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_leftover_temporary_files_are_skipped_and_cleaned(tmp_path):
    """A killed writer's temporary files match no input glob, and the next write of
    the same output removes them (not those of a live process)."""
    from bert_tf import io_utils
    from bert_tf.data.pretraining.writers import RecordFileWriter
    from bert_tf.cli import expand_globs

    pid = dead_pid()
    (tmp_path / "corpus.txt").write_text("text\n")
    leftovers = [tmp_path / f".out.tfrecord.tmp-{pid}-0123abcd",
                 tmp_path / f"out.tfrecord.tmp-{pid}-4567abcd",  # earlier versions' naming
                 tmp_path / f".vocab.txt.tmp-{pid}-89abcdef"]
    live = tmp_path / f".vocab.txt.tmp-{os.getppid()}-01234567"
    for path in leftovers + [live]:
        path.write_bytes(b"partial")
    assert io_utils.is_temporary_name(io_utils.temporary_path(str(tmp_path / "x.txt")))
    assert expand_globs(f"{tmp_path}/*", "input_file") == [f"{tmp_path}/corpus.txt"]

    with io_utils.atomic_open(str(tmp_path / "vocab.txt")) as f:
        f.write("[UNK]\n")
    writer = RecordFileWriter(str(tmp_path / "out.tfrecord"))
    writer.commit()
    assert not any(path.exists() for path in leftovers)
    assert live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["corpus.txt", "vocab.txt", "out.tfrecord", live.name])


COMMAND_LINES = ["data_tools.build_vocab", "data_tools.create_pretraining_data",
                 "data_tools.demo_corpus", "data_tools.extend_vocab", "run.run_pretraining",
                 "run.extract_features", "run.run_classifier", "run.run_ner", "run.run_squad",
                 "run.run_multiple_choice", "run.export_savedmodel", "run.demo",
                 "run.run_glue", "run.evaluate_pretraining"]


@pytest.mark.parametrize("module", COMMAND_LINES)
def test_help_exits_0_with_the_usage_lines_intact(module):
    """--help exits 0; a usage example continued with `\\` keeps its line breaks
    (absl's help joins the lines of a docstring whose line ends in a `\\`)."""
    status, output = run_command_line(module, ["--help"])
    assert status == 0, output[-3000:]
    assert "Traceback" not in output
    docstring = output.split("\nflags:")[0]
    for line in docstring.splitlines():
        assert not re.search(r"\S {3,}(--|\[--)", line), line
    if module in ("run.run_pretraining", "run.extract_features"):
        lines = docstring.splitlines()
        first = next(i for i, line in enumerate(lines) if line.strip().startswith("python -m"))
        assert lines[first].endswith("\\") and lines[first + 1].strip().startswith("--"), lines


def test_demo_refuses_a_foreign_folder_and_deletes_nothing(tmp_path):
    """A non-empty folder that is not a demo output is refused, untouched."""
    (tmp_path / "thesis.tex").write_text("years of work")
    (tmp_path / "corpus.txt").write_text("a demo name, but not only demo files here")
    assert_one_line_error("run.demo", {"output_dir": tmp_path, "num_documents": 100},
                          "error: --output_dir: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "thesis.tex"]
    # Only demo names, but the user's own files: without the demo's marker, refused too.
    (tmp_path / "thesis.tex").unlink()
    (tmp_path / "vocab.txt").write_text("a user's vocabulary")
    assert_one_line_error("run.demo", {"output_dir": tmp_path, "num_documents": 100},
                          "error: --output_dir: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "vocab.txt"]


def test_demo_reuses_its_own_output(tmp_path):
    """A previous demo output (its marker and only the demo's files) is emptied
    and reused."""
    from run import demo
    for name in [demo.DEMO_MARKER, "corpus.txt", "vocab.txt", "features.jsonl",
                 ".corpus.txt.tmp-1-0123abcd"]:
        (tmp_path / name).write_text("old")
    for name in ["records", "pretrained", "tagger"]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "checkpoint").write_text("old")
    demo.prepare_output_dir(str(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == [demo.DEMO_MARKER]  # emptied, marked
    demo.prepare_output_dir(str(tmp_path / "new" / "dir"))
    assert [p.name for p in (tmp_path / "new" / "dir").iterdir()] == [demo.DEMO_MARKER]


def test_demo_shows_the_interpreter_and_times_per_call(monkeypatch):
    """The printed command starts with the interpreter; `time_passes` gives the seconds per
    call over as many calls as fill `min_seconds` (on a clock that moves 0.02 s per reading:
    3 calls, 0.02 s each)."""
    from run import demo
    shown = demo.shown_command([sys.executable, "-m", "run.run_pretraining", "--do_train"])
    assert shown.startswith("python") and shown.endswith(" -m run.run_pretraining --do_train")
    readings = iter(range(100))
    monkeypatch.setattr(demo, "time", types.SimpleNamespace(
        monotonic=lambda: next(readings) * 0.02))  # the demo's clock alone
    calls = []
    seconds = demo.time_passes(lambda: calls.append(1), min_seconds=0.05)
    assert len(calls) == 3 and seconds == pytest.approx(0.02)


@pytest.mark.slow
def test_demo_times_each_tokenizer_after_a_first_pass(tmp_path, monkeypatch):
    """The tokenize stage times each tokenizer only after an untimed pass over the whole corpus
    (the fast one's first call traces its graph: timed cold, it looked 30x slower), each timing
    runs that tokenizer alone, and the two give the same tokens on every line."""
    from data_tools import demo_corpus
    from run import demo
    from bert_tf.text.fast_tokenization import FastTokenizer
    from bert_tf.text.vocab_learning import build_vocab
    from bert_tf.tokenization import FullTokenizer
    passes = {"exact": 0, "fast": 0}  # FullTokenizer.tokenize calls, FastTokenizer batches
    exact_tokenize, fast_batch = FullTokenizer.tokenize, FastTokenizer.tokenize_batch

    def counted_exact(self, text):
        passes["exact"] += 1
        return exact_tokenize(self, text)

    def counted_fast(self, texts):
        passes["fast"] += 1
        return fast_batch(self, texts)

    timings = []

    def one_timed_call(work, min_seconds=0.5):
        before = dict(passes)
        work()
        timings.append((before, dict(passes)))
        return 1.0

    monkeypatch.setattr(FullTokenizer, "tokenize", counted_exact)
    monkeypatch.setattr(FastTokenizer, "tokenize_batch", counted_fast)
    monkeypatch.setattr(demo, "time_passes", one_timed_call)
    corpus = str(tmp_path / "corpus.txt")
    demo_corpus.write_corpus(corpus, num_documents=30, seed=1)
    build_vocab([corpus], str(tmp_path / "vocab.txt"), 300, do_lower_case=True)
    report = demo.tokenization_report(corpus, str(tmp_path / "vocab.txt"))
    lines = report["lines"]
    assert report["identical_lines"] == f"{lines}/{lines}"
    (exact_before, exact_after), (fast_before, fast_after) = timings
    assert exact_before == {"exact": lines, "fast": 1}  # both first passes done
    assert exact_after == {"exact": 2 * lines, "fast": 1}  # the exact one alone timed
    assert fast_before == exact_after and fast_after == {"exact": 2 * lines, "fast": 2}


@pytest.mark.parametrize("module, flags, expected", [
    ("run.run_classifier", ["--mixed_precision=fp8"], "--mixed_precision=fp8"),
    ("run.run_squad", ["--max_seq_length=many"], "--max_seq_length=many"),
    ("data_tools.build_vocab", ["--no_such_flag=1"], "no_such_flag"),
], ids=["invalid enum value", "invalid integer", "unknown flag"])
def test_bad_flags_are_one_clear_line(module, flags, expected):
    """absl's own flag errors (it would print the usage text and exit 1) are one `error:` line
    and exit 2, as the README promises for invalid flag values."""
    assert_one_line_error(module, flags, expected)


def test_tensorflow_start_up_noise_is_recognised_in_both_log_formats():
    """The command lines drop TensorFlow's start-up banner as TensorFlow 2.21 (absl's prefix)
    and 2.20 (its own) write it, and nothing else."""
    from bert_tf import tensorflow_start_up
    noise = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "I0000 00:00:1795577489.206691   26926 port.cc:153] oneDNN custom operations are on. x",
        "I0000 00:00:1795577489.207059   26926 cudart_stub.cc:31] Could not find cuda drivers "
        "on your machine, GPU will not be used.",
        "2026-11-25 04:48:22.641285: I tensorflow/core/util/port.cc:153] oneDNN custom "
        "operations are on. x",
        "2026-11-25 04:48:22.640903: I external/local_xla/xla/tsl/cuda/cudart_stub.cc:31] Could "
        "not find cuda drivers on your machine, GPU will not be used."]
    no_driver = [
        "E0000 00:00:1795577489.207059   26926 cuda_platform.cc:51] failed call to cuInit: x",
        "2026-11-25 04:48:34.870067: E external/local_xla/xla/stream_executor/cuda/"
        "cuda_platform.cc:51] failed call to cuInit: INTERNAL: CUDA error"]
    kept = ["error: --output_dir: x", "W0000 00:00:1.0 1 saver.cc:1] a real warning",
            "2026-11-25 04:48:22.688560: E tensorflow/core/x.cc:1] a real error"]
    noise_re = tensorflow_start_up.START_UP_NOISE
    no_driver_re = tensorflow_start_up.NO_DRIVER_NOISE
    assert all(noise_re.match(line) for line in noise)
    assert all(no_driver_re.match(line) for line in no_driver)
    assert not any(noise_re.match(line) or no_driver_re.match(line) for line in kept)


def test_importing_bert_tf_drops_the_start_up_banner_and_keeps_the_users_logging():
    """A script that imports bert_tf (the API, a notebook), with
    TF_CPP_MIN_LOG_LEVEL=3 or without it, sees none of TensorFlow's start-up lines (oneDNN's
    and the CUDA stubs' banner, the cuInit ERROR), and its own logging configuration (absl's
    verbosity, Python's root logger) is as it set it. The oracle: the same script importing
    TensorFlow first, before bert_tf, prints the banner (TensorFlow 2.21 whatever the level,
    2.20 without it)."""
    banner = ("oneDNN custom operations are on", "Could not find cuda drivers",
              "failed call to cuInit")
    script = ("import logging, sys\n"
              "from absl import logging as absl_logging\n"
              "logging.basicConfig(level=logging.INFO)\n"
              "absl_logging.set_verbosity(absl_logging.DEBUG)\n"
              "{first}\n"
              "from bert_tf import api\n"
              "import tensorflow as tf\n"
              "tf.config.list_physical_devices()\n"
              "print(absl_logging.get_verbosity() == absl_logging.DEBUG,\n"
              "      logging.getLogger().level == logging.INFO)\n")

    def run(first, level):
        env = {key: value for key, value in os.environ.items()
               if key != "TF_CPP_MIN_LOG_LEVEL"}
        env.update({"TF_CPP_MIN_LOG_LEVEL": level} if level else {})
        return subprocess.run([sys.executable, "-c", script.format(first=first)],
                              capture_output=True, text=True, timeout=300, env=env)

    for level in ("3", None):
        ours = run("", level)
        assert ours.returncode == 0 and ours.stdout.split() == ["True", "True"], ours.stderr
        assert not any(text in ours.stderr for text in banner), (level, ours.stderr)
    tensorflow_first = run("import tensorflow", None)
    # (oneDNN's line only where TensorFlow turns oneDNN on by default: CPUs with AVX-512.)
    assert any(text in tensorflow_first.stderr for text in banner), tensorflow_first.stderr


@pytest.mark.parametrize("module,flags", [
    ("data_tools.build_vocab", {"output_file": "{tmp}/vocab.txt", "vocab_size": "200"}),
    ("data_tools.extend_vocab", {"vocab_file": "{vocab}",
                                 "output_vocab_file": "{tmp}/vocab.txt"}),
    ("data_tools.create_pretraining_data", {"vocab_file": "{vocab}",
                                            "output_file": "{tmp}/o.tfrecord"}),
])
def test_undecodable_input_is_the_same_error_in_every_data_tool(tmp_path, uncased_vocab, module,
                                                                 flags):
    """Bytes that are not UTF-8 stop every data tool with the file, line and byte
    (build_vocab and extend_vocab as create_pretraining_data), exit 2, nothing written."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"a first line of text\nthe caf\xe9 line\nlast line\n")
    flags = {name: value.format(tmp=tmp_path, vocab=uncased_vocab)
             for name, value in flags.items()}
    assert_refused(module, dict(flags, input_file=corpus),
                   f"error: {corpus}:2: not valid UTF-8 (invalid continuation byte: byte 0xe9 "
                   f"at byte 8 of the line)", tmp_path)


# ---- Input that would make a silently wrong model, and what the command lines print.
def tsv_run(data_dir, vocab_file, config_file, output_dir, **flags):
    """run_classifier --task_name=tsv on data_dir's train.tsv (text, label) with a tiny model."""
    base = {"task_name": "tsv", "text_a_column": 0, "label_column": 1, "data_dir": data_dir,
            "vocab_file": vocab_file, "bert_config_file": config_file, "output_dir": output_dir,
            "do_train": True, "max_seq_length": SEQ, "train_batch_size": 8}
    base.update(flags)
    return "run.run_classifier", base


@pytest.fixture
def classifier_files(tmp_path, uncased_vocab):
    """tmp_path/data (for the test's train.tsv) and a tiny config of the uncased vocabulary."""
    (tmp_path / "data").mkdir()
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(TINY, vocab_size=30522)))
    return {"data": tmp_path / "data", "vocab": uncased_vocab,
            "config": tmp_path / "bert_config.json", "out": tmp_path / "out"}


MULTI_LABEL_JOINED = ("a fine short film\tpositive;short\nno bad moment\tpositive;has_negation\n"
                      "dull and long\tnegative\nfun\tpositive\n")


@pytest.mark.slow
def test_multi_label_labels_joined_by_another_separator_are_refused(classifier_files, tmp_path):
    """--multi_label labels joined by ";" read with the default --label_separator=","
    and no --label_list would make a model over `positive;short`, `short`, ...: refused, naming
    the file, line and both flags; nothing written, nothing lost."""
    f = classifier_files
    (f["data"] / "train.tsv").write_text(MULTI_LABEL_JOINED)
    line = assert_refused(*tsv_run(f["data"], f["vocab"], f["config"], f["out"],
                                   multi_label=True),
                          f"error: {f['data'] / 'train.tsv'}:1: label 'positive;short' holds "
                          f"';', which --label_separator=',' does not split: if ';' joins "
                          f"several labels, pass --label_separator=';'", tmp_path)
    assert "--label_list" in line
    assert not f["out"].exists()


def test_multi_label_separator_check_reads_the_labels_as_meant(tmp_path):
    """With the separator the file uses, or with the labels given (taken as
    listed), the same file is read; labels holding "/" (AG News' "Sci/Tech") are no
    separators; "|" is suggested as ";" is."""
    from bert_tf.errors import InputError
    from bert_tf.tasks.classification.reader import TsvProcessor

    (tmp_path / "train.tsv").write_text(MULTI_LABEL_JOINED)
    options = dict(text_a_column=0, label_column=1, multi_label=True)
    assert TsvProcessor(label_separator=";", **options).get_labels(tmp_path) == [
        "has_negation", "negative", "positive", "short"]
    listed = ["positive;short", "positive;has_negation", "negative", "positive"]
    processor = TsvProcessor(label_list=listed, **options)
    assert processor.get_labels(tmp_path) == listed
    assert processor.get_train_examples(tmp_path)[0].label == ("positive;short",)
    (tmp_path / "train.tsv").write_text("a\tSci/Tech,World\nb\tWorld\nc\tx|y\n")
    with pytest.raises(InputError, match=r"train.tsv:3: label 'x\|y' holds '\|', .*pass "
                                         r"label_separator='\|'"):
        TsvProcessor(**options).get_labels(tmp_path)
    (tmp_path / "train.tsv").write_text("a\tSci/Tech,World\nb\tWorld\n")
    assert TsvProcessor(**options).get_labels(tmp_path) == ["Sci/Tech", "World"]


def sst2_head(shared_data, path, lines=40):
    """SST-2's train.tsv cut to its first `lines` lines (its header `sentence\tlabel` first)."""
    head = (shared_data / "glue_data" / "SST-2" / "train.tsv").read_text(
        "utf-8").splitlines(keepends=True)[:lines]
    assert head[0] == "sentence\tlabel\n"
    path.write_text("".join(head), encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_tsv_header_is_refused_without_skip_header(classifier_files, shared_data, tmp_path):
    """--task_name=tsv on SST-2's first 40 lines (a header, then 39 rows labelled 0
    or 1) without --skip_header would train 3 classes, the third `label`: refused, naming
    line 1 and --skip_header, nothing written (the next test reads it with skip_header)."""
    f = classifier_files
    train = sst2_head(shared_data, f["data"] / "train.tsv")
    line = assert_refused(*tsv_run(f["data"], f["vocab"], f["config"], f["out"]),
                          f"error: {train}:1: label 'label' is on no other line of the file: "
                          f"line 1 looks like a header; pass --skip_header", tmp_path)
    assert "--label_list" in line
    assert not f["out"].exists()


def test_a_header_line_read_as_data_is_named_by_every_reader(shared_data, tmp_path):
    """Each way a header can be read as data: inferred labels (single and
    multi-label), given labels, regression, and the multiple-choice reader of a user's file;
    each error names line 1 and skip_header, and skip_header reads the file. Files where line
    1's label is rare but real are read: too few lines to tell, or labels that do not repeat."""
    from bert_tf.errors import InputError
    from bert_tf.tasks.classification.reader import TsvProcessor
    from bert_tf.tasks.multiple_choice.reader import ChoiceProcessor

    train = sst2_head(shared_data, tmp_path / "train.tsv")
    cases = [({}, "label 'label' is on no other line of the file: line 1 looks like a header; "
                  "pass skip_header (or, if it is a real label, give the labels: label_list)"),
             ({"multi_label": True}, "label 'label' is on no other line of the file"),
             ({"label_list": "0,1"}, "label 'label' is not one of the labels ['0', '1']; if "
                                     "line 1 is a header, pass skip_header"),
             ({"regression": True}, "regression label 'label' is not a finite number; if line 1 "
                                    "is a header, pass skip_header")]
    for options, expected in cases:
        with pytest.raises(InputError) as failure:
            TsvProcessor(text_a_column=0, label_column=1, **options).get_train_examples(tmp_path)
        assert str(failure.value).startswith(f"{train}:1: {expected}"), str(failure.value)
        examples = TsvProcessor(text_a_column=0, label_column=1, skip_header=True,
                                **options).get_train_examples(tmp_path)
        assert len(examples) == 39
    (tmp_path / "train.tsv").write_text("context\tending0\tending1\tlabel\nHe sat\ton it\tup\t0\n")
    reader = dict(context_column=0, ending_columns="1,2", label_column=3)
    with pytest.raises(InputError, match=r"train.tsv:1: label 'label' is not the index of an "
                                         r"ending: 0 to 1; if line 1 is a header, pass "
                                         r"skip_header$"):
        ChoiceProcessor(**reader).get_train_examples(tmp_path)
    assert len(ChoiceProcessor(skip_header=True, **reader).get_train_examples(tmp_path)) == 1
    # Not headers: a rare first label among 9 other lines, and labels that seldom repeat.
    rows = ["text\tneutral\n"] + [f"text {i}\t{'pos' if i % 2 else 'neg'}\n" for i in range(9)]
    (tmp_path / "train.tsv").write_text("".join(rows))
    assert TsvProcessor(text_a_column=0, label_column=1).get_labels(tmp_path) == [
        "neg", "neutral", "pos"]
    rows = [f"text {i}\ttopic{i % 7}\n" for i in range(12)]
    (tmp_path / "train.tsv").write_text("".join(rows))
    assert len(TsvProcessor(text_a_column=0, label_column=1).get_labels(tmp_path)) == 7


def extend_vocab_flags(files, **flags):
    base = {"mode": "append", "init_checkpoint": files["checkpoint"],
            "bert_config_file": files["config"], "vocab_file": files["vocab"],
            "input_file": files["root"] / "unknown_words.txt"}
    base.update(flags)
    return "data_tools.extend_vocab", base


def test_extend_vocab_append_without_output_dir_names_it(files):
    """--mode=append without --output_dir names --output_dir (where the checkpoint
    goes; the vocabulary's default follows from it), before any work."""
    (files["root"] / "unknown_words.txt").write_text("zebra quokka\nzebra quokka\n")
    assert_refused(*extend_vocab_flags(files),
                   "error: --output_dir: required with --mode=append", files["root"])


@pytest.mark.slow
def test_extend_vocab_append_prints_no_tensorflow_deprecation(files, tmp_path):
    """Appending writes the checkpoint's state file without TensorFlow's
    deprecated update_checkpoint_state (its 3-line warning); the folder still works as an
    init_checkpoint (tf.train.latest_checkpoint finds the checkpoint)."""
    import tensorflow as tf

    (files["root"] / "unknown_words.txt").write_text("zebra quokka\nzebra quokka\n")
    status, output = run_command_line(*extend_vocab_flags(files, output_dir=tmp_path / "out"))
    assert status == 0, output[-3000:]
    assert "deprecat" not in output.lower() and "Instructions for updating" not in output, output
    assert tf.train.latest_checkpoint(str(tmp_path / "out")) == str(
        tmp_path / "out" / "bert_model.ckpt")


def test_oneDNN_float16_fallback_line_is_dropped_and_nothing_else():
    """oneDNN's once-per-process ERROR line on a CPU without float16 arithmetic is
    recognised in both log formats and dropped by the filter that absorbs it; other lines on
    file descriptor 2 are kept."""
    from bert_tf import cli
    fallback = ["E0000 00:00:1795577489.207059   26926 util.cc:145] oneDNN supports DT_HALF "
                "only on platforms with AVX-512. Falling back to the default Eigen-based "
                "implementation if present.",
                "2026-11-25 04:48:22.640903: E tensorflow/core/util/util.cc:145] oneDNN supports "
                "DT_HALF only on platforms with AVX-512. Falling back to the default Eigen-based "
                "implementation if present."]
    kept = ["E0000 00:00:1.0 1 util.cc:1] a real error", "error: --output_dir: x"]
    assert all(cli._FLOAT16_FALLBACK.match(line) for line in fallback)
    assert not any(cli._FLOAT16_FALLBACK.match(line) for line in kept)
    script = ("import os, sys; from bert_tf import cli\n"
              "with cli.StderrFiltered(cli._FLOAT16_FALLBACK) as f:\n"
              "    os.write(2, sys.argv[1].encode())\n"
              "print(len(f.dropped))\n")
    result = subprocess.run([sys.executable, "-c", script, "\n".join(fallback + kept) + "\n"],
                            capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "2", result.stderr
    assert result.stderr.splitlines() == kept


def test_a_float16_run_shows_a_note_only_where_the_cpu_lacks_float16():
    """A float16 run on this CPU prints no `E0000 ... DT_HALF` line; where TensorFlow alone
    prints it (oneDNN on, and no float16 kernels: TensorFlow's rule is AVX512BW with
    AVX512-FP16 or AMX-FP16, or AVX-NE-CONVERT, read from /proc/cpuinfo here), one note says
    what happens instead."""
    from bert_tf import cli
    flags = set(pathlib.Path("/proc/cpuinfo").read_text().split())
    supported = ("avx512bw" in flags and ({"avx512_fp16", "amx_fp16"} & flags)
                 or "avx_ne_convert" in flags)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    plain = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf\n"  # what the note's function runs
                               "@tf.function\n"
                               "def product(a, b):\n"
                               "    return tf.matmul(a, b)\n"
                               "product(tf.ones([2, 2], tf.float16), tf.ones([2, 2], tf.float16))"],
        capture_output=True, text=True, timeout=120, env=env)
    assert plain.returncode == 0, plain.stderr[-2000:]
    falls_back = "DT_HALF" in plain.stderr
    assert not (supported and falls_back), plain.stderr
    result = subprocess.run(
        [sys.executable, "-c", "from bert_tf import cli; cli.quiet_float16_fallback_notice()"],
        capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "DT_HALF" not in result.stderr
    assert (cli.FLOAT16_FALLBACK_NOTE in result.stderr) == falls_back, result.stderr
