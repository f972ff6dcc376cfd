// A GoogleTest fixture that runs dlscale as a user does, `mpirun -np 2 dlscale ARGUMENTS`, in a
// scratch directory, and reports each rank's exit code, dlscale's error lines, stdout and the wall
// time. A hard timeout turns a hang into a failure instead of a stuck test.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dlscale::testing {

struct Outcome {
  std::vector<int> rank_exit_codes;
  std::vector<std::string> error_lines;  // lines dlscale itself wrote to stderr
  std::string stdout_text;
  double seconds = 0;
};

inline std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), {}};
}

class DlscaleUnderMpirun : public ::testing::Test {
 protected:
  static constexpr int ranks = 2;
  static constexpr double seconds_allowed_for_refusal = 30;

  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("dlscale_mpirun_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(directory_);
    // Open MPI refuses to run as root (as CI does) and to oversubscribe cores unless told.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  // mpirun options of this test's launches (--bind-to ...), after the suite's own.
  std::string launcher_flags_;

  // Each rank runs inside a shell that records its exit code, so mpirun never cuts a rank short.
  // `seconds_allowed`: the hard timeout, sized for a shared 2-core machine.
  Outcome run_dlscale(const std::string& arguments, int seconds_allowed = 300) {
    for (int r = 0; r < ranks; ++r)
      std::filesystem::remove(directory_ / ("exit." + std::to_string(r)));
    std::ostringstream command;
    command << "cd " << directory_ << " && timeout " << seconds_allowed << " " << DLSCALE_MPIEXEC
            << " -np " << ranks << " " << DLSCALE_MPIEXEC_PREFLAGS << " " << launcher_flags_
            << " sh -c '\"$0\" \"$@\"; echo $? > " << directory_.string()
            << "/exit.${OMPI_COMM_WORLD_RANK:-0}' " << DLSCALE_EXECUTABLE << " " << arguments
            << " > stdout.txt 2> stderr.txt";
    const auto start = std::chrono::steady_clock::now();
    const int status = std::system(command.str().c_str());
    Outcome outcome;
    outcome.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_NE(WEXITSTATUS(status), 124) << "timed out: " << arguments;
    for (int r = 0; r < ranks; ++r) {
      const auto code = directory_ / ("exit." + std::to_string(r));
      outcome.rank_exit_codes.push_back(
          std::filesystem::exists(code) ? std::stoi(read_text_file(code)) : -1);
    }
    std::istringstream errors(read_text_file(directory_ / "stderr.txt"));
    for (std::string line; std::getline(errors, line);)
      if (line.rfind("dlscale", 0) == 0 && line.find(": error: ") != std::string::npos)
        outcome.error_lines.push_back(line);
    outcome.stdout_text = read_text_file(directory_ / "stdout.txt");
    return outcome;
  }

  // Every rank exits with `status`, quickly, and rank 0 alone prints one error line naming `named`.
  void expect_refused(const std::string& arguments, const std::string& named, int status = 2) {
    const Outcome outcome = run_dlscale(arguments);
    for (int r = 0; r < ranks; ++r)
      EXPECT_EQ(outcome.rank_exit_codes[r], status) << "rank " << r << " for: " << arguments;
    ASSERT_EQ(outcome.error_lines.size(), 1u) << "for: " << arguments;
    EXPECT_NE(outcome.error_lines[0].find(named), std::string::npos)
        << "'" << outcome.error_lines[0] << "' does not name " << named;
    EXPECT_LT(outcome.seconds, seconds_allowed_for_refusal) << arguments;
  }

  std::filesystem::path directory_;
};

}  // namespace dlscale::testing
