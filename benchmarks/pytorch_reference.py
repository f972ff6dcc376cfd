#!/usr/bin/python3
# PyTorch reference for dlscale: builds each dlscale workload in PyTorch with the same layer
# shapes, trains it on random data (SGD momentum 0.9) and prints the median training-step time.
#   --device cpu (default): at each model's reference CPU batch, per thread count, eager and
#       torch.compile: one "RESULT torch-MODE ..." line each, for
#       benchmarks/compare_with_frameworks.sh (run it with benchmarks/peers/.venv/bin/python).
#   --device cuda: on one GPU, one row per --cases entry (model:batch) at one --precision:
#       fp32 (TF32 off), tf32 (TF32 on for matmul and cuDNN) or bf16 (autocast to bfloat16),
#       with cudnn.benchmark on (the fast PyTorch eager setting); a Markdown table.
import argparse
import contextlib
import ctypes
import os
import statistics
import sys
import time

import torch
from torch import nn

from dlscale_models import BATCH, DEFAULT_GPT_BATCH, dlscale_parameter_counts

# The GPU cases of benchmarks/compare_with_frameworks.sh --device cuda (model:batch).
CUDA_CASES = ("fcn-s:64,fcn-s:4096,fcn-r:4096,alexnet-s:128,alexnet-r:1024,resnet-50:64,"
              "resnet-56:128,lstm-32:128,lstm-64:1024,vgg-16:64,mobilenet-v2:64,gpt2-small:8")


def fcn(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(nn.Sigmoid())
    return nn.Sequential(*layers)


def alexnet_r():
    layers, channels = [], 3
    for out in (32, 32, 64):
        layers += [nn.Conv2d(channels, out, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2)]
        channels = out
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(576, 10))


def alexnet_s():  # torchvision AlexNet without dropout and without the adaptive pool
    return nn.Sequential(
        nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2), nn.Flatten(),
        nn.Linear(9216, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000))


def vgg_16():  # configuration D, no dropout; 0 marks a 2x2 max pool
    layers, channels = [], 3
    for out in (64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0):
        if out == 0:
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(channels, out, 3, padding=1), nn.ReLU()]
            channels = out
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(25088, 4096), nn.ReLU(),
                         nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000))


def conv_bn(cin, cout, kernel, stride=1, groups=1, act=None):
    layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act) if act is not None else nn.Sequential(*layers)


class Residual(nn.Module):
    """body(x) + shortcut(x); projection shortcut (1x1 conv + BN) where the shape changes."""

    def __init__(self, body, cin, cout, stride, relu_after):
        super().__init__()
        self.body = body
        self.shortcut = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None
        self.relu = nn.ReLU() if relu_after else nn.Identity()

    def forward(self, x):
        return self.relu(self.body(x) + (x if self.shortcut is None else self.shortcut(x)))


def resnet_56():
    layers, channels = [conv_bn(3, 16, 3, act=nn.ReLU())], 16
    for width in (16, 32, 64):
        for block in range(9):
            stride = 2 if block == 0 and width != 16 else 1
            body = nn.Sequential(conv_bn(channels, width, 3, stride, act=nn.ReLU()),
                                 conv_bn(width, width, 3))
            layers.append(Residual(body, channels, width, stride, True))
            channels = width
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def resnet_50():  # v1: the stride on the first 1x1 convolution of a stage
    layers = [conv_bn(3, 64, 7, 2, act=nn.ReLU()), nn.MaxPool2d(3, 2, 1)]
    channels = 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for block in range(blocks):
            stride = 2 if block == 0 and width != 64 else 1
            body = nn.Sequential(conv_bn(channels, width, 1, stride, act=nn.ReLU()),
                                 conv_bn(width, width, 3, act=nn.ReLU()),
                                 conv_bn(width, 4 * width, 1))
            layers.append(Residual(body, channels, 4 * width, stride, True))
            channels = 4 * width
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))


def mobilenet_v2():  # x1.0, torchvision layout without dropout
    layers, channels = [conv_bn(3, 32, 3, 2, act=nn.ReLU6())], 32
    for expansion, out, blocks, first_stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2),
                                                 (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                                                 (6, 320, 1, 1)):
        for block in range(blocks):
            stride, hidden = (first_stride if block == 0 else 1), channels * expansion
            body = [conv_bn(channels, hidden, 1, act=nn.ReLU6())] if expansion != 1 else []
            body += [conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6()),
                     conv_bn(hidden, out, 1)]
            body = nn.Sequential(*body)
            layers.append(Residual(body, channels, out, 1, False)
                          if stride == 1 and channels == out else body)
            channels = out
    return nn.Sequential(*layers, conv_bn(320, 1280, 1, act=nn.ReLU6()), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(1280, 1000))


