"""A fast batch tokenizer with exactly `FullTokenizer`'s output, plus character offsets.

`FastTokenizer(vocab_file, do_lower_case)` returns, for every input, the same word pieces as the
original release's `FullTokenizer` (tests compare every distinct text of ../shared/data and
generated adversarial text with the reference), and for each piece its `(start, end)` character
span in the input text (for SQuAD answers and token classification labels).

Built on tensorflow-text's `FastWordpieceTokenizer` (C++, linear-time MaxMatch: the same result
as the original's greedy longest-match-first WordPiece). Each text takes one of three routes:
  * "ascii": ASCII text without control characters. For it the original is `str.lower()`, a
    split on whitespace and on every non-alphanumeric character, and WordPiece with words over
    200 characters as `[UNK]`: exactly the library end to end (its own pre-tokenization; its
    byte limit is a character limit in ASCII). Offsets are the library's.
  * "unicode": text whose other characters are all "plain": the original normalizes each of
    them to exactly one character whatever its context (e.g. "é" -> "e", "Ä" -> "a", "–" and
    NBSP unchanged), and the library's pre-tokenization puts it in the original's class
    (whitespace, punctuation, word character). Then `lower()` + that one-to-one map + the
    library end to end is exact, and character positions do not move (UTF-8 byte offsets are
    converted to characters). Each new character is decided once, by the original's
    definitions and one probe through the library (`bert_tf.text.library_route`).
  * "words": anything else (controls, CJK, combining marks, "İ", "Σ", private use, characters
    the library classifies differently, words over 200 characters). The original's output is a
    concatenation over whitespace words (cleaning and CJK spacing act on single characters, the
    rest on one whitespace word at a time), so each distinct raw word of the input is
    normalized once by an exact, offset-tracking port of the original's rules (`str.lower()` on
    the whole word for its final sigma, NFD with canonical reordering, Mn removal, CJK and
    punctuation splitting; `bert_tf.text.word_normalization`), its new basic tokens
    go through the library in one call per batch, and the word's pieces, ids and relative
    offsets are cached (`bert_tf.text.word_route`). The split uses exactly the original's
    whitespace (Unicode Zs, \\t \\n \\r, U+2028/U+2029; the other `str.isspace()` characters
    are controls it deletes).

Why not a library's normalizer: both compiled candidates differ from the original. Measured on
every code point (see tests/text/test_fast_tokenization.py): Hugging Face `tokenizers`'
BertNormalizer + BertPreTokenizer deletes private-use (Co) and unassigned (Cn) characters, which
the original keeps (they make their word `[UNK]`), treats ~800 other characters differently
(Unicode version: new punctuation, Cf, Mn, CJK Extension ranges), lower-cases without the final
sigma rule ("ΟΔΟΣ" -> "οδοσ" instead of "οδος"), and `BertWordPieceTokenizer` matches literal
"[MASK]"/"[CLS]" text as special tokens; tensorflow-text's FastBertTokenizer counts the word
limit in bytes, and its BertTokenizer lower-cases by ICU case folding ("Straße" -> "strasse").
Normalizing with CPython's own Unicode database (the reference's) avoids all of them.

Offsets are character indices into the text as given (after decoding bytes as UTF-8 with errors
ignored, like `convert_to_unicode`), end exclusive. A piece covers the input characters it came
from: accents removed by lower-casing stay inside the span of their letter, characters deleted
by cleaning (controls, U+FFFD) are in no span, and an `[UNK]` covers its whole basic token.
Pieces made from one input character that normalizes to several (a Hangul syllable's jamo under
NFD) share that character's span. `encode_batch` returns them, and the ids, as int32 numpy
arrays (see `Encoding`), sliced from one array per batch.

Cost: TensorFlow is imported, and the library's WordPiece models built, on the first call that
needs them (ASCII-only input builds one of the three); the models are shared by all
FastTokenizers of the process with the same vocabulary. Until a tokenizer has been given
`library_after_chars` characters, every text takes the "words" route, its new basic tokens
through the original's own WordPiece (`bert_tf.tokenization.WordpieceTokenizer`) instead of the
library: importing tensorflow-text and building its models costs memory and time, more than
they save on the few MB of text fine-tuning data usually is (docs/tokenization.md, Cost).
Without tensorflow-text it stays so (the same tokens; a warning says so once).
"""
import contextlib
import gc

from bert_tf import tokenization
from bert_tf.errors import file_error
from bert_tf.text.library_route import LibraryRoute, library_importable
from bert_tf.text.word_normalization import UNK
from bert_tf.text.word_route import WordRoute

