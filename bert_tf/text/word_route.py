"""The word route of `FastTokenizer`: any text, one raw word at a time, each word tokenized
once and cached.

A text's pieces are the concatenation of its raw words' pieces (`bert_tf.text.word_normalization`),
so each distinct raw word of a batch is normalized once, by the exact port of the original's
rules, its new basic tokens go through WordPiece in one call per batch (tensorflow-text's, or the
original's own `bert_tf.tokenization.WordpieceTokenizer` in Python alone), and the word's pieces,
ids and offsets relative to the word are cached. The caches are emptied when full.
"""
import itertools
import operator

import numpy

from bert_tf import tokenization
from bert_tf.text.encoding import encodings
from bert_tf.text.word_normalization import (ASCII_DELETED, MAX_CHARS_PER_WORD, SURROGATE, UNK,
                                             normalize_word, raw_words, raw_words_with_starts)

_chain = itertools.chain.from_iterable


class WordRoute:
    """The word route over `vocab` (token -> id) and `inv_vocab` (id -> token); `cache_size`:
    how many distinct raw words (and basic tokens) to remember."""

    def __init__(self, vocab, inv_vocab, do_lower_case, cache_size):
        self.vocab, self.inv_vocab = vocab, inv_vocab
        self.do_lower_case = do_lower_case
        self.cache_size = cache_size
        self._unk_id = vocab[UNK]
        self._wordpiece = tokenization.WordpieceTokenizer(vocab, unk_token=UNK)
        # Word caches. Raw word -> its pieces; -> (ids, begins, ends) relative to the word
        # (filled by encode_batch). Basic token -> its pieces, their ids, their (begin, end).
        self._tokens, self._ids_offsets = {}, {}
        self._piece_tokens, self._piece_ids, self._piece_offsets = {}, {}, {}

    def tokenize(self, texts, with_offsets, token_library):
        """Any text: split into raw words, each tokenized once (exactly) and cached.
        `token_library()`: tensorflow-text's WordPiece for single basic tokens, or None for the
        original's WordPiece in Python."""
        if not with_offsets:
            word_lists = [raw_words(t) for t in texts]
            self._add_words(word_lists, False, token_library)
            get = self._tokens.__getitem__
            return [list(_chain(map(get, words))) for words in word_lists]
        split = [raw_words_with_starts(t) for t in texts]
        self._add_words([words for words, _ in split], True, token_library)
        # The batch's raw words, flat; each word's cached (ids, begins, ends) relative to it.
        words = list(_chain(words for words, _ in split))
        entries = list(map(self._ids_offsets.__getitem__, words))
        first, second, third = (operator.itemgetter(k) for k in range(3))
        tokens = list(_chain(map(self._tokens.__getitem__, words)))
        ids = numpy.fromiter(_chain(map(first, entries)), numpy.int32, len(tokens))
        pieces_per_word = numpy.fromiter(map(len, map(first, entries)), numpy.int64, len(words))
        # Absolute offsets: each word's start, repeated once per piece, plus the piece's offsets
        # relative to the word.
        word_starts = numpy.repeat(
            numpy.fromiter(_chain(starts for _, starts in split), numpy.int64, len(words)),
            pieces_per_word)
        offsets = numpy.empty([len(ids), 2], numpy.int32)
        offsets[:, 0] = numpy.fromiter(_chain(map(second, entries)), numpy.int64, len(ids))
        offsets[:, 1] = numpy.fromiter(_chain(map(third, entries)), numpy.int64, len(ids))
        offsets += word_starts[:, None].astype(numpy.int32)
        words_per_text = [len(w) for w, _ in split]
        word_bounds = numpy.concatenate([[0], numpy.cumsum(words_per_text)]).astype(numpy.int64)
        piece_bounds = numpy.concatenate([[0], numpy.cumsum(pieces_per_word)])[word_bounds]
        return encodings(tokens, ids, offsets, piece_bounds.tolist())

    def _add_words(self, word_lists, with_offsets, token_library):
        """Tokenizes and caches every raw word of `word_lists` not cached yet: its pieces, and
        with `with_offsets` also their ids and offsets relative to the word."""
        cache = self._ids_offsets if with_offsets else self._tokens
        missing = set().union(*word_lists).difference(cache)
        if not missing:
            return
        if len(self._tokens) + len(missing) > self.cache_size:
            for table in (self._tokens, self._ids_offsets, self._piece_tokens,
                          self._piece_ids, self._piece_offsets):
                table.clear()
            missing = set().union(*word_lists)
        if with_offsets:
            basic = [(word, self._basic_tokens_with_origins(word)) for word in missing]
            self._add_pieces({text for _, tokens in basic for text, _ in tokens}, token_library)
            piece_ids, piece_offsets = self._piece_ids, self._piece_offsets
            get_tokens = self._piece_tokens.__getitem__
            for word, tokens in basic:
                ids, begins, ends = [], [], []
                for text, origin in tokens:
                    ids.extend(piece_ids[text])
                    for begin, end in piece_offsets[text]:
                        begins.append(origin(begin))
                        ends.append(origin(end - 1) + 1)
                self._tokens[word] = tuple(_chain(map(get_tokens, [text for text, _ in tokens])))
                self._ids_offsets[word] = (tuple(ids), tuple(begins), tuple(ends))
        else:
            basic = [(word, self._basic_tokens(word)) for word in missing]
            self._add_pieces({text for _, texts in basic for text in texts}, token_library)
            get = self._piece_tokens.__getitem__
            tokens = self._tokens
            for word, texts in basic:
                tokens[word] = get(texts[0]) if len(texts) == 1 else tuple(_chain(map(get, texts)))

    def _basic_tokens(self, word):
        """The original's basic tokens of one raw word (strings)."""
        if word.isascii():
            text = word.lower() if self.do_lower_case else word
            if text.isalnum():  # letters and digits only: one basic token
                return [text]
            if ASCII_DELETED.search(word) is None:  # lower() kept every position
                return tokenization._ASCII_PUNC_SPLIT.findall(text)
        return [text for text, _ in normalize_word(word, self.do_lower_case)]

    def _basic_tokens_with_origins(self, word):
        """The basic tokens of one raw word as (text, origin): `origin(i)` is the index in the
        word of the character that character i of `text` came from."""
        if word.isascii() and ASCII_DELETED.search(word) is None:
            text = word.lower() if self.do_lower_case else word
            return [(m.group(), m.start().__add__)
                    for m in tokenization._ASCII_PUNC_SPLIT.finditer(text)]
        return [(text, origins.__getitem__)
                for text, origins in normalize_word(word, self.do_lower_case)]

    def _add_pieces(self, texts, token_library):
        """Caches the word pieces, ids and offsets (within the token) of new basic tokens."""
        texts = [text for text in texts if text not in self._piece_tokens]
        if not texts:
            return
        vocab, unk_id = self.vocab, self._unk_id
        piece_ids = {}
        library = []
        for text in texts:
            if len(text) > MAX_CHARS_PER_WORD:
                piece_ids[text] = (unk_id,)
            elif text in vocab:  # a whole-token match needs no search
                piece_ids[text] = (vocab[text],)
            elif SURROGATE.search(text):  # not UTF-8, so in no vocabulary entry either
                piece_ids[text] = (unk_id,)
            else:
                library.append(text)
        tokenizer = token_library() if library else None
        if library and tokenizer is None:
            tokenize_word = self._wordpiece.tokenize_word  # the original's WordPiece itself
            for text in library:
                piece_ids[text] = tuple(vocab[token] for token in tokenize_word(text))
        elif library:
            ragged = tokenizer.tokenize(library)
            flat = ragged.flat_values.numpy().tolist()
            bounds = ragged.row_splits.numpy().tolist()
            for text, begin, end in zip(library, bounds, bounds[1:]):
                piece_ids[text] = tuple(flat[begin:end])
        inv_vocab = self.inv_vocab
        for text, ids in piece_ids.items():
            if len(ids) == 1:
                tokens, offsets = (inv_vocab[ids[0]],), ((0, len(text)),)  # also [UNK]
            else:  # consecutive substrings of `text`; "##" adds 2 characters after the first
                tokens = tuple([inv_vocab[i] for i in ids])
                offsets, position = [], 0
                for k, token in enumerate(tokens):
                    width = len(token) - (2 if k else 0)
                    offsets.append((position, position + width))
                    position += width
                offsets = tuple(offsets)
            self._piece_tokens[text] = tokens
            self._piece_ids[text] = ids
            self._piece_offsets[text] = offsets
