// Expressions: a parser that remembers columns, a type checker that follows numpy 1.24
// step by step (Python arithmetic between Python numbers, numpy's scalar promotion between
// scalars, value-based casting between arrays and scalars, ndarray ** scalar fast paths),
// and a blocked evaluator: tiles of the result, pieces of kPieceElements through every
// node, broadcast inputs gathered by strides, never a whole-array temporary.
// This file: the evaluator (tiles of the result, pieces of kPieceElements through every
// node, broadcast inputs gathered by strides); expr/parser.cpp and expr/types.cpp do the rest.

#include "tree.hpp"

#include "ooc/kernels/expr.hpp"

#include "core/mapped_array_access.hpp"
#include "ooc/error.hpp"
#include "ooc/internal/pipeline.hpp"
#include "ooc/kernel.hpp"
#include "os/file.hpp"
#include "os/tile_reader.hpp"
#include "ooc/selection.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <mutex>

#include <unistd.h>

namespace ooc::kernels {

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (std::size_t k = 0; k < out.size(); ++k) {
    const std::int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1;
    const std::int64_t y = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[out.size() - 1 - k] = x == 1 ? y : x;
  }
  return out;
}

using namespace expr_detail;

void Expression::Impl::plan_layout() {
  const Node& r = nodes[static_cast<std::size_t>(root)];
  shape = r.shape;
  dtype = r.dtype;
  size = element_count(shape).value_or(0);
  // numpy's result is Fortran-ordered when every input that has a say (two or more axes
  // longer than 1) is Fortran-ordered, and C-ordered otherwise.
  bool any_c = false, any_f = false;
  for (const Node& n : nodes) {
    if (n.kind != Node::Kind::input) continue;
    const auto long_axes = std::count_if(n.shape.begin(), n.shape.end(), [](std::int64_t d) { return d > 1; });
    if (long_axes < 2) continue;
    (n.array->order() == Order::fortran ? any_f : any_c) = true;
  }
  order = any_f && !any_c ? Order::fortran : Order::c;
  // Output axes in memory order, fastest first.
  const std::size_t ndim = shape.size();
  std::vector<std::size_t> axes(ndim);
  for (std::size_t k = 0; k < ndim; ++k) axes[k] = order == Order::c ? ndim - 1 - k : k;
  for (std::size_t axis : axes) memory_extent.push_back(shape[axis]);
  input_strides.assign(nodes.size(), {});
  input_direct.assign(nodes.size(), false);
  input_loaded.assign(nodes.size(), {});
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.kind != Node::Kind::input) continue;
    // The input's own element strides, then aligned with the result's trailing axes.
    const Shape& s = n.shape;
    const Shape own = element_strides(s, n.array->order());
    std::vector<std::int64_t> strides;
    bool direct = true;
    std::int64_t expected = 1;
    for (std::size_t axis : axes) {
      const std::size_t offset = ndim - s.size();  // s aligns with the last axes
      std::int64_t stride = 0;
      if (axis >= offset && s[axis - offset] != 1) stride = own[axis - offset];
      if (shape[axis] != 1) {
        if (stride != expected) direct = false;
        expected *= shape[axis];
      }
      strides.push_back(stride);
    }
    input_strides[i] = std::move(strides);
    input_direct[i] = direct && element_count(s).value_or(0) == size;
    if (!n.array->mapped() && !input_direct[i]) load_whole(i);
  }
}

void Expression::Impl::load_whole(std::size_t index) {
  constexpr std::uint64_t kMaxLoadedBytes = std::uint64_t{256} << 20;
  const MappedArray& a = *nodes[index].array;
  if (a.nbytes() > kMaxLoadedBytes)
    throw UsageError(a.path(), "eval: an input that is broadcast and read tile by tile (a selection or a chunked "
                               "dataset) must be under 256 MiB; write it to a .npy first");
  std::vector<std::byte>& bytes = input_loaded[index];
  bytes.resize(static_cast<std::size_t>(a.nbytes()));
  if (bytes.empty()) return;
  ooc::detail::AlignedBuffer buffer;
  const std::byte* data = ooc::detail::MappedArrayAccess::reader(a)->read(0, a.size(), buffer);
  std::memcpy(bytes.data(), data, bytes.size());
}

