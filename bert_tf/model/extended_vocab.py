"""A model for an extended vocabulary: `extend_vocab` writes the vocabulary with the words that
bert_tf.text.vocab_extension chooses (its module docstring: which words, and the two modes) and,
for appended words, the checkpoint's vocabulary-sized variables grown to match
(`resize_vocabulary`), with its config and casing: a model directory.

TensorFlow and the checkpoint modules are imported once the arguments, the vocabulary and the
output folder are checked (seconds of start-up).
"""
import os
import time

import numpy as np

from bert_tf import io_utils, progress, tokenization
from bert_tf.errors import InputError, arg, argument_error
from bert_tf.io_utils import atomic_open
from bert_tf.text.vocab_extension import (MODES, check_free_slots, check_single_pieces,
                                          extended_lines, rank_words, read_vocab_lines)

# The original's variables with a row per vocabulary entry: the token embeddings, and the masked
# LM's output bias (its output weights are the embeddings, tied).
VOCABULARY_VARIABLES = ("bert/embeddings/word_embeddings", "cls/predictions/output_bias")


def vocabulary_checkpoint_weights(init_checkpoint, bert_config):
    """`original_named_weights` of a checkpoint whose vocabulary is to grow, checked: its
    encoder layers must be `bert_config`'s, its word embeddings [vocab_size, hidden_size] of
    it (InputError naming init_checkpoint otherwise: another model's checkpoint, or none)."""
    from bert_tf.model import checkpoints

    weights, left_out = checkpoints.original_named_weights(init_checkpoint, bert_config)
    name = VOCABULARY_VARIABLES[0]
    if name not in weights:
        raise argument_error("init_checkpoint", f"{init_checkpoint} has no {name}")
    shape = tuple(np.shape(weights[name]))
    if shape != (bert_config.vocab_size, bert_config.hidden_size):
        raise argument_error("init_checkpoint", f"{init_checkpoint}'s {name} is {list(shape)}, "
                                                f"not [vocab_size, hidden_size] = "
                                                f"[{bert_config.vocab_size}, "
                                                f"{bert_config.hidden_size}] of "
                                                f"{arg('bert_config_file')}")
    return weights, left_out


def resize_vocabulary(weights, new_vocab_size, initializer_range=0.02, seed=None):
    """{original name: array} with `VOCABULARY_VARIABLES` grown to `new_vocab_size` rows: the
    old rows as they are, new embedding rows drawn as the original initialises them
    (`create_initializer`: truncated normal, stddev `initializer_range`, redrawn beyond 2
    stddev; `seed` makes them reproducible), new output-bias entries 0 (its
    zeros_initializer). The other weights are the same arrays."""
    from bert_tf.model import layers

    embedding_name, bias_name = VOCABULARY_VARIABLES
    embeddings = np.asarray(weights[embedding_name])
    old_size, hidden_size = embeddings.shape
    if new_vocab_size < old_size:
        raise ValueError(f"cannot shrink the vocabulary from {old_size} to {new_vocab_size}")
    resized = dict(weights)
    new_rows = layers.truncated_normal(initializer_range, seed=seed)(
        (new_vocab_size - old_size, hidden_size))
    resized[embedding_name] = np.concatenate(
        [embeddings, np.asarray(new_rows).astype(embeddings.dtype)])
    if bias_name in weights:
        bias = np.asarray(weights[bias_name])
        resized[bias_name] = np.concatenate([bias, np.zeros(new_vocab_size - old_size,
                                                            bias.dtype)])
    return resized


