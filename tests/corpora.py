"""All text of ../shared/data, as the strings a tokenizer is asked to tokenize.

Shared by every tokenizer parity check (tests/test_tokenization.py, tests/text/test_fast_tokenization.py,
tests/text/test_graph_tokenization.py, bench/data/tokenization.py), so that they all compare against
the reference on exactly the same text. Import it as

    import corpora                  # in tests (pytest puts tests/ on sys.path via conftest.py)
    from tests import corpora       # elsewhere, with the project root on sys.path (bench/)

and use
    corpora.all_texts(shared_data)            -> iterator of (corpus_name, text), every text field
    corpora.unique_texts(shared_data)         -> list of distinct texts, first-seen order
    corpora.CORPORA[name](shared_data)        -> iterator of the texts of one corpus
`shared_data` is the ../shared/data directory (the `shared_data` fixture of conftest.py).

It also holds the other inputs and oracle helpers the tokenizer tests share (conftest.py turns
them into session fixtures, so each reference computation runs once per test session):
    corpora.adversarial_texts(vocab_path)     -> generated adversarial texts (seeded)
    corpora.LIBRARY_DIFFERENCES               -> {case name: text} where a library differs
    corpora.code_point_texts()                -> every code point as a word and between letters
    corpora.write_cased_vocab(uncased, path)  -> a mixed-case vocabulary derived from uncased
    corpora.reference_words(ref, texts)       -> each text's whitespace words after the
                                                 reference's cleaning and CJK spacing
    corpora.tokens_by_word(reference, words)  -> the reference's tokens of texts given as words
    corpora.ByCase(function)                  -> {do_lower_case: function(do_lower_case)}, lazily
    corpora.assert_same_tokens(...)           -> one failure message naming the first mismatch

What counts as text (every field a BERT task would tokenize):
  glue:            the text columns of every GLUE .tsv (sentence, sentence1/2, question, #1/#2
                   String; column 4 of the header-less CoLA train/dev) and of the original MRPC
                   release files msr_paraphrase_{train,test}.txt, read as the original
                   run_classifier does (csv, tab-delimited, no quoting);
  squad_contexts / squad_questions: SQuAD v1.1 and v2.0 dev paragraphs' contexts and questions;
  conll2003:       the tokens of each sentence of train/valid/test joined by single spaces;
  wikitext2:       every line of valid.txt and test.txt (newline removed; blank lines included);
  sample_text:     every line of sample_text.txt.
"""
import csv
import json
import pathlib
import random

# Header names of the GLUE/MRPC columns that hold text to tokenize.
GLUE_TEXT_COLUMNS = ("sentence", "sentence1", "sentence2", "question", "#1 String", "#2 String")
COLA_TEXT_COLUMN = 3  # CoLA train/dev have no header: source, label, original label, sentence


def _read_tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f, delimiter="\t", quotechar=None))


def glue_texts(shared_data):
    root = pathlib.Path(shared_data) / "glue_data"
    paths = sorted(root.glob("*/*.tsv")) + sorted(root.glob("MRPC/msr_paraphrase_*.txt"))
    for path in paths:
        rows = _read_tsv(path)
        if not rows:
            continue
        header = [name.lstrip("\ufeff") for name in rows[0]]
        columns = [i for i, name in enumerate(header) if name in GLUE_TEXT_COLUMNS]
        if columns:
            body = rows[1:]
        elif path.parent.name == "CoLA":
            columns, body = [COLA_TEXT_COLUMN], rows
        else:
            continue  # e.g. MRPC/dev_ids.tsv: ids only
        for row in body:
            for i in columns:
                if i < len(row):
                    yield row[i]


def _squad_paragraphs(shared_data):
    for name in ("dev-v1.1.json", "dev-v2.0.json"):
        with open(pathlib.Path(shared_data) / "SQuAD" / name, encoding="utf-8") as f:
            for article in json.load(f)["data"]:
                yield from article["paragraphs"]


def squad_contexts(shared_data):
    for paragraph in _squad_paragraphs(shared_data):
        yield paragraph["context"]


def squad_questions(shared_data):
    for paragraph in _squad_paragraphs(shared_data):
        for qa in paragraph["qas"]:
            yield qa["question"]


def conll2003_texts(shared_data):
    for split in ("train", "valid", "test"):
        tokens = []
        with open(pathlib.Path(shared_data) / "conll2003" / f"{split}.txt", encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] != "-DOCSTART-":
                    tokens.append(fields[0])
                elif tokens:
                    yield " ".join(tokens)
                    tokens = []
        if tokens:
            yield " ".join(tokens)