// Values of input node n for result positions [begin, begin + count) in memory order,
// converted to the input's native dtype.
void Expression::Impl::gather(const Node& n, std::size_t index, std::int64_t begin, std::int64_t count,
                              std::byte* out) const {
  const MappedArray& a = *n.array;
  const DType from = a.dtype();
  const std::size_t item = static_cast<std::size_t>(from.itemsize());
  if (!a.mapped() && input_direct[index]) {
    ooc::detail::TileReader& reader = *ooc::detail::MappedArrayAccess::reader(a);
    thread_local ooc::detail::AlignedBuffer buffer;
    std::unique_lock<std::mutex> lock(reader_lock, std::defer_lock);
    if (!reader.concurrent()) lock.lock();
    convert(from, reader.read(begin, begin + count, buffer), n.dtype, out, count);
    return;
  }
  const std::byte* base = a.mapped() ? a.bytes().data() : input_loaded[index].data();
  if (input_direct[index]) {
    convert(from, base + static_cast<std::size_t>(begin) * item, n.dtype, out, count);
    return;
  }
  const std::vector<std::int64_t>& strides = input_strides[index];
  const std::size_t ndim = memory_extent.size();
  std::array<std::int64_t, 64> at{};
  std::int64_t rest = begin;
  for (std::size_t k = 0; k < ndim; ++k) {
    at[k] = rest % memory_extent[k];
    rest /= memory_extent[k];
  }
  // The file's bytes of each wanted element, then one conversion for the piece.
  std::byte* raw = out + static_cast<std::size_t>(kPieceElements) * 8;
  std::int64_t done = 0;
  while (done < count) {
    std::int64_t offset = 0;
    for (std::size_t k = 0; k < ndim; ++k) offset += at[k] * strides[k];
    const std::int64_t run = std::min(count - done, memory_extent[0] - at[0]);
    const std::int64_t step = strides[0];
    const std::byte* src = base + static_cast<std::size_t>(offset) * item;
    std::byte* dst = raw + static_cast<std::size_t>(done) * item;
    if (step == 1) {
      std::memcpy(dst, src, static_cast<std::size_t>(run) * item);
    } else {
      for (std::int64_t j = 0; j < run; ++j)
        std::memcpy(dst + static_cast<std::size_t>(j) * item, src + static_cast<std::size_t>(j * step) * item, item);
    }
    done += run;
    at[0] += run;
    for (std::size_t k = 0; k + 1 < ndim && at[k] == memory_extent[k]; ++k) {
      at[k] = 0;
      ++at[k + 1];
    }
  }
  convert(from, raw, n.dtype, out, count);
}

