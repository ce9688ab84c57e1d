"""A vocabulary file's identity: its tokens as the tokenizer reads them (`vocab_lines`), their
checksum (`vocabulary_sha256`) and whether two files give every token the same id. No
TensorFlow (remote files through `bert_tf.io_utils.open_input`): the record tools use it too.
"""
import hashlib

from bert_tf.io_utils import open_input


def vocab_lines(path):
    """A vocabulary's tokens as the tokenizer reads them (lines split on "\\n", stripped)."""
    with open_input(path, "vocabulary file") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.strip() for line in lines]


def vocabulary_sha256(path):
    """The SHA-256 of a vocabulary's tokens as the tokenizer reads them (one a line): two
    files give the same checksum when they give every token the same id."""
    return tokens_sha256(vocab_lines(path))


def tokens_sha256(lines):
    """`vocabulary_sha256` of a vocabulary's `vocab_lines`."""
    return hashlib.sha256(b"\n".join(lines)).hexdigest()


def same_vocabulary(first, second):
    """Whether two vocabulary files give every token the same id."""
    return vocab_lines(first) == vocab_lines(second)
