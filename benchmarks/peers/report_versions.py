"""Prints each peer's version and the math libraries it says it runs on (install.sh's report)."""
import os
import re

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up banner is not a report

import torch

config = torch.__config__.show()
blas = re.search(r"BLAS_INFO=(\w+)", config)
print(f"torch {torch.__version__}: BLAS {blas.group(1) if blas else 'not reported'}, "
      f"oneDNN {'v' + '.'.join(map(str, torch.backends.mkldnn.version())) if hasattr(torch.backends.mkldnn, 'version') else 'available' if torch.backends.mkldnn.is_available() else 'absent'}, "
      f"CPU capability {torch.backends.cpu.get_cpu_capability()}, threads {torch.get_num_threads()}")

import keras
import tensorflow as tf

onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1 (default on x86)")
print(f"tensorflow {tf.__version__} with keras {keras.__version__}: oneDNN ops "
      f"TF_ENABLE_ONEDNN_OPTS={onednn}, XLA CPU JIT available "
      f"{bool(tf.config.list_logical_devices('CPU'))}, backend {keras.backend.backend()}")
