#include "ooc/mpi.hpp"

#include "core/mapped_array_access.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <optional>

namespace ooc::mpi {
namespace {

constexpr int kChainTag = 0x00c;  // rank r -> r + 1: the running state of a reduction

// How an error travels to the ranks that did not see it.
struct ErrorText {
  ErrorKind kind = ErrorKind::other;
  std::string path;
  std::string problem;
  std::string option;
};

ErrorText describe(std::exception_ptr failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const Error& e) {  // a UsageError's kind is usage, a Cancelled's cancelled
    return {e.kind(), e.path(), e.problem(), e.option()};
  } catch (const std::exception& e) {
    return {ErrorKind::other, "", e.what(), ""};
  } catch (...) {
    return {ErrorKind::other, "", "unknown error", ""};
  }
}

[[noreturn]] void throw_described(const ErrorText& error) {
  switch (error.kind) {
    case ErrorKind::cancelled: throw Cancelled(error.path, error.problem);
    case ErrorKind::usage: throw UsageError(error.path, error.problem, error.option);
    case ErrorKind::index: throw IndexError(error.path, error.problem, error.problem);
    default: throw Error(error.path, error.problem, error.kind, error.option);
  }
}

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) throw Error(std::string("MPI: ") + what + " failed");
}

int message_size(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(INT_MAX)) throw Error("MPI: a message of over 2 GiB");
  return static_cast<int>(bytes);
}

bool same_layout(const ArrayInfo& a, const ArrayInfo& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.order == b.order && a.data_offset == b.data_offset;
}

}  // namespace

