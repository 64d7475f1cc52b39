// np.sort and np.argsort (kind='stable') out of core.
//
// Each value becomes a stored key: its bits, in native order, made unsigned-ordered
// invertibly (the sign flipped, negative floats complemented), so a sorted key gives the
// value's own bits back (NaN payloads and the sign of zero included). Comparisons use the
// order key, numpy's order: every NaN after +inf and equal to the others, -0.0 equal to
// 0.0; ties keep the input's order (stable).
//
// Three ways, by the shape of the work:
// - slabs: when a whole slab along the axis fits a tile (axis=-1 of an (N, 8) array), each
//   tile's slices are sorted where they lie and written through the output's own path;
// - in memory: the array fits one run: read, radix-sorted on every core's share... in one
//   piece, written;
// - runs: tile-sized runs are radix-sorted on the kernel threads into one temporary file
//   (unlinked as it is made: nothing survives the process), then merged in one pass.

#include "layer.hpp"
#include "core/mapped_array_access.hpp"
#include "order_keys.hpp"
#include "ooc/array_path.hpp"
#include "ooc/blocks.hpp"
#include "ooc/error.hpp"
#include "ooc/internal/pipeline.hpp"
#include "ooc/order.hpp"
#include "ooc/tile_plan.hpp"
#include "os/file.hpp"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_pipeline.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <mutex>
#include <system_error>