class LstmLm(nn.Module):
    """Embedding 512, 2-layer LSTM 512, a 512->10000 linear at every step (input: steps x batch)."""

    def __init__(self, vocabulary=10000, hidden=512, layers=2):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, hidden)
        self.lstm = nn.LSTM(hidden, hidden, layers)
        self.output = nn.Linear(hidden, vocabulary)

    def forward(self, tokens):
        hidden, _ = self.lstm(self.embedding(tokens))
        return self.output(hidden).flatten(0, 1)


class GptBlock(nn.Module):
    """Pre-norm GPT-2 block: x + proj(attention(ln_1(x))), then x + mlp(ln_2(x)); attention
    through scaled_dot_product_attention (causal), GELU in its tanh form as GPT-2 and dlscale."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.projection = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * width, width))

    def forward(self, x):
        batch, steps, width = x.shape
        q, k, v = (t.view(batch, steps, self.heads, width // self.heads).transpose(1, 2)
                   for t in self.qkv(self.ln_1(x)).split(width, dim=2))
        attention = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.projection(attention.transpose(1, 2).reshape(batch, steps, width))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    """dlscale's gpt:LAYERS,WIDTH,HEADS,SEQUENCE,VOCABULARY (nanoGPT's layout): token and
    position embeddings, pre-norm blocks, a final layer norm and a head tied to the token
    embedding; logits flattened to (batch x steps, vocabulary) for the cross-entropy."""

    def __init__(self, layers, width, heads, sequence, vocabulary):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocabulary, width), nn.Embedding(sequence, width)
        self.blocks = nn.Sequential(*(GptBlock(width, heads) for _ in range(layers)))
        self.ln_f = nn.LayerNorm(width)
        self.register_buffer("steps", torch.arange(sequence), persistent=False)

    def forward(self, tokens):
        x = self.blocks(self.tokens(tokens) + self.positions(self.steps))
        return nn.functional.linear(self.ln_f(x), self.tokens.weight).flatten(0, 1)


# dlscale's built-in GPT shapes (layers, width, heads, sequence, vocabulary).
GPT_SHAPES = {"gpt-tiny": (2, 64, 4, 32, 128), "gpt2-small": (12, 768, 12, 1024, 50257),
              "gpt2-medium": (24, 1024, 16, 1024, 50257)}


def gpt_shape(name):
    """(layers, width, heads, sequence, vocabulary) of a built-in GPT name or a gpt: spec."""
    if name in GPT_SHAPES:
        return GPT_SHAPES[name]
    fields = name[len("gpt:"):].split(",")
    if not name.startswith("gpt:") or len(fields) != 5 or not all(f.isdigit() for f in fields):
        sys.exit(f"bad GPT spec {name!r}: want gpt:LAYERS,WIDTH,HEADS,SEQUENCE,VOCABULARY")
    return tuple(int(f) for f in fields)


def is_gpt(name):
    return name in GPT_SHAPES or name.startswith("gpt:")


def gpt_parameter_count(name):
    """dlscale's count (docs/workloads.md): L (12 W^2 + 13 W) + 2 W + V W + S W."""
    layers, width, _, sequence, vocabulary = gpt_shape(name)
    return layers * (12 * width * width + 13 * width) + 2 * width + (vocabulary + sequence) * width


def split_models(text):
    """'fcn-r,gpt:2,64,4,32,128,fcn-s' -> ['fcn-r', 'gpt:2,64,4,32,128', 'fcn-s']: a spec's own
    fields are digits, and no model's name is (dlscale-bench-step splits the same way)."""
    models = []
    for field in text.split(","):
        if field.isdigit() and models and ":" in models[-1]:
            models[-1] += "," + field
        else:
            models.append(field)
    return models


