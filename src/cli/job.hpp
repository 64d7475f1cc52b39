#pragma once
// Where oocrun's work runs: this process alone, or, when MPI support is built in and an
// MPI launcher started the process, the ranks of an MPI job, each taking its share of
// the tiles. oocrun does the same steps either way through this interface.

#include "ooc/ooc.hpp"

#include <memory>
#include <string>

namespace ooc::cli {

/// This process alone: the plain single-process calls.
class Job {
 public:
  virtual ~Job() = default;

  /// An MPI job when an MPI launcher started this process (and oocrun was built with
  /// MPI); otherwise this process alone, and MPI is never initialised.
  static std::unique_ptr<Job> start(int& argc, char**& argv);

  /// Whether this is one rank of an MPI job.
  virtual bool spans_ranks() const { return false; }
  /// Whether this process prints results, reports and errors (the only one, or rank 0).
  virtual bool prints() const { return true; }
  /// Whether an in-place run keeps a journal, so that it can be resumed after a crash.
  virtual bool journals_in_place() const { return true; }
  /// The input array, mapped as far as this process needs it.
  virtual MappedArray map_input(const std::string& path, Access access, const PipelineOptions& options) const;
  /// A new output shaped as `in` (a .npy file or an HDF5 dataset), hidden until commit().
  virtual MappedArray create_output(const std::string& path, DType dtype, const MappedArray& in,
                                    bool overwrite) const;
  virtual void apply(const kernels::ElementwiseOp& op, const MappedArray& in, MappedArray& out,
                     const PipelineOptions& options) const;
  virtual Scalar reduce(const kernels::ReduceOp& op, const MappedArray& in, const PipelineOptions& options) const;
  virtual void commit(MappedArray& out) const;
};

#if OOC_WITH_MPI
/// The job of the ranks of MPI_COMM_WORLD (src/cli/mpi_job.cpp).
std::unique_ptr<Job> start_mpi_job(int& argc, char**& argv);
#endif

}  // namespace ooc::cli
