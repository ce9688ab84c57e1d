"""Keras 3 layers of the original BERT, each small, composable and serialisable (get_config).

The math is the original `modeling.py`'s: embeddings (word + token type + position) then
LayerNorm (epsilon 1e-12) and dropout; post-LayerNorm transformer layers; the attention mask adds
-10000 to the logits of padding positions; the pooler is dense + tanh on the first token.

Speed choices (measured with micro-benchmarks and `python -m bench.training.encoder_throughput`;
figures in docs/model.md), none of which changes the outputs beyond float rounding:
- Hidden states stay flat, [batch * seq, hidden], between layers, as the original does, so every
  dense layer is a plain 2-D matmul (no tensordot reshapes).
- Query, key and value are one fused [hidden, 3 * hidden] projection (one matmul instead of three);
  `bert_tf.model.checkpoints` splits/concatenates it to the original's separate query/key/value.
- One transpose brings Q, K and V to [batch, heads, seq, head_size] together (then unstack,
  whose gradient is cheap).
- Dense layers use bias_add, which oneDNN fuses with the matmul and the GELU at inference.
- In training, GELU, LayerNorm(x + residual) and dropout masking run as the XLA-fused kernels
  with hand-written gradients of `bert_tf.model.cpu_kernels`, and the float32 intermediate layer
  computes its input gradient from a transposed copy of the kernel; one switch there turns them
  all off (GPU, TPU). At inference no XLA kernel runs: plain ops are as fast there, and XLA
  compiles again for every new shape (length-bucketed batches).
- A model whose loss reads a few positions of the last layer (pretraining: [CLS] and the masked
  positions) computes that layer only there (`positions`).
- Matmuls stay oneDNN's (no whole-model XLA: on CPU they beat XLA's, docs/model.md).
- Under mixed precision, embedding lookups gather from the float32 table and cast only the gathered
  rows; LayerNorm and the log-softmax of the heads run in float32.
"""
import math

import keras
import tensorflow as tf

from bert_tf.model import quantization
from bert_tf.model.activations import get_activation
from bert_tf.model.cpu_kernels import (DROPOUT_BITS, cpu_kernels_enabled, dropout_with_bits,
                                       fused_layer_norm, layer_norm_forward,
                                       matmul_with_transposed_kernel_gradient, random_bits_like,
                                       transposes_kernel_for_gradient)

LAYER_NORM_EPSILON = 1e-12
ATTENTION_MASK_ADDER = -10000.0


def truncated_normal(stddev, seed=None):
    """The original's `create_initializer`: truncated normal with the initializer range."""
    return keras.initializers.TruncatedNormal(stddev=stddev, seed=seed)


def _quantize_kernel(layer, name, mode):
    """Replaces `layer`'s float kernel attribute `name` by `kernel_int8`, `kernel_scale` and
    `kernel_sum` (bert_tf.model.quantization: int8 per output unit, for inference only)."""
    if mode != "int8":
        raise NotImplementedError(f"{type(layer).__name__} quantizes to int8 only, not {mode}")
    if layer.kernel_int8 is not None:
        raise ValueError(f"layer {layer.name} is already quantized")
    kernel = getattr(layer, name)
    values, scale, column_sums = quantization.quantize_kernel(kernel.numpy())
    layer._tracker.unlock()
    layer._untrack_variable(kernel)
    # Past keras.Layer.__delattr__, which runs gc.collect() for each variable it deletes
    # (seconds per model, once per kernel): the float kernel goes with its last reference.
    super(keras.layers.Layer, layer).__delattr__(name)
    del kernel
    layer.kernel_int8 = layer.add_weight(name=f"{name}_int8", shape=values.shape,
                                         initializer="zeros", dtype="int8", trainable=False)
    layer.kernel_scale = layer.add_weight(name=f"{name}_scale", shape=scale.shape,
                                          initializer="ones", dtype="float32", trainable=False)
    layer.kernel_sum = layer.add_weight(name=f"{name}_sum", shape=scale.shape,
                                        initializer="zeros", dtype="float32", trainable=False)
    layer._tracker.lock()
    layer.kernel_int8.assign(values)
    layer.kernel_scale.assign(scale)
    layer.kernel_sum.assign(column_sums)


