#!/usr/bin/env bash
# GPU diagnostics and step times in one device call (what docs/performance.md's GPU table came
# from): the first-step gradient comparison with and without NVIDIA_TF32_OVERRIDE=0, dlscale's
# median step for every case at fp32 and tf32, then PyTorch's for the same cases.
# usage (on the GPU machine, from the repository root, OUT set): benchmarks/gpu_step_times.sh
JOBS=16 scripts/gpu-check.sh --build-only > $OUT/build.log 2>&1 || echo "build failed"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for o in 0 unset; do
  if [ $o = 0 ]; then export NVIDIA_TF32_OVERRIDE=0; else unset NVIDIA_TF32_OVERRIDE; fi
  echo "TF32 override $o:"; timeout 60 build-gpu/tests/dlscale_gpu_training_tests --gtest_filter='*FirstGradients*resnet*:*FirstGradients*alexnet*' 2>&1 | grep -E 'layer|OK|FAILED' | head -6
done
for c in fcn-s:64 fcn-s:4096 fcn-r:4096 alexnet-s:128 alexnet-r:1024 resnet-50:64 resnet-56:128 lstm-32:128 lstm-64:1024 vgg-16:64 mobilenet-v2:64; do
  m=${c%:*}; b=${c#*:}
  for p in fp32 tf32; do
    s=$SECONDS; line=$(timeout 60 mpirun -np 1 build-gpu/dlscale --device cuda --comm nccl --precision $p --model $m --batch $b --iters 20 --warmup 5 --out /tmp/x.h5 --overwrite 2>&1 | grep -E '^step |^compute|error' | tr -s ' ' | tr '\n' ' ')
    echo "$m $b $p [$((SECONDS-s))s] $line" | tee -a $OUT/dlscale-steps.txt
  done
done
for p in fp32 tf32; do timeout 150 python3 benchmarks/pytorch_reference.py --device cuda --precision $p --iters 20 --warmup 5 --dlscale build-gpu/dlscale > $OUT/pytorch-$p.md 2>&1; done
cat $OUT/pytorch-fp32.md $OUT/pytorch-tf32.md | grep '|'