def extend_vocab(vocab_file, input_files, output_vocab_file, *, mode="unused", num_words=100,
                 min_count=2, do_lower_case=True, init_checkpoint=None, bert_config=None,
                 output_dir=None, seed=12345, log=None):
    """Chooses `num_words` words of the corpus `input_files` (bert_tf.text.vocab_extension) and
    writes the extended vocabulary to `output_vocab_file`; with mode "append", also the
    resized `init_checkpoint` (`output_dir`/bert_model.ckpt, in the original naming, new rows
    drawn with `seed`), `output_dir`/bert_config.json (`bert_config` with the new
    vocab_size) and the casing (bert_tf.model.directory.RECORD_FILE): with the vocabulary
    there too (the command line's default), a model directory. Everything is checked before
    the corpus is read; on failure nothing is left.

    Returns a dict: the `words` added ({word, id, count, pieces} each, best first), the
    `vocab_size` (lines) written, and figures of the corpus and the checkpoint.
    """
    from bert_tf.text.vocab_learning import count_corpus_words

    log = log or progress.log
    start = time.monotonic()
    if mode not in MODES:
        raise argument_error("mode", f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    for name, value in (("num_words", num_words), ("min_count", min_count)):
        if value < 1:
            raise argument_error(name, f"must be a positive integer, got {value}")
    lines = read_vocab_lines(vocab_file)
    checkpoint_path = None
    if mode == "unused":
        for name, value in (("init_checkpoint", init_checkpoint), ("output_dir", output_dir)):
            if value:
                raise argument_error(name, f"only with {arg('mode')}=append: the [unusedN] "
                                           f"slots keep the checkpoint as it is")
        check_free_slots(vocab_file, lines, num_words)
    else:
        for name, value in (("init_checkpoint", init_checkpoint), ("output_dir", output_dir),
                            ("bert_config", bert_config)):
            if not value:
                raise argument_error(name, f"required with {arg('mode')}=append (the "
                                           f"checkpoint gets a row per new word)")
        from bert_tf.model import checkpoints, directory
        tokenization.check_vocab_fits(vocab_file, bert_config.vocab_size)
        io_utils.check_writable_dir(output_dir)
        if io_utils.same_or_inside(init_checkpoint, output_dir) or (
                os.path.isdir(output_dir) and os.listdir(output_dir)):
            raise argument_error("output_dir", f"{output_dir} must be a new or empty folder "
                                               f"(not the checkpoint's): nothing was written")
        weights, left_out = vocabulary_checkpoint_weights(init_checkpoint, bert_config)
        checkpoint_path = os.path.join(output_dir, "bert_model.ckpt")

    counts, stats = count_corpus_words(input_files, do_lower_case, "extend_vocab")
    vocab = tokenization.load_vocab(vocab_file)
    candidates = rank_words(counts, vocab, min_count)
    if not candidates:
        raise InputError(f"{', '.join(input_files)}: no word seen {min_count}+ times "
                         f"({arg('min_count')}) that the vocabulary splits: nothing to add")
    chosen = candidates[:num_words]
    words = [c.word for c in chosen]
    new_lines, ids = extended_lines(lines, words, mode)
    check_single_pieces(new_lines, words, do_lower_case)

    summary = {"mode": mode, "vocab_size": len(new_lines), "words_added": len(words),
               "words_asked": num_words, "candidates": len(candidates),
               "pieces_saved": sum(c.saved_pieces for c in chosen),
               "corpus_tokens": stats["tokens"]}
    if mode == "append":
        new_vocab_size = max(bert_config.vocab_size, len(new_lines))
        old_size = bert_config.vocab_size
        weights = resize_vocabulary(weights, new_vocab_size, bert_config.initializer_range,
                                    seed)
        with io_utils.removed_on_failure(output_dir):
            checkpoints.write_named_checkpoint(weights, checkpoint_path)
            bert_config.replace(vocab_size=new_vocab_size).to_json_file(
                os.path.join(output_dir, directory.CONFIG_FILE))
            _write_lines(output_vocab_file, new_lines)
            # The casing the words were counted with: the folder is a whole model directory.
            directory.write_record(output_dir, {"do_lower_case": bool(do_lower_case)})
        summary.update(old_vocab_size=old_size, new_vocab_size=new_vocab_size,
                       checkpoint=checkpoint_path, left_out=len(left_out))
        if left_out:
            log(f"[extend_vocab] not carried into {checkpoint_path}: {', '.join(left_out[:5])}"
                + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else ""))
    else:
        _write_lines(output_vocab_file, new_lines)
    summary["seconds"] = round(time.monotonic() - start, 2)
    for c, i in zip(chosen[:20], ids):
        log(f"[extend_vocab] id {i}: {c.word!r} seen {c.count} times, was "
            + ("[UNK]" if c.is_unknown else f"{c.pieces} pieces"))
    if len(chosen) > 20:
        log(f"[extend_vocab] ... and {len(chosen) - 20} more")
    log(f"[extend_vocab] wrote {output_vocab_file}  "
        + "  ".join(f"{k}={v}" for k, v in summary.items()))
    summary["words"] = [{"word": c.word, "id": i, "count": c.count, "pieces": c.pieces}
                        for c, i in zip(chosen, ids)]
    return summary


def _write_lines(path, lines):
    with atomic_open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))