def build(name, batch):
    """Returns (network, random input, random labels, parameters torch has beyond dlscale)."""
    if is_gpt(name):
        shape = gpt_shape(name)
        tokens = torch.randint(0, shape[4], (batch, shape[3]))
        return Gpt(*shape), tokens, torch.randint(0, shape[4], (batch * shape[3],)), 0
    if name.startswith("lstm-"):
        steps = int(name.split("-")[1])
        # torch's LSTM has two bias vectors per gate (b_ih and b_hh), dlscale one: 4 x 512 x 2.
        return (LstmLm(), torch.randint(0, 10000, (steps, batch)),
                torch.randint(0, 10000, (steps * batch,)), 4 * 512 * 2)
    builders = {"fcn-s": lambda: fcn([26752, 2048, 2048, 2048, 2048, 26752]),
                "fcn-r": lambda: fcn([784, 2048, 4096, 1024, 10]),
                "alexnet-r": alexnet_r, "alexnet-s": alexnet_s, "vgg-16": vgg_16,
                "resnet-56": resnet_56, "resnet-50": resnet_50, "mobilenet-v2": mobilenet_v2}
    network = builders[name]()
    if name.startswith("fcn-"):
        inputs = torch.randn(batch, network[0].in_features)
    else:
        inputs = torch.randn(batch, 3, *((32, 32) if name in ("alexnet-r", "resnet-56")
                                         else (224, 224)))
    classes = [m for m in network.modules() if isinstance(m, nn.Linear)][-1].out_features
    return network, inputs, torch.randint(0, classes, (batch,)), 0


def set_blas_threads(threads):
    # Debian's torch calls OpenBLAS through libblas.so.3, which ignores torch.set_num_threads.
    try:
        ctypes.CDLL("libblas.so.3").openblas_set_num_threads(threads)
    except (OSError, AttributeError):
        pass


def set_precision(precision):
    """fp32: no TF32 anywhere; tf32: TF32 for matmuls and cuDNN convolutions/RNNs; bf16: TF32
    off, and the step's forward and loss run under torch.autocast to bfloat16."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def median_step_cuda(network, inputs, labels, precision, iters, warmup):
    network.train()
    optimizer = torch.optim.SGD(network.parameters(), lr=0.01, momentum=0.9)
    loss_function = nn.CrossEntropyLoss()

    def autocast():
        if precision == "bf16":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    times = []
    for i in range(warmup + iters):
        torch.cuda.synchronize()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_function(network(inputs), labels)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def print_cuda_profile(network, inputs, labels, precision, steps):
    """torch.profiler over `steps` more steps of the same training step: the CUDA kernels by
    their own GPU time, the table to read beside dlscale-bench-layer-times."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        median_step_cuda(network, inputs, labels, precision, steps, 0)
    print(f"\ntorch.profiler, {steps} steps (times are totals over them):\n")
    print(profiler.key_averages().table(sort_by="self_cuda_time_total", row_limit=30))


def parse_cases(text):
    """'fcn-s:64,fcn-r:4096' -> [("fcn-s", 64), ("fcn-r", 4096)]; a bare model name means its
    reference CPU batch."""
    cases = []
    for item in filter(None, text.split(",")):
        name, _, batch = item.partition(":")
        if name not in BATCH:
            sys.exit(f"unknown model {name!r} in --cases; known: {', '.join(BATCH)}")
        try:
            cases.append((name, int(batch) if batch else BATCH[name]))
        except ValueError:
            sys.exit(f"bad batch {batch!r} in --cases entry {item!r} (want MODEL:BATCH)")
        if cases[-1][1] < 1:
            sys.exit(f"bad batch in --cases entry {item!r}: must be at least 1")
    if not cases:
        sys.exit("--cases is empty")
    return cases


