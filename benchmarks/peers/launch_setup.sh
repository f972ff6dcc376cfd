# shellcheck shell=bash disable=SC2154,SC2034  # reads and sets the sourcing script's variables
# Sourced by the scripts that run dlscale beside the PyTorch peers (compare_scaling_with_ddp.sh,
# compare_sharding_with_pytorch.sh), after they have read their options: checks the models list,
# the peers' environment, the build and root for --two-hosts; makes the raw-output directory;
# and with --two-hosts brings up two emulated hosts (removed on exit).
# Reads: here, build_dir, venv, models, two_hosts, cluster_script, raw_prefix (the raw
# directory's name in /tmp). Sets: cases, python, raw_dir, say, cluster, hosts, pin_to_core.

IFS=, read -ra cases <<<"$models"
for case in "${cases[@]}"; do
  [[ $case =~ ^[a-z0-9-]+:[1-9][0-9]*$ ]] || { echo "--models: bad entry '$case' (MODEL:BATCH)" >&2; exit 2; }
done

python=$venv/bin/python
if [[ ! -x $python ]] || ! "$python" -c 'import torch' 2>/dev/null; then
  echo "no PyTorch environment at $venv: make it with benchmarks/peers/install.sh" >&2
  exit 1
fi
if [[ ! -x $build_dir/dlscale ]]; then
  echo "no $build_dir/dlscale: build it with scripts/build.sh (or set BUILD_DIR)" >&2
  exit 1
fi
if ((two_hosts)) && ((EUID != 0)); then
  echo "--two-hosts needs root (network namespaces)" >&2
  exit 1
fi

raw_dir=${RAW_DIR:-$(mktemp -d "/tmp/$raw_prefix-XXXXXX")}
mkdir -p "$raw_dir"
echo "raw outputs: $raw_dir" >&2
# shellcheck source-path=SCRIPTDIR source=../../scripts/mpi-environment.sh
source "$here/../scripts/mpi-environment.sh"
started=$SECONDS
say() { echo "[$((SECONDS - started)) s] $*" >&2; }

cluster=''
# shellcheck disable=SC2317  # run by the EXIT trap
remove_cluster() { if [[ -n $cluster ]]; then "$cluster_script" down "$cluster"; fi; }
trap remove_cluster EXIT
hosts=()
pin_to_core=()
if ((two_hosts)); then
  cluster=$("$cluster_script" up 2 --slots 1)
  mapfile -t hosts < <("$cluster_script" hosts "$cluster")
  # Rank r on core r mod the cores, as benchmarks/netns_rate_limit.sh does: every emulated host
  # sees all the cores, and the kernel may otherwise stack both ranks on one.
  # shellcheck disable=SC2016  # expanded by each rank's shell
  pin_to_core=(sh -c 'exec taskset -c $((OMPI_COMM_WORLD_RANK % $(nproc))) "$@"' pin-to-core)
fi
