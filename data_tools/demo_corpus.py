"""Generates the demo corpus: small, deterministic, learnable, in the pretraining input format.

The demo must run on a fresh machine with no data, so it writes its own corpus instead of
shipping one. Each document describes one invented person with a few consistent facts (home
town, trade, pet, favourite colour and food) in sentences drawn from templates. The facts repeat
inside a document and differ between documents, so a masked-LM can learn both the grammar (easy
tokens) and to copy facts from context (harder ones), and next-sentence prediction has a real
signal: a sentence from another document usually talks about another person.

Invented names are built from syllables, so WordPiece has to split them into `##` pieces.

Format (as the original's create_pretraining_data expects): one sentence per line, a blank line
between documents.

    python -m data_tools.demo_corpus --output_file=corpus.txt --num_documents=2000
"""
import os
import random

from absl import flags

from bert_tf.cli import run_main
from bert_tf.errors import flag_error
from bert_tf.io_utils import atomic_open

_SYLLABLES = ["ka", "lo", "mi", "ren", "tas", "vo", "bel", "dor", "fin", "gu", "ha", "jor",
              "ne", "pi", "qua", "ro", "sil", "tu", "wen", "zar"]
_CITIES = ["Lisbon", "Oslo", "Nairobi", "Lima", "Kyoto", "Dublin", "Quebec", "Tunis", "Perth",
           "Bergen", "Cusco", "Porto", "Hanoi", "Zagreb", "Accra", "Tromso"]
_TRADES = ["baker", "sailor", "painter", "teacher", "farmer", "doctor", "carpenter", "singer",
           "pilot", "tailor", "miner", "gardener"]
