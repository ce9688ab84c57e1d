"""SQuAD post-processing time: the reference's write_predictions vs ours, whole dev set.

Both get the same examples and features (the reference's read_squad_examples and
convert_examples_to_features on ../shared/data/SQuAD/dev-v{1.1,2.0}.json, uncased vocabulary,
max_seq_length 384, doc_stride 128, max_query_length 64; ours are checked equal to them first)
and the same seeded float32 logits (padding positions 30 lower), n_best_size 20,
max_answer_length 30. Timed: the whole write_predictions call of each (candidates, n-best
texts, softmax, JSON files). The three files are compared byte for byte.

    python -m bench.finetuning.squad_postprocess             # dev v1.1
    python -m bench.finetuning.squad_postprocess --version=2.0 --rounds=3
    python -m bench.finetuning.squad_postprocess --ties      # logits rounded to 1 decimal
"""
import argparse
import os
import pathlib
import tempfile
import time

from bench import harness
from bench.common import DATA, VOCAB, import_refbert

FIELDS = ("unique_id", "example_index", "doc_span_index", "tokens", "token_to_orig_map",
          "token_is_max_context", "input_ids", "input_mask", "segment_ids")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="1.1", choices=("1.1", "2.0"))
    harness.add_rounds(parser, 1, "rounds of both (the best of them is printed)")
    parser.add_argument("--ties", action="store_true", help="round logits to 1 decimal")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    v2 = args.version == "2.0"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    from absl import flags

    from bert_tf.tasks.squad import postprocess, preprocessor, reader
    from bert_tf.tokenization import FullTokenizer
    refbert = import_refbert()
    rs = refbert.import_reference("run_squad")
    refbert.v1.logging.set_verbosity(refbert.v1.logging.ERROR)
    flags.FLAGS.version_2_with_negative = v2
    flags.FLAGS.null_score_diff_threshold = 0.0
    flags.FLAGS.verbose_logging = False

    path = str(DATA / "SQuAD" / f"dev-v{args.version}.json")
    examples = rs.read_squad_examples(path, is_training=False)
    ref_features = []
    rs.convert_examples_to_features(examples, rs.tokenization.FullTokenizer(str(VOCAB), True),
                                    384, 128, 64, False, ref_features.append)
    our_examples = reader.read_squad_examples(path, False, v2)
    our_features = preprocessor.convert_examples_to_features(
        our_examples, FullTokenizer(str(VOCAB), True), 384, 128, 64, False)
    assert len(our_features) == len(ref_features)
    for a, b in zip(ref_features, our_features):
        assert all(getattr(a, name) == getattr(b, name) for name in FIELDS), a.unique_id
    print(f"dev v{args.version}: {len(examples)} questions, {len(ref_features)} features "
          f"(ours equal the reference's)")

    rng = np.random.default_rng(args.seed)
    unique_ids = np.array([f.unique_id for f in ref_features])
    starts = rng.normal(size=(len(unique_ids), 384)).astype(np.float32)
    ends = rng.normal(size=(len(unique_ids), 384)).astype(np.float32)
    # Padding positions low, as a trained model has them (with none of a question's windows
    # holding a valid span, the reference's SQuAD 2.0 code fails on its best non-null entry).
    for row, feature in enumerate(ref_features):
        starts[row, len(feature.tokens):] -= 30.0
        ends[row, len(feature.tokens):] -= 30.0
    if args.ties:
        starts, ends = np.round(starts, 1), np.round(ends, 1)
    # The reference's predict loop turns each logit into a Python float.
    ref_results = [rs.RawResult(unique_id=int(u), start_logits=[float(x) for x in s],
                                end_logits=[float(x) for x in e])
                   for u, s, e in zip(unique_ids, starts, ends)]

    names = (postprocess.PREDICTIONS_FILE, postprocess.NBEST_FILE,
             postprocess.NULL_ODDS_FILE)
    with tempfile.TemporaryDirectory() as tmp:
        def measure(peer, round_index):
            out = pathlib.Path(tmp, peer)
            out.mkdir(exist_ok=True)
            paths = [str(out / n) for n in names]
            start = time.perf_counter()
            if peer == "reference":
                rs.write_predictions(examples, ref_features, ref_results, 20, 30, True, *paths)
            else:
                postprocess.write_predictions(
                    our_examples, our_features, unique_ids, starts, ends, 20, 30, True, *paths,
                    version_2_with_negative=v2)
            return time.perf_counter() - start

        times = harness.interleave(args.rounds, ("reference", "bert_tf"), measure)
        for name in names[:3 if v2 else 2]:
            a = pathlib.Path(tmp, "reference", name).read_bytes()
            b = pathlib.Path(tmp, "bert_tf", name).read_bytes()
            print(f"{name}: {'identical' if a == b else 'DIFFERENT'} ({len(a):,} bytes)")
    ref, ours = (harness.median(times[peer], statistic=min) for peer in ("reference", "bert_tf"))
    print(f"write_predictions, best of {args.rounds}: reference {ref:.2f} s, bert_tf "
          f"{ours:.2f} s ({harness.ratio(ref, ours, 1)})")


if __name__ == "__main__":
    main()
