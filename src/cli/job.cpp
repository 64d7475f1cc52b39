#include "cli/job.hpp"

#if OOC_WITH_MPI
#include "ooc/mpi.hpp"
#endif

namespace ooc::cli {

std::unique_ptr<Job> Job::start([[maybe_unused]] int& argc, [[maybe_unused]] char**& argv) {
#if OOC_WITH_MPI
  if (mpi::launched_by_mpi()) return start_mpi_job(argc, argv);
#endif
  return std::make_unique<Job>();
}

MappedArray Job::map_input(const std::string& path, Access access, const PipelineOptions&) const {
  return map_file(path, access);
}

MappedArray Job::create_output(const std::string& path, DType dtype, const MappedArray& in, bool overwrite) const {
  return create_array(path, dtype, in.shape(), in.order(), overwrite);
}

void Job::apply(const kernels::ElementwiseOp& op, const MappedArray& in, MappedArray& out,
                const PipelineOptions& options) const {
  op.apply(in, out, options);
}

Scalar Job::reduce(const kernels::ReduceOp& op, const MappedArray& in, const PipelineOptions& options) const {
  return op.run(in, options);
}

void Job::commit(MappedArray& out) const { out.commit(); }

}  // namespace ooc::cli