# Characters of input a FastTokenizer takes word by word in Python before it uses the library:
# the library's memory and start-up (tensorflow-text's import and its models) pay off only on
# more text than fine-tuning sets hold, where it tokenizes fresh text faster than Python alone
# (`python -m bench.data.tokenization`; figures in docs/tokenization.md, Cost).
LIBRARY_AFTER_CHARS = 20_000_000


@contextlib.contextmanager
def _gc_paused():
    """Pauses the cyclic garbage collector: a batch allocates millions of small acyclic objects
    (strings, lists, tuples), each allocation burst would trigger a full-heap scan that finds
    nothing, tripling the run time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class FastTokenizer:
    """Batch WordPiece tokenizer with `FullTokenizer`'s exact output and character offsets.

    Args:
      vocab_file: one token per line, read by `bert_tf.tokenization.load_vocab` (same ids).
      do_lower_case: lower-case and strip accents (uncased models).
      cache_size: how many distinct raw words (and basic tokens) to remember; the caches are
        emptied when full, which bounds memory on corpora with huge vocabularies.
      library_after_chars: characters of input tokenized in Python alone (the "words" route)
        before the library is used (module docstring, Cost); 0: from the first call. The
        output is the same either way.
    """

    def __init__(self, vocab_file, do_lower_case=True, cache_size=1 << 20,
                 library_after_chars=LIBRARY_AFTER_CHARS):
        self.vocab = tokenization.load_vocab(vocab_file)
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        if UNK not in self.vocab:
            raise file_error(vocab_file, f"the vocabulary has no {UNK} token")
        self.do_lower_case = do_lower_case
        size = max(self.inv_vocab) + 1
        tokens = [self.inv_vocab.get(i) for i in range(size)]
        self._library_route = LibraryRoute(self.vocab, tokens, do_lower_case)
        self._word_route = WordRoute(self.vocab, self.inv_vocab, do_lower_case, cache_size)
        self._chars_before_library = library_after_chars  # counts down in `_run`

    # ---- public API -----------------------------------------------------------------------

    def tokenize(self, text):
        """The word pieces of `text` (str, or UTF-8 bytes), identical to FullTokenizer.tokenize."""
        return self.tokenize_batch([text])[0]

    def tokenize_batch(self, texts):
        """`tokenize` for each text of a list."""
        return self._run(texts, with_offsets=False)

    def encode(self, text):
        """The `Encoding` (tokens, ids, offsets) of one text."""
        return self.encode_batch([text])[0]

    def encode_batch(self, texts):
        """For each text, an `Encoding`: tokens, ids (int32 array) and (start, end) character
        offsets (int32 array [pieces, 2])."""
        return self._run(texts, with_offsets=True)

    def convert_tokens_to_ids(self, tokens):
        return tokenization.convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        return tokenization.convert_by_vocab(self.inv_vocab, ids)

    # ---- routing ----------------------------------------------------------------------------

    def _run(self, texts, with_offsets):
        texts = [tokenization.convert_to_unicode(t) for t in texts]
        with _gc_paused():
            routes = self._route(texts)
            results = [None] * len(texts)
            for route, indices in routes.items():
                if indices:
                    chunk = [texts[i] for i in indices]
                    if route == "words":
                        outputs = self._words_route(chunk, with_offsets)
                    else:
                        outputs = self._library_route.tokenize(chunk, route, with_offsets)
                    for i, output in zip(indices, outputs):
                        results[i] = output
        # Counted once the call is done, so that all of it went one way (`_python_alone`).
        if self._chars_before_library > 0:
            self._chars_before_library -= sum(map(len, texts))
        return results

    def _python_alone(self):
        """Whether this call goes word by word through the original's WordPiece in Python, with
        no library (module docstring, Cost): until the tokenizer has had `library_after_chars`
        characters, and for good without tensorflow-text."""
        return self._chars_before_library > 0 or not library_importable()

    def _route(self, texts):
        """Indices of texts for each route: "ascii" and "unicode" (the library end to end,
        `LibraryRoute.route`) or "words" (the word cache); all to "words" in Python alone
        (`_python_alone`)."""
        if self._python_alone():
            return {"ascii": [], "unicode": [], "words": list(range(len(texts)))}
        return self._library_route.route(texts)

    def _words_route(self, texts, with_offsets):
        """The word route (`WordRoute.tokenize`), its new basic tokens through the library's
        WordPiece unless in Python alone."""
        return self._word_route.tokenize(texts, with_offsets, self._token_library)

    def _token_library(self):
        """The library's WordPiece for single basic tokens; None in Python alone."""
        return None if self._python_alone() else self._library_route.library("token")
