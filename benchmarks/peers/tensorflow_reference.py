"""TensorFlow/Keras 3 reference for dlscale: builds each dlscale workload in Keras with the same
layer shapes (CNNs channels_last, NHWC: TensorFlow's fast CPU layout), checks trainable parameter
counts against `dlscale --list-models` and prints the median CPU training-step time, one thread
count per process (TensorFlow fixes its thread pools at first use)."""
import argparse
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dlscale_models import BATCH, dlscale_parameter_counts  # noqa: E402  (benchmarks/)

MODES = {"xla": ("tensorflow-xla", True), "none": ("tensorflow-graph", False)}


def parse_args():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(
        description="TensorFlow/Keras training-step reference for dlscale (one thread count)")
    # The GPT family is compared with PyTorch only (issue 35 asks for scaled_dot_product_attention).
    known = [m for m in BATCH if not m.startswith("gpt")]
    parser.add_argument("--models", default=",".join(known), help="comma-separated models")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    parser.add_argument("--jit", choices=("xla", "none", "both"), default="both",
                        help="xla: tf.function(jit_compile=True); none: plain tf.function graph")
    parser.add_argument("--iters", type=int, default=5, help="measured steps")
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed steps after the first (tracing and compiling) call")
    parser.add_argument("--dlscale", default=os.path.join(here, "..", "..", "build", "dlscale"),
                        help="dlscale binary whose --list-models counts are checked")
    args = parser.parse_args()
    args.models = args.models.split(",")
    unknown = [m for m in args.models if m not in known]
    if unknown:
        sys.exit(f"unknown model(s) {unknown}; known: {', '.join(known)}")
    if args.threads < 1 or args.iters < 1 or args.warmup < 0:
        sys.exit("--threads and --iters must be at least 1, --warmup at least 0")
    return args


ARGS = parse_args()
# Both must be in the environment before TensorFlow loads: its C++ logging and any OpenMP
# runtime read them once.
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)

# TensorFlow 2.21 logs "oneDNN custom operations are on" through absl before absl's logging is
# set up, where TF_CPP_MIN_LOG_LEVEL does not reach: stderr is closed while TensorFlow loads (an
# import error still shows, its traceback printed after stderr is back).
_stderr, _devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
os.dup2(_devnull, 2)
try:
    import keras
    import tensorflow as tf
    from keras import layers
    from tensorflow.python.util import _pywrap_util_port
finally:
    os.dup2(_stderr, 2)
    os.close(_stderr)
    os.close(_devnull)

# XLA needs no pool of its own: TensorFlow runs an XLA:CPU executable with the calling device's
# Eigen intra-op pool (xla_launch_util.cc: run_options.set_intra_op_thread_pool), so this one
# setting bounds both modes.
tf.config.threading.set_intra_op_parallelism_threads(ARGS.threads)
tf.config.threading.set_inter_op_parallelism_threads(1)
keras.config.set_image_data_format("channels_last")


def conv_bn(x, out, kernel, stride=1, depthwise=False, act=None):
    """Bias-free convolution (PyTorch padding kernel // 2), batch norm, optional activation."""
    pad = kernel // 2
    if stride != 1 and pad:
        # "same" pads asymmetrically for strided convolutions; keep PyTorch's symmetric padding.
        x = layers.ZeroPadding2D(pad)(x)
    padding = "same" if stride == 1 else "valid"
    if depthwise:
        x = layers.DepthwiseConv2D(kernel, strides=stride, padding=padding, use_bias=False)(x)
    else:
        x = layers.Conv2D(out, kernel, strides=stride, padding=padding, use_bias=False)(x)
    # PyTorch's BatchNorm2d defaults (momentum 0.1 is Keras's 0.9); gamma and beta are trainable,
    # the moving mean and variance are not, as in PyTorch's buffers.
    x = layers.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
    return layers.Activation(act)(x) if act else x


def residual(x, body, cin, cout, stride, relu_after):
    """body(x) + shortcut(x); projection shortcut (1x1 conv + BN) where the shape changes."""
    shortcut = conv_bn(x, cout, 1, stride) if stride != 1 or cin != cout else x
    y = layers.Add()([body(x), shortcut])
    return layers.ReLU()(y) if relu_after else y


def fcn(sizes):
    inputs = x = keras.Input((sizes[0],))
    for i, size in enumerate(sizes[1:]):
        x = layers.Dense(size, activation="sigmoid" if i + 2 < len(sizes) else None)(x)
    return inputs, x


