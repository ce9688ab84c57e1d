"""Create masked-LM / next-sentence TFRecords for BERT pretraining (the original's script).

Same flags, defaults and records as google-research/bert's create_pretraining_data.py: for the
same input files, vocabulary, flags and seed, every record decodes to the same features, in the
same order, in the same output file, faster (see bert_tf/data/pretraining/ for how, and
docs/create_pretraining_data.md for the figures). Whole-word masking (--do_whole_word_mask) is
the GitHub master version's.

    python -m data_tools.create_pretraining_data \\
      --input_file=corpus/*.txt --output_file=records.tfrecord --vocab_file=vocab.txt

Input: one sentence per line, a blank line between documents.

Streaming mode, for corpora that do not fit in memory: set --num_workers and/or
--output_shards. The input is processed in windows of about --window_bytes of text, each by
one of --num_workers processes with its own seed (--random_seed + window number), random-next
sentences drawn from the same window; records go round-robin over the output shards. Each
shard is deterministic for a given seed, --window_bytes and shard count (whatever
--num_workers is), and memory stays bounded as the corpus grows. It is not the original's
single global shuffle (which needs every instance in memory).

Beyond the original's records (bert_tf.data.pretraining.record_layout.PretrainingLayout):
--masking=dynamic (masks drawn when read), --objective=mlm (no next-sentence pairs),
--pack_sequences (several instances per record), --full_windows (every input token in a record)
and --cross_documents; in every mode. --recipe=efficient sets them (docs/run_pretraining.md has
the recipes). See docs/create_pretraining_data.md.

--runner=DirectRunner (or DataflowRunner, FlinkRunner, SparkRunner with --beam_options) runs
the streaming mode as an Apache Beam pipeline (bert_tf/data/pretraining/beam.py): the same
output files, byte for byte, on one machine or many.

Output files are written under a temporary name and renamed when complete; then
<output_file>.manifest.json and <output_file>.vocab.txt beside them say how they were made, for
run_pretraining (bert_tf/data/pretraining/manifest.py).
"""
import functools
import os
import sys

from absl import flags

from bert_tf.cli import (expand_globs, refuse_flags_that_cannot_act, run_main,
                         set_flag_defaults)
from bert_tf.errors import InputError, flag_error
from bert_tf.io_utils import check_output_file, split_comma_list

FLAGS = flags.FLAGS

# The original's flags, names and defaults.
flags.DEFINE_string("input_file", None,
                    "Input raw text file (or comma-separated list of files; globs allowed). One "
                    "sentence per line, a blank line between documents.")
flags.DEFINE_string("output_file", None,
                    "Output TF example file (or comma-separated list of files; records go "
                    "round-robin across them).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for uncased models and "
                  "False for cased models.")
flags.DEFINE_bool("do_whole_word_mask", False,
                  "Whether to use whole word masking rather than per-WordPiece masking.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10,
                     "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Probability of creating sequences which are shorter than the maximum length.")

# bert_tf additions.
flags.DEFINE_integer("num_workers", None,
                     "Streaming mode: number of worker processes (default when only "
                     "--output_shards is set: one per CPU). Setting it selects the streaming "
                     "mode; the output does not depend on it.")
flags.DEFINE_integer("output_shards", None,
                     "Streaming mode: number of output files. With a single --output_file "
                     "PATH they are PATH-00000-of-0000N, ...; or list N files in --output_file. "
                     "Setting it selects the streaming mode.")
flags.DEFINE_integer("window_bytes", 1_000_000,
                     "Streaming mode: bytes of text per window (cut at the next document "
                     "boundary). A window is shuffled and masked on its own, and random-next "
                     "sentences come from its documents; memory grows with it.")
flags.DEFINE_bool("gzip", False,
                  "Write GZIP-compressed TFRecord files (read with "
                  "TFRecordDataset(..., compression_type='GZIP')).")
flags.DEFINE_enum("tokenizer", "full", ["full", "fast"],
                  "Tokenizer implementation, both with the original's exact output: 'full' "
                  "(bert_tf.tokenization.FullTokenizer with a word cache; starts instantly) or "
                  "'fast' (bert_tf.text.fast_tokenization.FastTokenizer; imports TensorFlow).")
flags.DEFINE_float("progress_interval", 10.0, "Seconds between progress lines.")
flags.DEFINE_string("runner", None,
                    "Run the streaming mode as an Apache Beam pipeline on this runner "
                    "(DirectRunner, DataflowRunner, FlinkRunner, SparkRunner, ...): the same "
                    "output files as the streaming mode. DirectRunner runs --num_workers "
                    "processes. Needs apache-beam (pip install 'apache-beam>=2.60', the beam "
                    "extra).")
flags.DEFINE_enum("masking", "static", ["static", "dynamic"],
                  "'static' (the original's): masks drawn once when the records are written "
                  "(--dupe_factor copies with different masks). 'dynamic': no masks written; "
                  "each record has masked_lm_candidates (0 never masked, 1 starts a masking "
                  "unit, 2 joins the unit before it) and the reader draws new masks every "
                  "epoch. --dupe_factor defaults to 1 then (set it to repeat the data).")