class Dense(keras.layers.Layer):
    """y = activation(x @ kernel + bias) on flat [N, in] inputs, the original's `tf.layers.dense`.

    Unlike keras.layers.Dense (matmul + add), it uses tf.nn.bias_add: TensorFlow's oneDNN graph
    rewrite then fuses matmul + bias + GELU into one kernel, faster than matmul + add
    (docs/model.md, speed choices).
    Weights: kernel [in, units], bias; quantized for inference (`quantize("int8")`,
    bert_tf.model.quantization): kernel_int8, kernel_scale and kernel_sum instead of the kernel.
    """

    kernel_int8 = None  # set by quantize("int8")

    def __init__(self, units, input_size, activation=None, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.input_size = input_size
        self.activation_name = activation
        if activation:
            get_activation(activation)  # an unknown name fails here, not at the first call
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.kernel = self.add_weight(name="kernel", shape=(self.input_size, self.units),
                                      initializer=truncated_normal(self.initializer_range))
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")
        self.built = True

    def quantize(self, mode=None, type_check=True, config=None):
        """Keras 3's `Layer.quantize` for this layer: "int8" (inference only)."""
        _quantize_kernel(self, "kernel", mode)

    def call(self, x, training=False):
        if self.kernel_int8 is not None:
            y, activated = quantization.quantized_dense(
                x, self.kernel_int8, self.kernel_scale, self.kernel_sum, self.bias,
                self.activation_name)
            activation = not activated and self.activation_name and get_activation(
                self.activation_name)
            return tf.cast(activation(y) if activation else y, self.compute_dtype)
        if training and x.dtype == tf.float32 and transposes_kernel_for_gradient(
                self.input_size, self.units) and cpu_kernels_enabled():
            y = matmul_with_transposed_kernel_gradient(x, tf.convert_to_tensor(self.kernel))
        else:
            y = tf.matmul(x, self.kernel)
        y = tf.nn.bias_add(y, self.bias)
        activation = self.activation_name and get_activation(self.activation_name, training)
        return activation(y) if activation else y

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, input_size=self.input_size,
                      activation=self.activation_name, initializer_range=self.initializer_range)
        return config


class Dropout(keras.layers.Dropout):
    """keras.layers.Dropout (same rate, seed generator and config), cheaper on CPU (docs/model.md).

    Each element is dropped when 16 random bits fall below round(rate * 2^16), a drop
    probability within 8e-6 of `rate`, and the kept ones are scaled by 2^16 / (2^16 - that), so
    the expectation is kept exactly. The bits come from XLA's Threefry, 16 per element (Keras
    draws a float32 uniform per element with TF's slower Philox kernel), and masking and scaling
    run as one fused pass forward and backward
    (BERT-Base pretraining has 3 dropouts per layer, ~3M elements each per batch of 8 x 128).
    """

    # False: a training call drops nothing and draws no random bits (`set_dropout`), read
    # when a step is traced.
    enabled = True

    def draws(self):
        """Whether a training call draws random bits (a seed from the seed generator)."""
        return self.enabled and 0 < self.rate < 1 and self.noise_shape is None

    def next_seed(self):
        """The stateless seed of the next training call (advancing the seed generator): to
        draw it outside a function that runs twice (`TransformerLayer`'s recomputation) and
        pass it to `call` as `seed`."""
        # Keras' seed handling (tensorflow backend): uint32 state -> int32 stateless seed.
        seed = self.seed_generator.next()
        return tf.cast(tf.math.floormod(tf.cast(seed, tf.int64), tf.int32.max - 1), tf.int32)

    def call(self, inputs, training=False, seed=None):
        """`seed`: the mask's seed, drawn beforehand by `next_seed` (None: drawn now)."""
        if not training or self.rate == 0 or not self.enabled:
            return inputs
        if not self.draws():
            return super().call(inputs, training=training)
        threshold = round(self.rate * 2 ** DROPOUT_BITS)
        scale = 2 ** DROPOUT_BITS / (2 ** DROPOUT_BITS - threshold)
        if seed is None:
            seed = self.next_seed()
        bits = random_bits_like(inputs, seed)
        if not cpu_kernels_enabled():  # the same bits, masked by plain ops
            kept = tf.cast(tf.cast(inputs, tf.float32) * scale, inputs.dtype)
            return tf.where(bits >= tf.constant(threshold, tf.uint16), kept,
                            tf.zeros_like(kept))
        return dropout_with_bits(inputs, bits, tf.constant(threshold, tf.uint16),
                                  tf.constant(scale, tf.float32))


