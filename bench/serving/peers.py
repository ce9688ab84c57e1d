"""The serving peers of bench/serving/latency.py, run inside the venv of bench/envs/serving_env.sh.

    bash bench/envs/serving_env.sh
    ~/.cache/bert_tf/serving-venv/bin/python -m bench.serving.peers --init_dir DIR --work_dir DIR

The same classifier as our SavedModel (the `init_dir` that bench.common.write_init_dir
writes: a Hugging Face BertForSequenceClassification directory with the MiniLM encoder and a
seeded 2-class head), served three ways, tokenization included on every side (transformers'
BertTokenizerFast of the same directory, padding to the batch's longest text, truncation at
--max_seq_length):

  ort_fp32      torch.onnx export (dynamic batch and sequence axes) of the model, then
                onnxruntime.transformers.optimizer.optimize_model(model_type="bert",
                num_heads, hidden_size from the config) and saved; an ONNX Runtime session.
  ort_int8      onnxruntime.quantization.quantize_dynamic of that optimized graph, QInt8 weights.
  transformers  the PyTorch model itself, eager, torch.set_num_threads(--threads).

ONNX Runtime sessions: intra_op_num_threads=--threads, inter_op_num_threads=1, sequential
execution. The exported files are kept in --work_dir and reused by a later worker.

Protocol: one JSON object per line on stdin, one JSON answer per line on stdout (everything
else the libraries print goes to stderr). Requests:
  {"cmd": "info"}                            -> versions, threads, the peers' model files, export
                                                and load seconds, the fused-operator counts
  {"cmd": "predict", "peer": P, "texts": T, "batch": 32}
                                             -> {"probabilities": [[p0, p1], ...]} in text order
  {"cmd": "measure", "peer": P, "texts": T, "latency_texts": 200, "batch": 32}
                                             -> {"latency_ms": [...], "median_ms", "p90_ms",
                                                 "texts_per_s", "load"}: batch-1 calls on the
                                                first latency_texts texts one after the other,
                                                then every text in batches of `batch` (one
                                                warm-up call of a batch first)
  {"cmd": "quit"}
T is a list of strings (single texts) or of [text_a, text_b] pairs. A failed request answers
{"error": "..."} and the worker goes on.
"""
import argparse
import json
import os
import statistics
import sys
import time

from bench.common import load_average, p90, serve_timings

PEERS = ("ort_fp32", "ort_int8", "transformers")