def alexnet_r():
    inputs = x = keras.Input((32, 32, 3))
    for out in (32, 32, 64):
        x = layers.Conv2D(out, 5, padding="same", activation="relu")(x)
        x = layers.MaxPooling2D(3, 2)(x)
    return inputs, layers.Dense(10)(layers.Flatten()(x))


def alexnet_s():  # torchvision AlexNet without dropout and without the adaptive pool
    inputs = keras.Input((224, 224, 3))
    x = layers.Conv2D(64, 11, 4, activation="relu")(layers.ZeroPadding2D(2)(inputs))
    x = layers.MaxPooling2D(3, 2)(x)
    x = layers.MaxPooling2D(3, 2)(layers.Conv2D(192, 5, padding="same", activation="relu")(x))
    for out in (384, 256, 256):
        x = layers.Conv2D(out, 3, padding="same", activation="relu")(x)
    x = layers.Flatten()(layers.MaxPooling2D(3, 2)(x))
    x = layers.Dense(4096, activation="relu")(x)
    x = layers.Dense(4096, activation="relu")(x)
    return inputs, layers.Dense(1000)(x)


def vgg_16():  # configuration D, no dropout; 0 marks a 2x2 max pool
    inputs = x = keras.Input((224, 224, 3))
    for out in (64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0):
        x = (layers.MaxPooling2D(2, 2)(x) if out == 0 else
             layers.Conv2D(out, 3, padding="same", activation="relu")(x))
    x = layers.Dense(4096, activation="relu")(layers.Flatten()(x))
    x = layers.Dense(4096, activation="relu")(x)
    return inputs, layers.Dense(1000)(x)


def resnet_56():
    inputs = keras.Input((32, 32, 3))
    x, channels = conv_bn(inputs, 16, 3, act="relu"), 16
    for width in (16, 32, 64):
        for block in range(9):
            stride = 2 if block == 0 and width != 16 else 1
            body = (lambda y, w=width, s=stride:
                    conv_bn(conv_bn(y, w, 3, s, act="relu"), w, 3))
            x, channels = residual(x, body, channels, width, stride, True), width
    return inputs, layers.Dense(10)(layers.GlobalAveragePooling2D()(x))


def resnet_50():  # v1: the stride on the first 1x1 convolution of a stage
    inputs = keras.Input((224, 224, 3))
    x = conv_bn(inputs, 64, 7, 2, act="relu")
    # Zero padding equals PyTorch's -inf padding here: the inputs are ReLU outputs, >= 0.
    x, channels = layers.MaxPooling2D(3, 2)(layers.ZeroPadding2D(1)(x)), 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for block in range(blocks):
            stride = 2 if block == 0 and width != 64 else 1
            body = (lambda y, w=width, s=stride: conv_bn(conv_bn(conv_bn(
                y, w, 1, s, act="relu"), w, 3, act="relu"), 4 * w, 1))
            x, channels = residual(x, body, channels, 4 * width, stride, True), 4 * width
    return inputs, layers.Dense(1000)(layers.GlobalAveragePooling2D()(x))


def mobilenet_v2():  # x1.0, torchvision layout without dropout
    inputs = keras.Input((224, 224, 3))
    x, channels = conv_bn(inputs, 32, 3, 2, act="relu6"), 32
    for expansion, out, blocks, first_stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2),
                                                 (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                                                 (6, 320, 1, 1)):
        for block in range(blocks):
            stride, hidden = (first_stride if block == 0 else 1), channels * expansion

            def body(y, hidden=hidden, stride=stride, out=out, expand=expansion != 1):
                if expand:
                    y = conv_bn(y, hidden, 1, act="relu6")
                y = conv_bn(y, hidden, 3, stride, depthwise=True, act="relu6")
                return conv_bn(y, out, 1)
            x = (residual(x, body, channels, out, 1, False) if stride == 1 and channels == out
                 else body(x))
            channels = out
    x = conv_bn(x, 1280, 1, act="relu6")
    return inputs, layers.Dense(1000)(layers.GlobalAveragePooling2D()(x))


def lstm_lm(vocabulary=10000, hidden=512):
    """Embedding 512, 2-layer LSTM 512, a 512->10000 linear at every step (input: batch x steps).
    Keras's LSTM has one bias per gate, as dlscale's."""
    inputs = keras.Input((None,), dtype="int32")
    x = layers.Embedding(vocabulary, hidden)(inputs)
    for _ in range(2):
        x = layers.LSTM(hidden, return_sequences=True)(x)
    return inputs, layers.Dense(vocabulary)(x)