def set_dropout(model, enabled):
    """Turns every dropout layer of `model` off (`enabled` False: training steps traced from now
    on drop nothing, and the layers' seed states stay where they are) or back on at its rate."""
    for layer in model._flatten_layers():
        if isinstance(layer, Dropout):
            layer.enabled = enabled


class LayerNorm(keras.layers.LayerNormalization):
    """The original's LayerNorm (last axis, epsilon 1e-12, float32 math) of the sum of its inputs.

    `layer(x, residual, training=True)` is LayerNorm(x + residual) in one fused pass forward and
    one backward (XLA; Keras' LayerNormalization runs ~8 separate memory-bound ops each way, and
    the residual add is one more). Input and output are in the compute dtype; gamma and beta
    stay float32.
    """

    def __init__(self, name, dtype=None, **kwargs):
        kwargs.setdefault("axis", -1)
        kwargs.setdefault("epsilon", LAYER_NORM_EPSILON)
        kwargs.setdefault("autocast", False)  # gamma and beta are used in float32
        super().__init__(name=name, dtype=dtype, **kwargs)

    def call(self, inputs, residual=None, training=False):
        summands = [inputs] if residual is None else [inputs, residual]
        gamma, beta = tf.convert_to_tensor(self.gamma), tf.convert_to_tensor(self.beta)
        if not (training and cpu_kernels_enabled()):
            # Inference: the plain ops are as fast, and XLA would compile the kernel again for
            # every new batch shape (length-bucketed predict; docs/fine_tuning.md, what did not
            # help).
            return layer_norm_forward.python_function(summands, gamma, beta, self.epsilon)[0]
        return fused_layer_norm(summands, gamma, beta, self.epsilon)


def attention_bias_from_mask(input_mask, dtype):
    """[B, T] 0/1 mask -> [B, 1, 1, T] additive bias: 0 for real tokens, -10000 for padding."""
    mask = tf.cast(input_mask, dtype)
    # expand_dims, not [:, None, None, :]: TFLite's converter has no builtin for a strided
    # slice that adds two axes (bert_tf.serving.litert).
    bias = (1.0 - mask) * tf.cast(ATTENTION_MASK_ADDER, dtype)
    return tf.expand_dims(tf.expand_dims(bias, 1), 1)


def attention_bias_from_sequence_ids(sequence_ids, dtype):
    """[B, T] sequence ids (1, 2, ... per packed sequence, 0 padding) -> [B, 1, T, T] additive
    bias: 0 where query and key belong to the same nonzero sequence, -10000 elsewhere (a padding
    query attends nowhere: its output is read by no loss)."""
    keys = tf.expand_dims(sequence_ids, 1)
    same = tf.equal(tf.expand_dims(sequence_ids, 2), keys) & tf.not_equal(keys, 0)
    bias = (1.0 - tf.cast(same, dtype)) * tf.cast(ATTENTION_MASK_ADDER, dtype)
    return tf.expand_dims(bias, 1)


def gather_positions(sequence_output, positions):
    """[B, T, H] and [B, P] int positions -> [B, P, H] (the original's `gather_indexes`)."""
    return tf.gather(sequence_output, tf.cast(positions, tf.int32), batch_dims=1)