bool launched_by_mpi() {
  // Open MPI's mpirun, PMIx launchers (srun --mpi=pmix, prterun), MPICH's Hydra and PMI-2.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

Session::Session(int& argc, char**& argv) {
  int initialized = 0;
  check(MPI_Initialized(&initialized), "MPI_Initialized");
  if (initialized) return;
  int provided = 0;
  check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  owned_ = true;
}

Session::~Session() {
  if (!owned_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

Communicator::Communicator(MPI_Comm comm) : comm_(comm) {
  check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

TilePlan Communicator::share(const ArrayInfo& info, const PipelineOptions& options) const {
  const TilePlan plan =
      TilePlan::contiguous(info.size(), info.dtype.itemsize(), options.tile_bytes).slice(options.tiles);
  // Ranks that cut different plans would each compute a part of a different answer.
  const std::int64_t mine[] = {plan.begin(), plan.end(), static_cast<std::int64_t>(plan.size()),
                               info.dtype.itemsize()};
  std::int64_t both[8], seen[8];
  for (int i = 0; i < 4; ++i) {
    both[i] = mine[i];
    both[4 + i] = -mine[i];
  }
  check(MPI_Allreduce(both, seen, 8, MPI_INT64_T, MPI_MAX, comm_), "MPI_Allreduce");
  for (int i = 0; i < 4; ++i)
    if (seen[i] != -seen[4 + i])
      throw UsageError("the ranks do not see the same array (dtype, shape or tile size differ)");
  return plan.slice(plan.share(rank_, size_));
}

PipelineOptions Communicator::share_options(const ArrayInfo& info, PipelineOptions options) const {
  options.tiles = share(info, options).tiles();
  return options;
}

void Communicator::agree(std::exception_ptr failure) const {
  const int mine = failure ? rank_ : size_;
  int first = size_;
  check(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
  if (first == size_) return;
  ErrorText error;
  if (rank_ == first) error = describe(failure);
  auto kind = static_cast<std::int32_t>(error.kind);
  check(MPI_Bcast(&kind, 1, MPI_INT32_T, first, comm_), "MPI_Bcast");
  error.kind = static_cast<ErrorKind>(kind);
  error.path = broadcast(std::move(error.path), first);
  error.problem = broadcast(std::move(error.problem), first);
  error.option = broadcast(std::move(error.option), first);
  if (rank_ == first) std::rethrow_exception(failure);
  throw_described(error);
}

std::vector<std::byte> Communicator::receive_from_previous() const {
  if (rank_ == 0) return {};
  MPI_Status status;
  check(MPI_Probe(rank_ - 1, kChainTag, comm_, &status), "MPI_Probe");
  int count = 0;
  check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
  std::vector<std::byte> bytes(static_cast<std::size_t>(count));
  check(MPI_Recv(bytes.data(), count, MPI_BYTE, rank_ - 1, kChainTag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
  return bytes;
}

void Communicator::send_to_next(const std::vector<std::byte>& bytes) const {
  if (rank_ + 1 >= size_) return;
  check(MPI_Send(bytes.data(), message_size(bytes.size()), MPI_BYTE, rank_ + 1, kChainTag, comm_), "MPI_Send");
}

std::vector<std::byte> Communicator::broadcast(std::vector<std::byte> bytes, int root) const {
  auto size = static_cast<std::uint64_t>(bytes.size());
  check(MPI_Bcast(&size, 1, MPI_UINT64_T, root, comm_), "MPI_Bcast");
  bytes.resize(static_cast<std::size_t>(size));
  check(MPI_Bcast(bytes.data(), message_size(bytes.size()), MPI_BYTE, root, comm_), "MPI_Bcast");
  return bytes;
}

std::string Communicator::broadcast(std::string text, int root) const {
  std::vector<std::byte> bytes(text.size());
  std::transform(text.begin(), text.end(), bytes.begin(), [](char c) { return static_cast<std::byte>(c); });
  bytes = broadcast(std::move(bytes), root);
  text.resize(bytes.size());
  std::transform(bytes.begin(), bytes.end(), text.begin(), [](std::byte b) { return static_cast<char>(b); });
  return text;
}

void Communicator::barrier() const { check(MPI_Barrier(comm_), "MPI_Barrier"); }

MappedArray map_share(const Communicator& comm, const std::string& path, Access access,
                      const PipelineOptions& options) {
  const ArrayInfo info = comm.all_or_none([&] { return read_info(path); });
  const TilePlan mine = comm.share(info, options);
  return comm.all_or_none([&] {
    MappedArray array = map_file(path, access, ElementRange{mine.begin(), mine.end()});
    if (!same_layout(array.info(), info)) throw Error(path, "the file changed while it was being opened");
    if (access == Access::read_write && !array.mapped())  // a Zarr array's chunks cross the ranks' shares
      throw UsageError(path, "under MPI, a Zarr array cannot be modified in place (its chunks cross the ranks' "
                             "shares): run in place without mpirun, or write a new array with -o");
    return array;
  });
}

MappedArray create_npy(const Communicator& comm, const std::string& path, DType dtype, const Shape& shape,
                       Order order, ElementRange window) {
  std::optional<MappedArray> out;
  std::string temp;
  comm.all_or_none([&] {
    if (comm.rank() != 0) return;
    out.emplace(ooc::create_npy(path, dtype, shape, order, window));
    temp = detail::MappedArrayAccess::pending_path(*out).string();
  });
  temp = comm.broadcast(std::move(temp), 0);
  // Collective, so no rank writes before the file exists at its full size.
  comm.all_or_none([&] {
    if (comm.rank() != 0) out.emplace(detail::MappedArrayAccess::map_output_part(temp, path, window));
  });
  return std::move(*out);
}

void commit(const Communicator& comm, MappedArray& out) {
  const bool pending = out.pending();  // rank 0's part of an output from mpi::create_npy
  comm.all_or_none([&] {
    if (!pending) out.commit();  // flush and fsync this rank's part
  });
  comm.all_or_none([&] {
    if (pending) out.commit();  // every part is on disk: fsync, rename into place
  });
}

void apply(const Communicator& comm, const kernels::ElementwiseOp& op, const MappedArray& in, MappedArray& out,
           const PipelineOptions& options) {
  const PipelineOptions mine = comm.share_options(in.info(), options);
  comm.all_or_none([&] { op.apply(in, out, mine); });
}

Scalar reduce(const Communicator& comm, const MappedArray& in, const kernels::ReduceOp& op,
              const PipelineOptions& options) {
  return op.with_kernel(in.shape(), in.order(), [&](const auto& kernel) -> Scalar { return reduce(comm, in, kernel, options); });
}

}  // namespace ooc::mpi