// Calls emit(position, values) for consecutive pieces of [begin, end): the result's
// values (dtype, native) for those positions, valid until the next call.
template <class Emit>
void Expression::Impl::evaluate_range(std::int64_t begin, std::int64_t end, Emit&& emit) const {
  constexpr std::size_t kSlot = static_cast<std::size_t>(kPieceElements) * 8;
  // One buffer per node for its values, three more per node for arguments converted to
  // its loop dtype: a few hundred KiB per thread at most.
  thread_local std::vector<std::byte> storage;
  thread_local std::vector<const std::byte*> result;
  storage.resize(nodes.size() * 4 * kSlot);
  result.assign(nodes.size(), nullptr);
  const Node& r = nodes[static_cast<std::size_t>(root)];
  for (std::int64_t at = begin; at < end; at += kPieceElements) {
    const std::int64_t n = std::min(kPieceElements, end - at);
    if (r.is_constant()) {  // the whole result is one value, broadcast
      std::byte* out = storage.data();
      const auto value = bytes_in(dtype, r.value);
      for (std::int64_t i = 0; i < n; ++i)
        std::memcpy(out + i * dtype.itemsize(), value.data(), static_cast<std::size_t>(dtype.itemsize()));
      emit(at, static_cast<const std::byte*>(out), n);
      continue;
    }
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const Node& node = nodes[i];
      std::byte* out = storage.data() + i * 4 * kSlot;
      switch (node.kind) {
        case Node::Kind::constant:
          break;
        case Node::Kind::input:
          gather(node, i, at, n, out);
          result[i] = out;
          break;
        case Node::Kind::copy:
          result[i] = result[static_cast<std::size_t>(node.args[0])];
          break;
        case Node::Kind::ones: {
          const auto one = bytes_in(node.dtype, PyScalar::of_int(1));
          for (std::int64_t j = 0; j < n; ++j)
            std::memcpy(out + j * node.dtype.itemsize(), one.data(), static_cast<std::size_t>(node.dtype.itemsize()));
          result[i] = out;
          break;
        }
        case Node::Kind::ufunc:
        case Node::Kind::where: {
          // Arguments in the loop dtype (a where's condition in bool): constants repeated,
          // arrays converted when their dtype differs.
          std::array<LoopInput, 3> inputs;
          std::size_t next_constant = 0;
          for (std::size_t k = 0; k < node.args.size(); ++k) {
            const Node& arg = nodes[static_cast<std::size_t>(node.args[k])];
            const DType want = node.kind == Node::Kind::where && k == 0 ? DType(Kind::boolean, 1) : node.loop;
            if (arg.is_constant()) {
              inputs[k] = {node.constant_args[next_constant++].data(), true};
            } else if (arg.dtype == want) {
              inputs[k] = {result[static_cast<std::size_t>(node.args[k])], false};
            } else {
              std::byte* converted = out + (k + 1) * kSlot;
              convert(arg.dtype, result[static_cast<std::size_t>(node.args[k])], want, converted, n);
              inputs[k] = {converted, false};
            }
          }
          if (node.kind == Node::Kind::ufunc) {
            try {
              run_loop(node.ufunc, node.loop, std::span<const LoopInput>(inputs.data(), node.args.size()), out, n);
            } catch (const std::domain_error& e) {
              throw Error(std::string(), "eval: " + std::string(e.what()), ErrorKind::value);
            }
          } else {
            const std::size_t item = static_cast<std::size_t>(node.dtype.itemsize());
            const bool* c = static_cast<const bool*>(inputs[0].data);
            for (std::int64_t j = 0; j < n; ++j) {
              const LoopInput& pick = c[inputs[0].repeated ? 0 : j] ? inputs[1] : inputs[2];
              std::memcpy(out + static_cast<std::size_t>(j) * item,
                          static_cast<const std::byte*>(pick.data) + (pick.repeated ? 0 : static_cast<std::size_t>(j) * item),
                          item);
            }
          }
          result[i] = out;
          break;
        }
      }
    }
    emit(at, result[static_cast<std::size_t>(root)], n);
  }
}

Expression Expression::compile(std::string_view text, const std::vector<Binding>& bindings) {
  auto impl = std::make_unique<Impl>();
  impl->text = std::string(text);
  std::optional<std::pair<std::string, int>> reduction;
  impl->root = parse(impl->text, bindings, impl->nodes, reduction);
  impl->check();
  if (reduction) {
    try {
      impl->reduction = ReduceOp::parse(reduction->first);
    } catch (const UsageError& e) {
      fail_at(impl->text, reduction->second, e.problem());
    }
  }
  impl->plan_layout();
  return Expression(std::move(impl));
}