def ort_session(path, threads):
    """An ONNX Runtime CPU session on `path`, as the peers serve: `threads` intra-op threads,
    one inter-op, sequential execution, every graph optimization."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def softmax(logits):
    import numpy as np
    logits = logits - logits.max(-1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(-1, keepdims=True)


class Peers:
    def __init__(self, init_dir, work_dir, max_seq_length=128, threads=2, log=None):
        import torch
        from transformers import BertTokenizerFast

        self.init_dir = init_dir
        self.work_dir = work_dir
        self.max_seq_length = max_seq_length
        self.threads = threads
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        torch.set_num_threads(threads)
        self.tokenizer = BertTokenizerFast.from_pretrained(init_dir)
        with open(os.path.join(init_dir, "config.json")) as f:
            self.config = json.load(f)
        self.info = {"threads": threads, "max_seq_length": max_seq_length}
        self._runners = {}
        os.makedirs(work_dir, exist_ok=True)

    # ---- The models.
    def _torch_model(self, attn_implementation=None):
        from transformers import BertForSequenceClassification
        kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
        model = BertForSequenceClassification.from_pretrained(self.init_dir, **kwargs)
        return model.eval()

    def onnx_paths(self):
        return {"raw": os.path.join(self.work_dir, "model.onnx"),
                "ort_fp32": os.path.join(self.work_dir, "model_opt.onnx"),
                "ort_int8": os.path.join(self.work_dir, "model_opt_int8.onnx")}

    def export(self):
        """The three ONNX files (kept in work_dir; existing ones are reused)."""
        import torch

        paths = self.onnx_paths()
        if not os.path.exists(paths["raw"]):
            start = time.perf_counter()
            # The eager attention: the graph ONNX Runtime's BERT fusions recognise.
            model = self._torch_model("eager")
            sample = self.tokenizer(["a short text", "and a somewhat longer second one"],
                                    padding=True, return_tensors="pt")
            names = ["input_ids", "attention_mask", "token_type_ids"]
            axes = {name: {0: "batch", 1: "sequence"} for name in names}
            axes["logits"] = {0: "batch"}
            with torch.no_grad():
                torch.onnx.export(model, tuple(sample[n] for n in names), paths["raw"],
                                  input_names=names, output_names=["logits"],
                                  dynamic_axes=axes, opset_version=17, dynamo=False)
            self.info["export_s"] = round(time.perf_counter() - start, 1)
        if not os.path.exists(paths["ort_fp32"]):
            from onnxruntime.transformers.optimizer import optimize_model
            start = time.perf_counter()
            optimized = optimize_model(paths["raw"], model_type="bert",
                                       num_heads=self.config["num_attention_heads"],
                                       hidden_size=self.config["hidden_size"])
            optimized.save_model_to_file(paths["ort_fp32"])
            self.info["fused_operators"] = optimized.get_fused_operator_statistics()
            self.info["optimize_s"] = round(time.perf_counter() - start, 1)
        if not os.path.exists(paths["ort_int8"]):
            import onnx
            from onnxruntime.quantization import QuantType, quantize_dynamic
            start = time.perf_counter()
            # ONNX's shape inference does not type the outputs of the fused com.microsoft ops
            # (Attention, SkipLayerNormalization, ...): they are float32.
            quantize_dynamic(paths["ort_fp32"], paths["ort_int8"], weight_type=QuantType.QInt8,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
            self.info["quantize_s"] = round(time.perf_counter() - start, 1)
        return paths

    def _ort_runner(self, path):
        import numpy as np

        session = ort_session(path, self.threads)
        names = [i.name for i in session.get_inputs()]
        self.info.setdefault("onnx_inputs", names)

        def run(texts):
            encoded = self._encode(texts, "np")
            feed = {name: encoded[name].astype(np.int64) for name in names}
            logits = session.run(None, feed)[0]
            return softmax(logits)
        return run

    def _torch_runner(self):
        import torch

        model = self._torch_model()
        self.info["transformers_attn_implementation"] = model.config._attn_implementation

        def run(texts):
            encoded = self._encode(texts, "pt")
            with torch.inference_mode():
                logits = model(**encoded).logits
            return torch.softmax(logits.float(), -1).numpy()
        return run

    def _encode(self, texts, tensors):
        if texts and isinstance(texts[0], (list, tuple)):
            a, b = zip(*texts)
            return self.tokenizer(list(a), list(b), padding=True, truncation="longest_first",
                                  max_length=self.max_seq_length, return_tensors=tensors)
        return self.tokenizer(list(texts), padding=True, truncation=True,
                              max_length=self.max_seq_length, return_tensors=tensors)

    def runner(self, peer):
        if peer not in self._runners:
            if peer not in PEERS:
                raise ValueError(f"unknown peer {peer!r} (known: {', '.join(PEERS)})")
            start = time.perf_counter()
            if peer == "transformers":
                self._runners[peer] = self._torch_runner()
            else:
                path = self.export()[peer]
                self._runners[peer] = self._ort_runner(path)
                self.info[f"{peer}_file"] = path
                self.info[f"{peer}_mb"] = round(os.path.getsize(path) / 2 ** 20, 1)
            self.info[f"{peer}_load_s"] = round(time.perf_counter() - start, 1)
        return self._runners[peer]

    # ---- The requests.
    def predict(self, peer, texts, batch=32):
        import numpy as np
        run = self.runner(peer)
        out = [run(texts[i:i + batch]) for i in range(0, len(texts), batch)]
        return {"probabilities": np.concatenate(out).tolist()}

    def measure(self, peer, texts, latency_texts=200, batch=32):
        run = self.runner(peer)
        run(texts[:batch])  # warm-up
        times, texts_per_s = serve_timings(run, texts, latency_texts, batch)
        return {"latency_ms": times, "median_ms": statistics.median(times),
                "p90_ms": p90(times), "texts_per_s": texts_per_s, "load": load_average()}

    def versions(self):
        import onnx
        import onnxruntime
        import torch
        import transformers
        return {"torch": torch.__version__, "transformers": transformers.__version__,
                "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
                "torch_threads": torch.get_num_threads()}


def serve(peers, requests, answer):
    for line in requests:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
            cmd = request.get("cmd")
            if cmd == "quit":
                answer({"ok": True})
                return
            if cmd == "info":
                for peer in request.get("peers", ()):
                    peers.runner(peer)
                result = dict(peers.info, **peers.versions())
            elif cmd == "predict":
                result = peers.predict(request["peer"], request["texts"],
                                       request.get("batch", 32))
            elif cmd == "measure":
                result = peers.measure(request["peer"], request["texts"],
                                       request.get("latency_texts", 200),
                                       request.get("batch", 32))
            else:
                raise ValueError(f"unknown cmd {cmd!r}")
        except Exception as error:  # the driver reports it; the worker goes on
            result = {"error": f"{type(error).__name__}: {error}"}
        answer(result)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--init_dir", required=True,
                        help="bench.common.write_init_dir's Hugging Face directory")
    parser.add_argument("--work_dir", required=True, help="where the ONNX files are kept")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # The protocol owns the real stdout; anything a library prints goes to stderr.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr

    def answer(result):
        protocol.write(json.dumps(result) + "\n")
        protocol.flush()

    peers = Peers(args.init_dir, args.work_dir, args.max_seq_length, args.threads)
    answer({"ready": True})
    serve(peers, sys.stdin, answer)


if __name__ == "__main__":
    main()
