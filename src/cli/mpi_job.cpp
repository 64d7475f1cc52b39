// oocrun under mpirun: every rank runs the same command on its share of the tiles;
// rank 0 prints.

#include "cli/job.hpp"

#include "ooc/mpi.hpp"

namespace ooc::cli {
namespace {

class MpiJob final : public Job {
 public:
  MpiJob(int& argc, char**& argv) : session_(argc, argv) {}

  bool prints() const override { return world_.rank() == 0; }
  bool journals_in_place() const override { return false; }
  bool spans_ranks() const override { return true; }

  MappedArray map_input(const std::string& path, Access access, const PipelineOptions& options) const override {
    return mpi::map_share(world_, path, access, options);
  }
  MappedArray create_output(const std::string& path, DType dtype, const MappedArray& in,
                            bool /*overwrite*/) const override {
    if (path.find(":/") != std::string::npos)
      throw UsageError(path, "under MPI, outputs are .npy files (HDF5 outputs are written by one process)");
    return mpi::create_npy(world_, path, dtype, in.shape(), in.order(), in.window());
  }
  void apply(const kernels::ElementwiseOp& op, const MappedArray& in, MappedArray& out,
             const PipelineOptions& options) const override {
    mpi::apply(world_, op, in, out, options);
  }
  Scalar reduce(const kernels::ReduceOp& op, const MappedArray& in, const PipelineOptions& options) const override {
    return mpi::reduce(world_, in, op, options);
  }
  void commit(MappedArray& out) const override { mpi::commit(world_, out); }

 private:
  mpi::Session session_;  // first in, last out: MPI lives as long as the job
  mpi::Communicator world_;
};

}  // namespace

std::unique_ptr<Job> start_mpi_job(int& argc, char**& argv) { return std::make_unique<MpiJob>(argc, argv); }

}  // namespace ooc::cli
