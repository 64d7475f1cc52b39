#pragma once
/// ooc under MPI (built with -DOOC_WITH_MPI=ON; link ooc::mpi). The ranks of a job share
/// each array's tiles: the tiles of the one TilePlan a single process would use are cut
/// into contiguous ranges, one per rank in rank order; each rank maps only the elements
/// of its range and runs the usual TBB pipeline over it. Reductions hand the running
/// state from rank to rank in rank order, which is tile order, so every answer is the
/// single-process answer bit for bit (same tile size). Outputs appear under their name
/// only when every rank has written and flushed its part.
///
/// Every function here is collective: every rank of the communicator calls it, in the
/// same order, with the same arguments. When any rank fails, every rank throws: the
/// lowest failing rank's error (rethrown as it was there, rebuilt as an ooc::Error,
/// UsageError or Cancelled with the same text elsewhere).

#include "ooc/kernel.hpp"
#include "ooc/kernels/elementwise.hpp"
#include "ooc/kernels/reductions.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/pipeline.hpp"
#include "ooc/state_bytes.hpp"
#include "ooc/tile_plan.hpp"

#include <mpi.h>

#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ooc::mpi {

/// True when an MPI launcher started this process (Open MPI's mpirun, MPICH's mpiexec,
/// srun): it looks at the launcher's environment only and calls no MPI function.
bool launched_by_mpi();

/// MPI for the life of this object: initialises it (thread level FUNNELED: only this
/// thread calls MPI; TBB's threads never do) unless it already is, and finalises it on
/// destruction if it initialised it.
class Session {
 public:
  Session(int& argc, char**& argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  bool owned_ = false;
};

/// The ranks an operation runs on.
class Communicator {
 public:
  explicit Communicator(MPI_Comm comm = MPI_COMM_WORLD);

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm get() const { return comm_; }

  /// This rank's part of the tiles a single process would run for an array of `info`
  /// with `options` (options.tile_bytes, and options.tiles if set): a contiguous range,
  /// the ranks' ranges in rank order. Throws on every rank unless every rank sees the
  /// same plan.
  TilePlan share(const ArrayInfo& info, const PipelineOptions& options) const;
  /// `options` with options.tiles set to this rank's share.
  PipelineOptions share_options(const ArrayInfo& info, PipelineOptions options) const;

  /// Returns if no rank's `failure` is set, else throws on every rank (see above).
  void agree(std::exception_ptr failure) const;
  /// Runs f() on this rank and agree()s on its outcome; returns f's value.
  template <class F>
  std::invoke_result_t<F&> all_or_none(F&& f) const {
    using R = std::invoke_result_t<F&>;
    std::exception_ptr failure;
    if constexpr (std::is_void_v<R>) {
      try {
        f();
      } catch (...) {
        failure = std::current_exception();
      }
      agree(failure);
    } else {
      std::optional<R> value;
      try {
        value.emplace(f());
      } catch (...) {
        failure = std::current_exception();
      }
      agree(failure);
      return std::move(*value);
    }
  }

