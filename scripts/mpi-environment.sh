# Sourced by the scripts that launch mpirun. Open MPI refuses to run as root unless told, and
# refuses more ranks than cores unless oversubscription is allowed; both are normal on a
# container or a small CI machine. A regular user on a cluster is not affected.
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