namespace ooc {

namespace {

using namespace order_keys;

// ---- keys --------------------------------------------------------------------------

template <class U>
U stored_key(U raw, Kind kind, bool swap) {
  const U bits = swap ? swap_bytes(raw) : raw;
  switch (kind) {
    case Kind::signed_int: return bits ^ kSign<U>;
    case Kind::floating: return float_key(bits);
    default: return bits;
  }
}

template <class U>
U raw_of(U key, Kind kind, bool swap) {
  const U bits = bits_of(key, kind);
  return swap ? swap_bytes(bits) : bits;
}

template <class U, bool Float>
U order_of(U key) {
  if constexpr (Float) {
    const U bits = float_bits(key);
    if (U(bits & U(~kSign<U>)) > kInfinity<U>) return std::numeric_limits<U>::max();  // every NaN, last, equal
    if (key == U(~kSign<U>)) return kSign<U>;                                         // -0.0 as 0.0
  }
  return key;
}

// ---- records: what a run holds per element -------------------------------------------

// Distinct empty types, so that [[no_unique_address]] gives both no bytes.
struct NoSlice {};
struct NoPosition {};

// Sliced: the slice (sorting along an axis of an n-d array, the slab too large for a
// tile); Positioned: the index along the axis (argsort's answer, and the tie-break where
// the input's memory order is not numpy's order).
template <class U, bool Sliced, bool Positioned>
struct Record {
  using Key = U;
  static constexpr bool sliced = Sliced, positioned = Positioned;
  U key;
  [[no_unique_address]] std::conditional_t<Sliced, std::int64_t, NoSlice> slice;
  [[no_unique_address]] std::conditional_t<Positioned, std::int64_t, NoPosition> pos;
};

static_assert(sizeof(Record<std::uint64_t, false, false>) == 8, "a value alone takes its own bytes in the runs");

// Negative: a before b; positive: b before a; 0: equal (they keep their runs' order).
template <class R, bool Float>
int compare(const R& a, const R& b) {
  if constexpr (R::sliced)
    if (a.slice != b.slice) return a.slice < b.slice ? -1 : 1;
  const auto ka = order_of<typename R::Key, Float>(a.key), kb = order_of<typename R::Key, Float>(b.key);
  if (ka != kb) return ka < kb ? -1 : 1;
  if constexpr (R::positioned)
    if (a.pos != b.pos) return a.pos < b.pos ? -1 : 1;
  return 0;
}

template <class R, bool Float>
bool before(const R& a, const R& b) {
  return compare<R, Float>(a, b) < 0;
}

// a and b have the same slice and order key: only their positions tell them apart.
template <class R, bool Float>
bool same_place(const R& a, const R& b) {
  if constexpr (R::sliced)
    if (a.slice != b.slice) return false;
  return order_of<typename R::Key, Float>(a.key) == order_of<typename R::Key, Float>(b.key);
}

// Stable LSD radix sort on (slice, order key), 11 bits a pass (6 passes for 8-byte keys,
// 3 for 4-byte ones; the counts of a pass stay in L1), passes whose digit is the same for
// every record skipped. `by_position`: equal (slice, key) records are then put in position
// order (their memory order is not numpy's: a Fortran array flattened).
constexpr int kDigitBits = 11;
constexpr std::size_t kBuckets = std::size_t{1} << kDigitBits;

// The LSD passes of radix_sort over data[0, n), the records moving between data and
// other; ends with them in `home` (one of the two).
template <class R, bool Float, class Counts, class DigitOf>
void least_significant_passes(R* data, R* other, std::size_t n, const Counts& counts, int digits, DigitOf&& digit_of,
                              R* home) {
  for (int d = 0; d < digits; ++d) {
    const auto& c = counts[static_cast<std::size_t>(d)];
    if (std::find(c.begin(), c.end(), n) != c.end()) continue;  // one bucket: nothing moves
    std::array<std::size_t, kBuckets> at;
    std::size_t sum = 0;
    for (std::size_t b = 0; b < kBuckets; ++b) {
      at[b] = sum;
      sum += c[b];
    }
    for (std::size_t i = 0; i < n; ++i) other[at[digit_of(data[i], d)]++] = data[i];
    std::swap(data, other);
  }
  if (data != home) std::copy(data, data + n, home);
}

template <class R, bool Float>
void radix_sort(std::vector<R>& v, std::vector<R>& scratch, bool by_position) {
  using U = typename R::Key;
  const std::size_t n = v.size();
  if (n < 256) {
    std::stable_sort(v.begin(), v.end(), before<R, Float>);
    return;
  }
  scratch.resize(n);
  std::uint64_t max_slice = 0;
  if constexpr (R::sliced)
    for (const R& r : v) max_slice = std::max(max_slice, static_cast<std::uint64_t>(r.slice));
  int slice_digits = 0;
  while (slice_digits * kDigitBits < 64 && (max_slice >> (kDigitBits * slice_digits)) != 0) ++slice_digits;
  constexpr int key_digits = (8 * static_cast<int>(sizeof(U)) + kDigitBits - 1) / kDigitBits;
  const int digits = key_digits + slice_digits;
  std::vector<std::array<std::size_t, kBuckets>> counts(static_cast<std::size_t>(digits));
  for (auto& c : counts) c.fill(0);
  auto digit_of = [](const R& r, int d) -> std::size_t {
    if (d < key_digits) return static_cast<std::size_t>((order_of<U, Float>(r.key) >> (kDigitBits * d)) & (kBuckets - 1));
    if constexpr (R::sliced)
      return static_cast<std::size_t>((static_cast<std::uint64_t>(r.slice) >> (kDigitBits * (d - key_digits))) &
                                      (kBuckets - 1));
    return 0;
  };
  for (const R& r : v) {
    const std::uint64_t k = order_of<U, Float>(r.key);
    for (int d = 0; d < key_digits; ++d) ++counts[static_cast<std::size_t>(d)][(k >> (kDigitBits * d)) & (kBuckets - 1)];
    if constexpr (R::sliced)
      for (int d = 0; d < slice_digits; ++d)
        ++counts[static_cast<std::size_t>(key_digits + d)]
                [(static_cast<std::uint64_t>(r.slice) >> (kDigitBits * d)) & (kBuckets - 1)];
  }
  least_significant_passes<R, Float>(v.data(), scratch.data(), n, counts, digits, digit_of, v.data());
  if constexpr (R::positioned) {
    if (!by_position) return;
    for (std::size_t i = 0; i < n;) {
      std::size_t j = i + 1;
      while (j < n && same_place<R, Float>(v[i], v[j])) ++j;
      if (j - i > 1) std::sort(v.begin() + static_cast<std::ptrdiff_t>(i), v.begin() + static_cast<std::ptrdiff_t>(j),
                               [](const R& a, const R& b) { return a.pos < b.pos; });
      i = j;
    }
  }
}

// ---- the geometry of a sort ----------------------------------------------------------

struct Plan {
  Geometry g;                 // memory order: (outer, length, inner), length the sorted axis
  bool flattened = false;     // axis None
  bool fortran_flat = false;  // axis None over a Fortran-ordered array: positions are C indices
  Shape memory_dims;          // the dims in memory order (fastest last), for fortran_flat
  Shape c_strides;            // the C strides of those dims' axes, in memory order
};

Plan plan_of(const MappedArray& in, const SortSpec& spec) {
  Plan p;
  const Shape& shape = in.shape();
  const int ndim = in.ndim();
  if (!spec.axis) {
    p.flattened = true;
    p.g.length = in.size();
    int long_dims = 0;
    for (std::int64_t n : shape) long_dims += n > 1;
    p.fortran_flat = in.order() == Order::fortran && long_dims > 1;
    if (p.fortran_flat) {
      const Shape c = element_strides(shape, Order::c);
      for (int d = ndim - 1; d >= 0; --d) {  // Fortran memory order: the last axis slowest
        p.memory_dims.push_back(shape[static_cast<std::size_t>(d)]);
        p.c_strides.push_back(c[static_cast<std::size_t>(d)]);
      }
    }
    return p;
  }
  const int k = *spec.axis < 0 ? *spec.axis + ndim : *spec.axis;
  if (k < 0 || k >= ndim)
    throw Error(std::string(), "axis " + std::to_string(*spec.axis) + " is out of bounds for array of dimension " +
                                   std::to_string(ndim), ErrorKind::value, "axis");
  const int m = in.order() == Order::c ? k : ndim - 1 - k;
  Shape dims = shape;
  if (in.order() == Order::fortran) std::reverse(dims.begin(), dims.end());
  p.g.length = dims[static_cast<std::size_t>(m)];
  for (int d = 0; d < m; ++d) p.g.outer *= dims[static_cast<std::size_t>(d)];
  for (int d = m + 1; d < ndim; ++d) p.g.inner *= dims[static_cast<std::size_t>(d)];
  return p;
}

// The C index of consecutive memory positions of a Fortran array, without a division each.
class FortranWalk {
 public:
  FortranWalk(const Plan& plan, std::int64_t p) : plan_(plan), index_(plan.memory_dims.size()) {
    // memory_dims is slowest first: the fastest is the last.
    for (std::size_t d = index_.size(); d-- > 0;) {
      index_[d] = p % plan.memory_dims[d];
      p /= plan.memory_dims[d];
      c_ += index_[d] * plan.c_strides[d];
    }
  }
  std::int64_t c_index() const { return c_; }
  void next() {
    for (std::size_t d = index_.size(); d-- > 0;) {
      c_ += plan_.c_strides[d];
      if (++index_[d] < plan_.memory_dims[d]) return;
      c_ -= index_[d] * plan_.c_strides[d];
      index_[d] = 0;
    }
  }