flags.DEFINE_enum("objective", "mlm_nsp", ["mlm_nsp", "mlm"],
                  "'mlm_nsp' (the original's): sentence pairs A/B, half with a random B, and "
                  "next_sentence_labels. 'mlm': masked-LM only: one contiguous span of "
                  "consecutive sentences of one document per instance, [CLS] text [SEP], no "
                  "next-sentence label.")
flags.DEFINE_bool("pack_sequences", False,
                  "Pack several instances into each record of exactly --max_seq_length tokens "
                  "(each keeps its [CLS]/[SEP] and segment ids; records get position_ids and "
                  "sequence_ids, and with next-sentence labels next_sentence_positions and "
                  "next_sentence_weights). Same instances as without it, fewer padded rows.")
flags.DEFINE_integer("max_sequences_per_row", None,
                     "With --pack_sequences: at most this many instances in a record (the "
                     "size of the per-sequence next-sentence features). Default: with "
                     "next-sentence pairs min(8, --max_seq_length // 5) (each slot costs every "
                     "row a last-layer position; more than 8 sequences a row is rare); with "
                     "--objective=mlm --max_seq_length // 3, which never limits the packing.")
flags.DEFINE_bool("full_windows", False,
                  "With --objective=mlm: every input token in a record. Each document's tokens "
                  "(its lines concatenated) are cut into consecutive windows of "
                  "--max_seq_length - 2 tokens, each instance [CLS] window [SEP]; only a "
                  "document's last window is shorter. No short sequences (--short_seq_prob); "
                  "--dupe_factor copies of the same windows, with other static masks.")
flags.DEFINE_bool("cross_documents", False,
                  "With --full_windows: windows run across document boundaries (RoBERTa's "
                  "FULL-SENTENCES): the documents in input order are one stream with a [SEP] "
                  "between consecutive documents (never masked), cut into full windows; only "
                  "the stream's last window is shorter (in the streaming mode each "
                  "--window_bytes window is a stream of its own).")
flags.DEFINE_enum("recipe", "original", ["original", "efficient"],
                  "The defaults of a named pretraining recipe (docs/run_pretraining.md has the "
                  "table); each flag given still wins. 'original': the 2018 release's. "
                  "'efficient': --objective=mlm --masking=dynamic --full_windows "
                  "--pack_sequences --dupe_factor=1 --masked_lm_prob=0.15 "
                  "--max_predictions_per_seq=ceil(--masked_lm_prob * --max_seq_length). The "
                  "records' manifest names it, and run_pretraining takes its training defaults "
                  "from it.")
flags.DEFINE_string("beam_options", "",
                    "With --runner: more Beam pipeline options, one shell-quoted string, e.g. "
                    "\"--project=P --region=R --temp_location=gs://B/tmp\" for Dataflow.")


def streaming_output_files(output_files, output_shards):
    """The shard file names: the listed files, or PATH-0000i-of-0000N for one PATH."""
    if output_shards is None or output_shards == len(output_files):
        return output_files
    if output_shards < 1:
        raise flag_error("output_shards", f"must be at least 1, got {output_shards}")
    if len(output_files) != 1:
        raise flag_error("output_shards", f"is {output_shards} but --output_file lists "
                                          f"{len(output_files)} files (give one path, or as many "
                                          "as shards)")
    return [f"{output_files[0]}-{i:05d}-of-{output_shards:05d}" for i in range(output_shards)]


