"""create_pretraining_data on Apache Beam (--runner): the streaming mode's files, byte for byte.

Oracle: the streaming mode (tests/data/pretraining/test_create_pretraining_data.py checks it against the
reference release, window by window) on the same input, flags, seed, window size and shard
count.
"""
import pytest

from bert_tf.data.pretraining.corpus import iter_window_spans, iter_windows, read_window_lines
from conftest import require_module
from test_create_pretraining_data import read_records, run_cli, wikitext_files  # noqa: F401 (a fixture)


@pytest.fixture
def beam():
    """Apache Beam (the test extra; a user's `pip install -e .[beam]`)."""
    return require_module("apache_beam", "create_pretraining_data --runner")

SHARDS = [f"-{i:05d}-of-00003" for i in range(3)]


def test_beam_writes_the_streaming_modes_files(beam, wikitext_files, uncased_vocab,  # noqa: F811
                                                tmp_path):
    common = [f"--input_file={','.join(map(str, wikitext_files))}",
              f"--vocab_file={uncased_vocab}", "--dupe_factor=2", "--window_bytes=40000",
              "--output_shards=3"]
    run_cli(*common, "--num_workers=1", f"--output_file={tmp_path / 'streaming'}")
    in_memory = run_cli(*common, "--runner=DirectRunner", "--num_workers=1",
                        f"--output_file={tmp_path / 'beam'}")
    run_cli(*common, "--runner=DirectRunner", "--num_workers=2",
            f"--output_file={tmp_path / 'beam2'}")
    run_cli(*common, "--runner=DirectRunner", "--gzip", f"--output_file={tmp_path / 'gz'}")
    streaming = [(tmp_path / f"streaming{s}").read_bytes() for s in SHARDS]
    # Several windows, so the order of windows matters.
    assert len(list(iter_windows([str(p) for p in wikitext_files], 40000))) >= 5
    assert [(tmp_path / f"beam{s}").read_bytes() for s in SHARDS] == streaming
    assert [(tmp_path / f"beam2{s}").read_bytes() for s in SHARDS] == streaming
    assert ([read_records(tmp_path / f"gz{s}", "GZIP") for s in SHARDS]
            == [read_records(tmp_path / f"streaming{s}") for s in SHARDS])
    # The summary comes back through Beam's metrics; no part file is left behind.
    counts = [len(read_records(tmp_path / f"streaming{s}")) for s in SHARDS]
    assert f"Wrote {sum(counts)} instances" in in_memory.stderr
    assert "mean masked fraction 0.1" in in_memory.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_window_spans_read_back_the_windows(tmp_path):
    # Edge cases: a document continuing into the next file, a file without a final newline,
    # an empty file, multi-byte UTF-8, blank lines of spaces, tiny read blocks.
    texts = ["héllo wörld\nsecond line\n\nnext doc\n  \n", "", "continues ü\nno newline",
             "\nthird file\n\n\nlast"]
    files = []
    for i, text in enumerate(texts):
        path = tmp_path / f"in{i}.txt"
        path.write_bytes(text.encode("utf-8"))
        files.append(str(path))
    for window_bytes in (1, 8, 20, 10**6):
        for block_bytes in (3, 64, 1 << 20):
            windows = list(iter_window_spans(files, window_bytes, block_bytes,
                                                              with_lines=True))
            lines = [line for _, window in windows for line in window]
            assert lines == list(iter_windows(files, 10**9))[0]
            for spans, window in windows:
                assert read_window_lines(spans) == window
            covered = [(path, start, stop) for spans, _ in windows for path, start, stop in spans]
            for path in files:  # the spans tile each file's bytes, in order
                mine = [(start, stop) for p, start, stop in covered if p == path]
                size = len(open(path, "rb").read())
                assert [0] + [stop for _, stop in mine] == [start for start, _ in mine] + [size]


def test_bad_runner_and_empty_input_are_errors(beam, uncased_vocab, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("one sentence.\n\nanother one.\n", encoding="utf-8")
    common = [f"--vocab_file={uncased_vocab}", f"--output_file={tmp_path / 'o'}"]
    result = run_cli(f"--input_file={text}", "--runner=NoSuchRunner", *common, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--runner" in result.stderr and "NoSuchRunner" in result.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    result = run_cli(f"--input_file={empty}", "--runner=DirectRunner", *common, check=False)
    assert result.returncode == 2 and "no text in" in result.stderr
    assert not list(tmp_path.glob("o*")) and not list(tmp_path.glob(".o*"))
    # A file the user has at the output path is left as it was (the run writes its shards
    # under temporary names, renamed only once it has counted documents).
    (tmp_path / "o").write_text("the user's", encoding="utf-8")
    result = run_cli(f"--input_file={empty}", "--runner=DirectRunner", *common, check=False)
    assert result.returncode == 2 and "no text in" in result.stderr
    assert (tmp_path / "o").read_text(encoding="utf-8") == "the user's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt", "in.txt", "o"]
