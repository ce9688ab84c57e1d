"""What a create_pretraining_data run wrote (`Summary`), for its closing summary lines."""
import dataclasses

from bert_tf.data.pretraining.options import InstanceOptions


@dataclasses.dataclass
class Summary:
    """What a run wrote, for the closing summary line.

    `instances` are the training sequences, `records` the rows written (as many unless
    packed); `max_seq_length` and `layout` (`InstanceOptions.describe()`) describe the rows.
    `input_tokens` are the input text's tokens, `input_tokens_in_records` those of them in at
    least one record (`instances.tokens_in_instances`); the others are dropped.
    """

    documents: int = 0
    input_tokens: int = 0
    input_tokens_in_records: int = 0
    instances: int = 0
    instance_tokens: int = 0
    masked_tokens: int = 0
    random_next: int = 0
    records: int = 0
    records_per_file: dict = dataclasses.field(default_factory=dict)
    options: InstanceOptions = None

    def add_records(self, stats):
        """stats: (real tokens, masked tokens, random next, instances) of records written."""
        tokens, masked, random_next, instances = stats
        self.instance_tokens += tokens
        self.masked_tokens += masked
        self.random_next += random_next
        self.instances += instances

    @property
    def masked_fraction(self):
        """Mean share of an instance's real tokens (incl. [CLS]/[SEP]) that are predicted."""
        return self.masked_tokens / self.instance_tokens if self.instance_tokens else 0.0

    @property
    def dropped_tokens(self):
        """Input tokens in no record."""
        return self.input_tokens - self.input_tokens_in_records

    def text_line(self):
        """`text: N input tokens, M in records, K dropped (P%)`."""
        share = 100 * self.dropped_tokens / self.input_tokens if self.input_tokens else 0.0
        return (f"text: {self.input_tokens} input tokens, {self.input_tokens_in_records} in "
                f"records, {self.dropped_tokens} dropped ({share:.2f}%)")

    @property
    def random_next_fraction(self):
        return self.random_next / self.instances if self.instances else 0.0

    def padding_fraction(self, rows):
        """Share of `rows` rows' max_seq_length positions that are padding."""
        capacity = rows * (self.options or InstanceOptions()).max_seq_length
        return 1.0 - self.instance_tokens / capacity if capacity else 0.0

    def format(self):
        """The closing summary: records per file, input tokens in records and dropped, tokens,
        padding, masked fraction, random-next share."""
        options = self.options or InstanceOptions()
        packed = options.pack_sequences
        what = (f"{self.instances} instances in {self.records} rows" if packed
                else f"{self.instances} instances")
        lines = [f"Wrote {what} from {self.documents} documents "
                 f"({self.input_tokens} input tokens):"]
        for path, count in self.records_per_file.items():
            lines.append(f"  {path}: {count} {'rows' if packed else 'instances'}")
        lines.append(f"  {self.text_line()}")
        per_instance = self.instance_tokens / self.instances if self.instances else 0.0
        lines.append(f"  tokens in instances: {self.instance_tokens} ({per_instance:.1f} per "
                     f"instance, incl. [CLS]/[SEP])")
        if not options.is_original:
            lines.append(f"  layout: {options.describe()}")
        if packed:
            lines.append(f"  packing: {self.instances} rows before, {self.records} after "
                         f"({self.instances / max(self.records, 1):.2f} instances a row); "
                         f"padding fraction {self.padding_fraction(self.instances):.4f} before, "
                         f"{self.padding_fraction(self.records):.4f} after")
        else:
            lines.append(f"  padding fraction: {self.padding_fraction(self.instances):.4f} of "
                         f"{self.instances} rows x {options.max_seq_length} tokens")
        if options.masking == "static":
            lines.append(f"  masked: {self.masked_tokens} tokens, mean masked fraction "
                         f"{self.masked_fraction:.4f}")
        else:
            lines.append("  masked: none written (dynamic masking: masks are drawn when read)")
        if options.next_sentence:
            lines.append(f"  random next: {self.random_next} "
                         f"({self.random_next_fraction:.4f})")
        return "\n".join(lines)
