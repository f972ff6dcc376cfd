// GoogleTest main for tests that run under mpirun: MPI is initialised once for all tests, and only
// rank 0 prints the full report; other ranks print their failures, prefixed with their rank.
#include <gtest/gtest.h>

#include <cstdio>

#include "comm/mpi_session.hpp"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, result.file_name(), result.line_number(),
                   result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dlscale::comm::MpiSession mpi(argc, argv);
  if (mpi.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(mpi.world_rank()));
  }
  return RUN_ALL_TESTS();
}
