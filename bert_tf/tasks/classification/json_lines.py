"""Classification on JSON Lines files, {"text": ..., "text_b": ..., "label": ...} a line (as
transformers' run_glue.py), each read as a TSV file with a header of the fields read."""
import json

from bert_tf.errors import arg, argument_error, file_error
from bert_tf.io_utils import decode_utf8, open_input
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
        super().__init__(text_a_column or "text", text_b_column, label_column or "label",
                         skip_header=True, **options)
        for argument, field in self.columns.items():
            if not isinstance(field, (str, type(None))):
                raise argument_error(argument, f"must be a field name, got {field!r}")

    def read_rows(self, path, split):
        read = {a: f for a, f in self.columns.items()
                if f is not None and (a != "label_column" or split != "test")}
        with open_input(path, f"{split} file") as f:
            lines = decode_utf8(f.read(), path).lstrip("\ufeff").split("\n")
        rows = [(0, list(read.values()))]
        for line_number, line in ((n, x) for n, x in enumerate(lines, 1) if x.strip()):
            try:
                value = json.loads(line)
            except json.JSONDecodeError as e:
                raise file_error(path, f"is not JSON: {e.msg}", line_number) from None
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
        """A field's text: a label's as TsvProcessor reads it (labels joined by the separator)."""
        if is_label and isinstance(value, list) == self.is_multi_label:
            values = value if isinstance(value, list) else [value]
            return (self.label_separator or "").join(
                v if isinstance(v, str) else json.dumps(v) for v in values)
        if isinstance(value, str):
            return value
        expected = ("a list of labels" if self.is_multi_label else "a label") if is_label \
            else "a text"
        raise file_error(path, f"holds {json.dumps(value)[:40]} where {expected} is",
                         line_number)
