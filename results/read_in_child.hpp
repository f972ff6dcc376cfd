// Reading a file that may be damaged, first in a child process. The HDF5 library trusts offsets
// stored in the file (its global heap reader, H5HG_read, follows them into unmapped memory), so a
// few changed bytes can crash it: in a child, that crash is a one-line "damaged results file"
// error instead of the command's own death. The readers' errors for damage are worded here too.
#pragma once

#include <filesystem>
#include <functional>

namespace dlscale::results {

// Throws UserError unless `path` is a regular file (after symbolic links): a FIFO or a device
// would leave the reader waiting for data forever, where no CPU-time bound ends it.
void require_regular_file(const std::filesystem::path& path);

// Checks require_regular_file(path), then runs read() in a forked child, with its CPU time
// bounded. Returns if read() returned there; rethrows its UserError's message as a UserError;
// throws UserError "damaged results file: PATH: ..." if the child crashed or ran out of time.
// Call read() again in this process afterwards.
void read_in_child(const std::filesystem::path& path, const std::function<void()>& read);

// Runs read(), turning what a damaged file makes it throw (an HDF5 failure, an allocation of a
// size the file declares, or a UserError "damaged results file: WHAT" from a check) into
// UserError "damaged results file: PATH: ...".
void blame_damage_on_file(const std::filesystem::path& path, const std::function<void()>& read);

}  // namespace dlscale::results