 private:
  const Plan& plan_;
  std::vector<std::int64_t> index_;
  std::int64_t c_ = 0;
};

// Where the rank-th value of slice s goes, in the output's memory order.
std::int64_t output_position(const Geometry& g, std::int64_t s, std::int64_t rank) {
  const std::int64_t o = s / g.inner, i = s % g.inner;
  return (o * g.length + rank) * g.inner + i;
}

// ---- slabs: every slice within a tile ------------------------------------------------

template <class U, bool Float>
void sort_slabs(const MappedArray& in, MappedArray& out, const Plan& plan, const SortSpec& spec,
                const PipelineOptions& options) {
  const Geometry& g = plan.g;
  const Kind kind = in.dtype().kind();
  const bool swap = !in.dtype().is_native();
  const std::int64_t slab = g.length * g.inner;
  const TilePlan tiles = TilePlan::slabs(g.outer, slab, in.dtype().itemsize(), options.tile_bytes);
  const MappedArray* inputs[] = {&in};
  struct Scratch {
    std::vector<U> keys;
    std::vector<std::pair<U, std::int64_t>> order;
  };
  tbb::enumerable_thread_specific<Scratch> scratch;
  for_each_block(std::span<const MappedArray* const>(inputs), &out, tiles, options,
                 [&](const Block& block) {
                   Scratch& s = scratch.local();
                   s.keys.resize(static_cast<std::size_t>(g.length));
                   s.order.resize(static_cast<std::size_t>(g.length));
                   const std::int64_t slabs = block.tile.size() / slab;
                   for (std::int64_t o = 0; o < slabs; ++o) {
                     const std::byte* base = block.inputs[0] + o * slab * static_cast<std::int64_t>(sizeof(U));
                     for (std::int64_t i = 0; i < g.inner; ++i) {
                       for (std::int64_t l = 0; l < g.length; ++l) {
                         U raw;
                         std::memcpy(&raw, base + (l * g.inner + i) * static_cast<std::int64_t>(sizeof(U)), sizeof(U));
                         const U key = stored_key(raw, kind, swap);
                         s.keys[static_cast<std::size_t>(l)] = key;
                         s.order[static_cast<std::size_t>(l)] = {order_of<U, Float>(key), l};
                       }
                       std::sort(s.order.begin(), s.order.end());  // (key, index): unique, so stable
                       for (std::int64_t r = 0; r < g.length; ++r) {
                         const std::int64_t at = o * slab + r * g.inner + i;
                         const std::int64_t l = s.order[static_cast<std::size_t>(r)].second;
                         if (spec.indices) {
                           std::memcpy(block.output + at * 8, &l, 8);
                         } else {
                           const U raw = raw_of(s.keys[static_cast<std::size_t>(l)], kind, swap);
                           std::memcpy(block.output + at * static_cast<std::int64_t>(sizeof(U)), &raw, sizeof(U));
                         }
                       }
                     }
                   }
                   return char{};
                 },
                 [](const Tile&, char) {});
}

// The directory the runs go to: the caller's, else the one holding the output's file (or
// its Zarr store: nothing of the sort's goes inside a store).
std::filesystem::path temp_dir_for(const MappedArray& out, const SortSpec& spec) {
  if (!spec.temp_dir.empty()) return spec.temp_dir;
  std::filesystem::path file = std::filesystem::absolute(ArrayPath::parse(out.path()).file);
  std::filesystem::path dir = file.parent_path();
  for (std::filesystem::path p = file; p.has_relative_path(); p = p.parent_path())
    if (p.extension() == ".zarr") dir = p.parent_path();
  return dir;
}

// ---- runs ---------------------------------------------------------------------------

// The temporary file of the runs: unlinked from the start (O_TMPFILE, or a fresh name
// removed at once), so no end of the process leaves it behind.
os::UniqueFd anonymous_file(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return os::UniqueFd(fd);
  std::string name = (dir / ".ooc-sort-runs-XXXXXX").string();
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw Error(dir.string(), "sort: cannot create the temporary file of its runs: " + os::errno_text(err),
                err == ENOSPC ? ErrorKind::no_space : err == ENOENT ? ErrorKind::not_found : ErrorKind::permission);
  }
  ::unlink(name.c_str());
  return os::UniqueFd(fd);
}

// Writes the merged records to `out`, rank after rank of each slice. A 1-d output is
// written through the file, a buffer at a time, each handed to write-back at once: pages
// faulted into the mapping would each be read (zeroed) first and all written by commit's
// msync (a 2 GiB sort spent 3.5 CPU-s zeroing them and waited 1 s on the msync). Sliced
// records land scattered along the slices: those go through the mapping.
template <class R>
class Writer {
 public:
  // Writes positions first, first + 1, ... (of slices in turn, for sliced records).
  Writer(MappedArray& out, const Plan& plan, const SortSpec& spec, Kind kind, bool swap, std::int64_t first = 0)
      : out_(out), bytes_(out.writable_bytes()), plan_(plan), indices_(spec.indices), kind_(kind), swap_(swap),
        written_(first), flushed_(first) {
    if constexpr (!R::sliced) buffer_.resize(kBufferRecords * static_cast<std::size_t>(item()));
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void put(const R& r) {
    std::int64_t at = written_;
    std::byte* to = bytes_.data();
    if constexpr (R::sliced) {
      if (r.slice != slice_) slice_ = r.slice, rank_ = 0;
      at = output_position(plan_.g, slice_, rank_++);
    } else {
      to = buffer_.data();
      at -= flushed_;
    }
    if (indices_) {
      if constexpr (R::positioned) std::memcpy(to + at * 8, &r.pos, 8);
    } else {
      using U = typename R::Key;
      const U raw = raw_of(r.key, kind_, swap_);
      std::memcpy(to + at * static_cast<std::int64_t>(sizeof(U)), &raw, sizeof(U));
    }
    ++written_;
    if constexpr (!R::sliced)
      if (written_ - flushed_ == static_cast<std::int64_t>(kBufferRecords)) flush();
  }

  // Writes what the buffer holds; call it once the part is merged.
  void flush() {
    if constexpr (!R::sliced) {
      if (written_ == flushed_) return;
      const std::uint64_t offset = out_.info().data_offset + static_cast<std::uint64_t>(flushed_) * item();
      const std::size_t size = static_cast<std::size_t>(written_ - flushed_) * static_cast<std::size_t>(item());
      const int fd = detail::MappedArrayAccess::fd(out_);
      os::write_at(fd, buffer_.data(), size, offset, out_.path());
      os::start_writeback(fd, offset, size);
      flushed_ = written_;
    }
  }

 private:
  static constexpr std::size_t kBufferRecords = std::size_t{1} << 19;  // 4 MiB of 8-byte values
  int item() const { return indices_ ? 8 : static_cast<int>(sizeof(typename R::Key)); }

  MappedArray& out_;
  std::span<std::byte> bytes_;
  const Plan& plan_;
  bool indices_;
  Kind kind_;
  bool swap_;
  std::int64_t written_, flushed_, slice_ = -1, rank_ = 0;
  std::vector<std::byte> buffer_;
};

// ---- the merge by parts sorted in memory -------------------------------------------

// What a run's sparse sample says about it: every `step`th order key of the sorted run.
template <class U>
struct RunSample {
  std::vector<U> keys;
  std::int64_t step = 1;
};

// The merge of sorted runs (records in the runs' order break ties: not sliced, memory
// order numpy's) by key ranges instead of a k-way merge: the runs' samples cut the keys
// into parts that each hold at most `capacity` records, a serial stage gathers each
// part's records run after run (ties in the runs' order), the kernel threads radix-sort
// the parts (stable: the ties keep that order) and write each at its place. A merge of
// 128 runs spent 7 loser-tree levels a record, 57% of an 8 GiB sort's CPU time; a radix
// sort of the gathered part costs what a run's did. A key whose samples alone exceed a
// part is a part of its own, copied in the runs' order without sorting (all its records
// are equal to the order).
template <class R, bool Float>
std::int64_t merge_sorted_parts(int runs_fd, const std::string& runs_name, const TilePlan& tiles,
                        std::vector<RunSample<typename R::Key>>& samples, std::int64_t capacity,
                        std::size_t per_buffer, MappedArray& out, const Plan& plan, const SortSpec& spec, Kind kind,
                        bool swap, const PipelineOptions& options, std::size_t threads, const std::string& dir,
                        const std::string& in_path) {
  using U = typename R::Key;
  const std::size_t k = tiles.size();
  // The parts: [start, end) of order keys; `whole` parts hold one key and skip the sort.
  struct Range {
    U start;
    U end;
    bool last, whole;
  };
  std::vector<std::pair<U, std::int64_t>> pooled;  // (order key, records it stands for)
  std::int64_t slack = 0;  // each run's records before its first sample inside a range
  for (RunSample<U>& sample : samples) {
    for (U key : sample.keys) pooled.emplace_back(key, sample.step);
    slack += sample.step;
    std::vector<U>().swap(sample.keys);
  }
  std::sort(pooled.begin(), pooled.end());
  std::vector<Range> ranges;
  U start = 0;
  std::int64_t bound = slack;
  for (std::size_t i = 0; i < pooled.size();) {
    const U key = pooled[i].first;
    std::size_t j = i;
    std::int64_t weight = 0;
    for (; j < pooled.size() && pooled[j].first == key; ++j) weight += pooled[j].second;
    if (bound + weight <= capacity) {
      bound += weight;
      i = j;
      continue;
    }
    if (bound > slack || start < key) {  // close the part before this key
      ranges.push_back({start, key, false, false});
      start = key;
      bound = slack;
      continue;
    }
    // This key alone is more than a part: a part of its own.
    if (key == std::numeric_limits<U>::max()) {
      ranges.push_back({key, key, true, true});
      start = key;
      bound = -1;
      break;
    }
    ranges.push_back({key, U(key + 1), false, true});
    start = U(key + 1);
    bound = slack;
    i = j;
  }
  if (bound >= 0) ranges.push_back({start, start, true, false});

  struct Cursor {
    std::vector<R> buffer;
    std::size_t at = 0;
    std::int64_t read = 0, end = 0;  // records of the run not yet buffered: [read, end)
  };
  std::vector<Cursor> cursors(k);
  auto refill = [&](Cursor& c) {
    const std::int64_t count = std::min<std::int64_t>(static_cast<std::int64_t>(per_buffer), c.end - c.read);
    c.buffer.resize(static_cast<std::size_t>(count));
    c.at = 0;
    if (count == 0) return;
    const std::uint64_t offset = static_cast<std::uint64_t>(c.read) * sizeof(R);
    const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(R);
    if (os::read_at(runs_fd, c.buffer.data(), bytes, offset, runs_name) != bytes)
      throw Error(dir, "sort: the temporary file of its runs came back short", ErrorKind::other);
    c.read += count;
    // The next refill's bytes on their way in while the part is sorted (cold runs: each
    // refill would otherwise wait for the disk on the gathering thread).
    const std::int64_t next = std::min<std::int64_t>(static_cast<std::int64_t>(per_buffer), c.end - c.read);
    if (next > 0)
      ::posix_fadvise(runs_fd, static_cast<off_t>(c.read * static_cast<std::int64_t>(sizeof(R))),
                      static_cast<off_t>(next * static_cast<std::int64_t>(sizeof(R))), POSIX_FADV_WILLNEED);
  };
  for (std::size_t r = 0; r < k; ++r) {
    cursors[r].read = tiles[r].begin;
    cursors[r].end = tiles[r].end;
    refill(cursors[r]);
  }
  // Hands each run's records of `range`, run after run, to take(first, count).
  auto gather = [&](const Range& range, auto&& take) {
    for (Cursor& c : cursors) {
      for (;;) {
        const R* first = c.buffer.data() + c.at;
        const R* stop = c.buffer.data() + c.buffer.size();
        const R* until = range.last ? stop : std::partition_point(first, stop, [&](const R& r) {
          return order_of<U, Float>(r.key) < range.end;
        });
        if (until > first) take(first, static_cast<std::size_t>(until - first));
        c.at += static_cast<std::size_t>(until - first);
        if (until < stop || c.read == c.end) break;
        refill(c);
      }
    }
  };

  struct Part {
    std::vector<R> records;
    std::int64_t first_out = 0;
  };
  std::mutex pool_mutex;
  std::vector<std::vector<R>> pool;  // part buffers, reused: fresh pages cost more than the sort
  tbb::enumerable_thread_specific<std::vector<R>> scratches;
  std::size_t next_range = 0;
  std::int64_t written = 0;
  detail::run_in_arena(static_cast<int>(threads), [&] {
    tbb::parallel_pipeline(
        threads,
        tbb::make_filter<void, std::shared_ptr<Part>>(
            tbb::filter_mode::serial_in_order,
            [&](tbb::flow_control& fc) -> std::shared_ptr<Part> {
              for (;;) {
                if (next_range == ranges.size()) {
                  fc.stop();
                  return nullptr;
                }
                if (options.cancel && options.cancel->load()) throw Cancelled(in_path, "sort cancelled");
                const Range& range = ranges[next_range++];
                if (range.whole) {  // one key: the runs' order is the sorted order
                  Writer<R> writer(out, plan, spec, kind, swap, written);
                  gather(range, [&](const R* first, std::size_t count) {
                    for (std::size_t i = 0; i < count; ++i) writer.put(first[i]);
                    written += static_cast<std::int64_t>(count);
                  });
                  writer.flush();
                  continue;
                }
                auto part = std::make_shared<Part>();
                {
                  std::lock_guard lock(pool_mutex);
                  if (!pool.empty()) {
                    part->records = std::move(pool.back());
                    pool.pop_back();
                  }
                }
                part->records.clear();
                part->records.reserve(static_cast<std::size_t>(capacity));
                part->first_out = written;
                gather(range, [&](const R* first, std::size_t count) {
                  if (static_cast<std::int64_t>(part->records.size() + count) > capacity)
                    throw Error(dir, "sort: a part of the merge outgrew its samples' bound", ErrorKind::other);
                  part->records.insert(part->records.end(), first, first + count);
                });
                written += static_cast<std::int64_t>(part->records.size());
                return part;
              }
            }) &
            tbb::make_filter<std::shared_ptr<Part>, void>(
                tbb::filter_mode::parallel, [&](std::shared_ptr<Part> part) {
                  radix_sort<R, Float>(part->records, scratches.local(), false);
                  Writer<R> writer(out, plan, spec, kind, swap, part->first_out);
                  for (const R& r : part->records) writer.put(r);
                  writer.flush();
                  std::lock_guard lock(pool_mutex);
                  pool.push_back(std::move(part->records));
                }));
  });
  return static_cast<std::int64_t>(ranges.size());
}

template <class R, bool Float>
SortResult sort_runs(const MappedArray& in, MappedArray& out, const Plan& plan, const SortSpec& spec,
                     const PipelineOptions& caller_options) {
  using U = typename R::Key;
  const Kind kind = in.dtype().kind();
  const bool swap = !in.dtype().is_native();
  PipelineOptions options = caller_options;
  options.tokens_per_thread = 1;  // one run per thread in memory, and its radix scratch
  options.populate = true;
  const std::size_t threads = static_cast<std::size_t>(detail::resolve_threads(options.threads));
  const std::int64_t n = in.size();
  // In memory when the sorted runs take at most half the budget (the other half: each
  // thread's run being sorted and its radix scratch); else runs of half the budget's
  // share per thread, written to the temporary file.
  const bool in_memory = static_cast<std::uint64_t>(n) * sizeof(R) <= spec.memory_budget / 2;
  // At most 8M records a run: a radix pass over more scatters beyond the caches and TLB
  // (64M float64 in two runs sorted 1.4x slower than in eight).
  const std::uint64_t per_run = std::clamp<std::uint64_t>(
      spec.memory_budget / ((in_memory ? 4 : 2) * sizeof(R) * threads), static_cast<std::uint64_t>(kBlockElements),
      std::uint64_t{1} << 23);
  options.tile_bytes = per_run * static_cast<std::uint64_t>(in.dtype().itemsize());
  const TilePlan tiles = TilePlan::for_array(in, options.tile_bytes);
  const std::uint64_t run_bytes = static_cast<std::uint64_t>(n) * sizeof(R);
  const bool spill = !in_memory && tiles.size() > 1;
  const std::filesystem::path dir = temp_dir_for(out, spec);
  const std::string runs_name = dir.string() + " (the sort's temporary runs)";
  os::UniqueFd runs;
  if (spill) {
    std::error_code ec;
    const std::filesystem::space_info space = std::filesystem::space(dir, ec);
    if (ec) throw Error(dir.string(), "sort: the temporary directory cannot be used: " + ec.message(),
                        ec == std::errc::no_such_file_or_directory ? ErrorKind::not_found : ErrorKind::other);
    if (space.available < run_bytes)
      throw Error(dir.string(), "sort: not enough disk space for the sorted runs: " + os::size_text(run_bytes) +
                                    " needed, " + os::size_text(space.available) + " free (choose another temp_dir)",
                  ErrorKind::no_space, "temp_dir");
    runs = anonymous_file(dir);
    os::preallocate(runs.get(), run_bytes, runs_name);
  }

  // The merge by sorted parts (merge_sorted_parts): its parts hold at most `capacity`
  // records, each thread's part and radix scratch 3/4 of the budget, the runs' read
  // buffers the rest; its samples (a key every `step` records of a run, so that the
  // bound they give is at most a quarter off) must stay small beside the budget, which
  // holds up to arrays of ~5e9 records at the default budget. Otherwise, and for sliced
  // or Fortran-flattened records, the k-way merge below.
  const std::size_t k = tiles.size();
  const std::int64_t capacity = std::max<std::int64_t>(
      kBlockElements, static_cast<std::int64_t>(3 * spec.memory_budget / (8 * threads * sizeof(R))));
  const std::int64_t step = std::max<std::int64_t>(1, capacity / static_cast<std::int64_t>(4 * k));
  const bool by_parts = spill && !R::sliced && !plan.fortran_flat && static_cast<std::int64_t>(2 * k) * step <= capacity &&
                        static_cast<std::uint64_t>(n / step + static_cast<std::int64_t>(k)) * 16 <=
                            spec.memory_budget / 8;
  std::vector<RunSample<U>> samples(by_parts ? k : 0);

  tbb::enumerable_thread_specific<std::vector<R>> locals, scratches;
  std::vector<R> whole(spill ? 0 : static_cast<std::size_t>(n));  // the runs, when in memory
  const MappedArray* inputs[] = {&in};
  for_each_block(std::span<const MappedArray* const>(inputs), nullptr, tiles, options,
                 [&](const Block& block) {
                   std::vector<R>& v = locals.local();
                   v.resize(static_cast<std::size_t>(block.tile.size()));
                   const std::byte* bytes = block.inputs[0];
                   std::optional<SliceWalk> walk;
                   if constexpr (R::sliced) walk.emplace(plan.g, block.tile.begin);
                   std::optional<FortranWalk> fortran;
                   if (plan.fortran_flat) fortran.emplace(plan, block.tile.begin);
                   for (std::int64_t j = 0; j < block.tile.size(); ++j) {
                     R& r = v[static_cast<std::size_t>(j)];
                     U raw;
                     std::memcpy(&raw, bytes + j * static_cast<std::int64_t>(sizeof(U)), sizeof(U));
                     r.key = stored_key(raw, kind, swap);
                     if constexpr (R::sliced) {
                       r.slice = walk->slice();
                       r.pos = walk->l;
                       walk->next();
                     } else if constexpr (R::positioned) {
                       if (fortran) {
                         r.pos = fortran->c_index();
                         fortran->next();
                       } else {
                         r.pos = block.tile.begin + j;
                       }
                     }
                   }
                   radix_sort<R, Float>(v, scratches.local(), plan.fortran_flat);
                   if (by_parts) {
                     RunSample<U>& sample = samples[block.tile.index];
                     sample.step = step;
                     for (std::size_t i = 0; i < v.size(); i += static_cast<std::size_t>(step))
                       sample.keys.push_back(order_of<U, Float>(v[i].key));
                   }
                   if (spill)
                     os::write_at(runs.get(), v.data(), v.size() * sizeof(R),
                                  static_cast<std::uint64_t>(block.tile.begin) * sizeof(R), runs_name);
                   else
                     std::copy(v.begin(), v.end(), whole.begin() + block.tile.begin);
                   return char{};
                 },
                 [](const Tile&, char) {});
  locals.clear();
  scratches.clear();

  SortResult result;
  result.reads = 1;
  if (spill) {
    result.runs = static_cast<std::int64_t>(tiles.size());
    result.run_bytes = run_bytes;
  }
  if (by_parts) {
    const std::size_t per_buffer =
        std::max<std::size_t>(std::size_t{1} << 12, spec.memory_budget / (4 * k * sizeof(R)));
    result.merge_parts = merge_sorted_parts<R, Float>(runs.get(), runs_name, tiles, samples, capacity, per_buffer, out, plan, spec, kind,
                                 swap, options, threads, dir.string(), in.path());
    return result;
  }
  // Record i of the runs (one read of the file for a spilled one).
  auto record_at = [&](std::int64_t i) {
    if (!spill) return whole[static_cast<std::size_t>(i)];
    R r;
    if (os::read_at(runs.get(), &r, sizeof(R), static_cast<std::uint64_t>(i) * sizeof(R), runs_name) != sizeof(R))
      throw Error(dir.string(), "sort: the temporary file of its runs came back short", ErrorKind::other);
    return r;
  };

  // The merge, cut into parts by key: a part takes, of every run, the records whose order
  // key lies in its range (equal keys never straddle two parts, so ties keep their runs'
  // order), and writes its own stretch of the output. Sliced records are one part.
  std::size_t parts = 1;
  if constexpr (!R::sliced)
    if (threads > 1 && k > 1 && n >= (std::int64_t{1} << 20)) parts = 2 * threads;
  std::vector<std::vector<std::int64_t>> bounds(parts + 1, std::vector<std::int64_t>(k));  // bounds[j][r]
  for (std::size_t r = 0; r < k; ++r) {
    bounds[0][r] = tiles[r].begin;
    bounds[parts][r] = tiles[r].end;
  }
  if (parts > 1) {
    std::vector<U> samples;
    constexpr std::int64_t kSamplesPerRun = 256;
    for (std::size_t r = 0; r < k; ++r) {
      const Tile tile = tiles[r];
      for (std::int64_t s = 0; s < kSamplesPerRun; ++s)
        samples.push_back(order_of<U, Float>(record_at(tile.begin + s * tile.size() / kSamplesPerRun).key));
    }
    std::sort(samples.begin(), samples.end());
    for (std::size_t j = 1; j < parts; ++j) {
      const U splitter = samples[j * samples.size() / parts];
      for (std::size_t r = 0; r < k; ++r) {
        std::int64_t lo = std::max(tiles[r].begin, bounds[j - 1][r]), hi = tiles[r].end;  // first key >= splitter
        while (lo < hi) {
          const std::int64_t mid = lo + (hi - lo) / 2;
          if (order_of<U, Float>(record_at(mid).key) < splitter) lo = mid + 1;
          else hi = mid;
        }
        bounds[j][r] = lo;
      }
    }
  }
  std::vector<std::int64_t> first_out(parts + 1, 0);
  for (std::size_t j = 0; j < parts; ++j) {
    first_out[j + 1] = first_out[j];
    for (std::size_t r = 0; r < k; ++r) first_out[j + 1] += bounds[j + 1][r] - bounds[j][r];
  }
  const std::size_t per_buffer =
      std::max<std::size_t>(std::size_t{1} << 12, spec.memory_budget / (2 * parts * k * sizeof(R)));

  auto merge_part = [&](std::size_t j) {
    struct Cursor {
      std::vector<R> buffer;
      const R* at = nullptr;
      const R* stop = nullptr;
      std::int64_t read = 0, end = 0;  // records of the run not yet buffered: [read, end)
    };
    std::vector<Cursor> cursors(k);
    auto refill = [&](Cursor& c) {
      const std::int64_t count =
          spill ? std::min<std::int64_t>(static_cast<std::int64_t>(per_buffer), c.end - c.read) : c.end - c.read;
      if (!spill) {
        c.at = whole.data() + c.read;
        c.stop = c.at + count;
      } else {
        c.buffer.resize(static_cast<std::size_t>(count));
        if (count > 0 && os::read_at(runs.get(), c.buffer.data(), static_cast<std::size_t>(count) * sizeof(R),
                                     static_cast<std::uint64_t>(c.read) * sizeof(R), runs_name) !=
                             static_cast<std::size_t>(count) * sizeof(R))
          throw Error(dir.string(), "sort: the temporary file of its runs came back short", ErrorKind::other);
        c.at = c.buffer.data();
        c.stop = c.at + count;
      }
      c.read += count;
    };
    for (std::size_t r = 0; r < k; ++r) {
      cursors[r].read = bounds[j][r];
      cursors[r].end = bounds[j + 1][r];
      refill(cursors[r]);
    }
    Writer<R> writer(out, plan, spec, kind, swap, first_out[j]);
    std::int64_t merged = 0;
    auto count_one = [&] {
      if ((++merged & 0xfffff) == 0 && options.cancel && options.cancel->load())
        throw Cancelled(in.path(), "sort cancelled");
    };
    // A loser tree over the runs: log2(k) comparisons a record (a heap's pop and push
    // take twice that). A run beats another when its next record comes first; equal
    // records: the earlier run, as the input had them; a run that is done never wins.
    if (R::sliced || plan.fortran_flat) {
      auto beats = [&](std::size_t a, std::size_t b) {
        const Cursor& x = cursors[a];
        const Cursor& y = cursors[b];
        if (x.at == x.stop) return false;
        if (y.at == y.stop) return true;
        const int order = compare<R, Float>(*x.at, *y.at);
        return order != 0 ? order < 0 : a < b;
      };
      std::vector<std::size_t> losers(k);  // losers[1..k-1]: each match's loser; leaves are k..2k-1
      auto play = [&](auto&& self, std::size_t node) -> std::size_t {
        if (node >= k) return node - k;
        const std::size_t a = self(self, 2 * node), b = self(self, 2 * node + 1);
        if (beats(a, b)) {
          losers[node] = b;
          return a;
        }
        losers[node] = a;
        return b;
      };
      std::size_t winner = k == 1 ? 0 : play(play, 1);
      while (cursors[winner].at != cursors[winner].stop) {
        Cursor& c = cursors[winner];
        writer.put(*c.at);
        if (++c.at == c.stop) refill(c);
        for (std::size_t node = (winner + k) / 2; node >= 1; node /= 2)
          if (beats(losers[node], winner)) std::swap(losers[node], winner);
        count_one();
      }
    } else {
      // The runs' order breaks every tie (memory order is numpy's): each run's next record
      // is one number, its order key above its tag (the run, or k + run once the run is
      // done: after every record, the largest key's too), and the tree holds those numbers,
      // so a match is a min and a max (no branch to mispredict on random keys).
      using Packed = std::conditional_t<(sizeof(U) > 4), unsigned __int128, std::uint64_t>;
      auto head = [&](std::size_t r) {
        const Cursor& c = cursors[r];
        return c.at == c.stop ? Packed(std::numeric_limits<U>::max()) << 32 | Packed(k + r)
                              : Packed(order_of<U, Float>(c.at->key)) << 32 | Packed(r);
      };
      std::vector<Packed> losers(k);
      auto play = [&](auto&& self, std::size_t node) -> Packed {
        if (node >= k) return head(node - k);
        const Packed a = self(self, 2 * node), b = self(self, 2 * node + 1);
        losers[node] = std::max(a, b);
        return std::min(a, b);
      };
      Packed winner = play(play, 1);
      for (;;) {
        const std::size_t r = static_cast<std::size_t>(static_cast<std::uint32_t>(winner));
        if (r >= k) break;
        Cursor& c = cursors[r];
        writer.put(*c.at);
        if (++c.at == c.stop) refill(c);
        winner = head(r);
        for (std::size_t node = (r + k) / 2; node >= 1; node /= 2) {
          const Packed l = losers[node];
          losers[node] = std::max(l, winner);
          winner = std::min(l, winner);
        }
        count_one();
      }
    }
    writer.flush();
  };
  if (parts == 1) {
    merge_part(0);
  } else {
    detail::run_in_arena(static_cast<int>(threads), [&] {
      tbb::parallel_for(std::size_t{0}, parts, [&](std::size_t j) { merge_part(j); });
    });
  }
  return result;
}

template <class U, bool Float>
SortResult sort_typed(const MappedArray& in, MappedArray& out, const Plan& plan, const SortSpec& spec,
                      const PipelineOptions& options) {
  if (!plan.flattened && plan.g.slices() > 1) {
    const std::uint64_t slab_bytes = static_cast<std::uint64_t>(plan.g.length * plan.g.inner) * sizeof(U);
    if (slab_bytes <= options.tile_bytes) {
      sort_slabs<U, Float>(in, out, plan, spec, options);
      return SortResult{1, 0, 0};
    }
    return sort_runs<Record<U, true, true>, Float>(in, out, plan, spec, options);
  }
  if (spec.indices || plan.fortran_flat) return sort_runs<Record<U, false, true>, Float>(in, out, plan, spec, options);
  return sort_runs<Record<U, false, false>, Float>(in, out, plan, spec, options);
}

}  // namespace

DType sort_dtype(const MappedArray& in, const SortSpec& spec) {
  return spec.indices ? dtype_of<std::int64_t> : in.dtype();
}

Shape sort_shape(const MappedArray& in, const SortSpec& spec) {
  if (!spec.axis) return Shape{in.size()};
  return in.shape();
}

SortResult sort(const MappedArray& in, MappedArray& out, const SortSpec& spec, const PipelineOptions& options) {
  try {
    const Plan plan = plan_of(in, spec);
    const DType dtype = sort_dtype(in, spec);
    if (out.shape() != sort_shape(in, spec) || out.dtype().descr() != dtype.descr() ||
        (out.ndim() > 1 && out.order() != in.order()))
      throw UsageError(out.path(), "sort: the output is not of the result's shape, dtype and order");
    if (in.size() == 0) return SortResult{};
    const bool needs_mapped = plan.flattened || plan.g.slices() <= 1 ||
                              static_cast<std::uint64_t>(plan.g.length * plan.g.inner) * in.dtype().itemsize() > options.tile_bytes;
    if (needs_mapped && detail::MappedArrayAccess::writer(out) != nullptr) {
      // A compressed or chunked output is written tile by tile: the merge writes into a
      // temporary .npy beside it, copied over, and never given a name.
      const std::filesystem::path dir = temp_dir_for(out, spec);
      MappedArray scratch = create_npy((dir / (".ooc-sort-" + std::to_string(::getpid()) + ".npy")).string(), dtype,
                                       out.shape(), out.order());
      SortResult result = sort(in, scratch, spec, options);
      const MappedArray* inputs[] = {&scratch};
      for_each_block(std::span<const MappedArray* const>(inputs), &out, TilePlan::for_array(scratch, options.tile_bytes),
                     options,
                     [&](const Block& block) {
                       std::memcpy(block.output, block.inputs[0],
                                   static_cast<std::size_t>(block.tile.size()) * static_cast<std::size_t>(dtype.itemsize()));
                       return char{};
                     },
                     [](const Tile&, char) {});
      return result;
    }
    const Kind kind = in.dtype().kind();
    return visit_dtype(in.dtype().native(), [&]<class T>(std::type_identity<T>) {
      using U = Bits<T>;
      if constexpr (sizeof(U) > 1)
        if (kind == Kind::floating) return sort_typed<U, true>(in, out, plan, spec, options);
      return sort_typed<U, false>(in, out, plan, spec, options);
    });
  } catch (const Error&) {
    order_keys::rethrow_naming_array(in.path());
  }
}

namespace {

// Each run of equal order keys (-0.0 with 0.0, NaNs together) of a sorted 1-d array, in
// order: f(index of the value that stands for it, count). The value is the run's -0.0
// where it has one (as the tables' unique gives), else its first.
template <class U, bool Float, class F>
void each_distinct(const MappedArray& sorted, Kind kind, bool swap, F&& f) {
  const std::byte* bytes = sorted.bytes().data();
  const std::int64_t n = sorted.size();
  std::uintptr_t mark = 0;
  auto key_at = [&](std::int64_t j) {
    U raw;
    std::memcpy(&raw, bytes + j * static_cast<std::int64_t>(sizeof(U)), sizeof(U));
    return stored_key(raw, kind, swap);
  };
  if (n == 0) return;
  std::int64_t first = 0, chosen = 0;
  U current = order_of<U, Float>(key_at(0));
  for (std::int64_t j = 1; j < n; ++j) {
    const U key = key_at(j);
    if (order_of<U, Float>(key) != current) {
      f(chosen, j - first);
      first = chosen = j;
      current = order_of<U, Float>(key);
    } else if (Float && key == U(~kSign<U>)) {
      chosen = j;  // -0.0 among the zeros
    }
    if ((j & ((std::int64_t{1} << 22) - 1)) == 0) detail::MappedArrayAccess::drop_pages_before(sorted, j, &mark);
  }
  f(chosen, n - first);
}

}  // namespace

UniqueToResult unique_to(const MappedArray& in, const std::function<MappedArray(std::int64_t)>& make_output,
                         bool counts, const SortSpec& how, const PipelineOptions& options) {
  UniqueToResult result;
  const DType dtype = in.dtype().native();
  std::optional<UniqueResult> tables;
  try {
    tables = unique(in, how.memory_budget, options);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::out_of_memory) throw;
  }
  if (tables) {
    result.distinct = static_cast<std::int64_t>(tables->counts.size());
    result.reads = tables->passes;
    MappedArray& out = result.output.emplace(make_output(result.distinct));
    std::span<std::byte> bytes = out.writable_bytes();
    if (!tables->values.empty()) std::memcpy(bytes.data(), tables->values.data(), tables->values.size());
    if (counts) result.counts = std::move(tables->counts);
    return result;
  }
  // More distinct values than the tables hold: sorted into a hidden .npy, then read once.
  result.sorted = true;
  SortSpec spec = how;
  spec.axis = std::nullopt;
  spec.indices = false;
  const std::filesystem::path dir =
      how.temp_dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(how.temp_dir);
  MappedArray sorted = create_npy((dir / (".ooc-unique-" + std::to_string(::getpid()) + ".npy")).string(), in.dtype(),
                                  Shape{in.size()}, Order::c);
  result.reads = 1 + sort(in, sorted, spec, options).reads;
  const Kind kind = in.dtype().kind();
  const bool swap = !in.dtype().is_native();
  visit_dtype(dtype, [&]<class T>(std::type_identity<T>) {
    using U = Bits<T>;
    auto with = [&]<bool Float>() {
      std::int64_t distinct = 0;
      each_distinct<U, Float>(sorted, kind, swap, [&](std::int64_t, std::int64_t count) {
        ++distinct;
        if (counts) {
          if (result.counts.size() * sizeof(std::int64_t) >= how.memory_budget)
            throw Error(in.path(), "unique: the counts of more than " + std::to_string(result.counts.size()) +
                                       " distinct values do not fit the memory budget of " +
                                       std::to_string(how.memory_budget) + " bytes (ask for the values alone)",
                        ErrorKind::out_of_memory);
          result.counts.push_back(count);
        }
      });
      result.distinct = distinct;
      MappedArray& out = result.output.emplace(make_output(distinct));
      std::byte* into = out.writable_bytes().data();
      const std::byte* from = sorted.bytes().data();
      std::int64_t at = 0;
      each_distinct<U, Float>(sorted, kind, swap, [&](std::int64_t index, std::int64_t) {
        U raw;
        std::memcpy(&raw, from + index * static_cast<std::int64_t>(sizeof(U)), sizeof(U));
        if (swap) raw = swap_bytes(raw);
        std::memcpy(into + (at++) * static_cast<std::int64_t>(sizeof(U)), &raw, sizeof(U));
      });
    };
    if constexpr (sizeof(U) > 1)
      if (kind == Kind::floating) return with.template operator()<true>();
    with.template operator()<false>();
  });
  return result;
}

}  // namespace ooc
