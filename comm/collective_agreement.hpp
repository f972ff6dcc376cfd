// Makes a failure on any rank a failure on every rank. Set-up steps that may fail on one rank only
// (a file missing on one node, a directory not writable) run inside agree_on_success(), so no rank
// goes on to a collective that the failed rank will never join.
#pragma once

#include <functional>

#include <mpi.h>

namespace dlscale::comm {

// Runs `step` on every rank of `comm`. If it throws UserError or PointFailure on any rank, every
// rank throws the same kind, with the message of the lowest failing rank. Other exceptions
// propagate unchanged.
void agree_on_success(MPI_Comm comm, const std::function<void()>& step);

}  // namespace dlscale::comm