_PETS = ["cat", "dog", "parrot", "goat", "horse", "rabbit", "turtle", "owl"]
_COLOURS = ["red", "blue", "green", "yellow", "purple", "orange", "black", "white"]
_FOODS = ["bread", "rice", "soup", "cheese", "apples", "fish", "beans", "honey", "noodles"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# Sentence templates; {name}, {city}, ... are the document's facts.
_TEMPLATES = [
    "{name} lives in {city} and works as a {trade}.",
    "Every {day}, {name} walks the {pet} through the old streets of {city}.",
    "The {pet} of {name} likes to sleep near the window.",
    "As a {trade}, {name} starts work early in the morning.",
    "{name} paints the door of the house {colour} every spring.",
    "People in {city} know {name} as the {trade} with the {colour} coat.",
    "For dinner, {name} usually eats {food} with friends.",
    "On {day} evenings the {trade} from {city} cooks {food}.",
    "{name} says that {food} tastes best when it is fresh.",
    "The {colour} hat of {name} is famous in {city}.",
    "Many years ago, {name} moved to {city} to become a {trade}.",
    "When it rains, {name} stays home with the {pet}.",
    "The neighbours of {name} often borrow {food} on {day}.",
    "{name} has never left {city}, not even for a day.",
    "Some say the {pet} is smarter than {name}, but {name} disagrees.",
]


def _person(rng):
    name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
    return {"name": name, "city": rng.choice(_CITIES), "trade": rng.choice(_TRADES),
            "pet": rng.choice(_PETS), "colour": rng.choice(_COLOURS),
            "food": rng.choice(_FOODS)}


def generate_documents(num_documents, seed=0, min_sentences=4, max_sentences=12):
    """Yields documents, each a list of sentences (strings), deterministically from `seed`."""
    rng = random.Random(seed)
    for _ in range(num_documents):
        facts = _person(rng)
        sentences = []
        for _ in range(rng.randint(min_sentences, max_sentences)):
            template = rng.choice(_TEMPLATES)
            sentences.append(template.format(day=rng.choice(_DAYS), **facts))
        yield sentences


def write_corpus(path, num_documents, seed=0):
    """Writes the corpus to `path` (atomically); returns (documents, sentences, bytes)."""
    num_sentences = 0
    num_bytes = 0
    with atomic_open(path, "w") as f:
        for document in generate_documents(num_documents, seed):
            text = "\n".join(document) + "\n\n"
            f.write(text)
            num_sentences += len(document)
            num_bytes += len(text.encode("utf-8"))
    return num_documents, num_sentences, num_bytes


def tagged_sentence(template, facts, day):
    """(words, tags) of a template sentence: the person's name B-PER, the city B-LOC, other
    words O; punctuation split off as its own word (CoNLL style)."""
    entities = {facts["name"]: "B-PER", facts["city"]: "B-LOC"}
    words, tags = [], []
    for word in template.format(day=day, **facts).split():
        core = word.rstrip(".,")
        for piece in (core, word[len(core):]):
            if piece:
                words.append(piece)
                tags.append(entities.get(piece, "O"))
    return words, tags


def write_tagging_task(directory, num_train=2000, num_valid=300, num_test=200, seed=1):
    """Writes the demo's fine-tuning task as CoNLL files (`word tag`, blank line between
    sentences) in `directory`: train.txt, valid.txt, test.txt, each about other new people, so
    names must be recognised from context and WordPiece shape, not remembered."""
    sizes = {"train.txt": num_train, "valid.txt": num_valid, "test.txt": num_test}
    for offset, (name, size) in enumerate(sizes.items()):
        rng = random.Random(seed * 1000 + offset)
        with atomic_open(os.path.join(directory, name), "w") as f:
            for _ in range(size):
                words, tags = tagged_sentence(rng.choice(_TEMPLATES), _person(rng),
                                              rng.choice(_DAYS))
                f.write("".join(f"{w} {t}\n" for w, t in zip(words, tags)) + "\n")
    return sizes


def choice_questions(num_questions, rng, num_choices=4):
    """(context, endings, label) questions: a sentence of a new person's document, its true
    next sentence and num_choices - 1 sentences of other people's documents, in random order
    (label: the true one's index). Learnable because a document repeats its person's facts."""
    questions = []
    while len(questions) < num_questions:
        documents = list(generate_documents(num_choices + 4, seed=rng.randrange(1 << 30)))
        for d, document in enumerate(documents):
            if len(questions) == num_questions:
                break
            i = rng.randrange(len(document) - 1)
            others = rng.sample([k for k in range(len(documents)) if k != d], num_choices - 1)
            endings = [rng.choice(documents[k]) for k in others]
            label = rng.randrange(num_choices)
            endings.insert(label, document[i + 1])
            questions.append((document[i], endings, label))
    return questions


CHOICE_TASK_HEADER = ["context", "ending0", "ending1", "ending2", "ending3", "label"]


def write_choice_task(directory, num_train=2000, num_dev=300, num_test=200, seed=2):
    """Writes the demo's multiple-choice task (run_multiple_choice --task_name=tsv
    --skip_header --context_column=context --ending_columns=ending0,ending1,ending2,ending3
    --label_column=label) in `directory`: train.tsv, dev.tsv and test.tsv (no label column),
    each about other new people: which of 4 sentences comes next (`choice_questions`)."""
    sizes = {"train.tsv": num_train, "dev.tsv": num_dev, "test.tsv": num_test}
    for offset, (name, size) in enumerate(sizes.items()):
        rng = random.Random(seed * 1000 + offset)
        header = CHOICE_TASK_HEADER[:-1] if name == "test.tsv" else CHOICE_TASK_HEADER
        with atomic_open(os.path.join(directory, name), "w") as f:
            f.write("\t".join(header) + "\n")
            for context, endings, label in choice_questions(size, rng):
                row = [context] + endings + ([] if name == "test.tsv" else [str(label)])
                f.write("\t".join(row) + "\n")
    return sizes


FLAGS = flags.FLAGS


def define_flags():
    """Defined on demand, not at import: tests import this module beside the reference's
    create_pretraining_data, whose --output_file would clash."""
    flags.DEFINE_string("output_file", None, "Where to write the corpus (one sentence per line, "
                        "blank line between documents).")
    flags.DEFINE_integer("num_documents", 2000, "How many documents (invented people) to write.")
    flags.DEFINE_integer("seed", 0, "Random seed; the same seed gives the same corpus.")
    flags.DEFINE_string("task_dir", None, "Also write a tagging task here (CoNLL train/valid/"
                        "test.txt: the person's name B-PER, the city B-LOC, other words O).")
    flags.DEFINE_string("choice_task_dir", None, "Also write a multiple-choice task here "
                        "(train/dev/test.tsv: a sentence, and its next sentence among 3 of other "
                        "documents; see docs/fine_tuning.md, run_multiple_choice).")


def main(argv):
    del argv
    if not FLAGS.output_file:
        raise flag_error("output_file", "is required")
    if FLAGS.num_documents < 1:
        raise flag_error("num_documents", f"must be >= 1, got {FLAGS.num_documents}")
    documents, sentences, size = write_corpus(FLAGS.output_file, FLAGS.num_documents, FLAGS.seed)
    print(f"wrote {FLAGS.output_file}: {documents} documents, {sentences} sentences, {size} bytes")
    if FLAGS.task_dir:
        sizes = write_tagging_task(FLAGS.task_dir, seed=FLAGS.seed + 1)
        print(f"wrote the tagging task in {FLAGS.task_dir}: "
              + ", ".join(f"{name} {size} sentences" for name, size in sizes.items()))
    if FLAGS.choice_task_dir:
        sizes = write_choice_task(FLAGS.choice_task_dir, seed=FLAGS.seed + 2)
        print(f"wrote the multiple-choice task in {FLAGS.choice_task_dir}: "
              + ", ".join(f"{name} {size} questions" for name, size in sizes.items()))


def console_main():
    define_flags()
    run_main(main)


if __name__ == "__main__":
    console_main()