def main_cuda(args, expected):
    if not torch.cuda.is_available():
        sys.exit("--device cuda: torch.cuda.is_available() is False (no GPU, or a CPU-only "
                 f"PyTorch {torch.__version__})")
    cases = parse_cases(args.cases or CUDA_CASES)
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    set_precision(args.precision)

    print("# PyTorch reference: training step on one GPU\n")
    print(f"- command: `{' '.join(sys.argv)}`")
    print(f"- PyTorch {torch.__version__} (Python {sys.version.split()[0]}), CUDA "
          f"{torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, GPU "
          f"{torch.cuda.get_device_name()}")
    print(f"- precision {args.precision}: matmul allow_tf32="
          f"{torch.backends.cuda.matmul.allow_tf32}, cudnn allow_tf32="
          f"{torch.backends.cudnn.allow_tf32}, autocast bfloat16: {args.precision == 'bf16'}; "
          "cudnn.benchmark=True; eager mode, training mode")
    print("- step: zero_grad(set_to_none=True), forward, cross-entropy, backward, "
          "SGD(lr=0.01, momentum=0.9), timed between torch.cuda.synchronize() calls; "
          f"median of {args.iters} measured steps after {args.warmup} warm-up\n")
    print("| model | batch | precision | median step s | parameters | dlscale parameters |")
    print("|---|---:|---:|---:|---:|---:|")
    failures = 0
    for name, batch in cases:
        count = expected[name]
        try:
            # Built on the GPU: parameters initialised and data drawn there rather than on the
            # host and copied over (fcn-s, vgg-16 and gpt2-small have 122 to 138 million
            # parameters, and a GPU check builds each case once per precision); the step is the
            # same either way.
            with device:
                network, inputs, labels, extra = build(name, batch)
            count = sum(p.numel() for p in network.parameters())
            if count != expected[name] + extra:
                sys.exit(f"{name}: {count:,} parameters in torch, {expected[name]:,} in dlscale")
            step = median_step_cuda(network, inputs, labels, args.precision, args.iters,
                                    args.warmup)
            cell = f"{step:.6f}"
            if args.profile:
                print_cuda_profile(network, inputs, labels, args.precision, args.profile)
        except RuntimeError as error:  # torch.cuda.OutOfMemoryError is one
            failures += 1
            cell = "failed"
            print(f"{name} batch {batch} {args.precision}: {str(error).splitlines()[0]}",
                  file=sys.stderr)
        print(f"| {name} | {batch} | {args.precision} | {cell} | {count:,} | "
              f"{expected[name]:,} |", flush=True)
        network = inputs = labels = None
        torch.cuda.empty_cache()
    if any(name.startswith("lstm-") for name, _ in cases):
        print("\ntorch's LSTM has two biases per gate (b_ih, b_hh): 4,096 parameters more "
              "than dlscale's single bias.")
    if failures:
        sys.exit(f"{failures} case(s) failed")


def cpu_step_function(network, inputs, labels, mode, precision="fp32"):
    """One training step on the CPU: zero_grad, forward, cross-entropy, backward, SGD update;
    precision bf16: the forward and the loss under torch.autocast("cpu", bfloat16), as PyTorch's
    CPU mixed precision recipe has it (float weights and update, bf16 GEMMs and convolutions).
    mode "compile": the network under torch.compile (inductor, default mode; AOTAutograd
    compiles its backward too) and the optimizer's update as its own compiled function, as
    PyTorch's "compiling the optimizer" recipe does; backward() itself stays a call between them."""
    optimizer = torch.optim.SGD(network.parameters(), lr=0.01, momentum=0.9)
    loss_function = nn.CrossEntropyLoss()
    forward = torch.compile(network) if mode == "compile" else network
    update = torch.compile(optimizer.step) if mode == "compile" else optimizer.step

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_function(forward(inputs), labels)
        loss.backward()
        update()
    return step