def _lines(path):
    with open(path, encoding="utf-8", newline="") as f:
        for line in f:
            yield line.rstrip("\r\n")


def wikitext2_texts(shared_data):
    for split in ("valid", "test"):
        yield from _lines(pathlib.Path(shared_data) / "wikitext-2" / f"{split}.txt")


def sample_texts(shared_data):
    yield from _lines(pathlib.Path(shared_data) / "sample_text.txt")


CORPORA = {
    "glue": glue_texts,
    "squad_contexts": squad_contexts,
    "squad_questions": squad_questions,
    "conll2003": conll2003_texts,
    "wikitext2": wikitext2_texts,
    "sample_text": sample_texts,
}


def all_texts(shared_data):
    """Every text of every corpus, as (corpus_name, text)."""
    for name, texts in CORPORA.items():
        for text in texts(shared_data):
            yield name, text


def unique_texts(shared_data):
    """The distinct texts of all corpora, in first-seen order (each compared once)."""
    return list(dict.fromkeys(text for _, text in all_texts(shared_data)))


# ------------------------------------------------------------------------------------------
# Generated text
# ------------------------------------------------------------------------------------------


def _handwritten_and_random_texts():
    texts = [
        "", " ", "\t\n\r ", "Hello, World!", "unaffable", "UNAFFABLE", "John's $5.00 (approx.)",
        # accents and combining marks
        "Café naïve résumé Ångström Øresund ÆSIR Œuvre façade", "e\u0301 a\u0308\u0304 o\u0328\u0301",
        "\u0301", "\u0301abc", "abc\u0301", "\u0301\u0302\u0303 \u0300", "A\u030a\u0301\u0327x",
        "İstanbul ı I İ ǅungla ǈ ǋ", "ΟΔΥΣΣΕΥΣ Σ σΣ ΑΣ'Α ΣΑ", "Straße ẞ ß ﬁnance ﬀ Ǆ",
        "ℌℍ ℵ Ⅻ ⅻ ① ｆｕｌｌｗｉｄｔｈ ＡＢＣ", "ǰ ΐ ΰ և ẖ ẗ ẘ ẙ ẚ",
        # CJK and other East Asian scripts
        "中文字符测试。你好，世界！", "日本語のテキスト、カタカナ、ひらがな", "한국어 텍스트 입니다",
        "𠀀𠀁𪜀𫝀𫠠𬺰 豈更 丽丸 㐀㐁 ⺀⼀ 〇 々", "mixed中文and English混合text",
        # emoji
        "I ❤ NY 👍🏽 👨\u200d👩\u200d👧\u200d👦 🇺🇸 ☺\ufe0f 1\ufe0f\u20e3", "🤖🤖🤖robots🤖",
        # zero-width, exotic spaces and separators
        "zero\u200bwidth\u200cnon\u200djoiner\u2060wj\ufeffbom", "non\u00a0breaking\u202fnarrow",
        "ideo\u3000graphic en\u2002em\u2003thin\u2009hair\u200a", "ogham\u1680mark mvs\u180esep",
        "line\u2028para\u2029sep", "nel\x85next vt\x0bff\x0cfs\x1cgs\x1drs\x1eus\x1f",
        "math\u205fspace \u00a0\u00a0 lead and trail \u00a0",
        # controls, NUL, replacement character, soft hyphen, surrogates, private use, tags
        "ctrl\x01\x02\x07\x1b[0m\x7f del", "nul\x00byte\x00", "repl\ufffdacement \ufffd",
        "soft\u00adhyphen", "lone \ud800 surrogate \udfff", "private \ue000\U000f0000 use",
        "tag\U000e0001\U000e0041s", "variation\U000e0100selector", "rtl\u200fmark\u202eoverride",
        # literal special-token text
        "[MASK] [CLS] [SEP] [UNK] [PAD] [unused0] [unused99]", "[mask] [cls]", "a[MASK]b",
        "[CLS]hello[SEP]world[SEP]", "##ing ## # ###", "[unused1000]",
        # long words: the 200-character limit applies to each basic token
        "a" * 199, "a" * 200, "a" * 201, "x" * 1000, ("ab" * 150) + ", ok",
        "é" * 201, "É" * 200 + "\u0301", "supercalifragilistic" * 11, "中" * 300,
        ("pre-" * 80) + "end", "http://example.com/" + "q" * 250 + "?x=1",
        # mixed scripts
        "Русский текст и English words", "مرحبا بالعالم", "שלום עולם", "हिन्दी भाषा",
        "ภาษาไทยไม่มีช่องว่าง", "Ελληνικά κείμενα", "ქართული", "ትግርኛ", "ᚠᚢᚦᚨᚱᚲ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐁𝐨𝐥𝐝",
        "numbers ١٢٣ ۴۵۶ ७८९ 1,234.56 ½ ²³",
        "punct ¡¿ «» „“ ‘’ — – … · • † ‡ ‰ ′ ″ ※ ⁂ 〈〉 【】 「」 ､ ｡",
        "symbols $ ^ ` ~ | + < = > © ® ™ ° € £ ¥ ₹ ∑ √ ∞",
    ]
    rng = random.Random(1234)
    # Seeded random Unicode: any code point (surrogates included) with some structure.
    for _ in range(1500):
        length = rng.randint(1, 40)
        chars = []
        for _ in range(length):
            r = rng.random()
            if r < 0.2:
                chars.append(" ")
            elif r < 0.45:
                chars.append(chr(rng.randint(0, 0x7F)))
            elif r < 0.75:
                chars.append(chr(rng.randint(0x80, 0x2FFF)))
            else:
                chars.append(chr(rng.randint(0x3000, 0x10FFFF)))
        texts.append("".join(chars))
    return texts