class BertEmbeddings(keras.layers.Layer):
    """Word + token type + position embeddings, LayerNorm, dropout.

    Call on (input_ids [B, T], segment_ids [B, T]); returns [B * T, H] (flat) in the compute dtype.
    Weights (original names under bert/embeddings/): word_embeddings [V, H],
    token_type_embeddings [type_vocab_size, H], position_embeddings [max_position, H], LayerNorm.
    """

    def __init__(self, vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
                 initializer_range=0.02, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        self.layer_norm = LayerNorm("LayerNorm", dtype="float32")
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        init = truncated_normal(self.initializer_range)
        # autocast=False: gather float32 rows, cast only those (not the whole table) under
        # mixed precision.
        self.word_embeddings = self.add_weight(
            name="word_embeddings", shape=(self.vocab_size, self.hidden_size), initializer=init,
            autocast=False)
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings", shape=(self.type_vocab_size, self.hidden_size),
            initializer=init, autocast=False)
        self.position_embeddings = self.add_weight(
            name="position_embeddings", shape=(self.max_position_embeddings, self.hidden_size),
            initializer=init, autocast=False)
        self.layer_norm.build((None, self.hidden_size))
        self.built = True

    def call(self, input_ids, segment_ids, training=False, position_ids=None):
        """`position_ids` [B, T]: each token's position (packed rows restart at 0 in each
        sequence); None: 0 .. T-1."""
        seq_length = input_ids.shape[1] or tf.shape(input_ids)[1]
        flat_ids = tf.reshape(input_ids, [-1])
        flat_types = tf.reshape(segment_ids, [-1])
        x = tf.gather(self.word_embeddings, flat_ids) + tf.gather(self.token_type_embeddings,
                                                                  flat_types)
        x = tf.reshape(x, [-1, seq_length, self.hidden_size])
        if position_ids is None:
            x = x + self.position_embeddings[tf.newaxis, :seq_length, :]
        else:
            x = x + tf.gather(self.position_embeddings, tf.cast(position_ids, tf.int32))
        x = self.layer_norm(tf.reshape(x, [-1, self.hidden_size]))
        x = tf.cast(x, self.compute_dtype)
        return self.dropout(x, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                      max_position_embeddings=self.max_position_embeddings,
                      type_vocab_size=self.type_vocab_size,
                      initializer_range=self.initializer_range, dropout_rate=self.dropout_rate)
        return config


class BertSelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product self-attention with a fused QKV projection.

    Call on (x [B * T, H] flat, attention_bias [B, 1, 1, T] or [B, 1, T, T], seq_length);
    returns the context
    [B * T, H] (before the output projection, as the original's `attention_layer`), or [B * P, H]
    for P query rows per sequence given as `query`.
    Weights: qkv_kernel [H, 3H] = concat(query, key, value kernels), qkv_bias [3H]; quantized
    for inference (`quantize("int8")`): kernel_int8, kernel_scale and kernel_sum instead of
    qkv_kernel.
    """

    kernel_int8 = None  # set by quantize("int8")

    def __init__(self, hidden_size, num_attention_heads, initializer_range=0.02,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of "
                             f"num_attention_heads {num_attention_heads}")
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.head_size = hidden_size // num_attention_heads
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.qkv_kernel = self.add_weight(
            name="qkv_kernel", shape=(self.hidden_size, 3 * self.hidden_size),
            initializer=truncated_normal(self.initializer_range))
        self.qkv_bias = self.add_weight(name="qkv_bias", shape=(3 * self.hidden_size,),
                                        initializer="zeros")
        self.built = True

    def quantize(self, mode=None, type_check=True, config=None):
        """Keras 3's `Layer.quantize` for the QKV projection: "int8" (inference only)."""
        _quantize_kernel(self, "qkv_kernel", mode)

    def _project(self, x, columns=None):
        """x @ qkv_kernel + qkv_bias, or their `columns` (a slice) only (float or int8)."""
        if self.kernel_int8 is not None:
            kernel, scale, sums, bias = (self.kernel_int8, self.kernel_scale, self.kernel_sum,
                                         self.qkv_bias)
            if columns is not None:
                kernel, scale, sums, bias = (kernel[:, columns], scale[columns], sums[columns],
                                             bias[columns])
            return tf.cast(quantization.quantized_dense(x, kernel, scale, sums, bias)[0],
                           self.compute_dtype)
        kernel, bias = self.qkv_kernel, self.qkv_bias
        if columns is not None:
            kernel, bias = kernel[:, columns], bias[columns]
        return tf.nn.bias_add(tf.matmul(x, kernel), bias)

    def call(self, x, attention_bias, seq_length, training=False, query=None,
             dropout_seed=None):
        """`query`: optional flat [B * P, H] rows (e.g. the hidden states at P chosen positions)
        that attend over the whole sequence `x` instead of every position of `x`.
        `dropout_seed`: the attention dropout's seed, drawn beforehand (`Dropout.next_seed`)."""
        n, d, h = self.num_attention_heads, self.head_size, self.hidden_size
        if query is None:
            qkv = self._project(x)
            # [B*T, 3H] -> [3, B, N, T, D]: one transpose for all three. unstack (not qkv[i]) so
            # that the gradient is a cheap stack, not three scatters into zeros (faster forward
            # + backward in float32 and bfloat16: docs/model.md, speed choices).
            qkv = tf.transpose(tf.reshape(qkv, [-1, seq_length, 3, n, d]), [2, 0, 3, 1, 4])
            query, key, value = tf.unstack(qkv, 3)
        else:
            kv = self._project(x, slice(h, None))
            kv = tf.transpose(tf.reshape(kv, [-1, seq_length, 2, n, d]), [2, 0, 3, 1, 4])
            key, value = tf.unstack(kv, 2)
            query = self._project(query, slice(None, h))
            query = tf.transpose(tf.reshape(query, [tf.shape(key)[0], -1, n, d]), [0, 2, 1, 3])
        scores = tf.matmul(query, key, transpose_b=True) * tf.cast(1.0 / math.sqrt(d), x.dtype)
        scores = scores + tf.cast(attention_bias, scores.dtype)
        if scores.dtype == tf.float16:
            # float16 has too little range for a stable softmax; bfloat16 has float32's range.
            probs = tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32)), scores.dtype)
        else:
            probs = tf.nn.softmax(scores)
        probs = self.dropout(probs, training=training, seed=dropout_seed)
        context = tf.matmul(probs, value)  # [B, N, T (or P), D]
        context = tf.transpose(context, [0, 2, 1, 3])
        return tf.reshape(context, [-1, h])

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_attention_heads=self.num_attention_heads,
                      initializer_range=self.initializer_range, dropout_rate=self.dropout_rate)
        return config


