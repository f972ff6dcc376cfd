"""Prints each peer's version and the math libraries it says it runs on, one line each
(install.sh's report, and the header of compare_with_frameworks.sh's table)."""
import os
import re

import torch

config = torch.__config__.show()
blas = re.search(r"BLAS_INFO=(\w+)", config)
mkl = re.search(r"Math Kernel Library Version ([\w.]+)", config)
onednn = re.search(r"MKL-DNN (v[\d.]+)", config)
print(f"torch {torch.__version__}: BLAS {blas.group(1) if blas else 'not reported'}"
      f"{' ' + mkl.group(1) if mkl else ''}, oneDNN {onednn.group(1) if onednn else 'not reported'}, "
      f"CPU capability {torch.backends.cpu.get_cpu_capability()}")

# TensorFlow logs its oneDNN banner through absl before TF_CPP_MIN_LOG_LEVEL applies: stderr is
# closed while it loads.
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
saved_stderr, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
os.dup2(devnull, 2)
try:
    import keras
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_util_port
finally:
    os.dup2(saved_stderr, 2)
print(f"tensorflow {tf.__version__} with keras {keras.__version__}: oneDNN ops "
      f"{'on' if _pywrap_util_port.IsMklEnabled() else 'off'}")