def adversarial_texts(vocab_path):
    """Handwritten hard cases, seeded random Unicode, and random glued vocabulary pieces of
    `vocab_path` (randomly cased and punctuated: exercises greedy matching)."""
    texts = _handwritten_and_random_texts()
    tokens = [t for t in pathlib.Path(vocab_path).read_text(encoding="utf-8").split("\n") if t]
    # Words whose greedy match is one of the longest entries (bounds of the candidate search).
    for token in sorted(tokens, key=len, reverse=True)[:40]:
        body = token[2:] if token.startswith("##") else token
        texts.append(f"{body}s a{body} {body.upper()}x re{body}ing")
    rng = random.Random(5678)
    for _ in range(1500):
        words = []
        for _ in range(rng.randint(1, 8)):
            word = "".join(rng.choice(tokens).replace("##", "") for _ in range(rng.randint(1, 6)))
            if rng.random() < 0.3:
                word = word.title()
            if rng.random() < 0.2:
                word += rng.choice(".,;:!?'\"-)")
            words.append(word)
        texts.append(" ".join(words))
    return texts


# Inputs on which a library differs from the original (found by comparing Hugging Face
# tokenizers' BertNormalizer + BertPreTokenizer and tensorflow-text with the reference on every
# code point and on the shared data), each of which FastTokenizer must get right.
LIBRARY_DIFFERENCES = {
    "literal special tokens": "[MASK] [CLS] x[SEP]y [UNK] [PAD] [unused0] [mask] ##ing",
    "non-breaking and other spaces": "a\u00a0b c\u202fd e\u3000f g\u2007h i\u2028j k\u2029l",
    "combining marks": "e\u0301 a\u0308\u0304b \u0301x o\u0328\u0301 \u0345\u0301",
    "non-Mn combining marks (canonical order)": "a\U0001d165\U0001d16e\u0301 \u0903\u093c x\u0bcd",
    "controls and format characters": "a\x00b c\x7fd e\u200bf g\u00adh i\ufeffj k\x1cl m\x85n \x0bx\x0c",
    "U+FFFD and U+0000": "\ufffd \x00 re\ufffdplace \x00\ufffd",
    "CJK ranges": "中\u3400\u4dbf\U00020000\U0002a6df\U0002a700\U0002b740\U0002b820\U0002ceaf"
                  "\uf900\ufaff\U0002f800 \U0002ceb0\U00030000\u3007 aä中b",
    "punctuation classes": "$5 ^x `y ~z |w \u00a1\u00bf \u2e5d\u2e55 \u061d \u0c77 \u166d \u2010\u2015"
                           " \u30fb \uff01 \U00010ead",
    "new or unassigned code points": "\u0890x \u0898y \u1c89z \ua7cbw \U00010d50 \U0003134b",
    "private use": "a\ue000b \U000f0000 \U0010fffd x\ue000",
    "200-character words": " ".join(["a" * 200, "b" * 201, "é" * 200, "é" * 201, "É" * 200 + "\u0301",
                                       "ü" * 150, "中" * 250, "x" * 199 + "." + "y" * 5]),
    "lower-casing: İ ẞ Σ ǅ": "İstanbul İ ẞ STRAßE ΟΔΟΣ ΣΑΣ Σ aΣ. ΑΣ'Α ǅ ǈ Ǳ \u0130\u0307",
    "title-case and special lower-case": "ǅungla ǈ ǋ ᾈ ᾼ ῼ K Å Ω",
    "emoji and modifiers": "I ❤ NY 👍🏽 👨\u200d👩\u200d👧 🇺🇸 ☺\ufe0f 1\ufe0f\u20e3",
    "Hangul and other decompositions": "한국어 ĳ ǆ ﬁ ℌ ｆｕｌｌ Ａ ① ½ ¹ ſ",
}


