# shellcheck shell=bash
# Sourced by the multi-host tests. Skips the test (exit 77, CTest's SKIP_RETURN_CODE) only where
# namespaces cannot be made here (not root, or no namespace support); otherwise
# `start_cluster N [UP OPTIONS]` makes an emulated cluster in $cluster, and a scratch directory is
# in $work_dir; both are removed when the test exits, whether it passed or failed.

multihost_directory=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster_script=$multihost_directory/netns_cluster.sh

if ((EUID != 0)) || ! unshare --net --uts true 2>/dev/null; then
  echo "SKIP: network and UTS namespaces cannot be created here (needs root); this is not a pass"
  exit 77
fi

cluster=
work_dir=$(mktemp -d /tmp/dlscale-multihost-test-XXXXXX)
remove_test_files() {
  if [[ -n $cluster ]]; then "$cluster_script" down "$cluster"; fi
  rm -rf "$work_dir"
}
trap remove_test_files EXIT

start_cluster() {
  cluster=$("$cluster_script" up "$@")
  echo "cluster $cluster: $("$cluster_script" hosts "$cluster" | xargs)"
}