class TransformerLayer(keras.layers.Layer):
    """One post-LayerNorm transformer layer, as the original's `transformer_model` body.

    attention -> dense -> dropout -> LayerNorm(+ input) -> intermediate dense + activation ->
    dense -> dropout -> LayerNorm(+ attention output). Works on flat [B * T, H] hidden states.
    Sub-layer names follow the original: attention/self, attention/output/dense,
    attention/output/LayerNorm, intermediate/dense, output/dense, output/LayerNorm.

    `recompute` (`set_recompute`): in training, keep only the layer's input for the backward
    pass and compute its activations again there (tf.recompute_grad; "gradient
    checkpointing"). The activations of a layer at sequence length T hold a few [B, N, T, T]
    attention tensors and [B * T, 4H] ones: BERT-Large at 512 keeps ~24 x 0.5 GB of them per
    8 sequences. Recomputing costs one more forward pass of the layers (about a third more
    compute per step), the gradients are the same: the dropout masks are drawn once, before
    the layer runs, and the recomputation reuses their seeds.
    """

    def __init__(self, hidden_size, num_attention_heads, intermediate_size, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 initializer_range=0.02, recompute=False, **kwargs):
        super().__init__(**kwargs)
        self.recompute = recompute
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.attention = BertSelfAttention(hidden_size, num_attention_heads, initializer_range,
                                           attention_probs_dropout_prob, name="self",
                                           dtype=self.dtype_policy)
        self.attention_output = Dense(hidden_size, hidden_size, None, initializer_range,
                                      name="attention_output_dense", dtype=self.dtype_policy)
        self.attention_layer_norm = LayerNorm("attention_output_LayerNorm",
                                              dtype=self.dtype_policy)
        self.intermediate = Dense(intermediate_size, hidden_size, hidden_act, initializer_range,
                                  name="intermediate_dense", dtype=self.dtype_policy)
        self.output_dense = Dense(hidden_size, intermediate_size, None, initializer_range,
                                  name="output_dense", dtype=self.dtype_policy)
        self.output_layer_norm = LayerNorm("output_LayerNorm", dtype=self.dtype_policy)
        self.dropout = Dropout(hidden_dropout_prob, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        h = self.hidden_size
        self.attention.build(None)
        self.attention_output.build(None)
        self.attention_layer_norm.build((None, h))
        self.intermediate.build(None)
        self.output_dense.build(None)
        self.output_layer_norm.build((None, h))
        self.built = True

    def call(self, x, attention_bias, seq_length, training=False, positions=None):
        """`positions`: optional [B, P] int; then the layer's output is computed only at those
        positions ([B * P, H]; their attention still reads every position). A model whose loss
        reads a few positions of the last layer (masked-LM, [CLS]) skips the rest of its work."""
        if not (training and self.recompute):
            return self._forward(x, attention_bias, seq_length, training, positions)
        # The seeds of the three dropout masks, drawn in the order the forward pass draws them:
        # the recomputation then drops what the forward pass dropped (drawing again would give
        # other masks, and other gradients), and what the layer drops without recompute.
        seeds = [dropout.next_seed() if dropout.draws() else None
                 for dropout in (self.attention.dropout, self.dropout, self.dropout)]
        forward = tf.recompute_grad(
            lambda h: self._forward(h, attention_bias, seq_length, True, positions, seeds))
        return forward(x)

    def _forward(self, x, attention_bias, seq_length, training, positions, seeds=(None,) * 3):
        query = None
        if positions is not None:
            query = gather_positions(tf.reshape(x, [-1, seq_length, self.hidden_size]), positions)
            query = tf.reshape(query, [-1, self.hidden_size])
            if attention_bias.shape[2] != 1:  # a bias per query row (packed sequences)
                attention_bias = tf.expand_dims(
                    gather_positions(attention_bias[:, 0], positions), 1)
        context = self.attention(x, attention_bias, seq_length=seq_length, training=training,
                                 query=query, dropout_seed=seeds[0])
        if query is not None:
            x = query
        attention_output = self.dropout(self.attention_output(context), training=training,
                                        seed=seeds[1])
        attention_output = self.attention_layer_norm(attention_output, x)
        hidden = self.output_dense(self.intermediate(attention_output, training=training))
        hidden = self.dropout(hidden, training=training, seed=seeds[2])
        return self.output_layer_norm(hidden, attention_output)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_attention_heads=self.num_attention_heads,
                      intermediate_size=self.intermediate_size, hidden_act=self.hidden_act,
                      hidden_dropout_prob=self.hidden_dropout_prob,
                      attention_probs_dropout_prob=self.attention_probs_dropout_prob,
                      initializer_range=self.initializer_range, recompute=self.recompute)
        return config