def code_point_texts():
    """Every code point as a word, and every fifth between letters, 4096 code points a text
    (surrogates: not text; private-use planes: a sample, they are all alike)."""
    code_points = [cp for cp in range(0x110000) if not (
        0xE000 <= cp <= 0xF8FF or 0xF0000 <= cp or 0xD800 <= cp <= 0xDFFF)]
    code_points += list(range(0xE000, 0xF900, 97)) + list(range(0xF0000, 0x110000, 997))
    texts = []
    for i in range(0, len(code_points), 4096):
        chars = [chr(cp) for cp in code_points[i:i + 4096]]
        texts.append(" ".join(chars))
        texts.append(" ".join("a" + c + "b" for c in chars[::5]))
    return texts


def write_cased_vocab(uncased_vocab, path):
    """Writes the uncased vocabulary plus title- and upper-case forms of its whole-word entries
    to `path` (so that cased words really go through WordPiece instead of mostly being [UNK])."""
    tokens = pathlib.Path(uncased_vocab).read_text(encoding="utf-8").split("\n")[:-1]
    seen = set(tokens)
    extra = []
    for token in tokens:
        if token.startswith("[") or token.startswith("##"):
            continue
        for variant in (token.title(), token.upper()):
            if variant not in seen:
                seen.add(variant)
                extra.append(variant)
    pathlib.Path(path).write_text("\n".join(tokens + extra) + "\n", encoding="utf-8")
    return pathlib.Path(path)


# ------------------------------------------------------------------------------------------
# Oracle helpers (the reference release's outputs)
# ------------------------------------------------------------------------------------------


def reference_words(ref, texts):
    """Each text's whitespace words after the reference's own cleaning and CJK spacing.

    The reference's `BasicTokenizer.tokenize` cleans and CJK-spaces the text one character at a
    time, splits it on whitespace, and from there on handles each word on its own (lower-casing,
    accents and punctuation per word, then WordPiece per resulting token). So the reference's
    tokens for a text are exactly the concatenation of the reference's tokens for its words
    (`tokens_by_word`), which runs the reference's per-word work once per distinct word (121k
    in the shared data) instead of once per occurrence (3.4M). tests/test_tokenization.py checks
    the shortcut against the reference run on whole texts. Cleaning does not depend on the case.
    """
    basic = ref.BasicTokenizer(do_lower_case=True)
    return [ref.whitespace_tokenize(basic._tokenize_chinese_chars(basic._clean_text(text)))
            for text in texts]


def tokens_by_word(reference, word_lists):
    """The reference FullTokenizer's tokens of texts given as their `reference_words`."""
    word_tokens = {word: reference.tokenize(word)
                   for word in {w for words in word_lists for w in words}}
    return [[t for w in words for t in word_tokens[w]] for words in word_lists]


class ByCase(dict):
    """{do_lower_case: function(do_lower_case)}, each value computed on first access."""

    def __init__(self, function):
        super().__init__()
        self._function = function

    def __missing__(self, do_lower_case):
        value = self[do_lower_case] = self._function(do_lower_case)
        return value


def assert_same_tokens(texts, expected, actual, where):
    """Fails naming how many texts differ and the first one (`where(text)` says whose it is)."""
    mismatches = [(i, t) for i, t in enumerate(texts) if expected[i] != actual[i]]
    if mismatches:
        i, text = mismatches[0]
        raise AssertionError(
            f"{len(mismatches)} of {len(texts)} texts differ from the reference; first "
            f"({where(text)}): {text[:300]!r}\n reference: {expected[i][:60]}\n"
            f" ours:      {actual[i][:60]}")
