"""Classification on JSON Lines files, {"text": ..., "text_b": ..., "label": ...} a line (as
transformers' run_glue.py), each read as a TSV file with a header of the fields read."""
import json

from bert_tf.errors import arg, argument_error, file_error
from bert_tf.io_utils import read_text
from bert_tf.tasks.classification.reader import TsvProcessor, register


@register("jsonl")
class JsonLinesProcessor(TsvProcessor):
    """TsvProcessor's options, the columns naming fields (default "text", no text_b, "label");
    a label is a string, number or boolean, or (multi_label) a list of them."""
    name = "jsonl"
    default_file_names = {split: f"{split}.jsonl" for split in ("train", "dev", "test")}

    def __init__(self, text_a_column=None, text_b_column=None, label_column=None,
                 skip_header=False, delimiter=None, **options):
        for argument, given in (("skip_header", skip_header), ("delimiter", delimiter)):
            if given:
                raise argument_error(argument, "is for TSV and CSV files, not JSON Lines")
        super().__init__("text" if text_a_column is None else text_a_column, text_b_column,
                         "label" if label_column is None else label_column, skip_header=True,
                         **options)

    def read_rows(self, path, split):
        read = {a: f for a, f in self.columns.items()
                if f is not None and (a != "label_column" or split != "test")}
        text = read_text(path, f"{split} file").removeprefix("\ufeff")
        lines = text.replace("\r", "").split("\n")
        rows = [(0, list(read.values()))]
        for line_number, line in enumerate(lines[:-1] if lines[-1] == "" else lines, 1):
            try:
                value = json.loads(line)
            except json.JSONDecodeError as e:
                raise file_error(path, f"is not a JSON object: {e.msg}", line_number) from None
            if not isinstance(value, dict):
                raise file_error(path, "is not a JSON object", line_number)
            for argument, field in read.items():
                if field not in value:
                    raise file_error(path, f"has no field {field!r} ({arg(argument)})",
                                     line_number)
            rows.append((line_number, [self._field(value[f], a == "label_column", path,
                                                   line_number) for a, f in read.items()]))
        return rows

    def _field(self, value, is_label, path, line_number):
        listed = is_label and self.is_multi_label and isinstance(value, list)
        items = value if listed else [value]
        if not all(isinstance(v, (str, int, float) if is_label else str) for v in items):
            raise file_error(path, f"holds {json.dumps(value)[:40]} where "
                                   f"{'a label' if is_label else 'a text'} is", line_number)
        texts = [v if isinstance(v, str) else json.dumps(v) for v in items]  # true, 1.5
        if listed and any(self.label_separator in text for text in texts):
            raise file_error(path, f"a label holds the {arg('label_separator')} "
                                   f"{self.label_separator!r}", line_number)
        return self.label_separator.join(texts) if listed else texts[0]