def build(name, batch):
    """Returns (model, random input, random labels), the data as tensors made once."""
    if name.startswith("lstm-"):
        steps = int(name.split("-")[1])
        inputs, outputs = lstm_lm()
        data = tf.random.uniform((batch, steps), 0, 10000, tf.int32)
        labels = tf.random.uniform((batch, steps), 0, 10000, tf.int32)  # the next-token ids
        return keras.Model(inputs, outputs), data, labels
    builders = {"fcn-s": lambda: fcn([26752, 2048, 2048, 2048, 2048, 26752]),
                "fcn-r": lambda: fcn([784, 2048, 4096, 1024, 10]),
                "alexnet-r": alexnet_r, "alexnet-s": alexnet_s, "vgg-16": vgg_16,
                "resnet-56": resnet_56, "resnet-50": resnet_50, "mobilenet-v2": mobilenet_v2}
    inputs, outputs = builders[name]()
    data = tf.random.normal((batch, *inputs.shape[1:]))
    labels = tf.random.uniform((batch,), 0, outputs.shape[-1], tf.int32)
    return keras.Model(inputs, outputs), data, labels


def measure(model, data, labels, jit_compile, iters, warmup):
    """Returns (median step seconds, first call seconds less the median)."""
    # A fresh optimizer per mode, built outside the compiled step so that no variable is created
    # inside it.
    optimizer = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
    optimizer.build(model.trainable_variables)
    loss_function = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(jit_compile=jit_compile)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_function(y, model(x, training=True))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(gradients, model.trainable_variables)
        return loss

    def timed():
        start = time.perf_counter()
        float(step(data, labels))  # fetching the loss waits for the step's work
        return time.perf_counter() - start

    first = timed()
    for _ in range(warmup):
        timed()
    median = statistics.median(timed() for _ in range(iters))
    return median, first - median


def main():
    expected = dlscale_parameter_counts(ARGS.dlscale)
    missing = [m for m in ARGS.models if m not in expected]
    if missing:
        sys.exit(f"{ARGS.dlscale} --list-models lists no {', '.join(missing)}")
    modes = ("xla", "none") if ARGS.jit == "both" else (ARGS.jit,)
    # IsMklEnabled: built with oneDNN and not turned off by TF_ENABLE_ONEDNN_OPTS=0.
    onednn = "on" if _pywrap_util_port.IsMklEnabled() else "off"
    print(f"# tensorflow {tf.__version__}, keras {keras.__version__} "
          f"(backend {keras.backend.backend()}), Python {sys.version.split()[0]}; "
          f"oneDNN ops {onednn} (TF_ENABLE_ONEDNN_OPTS="
          f"{os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')})", file=sys.stderr)
    print(f"# threads: intra-op {ARGS.threads}, inter-op 1; float32, training mode, channels_last;"
          " step: forward, sparse cross-entropy from logits, GradientTape, SGD(0.01, momentum "
          f"0.9); median of {ARGS.iters} after the first call and {ARGS.warmup} warm-up",
          file=sys.stderr)
    keras.utils.set_random_seed(0)
    # One stdout line per (model, mode); COMPILE_S is the first call (trace, graph optimisation,
    # XLA compilation and one step) less the median step:
    #   RESULT tensorflow-xla|tensorflow-graph MODEL BATCH THREADS MEDIAN_STEP_S COMPILE_S PARAMS
    #   RESULT tensorflow-xla|tensorflow-graph MODEL BATCH THREADS failed REASON...
    failures = 0
    for name in ARGS.models:
        batch = BATCH[name]
        model, data, labels = build(name, batch)
        count = sum(math.prod(v.shape) for v in model.trainable_variables)
        if count != expected[name]:
            sys.exit(f"{name}: {count:,} trainable parameters in Keras, {expected[name]:,} in "
                     "dlscale")
        for mode in modes:
            label, jit_compile = MODES[mode]
            prefix = f"RESULT {label} {name} {batch} {ARGS.threads}"
            try:
                median, compile_seconds = measure(model, data, labels, jit_compile, ARGS.iters,
                                                  ARGS.warmup)
                print(f"{prefix} {median:.6f} {compile_seconds:.3f} {count}", flush=True)
            except Exception as error:  # an XLA or TensorFlow runtime error, out of memory...
                failures += 1
                reason = " ".join(str(error).split()) or "(no message)"
                print(f"{prefix} failed {type(error).__name__}: {reason[:300]}", flush=True)
        del model, data, labels
        keras.backend.clear_session()
    if failures:
        sys.exit(f"{failures} model/mode run(s) failed")


if __name__ == "__main__":
    main()