def time_cpu_steps(step, iters, warmup, compiled):
    """(median of `iters` timed steps, compile seconds). The warm-up steps are never timed: a
    compiled step compiles in its first call and again in its second, when the optimizer's
    momentum buffers exist, so it gets at least two. Compile seconds: the warm-up steps' time
    beyond as many median steps."""
    untimed = max(warmup, 2 if compiled else 1)
    warmup_seconds = 0.0
    for _ in range(untimed):
        start = time.perf_counter()
        step()
        warmup_seconds += time.perf_counter() - start
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    return median, max(warmup_seconds - untimed * median, 0.0)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(
        description="PyTorch training-step reference for dlscale (CPU: dlscale-bench-step)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--models", default="fcn-r,fcn-s",
                        help="cpu: models (built-in names or gpt: specs such as "
                             "gpt:12,768,12,256,50257), each at its reference CPU batch")
    parser.add_argument("--batch", type=int,
                        help="cpu: samples per step of every model (default: each model's "
                             "reference CPU batch)")
    parser.add_argument("--threads", default="1,2", help="cpu: thread counts")
    parser.add_argument("--modes", default="eager,compile",
                        help="cpu: eager, compile (torch.compile, inductor) or both")
    parser.add_argument("--cases", help="cuda: MODEL:BATCH,... (default: " + CUDA_CASES + ")")
    parser.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32",
                        help="fp32; bf16 (autocast); cuda: tf32 (TF32 on)")
    parser.add_argument("--iters", type=int, help="measured steps (default: cpu 5, cuda 30)")
    parser.add_argument("--warmup", type=int, help="warm-up steps (default: cpu 2, cuda 5)")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="cuda: after timing each case, profile STEPS more steps with "
                             "torch.profiler and print its kernel table")
    parser.add_argument("--dlscale", default=os.path.join(here, "..", "build", "dlscale"),
                        help="dlscale binary whose --list-models counts are checked")
    args = parser.parse_args()
    cuda = args.device == "cuda"
    if args.iters is None:
        args.iters = 30 if cuda else 5
    if args.warmup is None:
        args.warmup = 5 if cuda else 2
    if args.iters < 1 or args.warmup < 0:
        sys.exit("--iters must be at least 1 and --warmup at least 0")
    if cuda:
        torch.manual_seed(0)
        return main_cuda(args, dlscale_parameter_counts(args.dlscale))
    if args.cases is not None or args.precision == "tf32":
        sys.exit("--cases and --precision tf32 are for --device cuda")
    models, thread_counts = split_models(args.models), [int(t) for t in args.threads.split(",")]
    unknown = [m for m in models if m not in BATCH and not m.startswith("gpt:")]
    if unknown:
        sys.exit(f"unknown model(s) {unknown}; known: {', '.join(BATCH)} and gpt: specs")
    if args.batch is not None and args.batch < 1:
        sys.exit("--batch must be at least 1")
    torch.manual_seed(0)
    torch.set_num_interop_threads(1)
    torch.set_float32_matmul_precision("highest")  # float32 everywhere, as dlscale
    expected = dlscale_parameter_counts(args.dlscale)
    expected.update({m: gpt_parameter_count(m) for m in models if m.startswith("gpt:")})

    modes = args.modes.split(",")
    if set(modes) - {"eager", "compile"} or not modes:
        sys.exit(f"--modes: {args.modes!r}; want eager, compile or both")
    arithmetic = "autocast bfloat16" if args.precision == "bf16" else "float32"
    print(f"# PyTorch {torch.__version__} (Python {sys.version.split()[0]}), "
          f"mkldnn available {torch.backends.mkldnn.is_available()}, {arithmetic}, "
          "training mode; step: zero_grad, forward, cross-entropy, backward, "
          "SGD(lr=0.01, momentum=0.9); "
          f"median of {args.iters} measured steps after {args.warmup} warm-up", file=sys.stderr)
    if any(m.startswith("lstm-") for m in models):
        print("# torch's LSTM has two biases per gate (b_ih, b_hh): 4,096 parameters more "
              "than dlscale's single bias", file=sys.stderr)
    failures = 0
    for name in models:
        batch = args.batch or BATCH.get(name, DEFAULT_GPT_BATCH)
        network, inputs, labels, extra = build(name, batch)
        count = sum(p.numel() for p in network.parameters())
        if count != expected[name] + extra:
            sys.exit(f"{name}: {count:,} parameters in torch, {expected[name]:,} in dlscale")
        network.train()
        for threads in thread_counts:
            torch.set_num_threads(threads)
            set_blas_threads(threads)
            for mode in modes:
                # Line format read by benchmarks/compare_with_frameworks.sh: tool model batch
                # threads median-step-s compile-s parameters, or "failed" and the reason.
                tool = f"torch-{mode}" + ("-bf16" if args.precision == "bf16" else "")
                prefix = f"RESULT {tool} {name} {batch} {threads}"
                try:
                    if mode == "compile":
                        torch._dynamo.reset()  # compile afresh for this thread count
                    step = cpu_step_function(network, inputs, labels, mode, args.precision)
                    median, compile_seconds = time_cpu_steps(step, args.iters, args.warmup,
                                                             mode == "compile")
                    if mode == "eager":
                        compile_seconds = 0.0
                    print(f"{prefix} {median:.6f} {compile_seconds:.3f} {count}", flush=True)
                except Exception as error:  # a compile failure is a result of its own
                    failures += 1
                    reason = " ".join(str(error).split())[:200] or type(error).__name__
                    print(f"{prefix} failed {type(error).__name__}: {reason}", flush=True)
    if failures:
        sys.exit(f"{failures} case(s) failed")


if __name__ == "__main__":
    main()