Expression::Expression(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Expression::Expression(Expression&&) noexcept = default;
Expression& Expression::operator=(Expression&&) noexcept = default;
Expression::~Expression() = default;

DType Expression::dtype() const { return impl_->dtype; }
const Shape& Expression::shape() const { return impl_->shape; }
Order Expression::order() const { return impl_->order; }
const std::optional<ReduceOp>& Expression::reduction() const { return impl_->reduction; }

namespace {

// Streams over the result's tiles; the bound arrays laid out as the result are prefetched
// and released with them.
struct Run {
  TilePlan plan;
  ooc::detail::Streams streams;
  Run(const Expression::Impl& impl, const PipelineOptions& options)
      : plan(TilePlan::contiguous(impl.size, impl.dtype.itemsize(), options.tile_bytes)), streams(plan, options) {
    for (std::size_t i = 0; i < impl.nodes.size(); ++i)
      if (impl.nodes[i].kind == Node::Kind::input && impl.input_direct[i] && impl.nodes[i].array->mapped())
        streams.add_input(*impl.nodes[i].array);
  }
};

}  // namespace

void Expression::evaluate(MappedArray& out, const PipelineOptions& options) const {
  const Impl& impl = *impl_;
  if (out.shape() != impl.shape || (out.order() != impl.order && impl.shape.size() > 1))
    throw UsageError(out.path(), "the output's shape or order is not the expression's");
  PipelineOptions capped = options;  // a compressed output's writer may ask for smaller tiles
  capped.tile_bytes = ooc::detail::tile_bytes_writing(out, impl.dtype.itemsize(), options.tile_bytes);
  Run run(impl, capped);
  run.streams.add_output(out);
  const DType to = out.dtype();
  const std::size_t item = static_cast<std::size_t>(to.itemsize());
  struct Done {};
  run_pipeline(
      run.plan, run.streams, options,
      [&](const Tile& tile) {
        // The tile's place in the output: in the mapping, or in the buffer that direct
        // output writes to the file at commit.
        std::byte* first = run.streams.output(out, tile);
        impl.evaluate_range(tile.begin, tile.end, [&](std::int64_t at, const std::byte* values, std::int64_t n) {
          convert(impl.dtype, values, to, first + static_cast<std::size_t>(at - tile.begin) * item, n);
        });
        return Done{};
      },
      [](const Tile&, Done&&) {});
}

std::vector<std::byte> Expression::evaluate(const PipelineOptions& options) const {
  const Impl& impl = *impl_;
  std::vector<std::byte> out(static_cast<std::size_t>(impl.size) * static_cast<std::size_t>(impl.dtype.itemsize()));
  Run run(impl, options);
  const std::size_t item = static_cast<std::size_t>(impl.dtype.itemsize());
  struct Done {};
  run_pipeline(
      run.plan, run.streams, options,
      [&](const Tile& tile) {
        impl.evaluate_range(tile.begin, tile.end, [&](std::int64_t at, const std::byte* values, std::int64_t n) {
          std::memcpy(out.data() + static_cast<std::size_t>(at) * item, values, static_cast<std::size_t>(n) * item);
        });
        return Done{};
      },
      [](const Tile&, Done&&) {});
  return out;
}

Scalar Expression::reduce(const PipelineOptions& options) const {
  const Impl& impl = *impl_;
  if (!impl.reduction) throw UsageError("eval: the expression has no outermost reduction");
  Run run(impl, options);
  return impl.reduction->with_kernel(impl.shape, impl.order, [&](const auto& kernel) -> Scalar {
    using Kernel = std::decay_t<decltype(kernel)>;
    return visit_dtype(impl.dtype, [&]<class T>(std::type_identity<T>) -> Scalar {
      using Input = ooc::detail::kernel_input_t<Kernel, T>;
      // The kernel sees the result in blocks of kBlockElements on the same grid as a
      // file's, so sum(a*b) takes exactly numpy's steps over the temporary a*b.
      return ooc::detail::reduce_tiles<T>(kernel, run.plan, run.streams, options, [&](const Tile& tile, auto&& f) {
        thread_local std::vector<std::byte> block;
        block.resize(static_cast<std::size_t>(kBlockElements) * sizeof(T));
        Input* converted = reinterpret_cast<Input*>(ooc::detail::scratch(ooc::detail::ScratchSlot::kernel, sizeof(Input) * kBlockElements));
        for (std::int64_t at = tile.begin; at < tile.end; at += kBlockElements) {
          const std::int64_t n = std::min(kBlockElements, tile.end - at);
          impl.evaluate_range(at, at + n, [&](std::int64_t p, const std::byte* values, std::int64_t m) {
            std::memcpy(block.data() + static_cast<std::size_t>(p - at) * sizeof(T), values,
                        static_cast<std::size_t>(m) * sizeof(T));
          });
          const Input* values = reinterpret_cast<const Input*>(block.data());
          if constexpr (!std::is_same_v<Input, T>) {
            convert(dtype_of<T>, block.data(), dtype_of<Input>, converted, n);
            values = converted;
          }
          f(Tile{tile.index, at, at + n}, ConstArrayMap<Input>(values, n));
        }
      });
    });
  });
}


namespace {

// The reader of map_expression's array: a tile's elements are computed, piece by piece,
// from the bound arrays. The inputs laid out as the result stream with it: their pages
// are asked for ahead and let go behind, as a run does for arrays it reads itself.
class ExpressionReader final : public ooc::detail::TileReader {
 public:
  static constexpr std::uint64_t kTileBytes = std::uint64_t{4} << 20;

  explicit ExpressionReader(std::vector<MappedArray> arrays) : arrays_(std::move(arrays)) {}

  const std::vector<MappedArray>& arrays() const { return arrays_; }

  void adopt(Expression expression, const Expression::Impl& impl) {
    expression_.emplace(std::move(expression));
    impl_ = &impl;
    for (std::size_t i = 0; i < impl.nodes.size(); ++i) {
      const MappedArray* a = impl.nodes[i].array;
      if (impl.nodes[i].kind != Node::Kind::input || !impl.input_direct[i]) continue;
      if (std::none_of(streamed_.begin(), streamed_.end(), [&](const Streamed& s) { return s.array == a; }))
        streamed_.push_back({a, 0});
    }
  }

  const std::byte* read(std::int64_t begin, std::int64_t end, ooc::detail::AlignedBuffer& buffer) override {
    const std::size_t item = static_cast<std::size_t>(impl_->dtype.itemsize());
    buffer.ensure(std::max<std::size_t>(1, static_cast<std::size_t>(end - begin) * item));
    std::byte* out = buffer.data();
    impl_->evaluate_range(begin, end, [&](std::int64_t at, const std::byte* values, std::int64_t n) {
      std::memcpy(out + static_cast<std::size_t>(at - begin) * item, values, static_cast<std::size_t>(n) * item);
    });
    return out;
  }
  // evaluate_range may run on several threads: an input read by a reader that is not
  // thread-safe is read under the expression's lock (gather).
  bool concurrent() const override { return true; }
  // Tiles of a few MiB: a tile computed here is still in the cache when the run's kernel
  // reads it, and the buffers of the tiles in flight stay small. (The mean of `a - 1`
  // along axis 0 of 1 GiB of (N, 8) float64, medians of 5: 1.54 s at 4 MiB, 1.94 s at
  // 16 MiB; resident 34 MiB above the interpreter's at 4 MiB, 106-129 MiB at 16 MiB.)
  // The sparsest selection among the inputs sizes them further, as for eval.
  std::uint64_t tile_bytes_cap() const override {
    std::uint64_t cap = kTileBytes;
    for (const MappedArray& a : arrays_) cap = std::min(cap, tile_bytes_spanning(a, kTileBytes));
    return cap;
  }
  void will_need(std::int64_t begin, std::int64_t end) override {
    for (const Streamed& s : streamed_) {
      if (s.array->mapped())
        ooc::detail::MappedArrayAccess::advise(*s.array, begin, end, os::Advice::will_need);
      else
        ooc::detail::MappedArrayAccess::reader(*s.array)->will_need(begin, end);
    }
  }
  void release(std::int64_t begin, std::int64_t end) override {
    for (Streamed& s : streamed_) {
      if (s.array->mapped())
        ooc::detail::MappedArrayAccess::drop_pages_before(*s.array, end, &s.dropped_to);
      else
        ooc::detail::MappedArrayAccess::reader(*s.array)->release(begin, end);
    }
  }
  bool shrank() const override {
    return std::any_of(arrays_.begin(), arrays_.end(), [](const MappedArray& a) { return a.shrank(); });
  }

 private:
  struct Streamed {
    const MappedArray* array;
    std::uintptr_t dropped_to;  // release(): pages below this address are let go
  };
  std::vector<MappedArray> arrays_;  // never resized: the expression points into it
  std::optional<Expression> expression_;
  const Expression::Impl* impl_ = nullptr;
  std::vector<Streamed> streamed_;
};

}  // namespace

MappedArray map_expression(std::string_view text, const std::vector<std::string>& names,
                           std::vector<MappedArray> arrays, std::string path) {
  if (names.size() != arrays.size()) throw UsageError("map_expression: names and arrays differ in number");
  if (arrays.empty()) throw UsageError("eval: an expression read as an array needs at least one array");
  auto reader = std::make_unique<ExpressionReader>(std::move(arrays));
  std::vector<Binding> bindings;
  for (std::size_t i = 0; i < names.size(); ++i) bindings.push_back({names[i], &reader->arrays()[i]});
  Expression expression = Expression::compile(text, bindings);
  if (expression.reduction())
    throw UsageError("eval: " + std::string(text) + ": a reduction gives one value, not an array to read");
  const Expression::Impl& impl = *expression.impl_;
  ArrayInfo info;
  info.format = "expression";
  info.dtype = impl.dtype;
  info.shape = impl.shape;
  info.order = impl.order;
  // Locks and journals are the first array's: an in-place run on it is refused while
  // the expression is read (the caller checks the others).
  const auto [source_path, source_fd] = ooc::detail::MappedArrayAccess::source(reader->arrays().front());
  os::UniqueFd fd(::dup(source_fd));
  reader->adopt(std::move(expression), impl);
  if (path.empty()) path = std::string(text);
  return ooc::detail::MappedArrayAccess::read_by(std::move(path), std::move(info), source_path, std::move(fd),
                                                 std::move(reader));
}

}  // namespace ooc::kernels