def set_recompute(model, on=True):
    """Turns `TransformerLayer.recompute` on (or off) in every transformer layer of `model`
    (any model holding BertEncoders); returns how many. Read when the training function is
    traced: set it before."""
    layers = [layer for layer in model._flatten_layers(include_self=True)
              if isinstance(layer, TransformerLayer)]
    for layer in layers:
        layer.recompute = bool(on)
    return len(layers)


class BertPooler(keras.layers.Layer):
    """Dense + tanh on the first token's hidden state (original: bert/pooler/dense)."""

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dense = Dense(hidden_size, hidden_size, "tanh", initializer_range, name="dense",
                           dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.dense.build(None)
        self.built = True

    def call(self, sequence_output):
        return self.dense(sequence_output[:, 0, :])

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range)
        return config


class HeadTransform(keras.layers.Layer):
    """Dense + activation + LayerNorm before the masked-LM output (cls/predictions/transform)."""

    def __init__(self, hidden_size, hidden_act="gelu", initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.dense = Dense(hidden_size, hidden_size, hidden_act, initializer_range, name="dense",
                           dtype=self.dtype_policy)
        self.layer_norm = LayerNorm("LayerNorm", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.dense.build(None)
        self.layer_norm.build((None, self.hidden_size))
        self.built = True

    def call(self, x):
        return self.layer_norm(self.dense(x))

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, hidden_act=self.hidden_act,
                      initializer_range=self.initializer_range)
        return config


class OutputProjection(keras.layers.Layer):
    """logits = x @ output_weights^T + output_bias, in float32.

    The original's head layout: `output_weights` is [units, hidden] (transposed w.r.t. a Dense
    kernel) and `output_bias` is [units]; used by next-sentence, classification, SQuAD and
    token-classification heads.
    """

    def __init__(self, units, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(self.units, self.hidden_size),
            initializer=truncated_normal(self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.units,),
                                           initializer="zeros", autocast=False)
        self.built = True

    def call(self, x):
        logits = tf.matmul(x, self.output_weights, transpose_b=True)
        return tf.nn.bias_add(tf.cast(logits, tf.float32), self.output_bias)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, hidden_size=self.hidden_size,
                      initializer_range=self.initializer_range)
        return config