  /// Rank r > 0 receives what rank r - 1 passed to send_to_next(); rank 0 gets nothing.
  std::vector<std::byte> receive_from_previous() const;
  /// Rank r < size - 1 sends `bytes` to rank r + 1; the last rank does nothing.
  void send_to_next(const std::vector<std::byte>& bytes) const;
  /// Every rank gets `root`'s bytes (what the others pass is ignored).
  std::vector<std::byte> broadcast(std::vector<std::byte> bytes, int root) const;
  std::string broadcast(std::string text, int root) const;
  void barrier() const;

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

/// Maps this rank's share (Communicator::share) of the array at `path`.
MappedArray map_share(const Communicator& comm, const std::string& path, Access access = Access::read_only,
                      const PipelineOptions& options = {});

/// Creates the output `path` as ooc::create_npy does, once, on rank 0 (temporary name,
/// pre-allocated), and maps on every rank the elements of `window` (this rank's share:
/// pass the input's window()) for writing. Until commit() the final name is untouched.
MappedArray create_npy(const Communicator& comm, const std::string& path, DType dtype, const Shape& shape,
                       Order order, ElementRange window);

/// Makes an output durable: every rank flushes and fsyncs what it wrote; then, for an
/// output from mpi::create_npy, rank 0 renames it into place. If any rank fails, every
/// rank throws and a new output never appears (rank 0's temporary file is removed when
/// its MappedArray is destroyed).
void commit(const Communicator& comm, MappedArray& out);

/// ooc::transform_as over the ranks: each rank transforms its share; `in` and `out`
/// must map it (map_share, mpi::create_npy).
template <class C, class Fn>
void transform_as(const Communicator& comm, const MappedArray& in, MappedArray& out, Fn&& fn,
                  const PipelineOptions& options = {}) {
  const PipelineOptions mine = comm.share_options(in.info(), options);
  comm.all_or_none([&] { ooc::transform_as<C>(in, out, std::forward<Fn>(fn), mine); });
}

/// ElementwiseOp::apply over the ranks, as transform_as above.
void apply(const Communicator& comm, const kernels::ElementwiseOp& op, const MappedArray& in, MappedArray& out,
           const PipelineOptions& options = {});

/// ooc::reduce over the ranks: the single-process answer, bit for bit, on every rank.
/// `in` must map this rank's share (map_share). Each rank reduces its tiles to one state
/// per tile; then the running state goes from rank to rank in rank order, each rank
/// merging its tile states into it exactly as the single-process commit stage would
/// (so merge() need not be associative), and the last rank's state is broadcast. A rank
/// holds its tiles' states until the running state arrives: for the built-in sums one
/// number per 8192 elements (a 64 KiB block of float64).
// The return type is deduced (not spelled as reduce_result_t<Kernel>) so that clang does
// not form it for ReduceOp, which has no State, before the constraint rules this out.
template <class Kernel>
  requires(!std::is_same_v<Kernel, kernels::ReduceOp>)
auto reduce(const Communicator& comm, const MappedArray& in, const Kernel& kernel,
            const PipelineOptions& options = {}) {
  using Result = detail::reduce_result_t<Kernel>;
  const TilePlan plan = comm.share(in.info(), options);
  auto reduce_as = [&]<class T>(std::type_identity<T>) -> Result {
    if constexpr (!detail::kernel_accepts<Kernel, T>()) {
      throw UsageError(in.path(), "this reduction does not accept " + in.dtype().name());
    } else if constexpr (detail::kernel_in_order<Kernel, T>()) {
      // Its partial runs on the running state itself, which no rank has until the ranks
      // before it are done: nothing to do in parallel.
      throw UsageError(in.path(), "this reduction runs in array order and is not split across MPI ranks for " +
                                      in.dtype().name() + "; run it without mpirun");
    } else {
      using State = detail::kernel_state_t<Kernel, T>;
      static_assert(TransferableState<State>,
                    "an MPI reduction's State must be trivially copyable or have save(StateWriter&) const "
                    "and load(StateReader&) (ooc/state_bytes.hpp)");
      std::vector<State> tiles;  // this rank's tile states, in tile order
      comm.all_or_none([&] {
        try {
          reduce_tiles<T>(in, kernel, plan, options, [&](const Tile&, State&& s) { tiles.push_back(std::move(s)); });
        } catch (...) {
          detail::rethrow_naming(in.path());
        }
      });

      // The single-process commit stage, continued across ranks: the running state of the
      // tiles before this rank's arrives, this rank's tile states are merged into it in
      // order, and it goes on to the next rank. A leading byte says whether it is sound.
      std::exception_ptr failure;
      std::vector<std::byte> passed = comm.receive_from_previous();
      std::vector<std::byte> running{std::byte{1}};
      try {
        State total = detail::kernel_identity<T>(kernel);
        const bool sound = comm.rank() == 0 || (!passed.empty() && passed[0] == std::byte{1});
        if (sound) {
          if (comm.rank() > 0) {
            StateReader reader(std::span<const std::byte>(passed).subspan(1));
            load_state(total, reader);
          }
          for (State& s : tiles) kernel.merge(total, std::move(s));
          StateWriter writer;
          writer.put(std::byte{1});
          save_state(total, writer);
          running = std::move(writer).take();
        } else {
          running = {std::byte{0}};  // a rank before failed; agree() below reports it
        }
      } catch (...) {
        failure = detail::current_exception_naming(in.path());
        running = {std::byte{0}};
      }
      comm.send_to_next(running);
      comm.agree(failure);

      const std::vector<std::byte> final_state = comm.broadcast(std::move(running), comm.size() - 1);
      State total = detail::kernel_identity<T>(kernel);
      StateReader reader(std::span<const std::byte>(final_state).subspan(1));
      load_state(total, reader);
      try {
        return detail::kernel_result<T>(kernel, total);  // fails alike on every rank, or on none
      } catch (...) {
        detail::rethrow_naming(in.path());
      }
    }
  };
  return visit_dtype(in.dtype(), reduce_as);
}

/// ReduceOp::run over the ranks.
Scalar reduce(const Communicator& comm, const MappedArray& in, const kernels::ReduceOp& op,
              const PipelineOptions& options = {});

}  // namespace ooc::mpi
