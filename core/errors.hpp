// The kinds of failure dlscale distinguishes: a user's mistake (bad option, file or model spec),
// reported as one line with a usage exit code; a sweep point that could not be measured, kept as a
// result; and a failed library call, which names the library, the call, and where it was made.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dlscale {

// A problem with what the user asked for. main() prints its message as one line and exits 2.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Why a sweep point could not be measured; recorded with the point (results/study_record.hpp).
enum class FailureCause {
  does_not_fit,   // the memory estimate exceeded the device's free memory: nothing was allocated
  out_of_memory,  // an allocation failed (host, device or a library's workspace)
  diverged,       // a loss or gradient became NaN or infinite
  timed_out,      // ran past --point-timeout
  job_left_no_results,  // its Slurm job of a node study ended without a results file (merge)
  unknown,              // read from a file written before causes were recorded
  target_not_reached,   // trained to --max-samples without reaching its target
};

// A sweep point that could not be measured. The coordinator keeps it as a result with its cause
// and reason, and the sweep goes on.
class PointFailure : public std::runtime_error {
 public:
  PointFailure(FailureCause cause, const std::string& reason)
      : std::runtime_error(reason), cause_(cause) {}
  FailureCause cause() const { return cause_; }

 private:
  FailureCause cause_;
};

// A library call that failed (MPI, HDF5, oneDNN, CUDA, NCCL). Each library has one checked-call
// macro that throws this with the call's text and the library's own error string.
class LibraryError : public std::runtime_error {
 public:
  LibraryError(std::string_view library, std::string_view call, std::string_view file, int line,
               std::string_view message);
  // The library's own words, without the call and where it was made: for messages about a
  // user's file, where the call site means nothing to them.
  const std::string& library_message() const { return library_message_; }

 private:
  std::string library_message_;
};

// A library call that could not allocate memory: thrown by the checked-call idiom of each library
// that says so (cudaErrorMemoryAllocation, CUBLAS_STATUS_ALLOC_FAILED, cuDNN's and oneDNN's
// out-of-memory statuses), so that a point too large for the machine fails as a point.
class OutOfMemory : public LibraryError {
 public:
  using LibraryError::LibraryError;
};

// Throws UserError "OPTION: unknown WHAT 'VALUE' (available: A, B)" unless value is a choice.
void require_choice(std::string_view option, std::string_view what, const std::string& value,
                    const std::vector<std::string>& choices);

}  // namespace dlscale