def main(argv):
    del argv
    # The first time numba loads compiled code it imports scipy.linalg (a few hundred ms of
    # start-up) only to look for a BLAS; our compiled code does no linear algebra.
    sys.modules.setdefault("scipy.linalg.cython_blas", None)
    streaming = (FLAGS.num_workers is not None or FLAGS.output_shards is not None
                 or FLAGS.runner is not None)
    from bert_tf.data.pretraining import recipes
    recipe = recipes.recipe(FLAGS.recipe)
    by_recipe = recipes.settle(recipe.data_flags, FLAGS.flag_values_dict(),
                               {name for name in recipe.data_flags if FLAGS[name].present})
    set_flag_defaults(by_recipe, f"--recipe={recipe.name}")
    inactive = {}
    if not FLAGS.pack_sequences:
        inactive["max_sequences_per_row"] = "only with --pack_sequences"
    if not streaming:
        inactive["window_bytes"] = ("only the streaming mode reads its input in windows "
                                    "(--num_workers, --output_shards or --runner)")
    if FLAGS.runner is None:
        inactive["beam_options"] = "only with --runner (an Apache Beam pipeline)"
    if FLAGS.full_windows:
        inactive["short_seq_prob"] = (
            "--full_windows cuts every window to --max_seq_length - 2 tokens (no shorter target "
            "length)" + (f"; --recipe={recipe.name} sets it" if "full_windows" in by_recipe
                         else ""))
    refuse_flags_that_cannot_act(inactive)
    # The library after the flags are parsed, and after the line above (it imports numba):
    # --help and flag errors come without numba's start-up.
    from bert_tf.data.pretraining import manifest
    from bert_tf.data.pretraining.corpus import make_tokenizer
    from bert_tf.data.pretraining.generate import create_pretraining_data, default_processes
    from bert_tf.data.pretraining.options import InstanceOptions
    from bert_tf.data.pretraining.streaming import create_pretraining_data_streaming
    # Dynamic masks differ every epoch: copies of the data with other masks are not
    # needed, so --dupe_factor is 1 unless given.
    dupe_factor = (FLAGS.dupe_factor if FLAGS.masking == "static" or FLAGS["dupe_factor"].present
                   else 1)
    options = InstanceOptions(
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        dupe_factor=dupe_factor,
        masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
        masking=FLAGS.masking,
        objective=FLAGS.objective,
        pack_sequences=FLAGS.pack_sequences,
        max_sequences_per_row=FLAGS.max_sequences_per_row or 0,
        full_windows=FLAGS.full_windows,
        cross_documents=FLAGS.cross_documents)
    try:
        options.validate()
    except InputError as e:
        if e.argument not in by_recipe:
            raise
        # A value the recipe set that a flag given against it cannot work with.
        message = str(e).split(": ", 1)[-1]
        value = by_recipe[e.argument]
        yourself = (f"--no{e.argument}" if value is True else f"--{e.argument}=..." if
                    value is not False else f"--{e.argument}")
        raise flag_error(e.argument, f"{message} (set by --recipe={recipe.name}: give another "
                                     f"--recipe, or {yourself})") from None
    input_files = expand_globs(FLAGS.input_file, "input_file")
    output_files = split_comma_list(FLAGS.output_file)
    if not output_files:
        raise flag_error("output_file", "no output file given")
    if streaming:
        output_files = streaming_output_files(output_files, FLAGS.output_shards)
        num_workers = FLAGS.num_workers or os.cpu_count() or 1
        if num_workers < 1:
            raise flag_error("num_workers", f"must be at least 1, got {num_workers}")
    for path in output_files + manifest.written_paths(output_files):
        check_output_file(path, "output_file", inputs={"input_file": input_files,
                                                       "vocab_file": FLAGS.vocab_file})
    tokenizer_factory = functools.partial(make_tokenizer, FLAGS.tokenizer, FLAGS.vocab_file,
                                          FLAGS.do_lower_case)
    tokenizer = tokenizer_factory()  # also checks the vocabulary before any work

    log = sys.stderr
    if dupe_factor != FLAGS.dupe_factor:
        print("--masking=dynamic: --dupe_factor=1 (the reader draws new masks every epoch; set "
              "--dupe_factor to repeat the data)", file=log)
    print("*** Reading from input files ***", file=log)
    for path in input_files:
        print(f"  {path}", file=log)
        if "://" not in path and os.path.isfile(path) and os.path.getsize(path) == 0:
            print(f"warning: {path} is empty", file=log)
    if FLAGS.runner:
        # Apache Beam: optional, slow to import.
        from bert_tf.data.pretraining import beam as pretraining_beam

        summary = pretraining_beam.create_pretraining_data_beam(
            input_files, output_files, tokenizer_factory, options,
            pretraining_beam.pipeline_options(FLAGS.runner, num_workers, FLAGS.beam_options),
            random_seed=FLAGS.random_seed, window_bytes=FLAGS.window_bytes, gzip=FLAGS.gzip,
            log=lambda message: print(message, file=log))
    elif streaming:
        summary = create_pretraining_data_streaming(
            input_files, output_files, tokenizer, options, random_seed=FLAGS.random_seed,
            num_workers=num_workers, window_bytes=FLAGS.window_bytes, gzip=FLAGS.gzip,
            progress_interval=FLAGS.progress_interval)
    else:
        summary = create_pretraining_data(
            input_files, output_files, tokenizer, options, random_seed=FLAGS.random_seed,
            gzip=FLAGS.gzip,
            # FastTokenizer imports TensorFlow, which must not be forked: one process.
            processes=(1 if FLAGS.tokenizer == "fast"
                       else default_processes(input_files)),
            progress_interval=FLAGS.progress_interval)
    # Beside the records once they are in place: how they were made, for run_pretraining.
    manifest_files = manifest.write(
        manifest.build(options, FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.recipe,
                       FLAGS.random_seed, FLAGS.gzip, summary),
        output_files, FLAGS.vocab_file, summary.records_per_file)
    # Named once written: an input that makes no record (an empty corpus) is an error that
    # writes nothing.
    print("*** Wrote output files ***", file=log)
    for path in output_files:
        print(f"  {path}", file=log)
    for path in manifest_files:
        print(f"  {path} (how they were made)", file=log)
    print(summary.format(), file=log)


def console_main():
    flags.mark_flag_as_required("input_file")
    flags.mark_flag_as_required("output_file")
    flags.mark_flag_as_required("vocab_file")
    run_main(main)


if __name__ == "__main__":
    console_main()
