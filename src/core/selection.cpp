#include "ooc/selection.hpp"

#include "core/bool_mask.hpp"
#include "core/mapped_array_access.hpp"
#include "core/selection_info.hpp"
#include "ooc/dtype.hpp"
#include "os/direct_io.hpp"
#include "os/tile_reader.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <sstream>

namespace ooc {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits at the commas outside brackets.
std::vector<std::string_view> split_top_level(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  std::size_t from = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    else if (s[i] == ']') --depth;
    else if (s[i] == ',' && depth == 0) {
      parts.push_back(trim(s.substr(from, i - from)));
      from = i + 1;
    }
  }
  parts.push_back(trim(s.substr(from)));
  return parts;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw UsageError(path_, "selection [" + std::string(text_) + "]: " + problem);
  }
  // Where numpy raises IndexError.
  [[noreturn]] void fail_index(const std::string& problem, const std::string& numpy_text) const {
    throw IndexError(path_, "selection [" + std::string(text_) + "]: " + problem, numpy_text);
  }

  std::int64_t integer(std::string_view s) const {
    s = trim(s);
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      if (ec == std::errc::result_out_of_range) fail("index " + std::string(s) + " does not fit in 64 bits");
      fail("'" + std::string(s) + "' is not an integer index, a slice start:stop:step, a list [i, j] or @FILE");
    }
    return value;
  }

  std::optional<std::int64_t> slice_part(std::string_view s) const {
    s = trim(s);
    if (s.empty() || s == "None") return std::nullopt;
    // Python clamps a slice's start, stop and step beyond its machine integers
    // (PySlice_Unpack), and numpy with it: v[:10**30] is all of v, v[10**30:] is empty.
    std::string_view digits = s;
    if (digits.front() == '+') digits.remove_prefix(1);
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec == std::errc::result_out_of_range && end == digits.data() + digits.size())
      return digits.front() == '-' ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int64_t>::max();
    return integer(s);
  }

  Selection::Item item(std::string_view s) const {
    if (s.empty()) fail("an empty index");
    if (s == "..." || s == "Ellipsis") fail("'...' is not supported: write the axes out");
    if (s == "None" || s == "np.newaxis") fail("new axes (None) are not supported");
    if (s == "True" || s == "False") fail("boolean scalar indices are not supported (a mask is a file: @keep.npy)");
    if (s.front() == '@') return index_file(std::string(trim(s.substr(1))));
    if (s.front() == '[') {
      if (s.back() != ']') fail("a list must end with ']'");
      const std::string_view inner = trim(s.substr(1, s.size() - 2));
      std::vector<std::int64_t> list;
      if (!inner.empty())
        for (std::string_view part : split_top_level(inner)) {
          if (!part.empty() && part.front() == '[') fail("nested lists (more than one list dimension) are not supported");
          if (part.empty()) fail("an empty entry in a list");
          list.push_back(integer(part));
        }
      return list;
    }
    if (s.find(':') != std::string_view::npos) {
      std::vector<std::string_view> parts;
      std::size_t from = 0;
      for (std::size_t i = 0; i <= s.size(); ++i)
        if (i == s.size() || s[i] == ':') {
          parts.push_back(s.substr(from, i - from));
          from = i + 1;
        }
      if (parts.size() > 3) fail("a slice has at most start:stop:step");
      Slice slice;
      slice.start = slice_part(parts[0]);
      slice.stop = slice_part(parts[1]);
      if (parts.size() == 3) slice.step = slice_part(parts[2]);
      return slice;
    }
    return integer(s);
  }

  // An array in a file, as numpy's a[np.load(FILE)]: a bool one is a mask (counted, not
  // loaded), the integers of a 1-D integer one a list.
  Selection::Item index_file(const std::string& file) const {
    if (file.empty()) fail("@ must name an index array or mask file, as @rows.npy or @keep.npy");
    MappedArray indices = [&] {
      try {
        return map_file(file);
      } catch (const Error& e) {
        fail(std::string("index array ") + e.what());
      }
    }();
    const DType dtype = indices.dtype();
    if (dtype.kind() == Kind::boolean) {
      if (indices.ndim() == 0) fail("mask " + file + " has 0 dimensions: a 0-d boolean index adds an axis, which "
                                    "ooc selections do not");
      try {
        return BoolMask(std::move(indices));
      } catch (const UsageError& e) {
        fail(std::string("mask ") + e.what());
      }
    }
    if (dtype.kind() != Kind::signed_int && dtype.kind() != Kind::unsigned_int) {
      const std::string numpy_text = "arrays used as indices must be of integer (or boolean) type";
      fail_index("index array " + file + " holds " + dtype.name() + "; " + numpy_text, numpy_text);
    }
    if (indices.shape().size() != 1)
      fail("index array " + file + " has " + std::to_string(indices.shape().size()) +
           " dimensions; only 1-D index arrays are supported");
    std::vector<std::int64_t> values(static_cast<std::size_t>(indices.size()));
    if (values.empty()) return values;
    const std::size_t item = static_cast<std::size_t>(dtype.itemsize());
    auto take = [&](const std::byte* data, std::int64_t begin, std::int64_t count) {
      for (std::int64_t i = 0; i < count; ++i) {
        const std::byte* p = data + static_cast<std::size_t>(i) * item;
        if (dtype.kind() == Kind::unsigned_int) {
          std::uint64_t v = 0;
          convert(dtype, p, dtype_of<std::uint64_t>, &v, 1);
          if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            fail("index " + std::to_string(v) + " in " + file + " does not fit in 64 bits");
          values[static_cast<std::size_t>(begin + i)] = static_cast<std::int64_t>(v);
        } else {
          convert(dtype, p, dtype_of<std::int64_t>, &values[static_cast<std::size_t>(begin + i)], 1);
        }
      }
    };
    if (indices.mapped()) {
      take(indices.bytes().data(), 0, indices.size());
    } else {
      detail::AlignedBuffer buffer;
      detail::TileReader* reader = detail::MappedArrayAccess::reader(indices);
      take(reader->read(0, indices.size(), buffer), 0, indices.size());
    }
    return values;
  }

 private:
  std::string_view text_;
  const std::string& path_;
};

// The source axes a streamed mask covers: where its C-order position f lies in the source.
struct MaskAxes {
  std::vector<std::int64_t> sizes, strides;  // of the source axes it covers, outermost first
  bool linear = false;                       // those axes lie one after another: f * strides.back()
  std::int64_t offset(std::int64_t f) const {
    if (linear) return f * strides.back();
    std::int64_t offset = 0;
    for (std::size_t j = sizes.size(); j-- > 0;) {
      offset += f % sizes[j] * strides[j];
      f /= sizes[j];
    }
    return offset;
  }
  // Positions f, f + 1, ... that lie strides.back() apart in the source: those on the same
  // row of the innermost axis (all of them when linear).
  std::int64_t straight_from(std::int64_t f) const {
    return linear ? std::numeric_limits<std::int64_t>::max() : sizes.back() - f % sizes.back();
  }
};

// One loop of a selection, in its memory order: element i of it is `offset(i)` elements
// from the loop's start in the source, or, for a streamed mask, at the offset of the
// mask's i-th true element (walked with a cursor: for_each_run).
struct Loop {
  std::int64_t count = 1;
  std::int64_t stride = 0;                // source elements between neighbours (a slice)
  std::vector<std::int64_t> offsets;      // or each index's offset (the list's axis)
  std::shared_ptr<const detail::MaskIndex> mask;  // or a mask's true elements
  MaskAxes mask_axes;
  std::int64_t offset(std::int64_t i) const { return offsets.empty() ? i * stride : offsets[static_cast<std::size_t>(i)]; }
};

// Where a selection's elements are in its source: element m (in the selection's memory
// order) is at base + the sum of each loop's offset of m's digit for that loop.
struct Layout {
  Shape shape;
  Order order = Order::c;
  std::int64_t base = 0;
  std::vector<Loop> loops;  // innermost first
  std::int64_t size = 0;
};

// A run of selected elements: `count` elements from source element `first`, `step`
// apart, that are elements [at, at + count) of the selection.
struct Run {
  std::int64_t at, first, count, step;
};

// Calls f(run) for the runs of selection elements [begin, end), in order. A streamed
// mask's loop walks its true elements with a cursor, from the true element `begin` needs
// on: a tile reads only its own part of the mask.
template <class F>
void for_each_run(const Layout& layout, std::int64_t begin, std::int64_t end, F&& f) {
  if (begin >= end) return;
  const std::size_t depth = layout.loops.size();
  std::vector<std::int64_t> digit(depth), offset(depth);
  std::vector<std::optional<detail::MaskIndex::Cursor>> cursor(depth);
  std::int64_t rest = begin;
  for (std::size_t d = 0; d < depth; ++d) {
    const Loop& loop = layout.loops[d];
    digit[d] = rest % loop.count;
    rest /= loop.count;
    if (loop.mask) {
      cursor[d].emplace(*loop.mask);
      cursor[d]->seek(digit[d]);
    }
  }
  // The offset of loop d's current element.
  auto current = [&](std::size_t d) {
    const Loop& loop = layout.loops[d];
    return loop.mask ? loop.mask_axes.offset(cursor[d]->position()) : loop.offset(digit[d]);
  };
  for (std::size_t d = 1; d < depth; ++d) offset[d] = current(d);
  const Loop& inner = layout.loops[0];
  std::int64_t at = begin;
  for (;;) {
    std::int64_t outer = layout.base;
    for (std::size_t d = 1; d < depth; ++d) outer += offset[d];
    const std::int64_t n = std::min(inner.count - digit[0], end - at);
    if (inner.mask) {
      detail::MaskIndex::Cursor& walk = *cursor[0];
      for (std::int64_t j = 0; j < n;) {
        const std::int64_t f0 = walk.position();
        const std::int64_t run = walk.take_run(std::min(n - j, inner.mask_axes.straight_from(f0)));
        f(Run{at + j, outer + inner.mask_axes.offset(f0), run, inner.mask_axes.strides.back()});
        j += run;
      }
    } else if (inner.offsets.empty()) {
      f(Run{at, outer + digit[0] * inner.stride, n, inner.stride});
    } else {
      for (std::int64_t j = 0; j < n; ++j) f(Run{at + j, outer + inner.offsets[static_cast<std::size_t>(digit[0] + j)], 1, 1});
    }
    at += n;
    if (at >= end) return;
    digit[0] = 0;
    if (inner.mask) cursor[0]->seek(0);
    for (std::size_t d = 1; d < depth; ++d) {
      const bool carry = ++digit[d] == layout.loops[d].count;
      if (carry) digit[d] = 0;
      if (cursor[d]) {
        if (carry) cursor[d]->seek(0);
        else cursor[d]->next();
      }
      offset[d] = current(d);
      if (!carry) break;
    }
  }
}

// Source elements [lo, hi] that are read as one piece.
struct Span {
  std::int64_t lo, hi;
};

// The source elements [lo, hi] a piece of a tile read (none while hi < lo).
struct Cover {
  std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = -1;
  void add(std::int64_t first, std::int64_t count, std::int64_t step) {
    const std::int64_t last = first + (count - 1) * step;
    lo = std::min({lo, first, last});
    hi = std::max({hi, first, last});
  }
};

// Groups runs into spans: a gap of up to `gap` elements between a run and the span being
// built is read through; a larger one starts a new span. A strided run whose own gaps
// are larger is taken element by element. flush(span, runs) gets each span and its runs;
// a builder that only advises or counts spans keeps no runs (Runs::dropped), since
// keeping one per row of a dense selection made the serial prefetch stage the
// bottleneck, filling fresh pages with them.
class SpanBuilder {
 public:
  enum class Runs { kept, dropped };
  // `longest`: no span covers more source elements than this (a run longer is cut), so
  // that a reader of spans into a buffer of its own holds a bounded piece at a time.
  explicit SpanBuilder(std::int64_t gap, Runs runs = Runs::kept,
                       std::int64_t longest = std::numeric_limits<std::int64_t>::max())
      : gap_(gap), keep_runs_(runs == Runs::kept), longest_(std::max<std::int64_t>(1, longest)) {}

  template <class Flush>
  void add(const Run& run, Flush&& flush) {
    const std::int64_t gap_inside = std::abs(run.step) - 1;
    if (run.count > 1 && gap_inside > gap_) {
      for (std::int64_t i = 0; i < run.count; ++i) add(Run{run.at + i, run.first + i * run.step, 1, 1}, flush);
      return;
    }
    const std::int64_t reach = std::max<std::int64_t>(1, std::abs(run.step));
    if (run.count > 1 && (run.count - 1) * reach + 1 > longest_) {
      const std::int64_t per = std::max<std::int64_t>(1, (longest_ - 1) / reach + 1);
      for (std::int64_t i = 0; i < run.count; i += per)
        add(Run{run.at + i, run.first + i * run.step, std::min(per, run.count - i), run.step}, flush);
      return;
    }
    const std::int64_t last = run.first + (run.count - 1) * run.step;
    const std::int64_t lo = std::min(run.first, last), hi = std::max(run.first, last);
    if (open_) {
      const std::int64_t distance = std::max(lo - span_.hi, span_.lo - hi) - 1;
      if (distance <= gap_ && std::max(span_.hi, hi) - std::min(span_.lo, lo) + 1 <= longest_) {
        span_.lo = std::min(span_.lo, lo);
        span_.hi = std::max(span_.hi, hi);
        if (keep_runs_) runs_.push_back(run);
        return;
      }
      finish(flush);
    }
    span_ = Span{lo, hi};
    open_ = true;
    if (keep_runs_) runs_.push_back(run);
  }

  template <class Flush>
  void finish(Flush&& flush) {
    if (!open_) return;
    flush(span_, runs_);
    runs_.clear();
    open_ = false;
  }

 private:
  std::int64_t gap_;
  bool keep_runs_;
  std::int64_t longest_;
  bool open_ = false;
  Span span_{0, 0};
  std::vector<Run> runs_;
};

// Copies `count` elements of `item` bytes, `step` elements apart in `src`, to `dst`.
void copy_run(std::byte* dst, const std::byte* src, std::int64_t count, std::int64_t step, std::size_t item) {
  if (step == 1) {
    std::memcpy(dst, src, static_cast<std::size_t>(count) * item);
    return;
  }
  const std::ptrdiff_t stride = static_cast<std::ptrdiff_t>(step) * static_cast<std::ptrdiff_t>(item);
  auto strided = [&]<class Word>(std::type_identity<Word>) {
    for (std::int64_t i = 0; i < count; ++i, src += stride, dst += sizeof(Word)) std::memcpy(dst, src, sizeof(Word));
  };
  switch (item) {
    case 1: strided(std::type_identity<std::uint8_t>{}); break;
    case 2: strided(std::type_identity<std::uint16_t>{}); break;
    case 4: strided(std::type_identity<std::uint32_t>{}); break;
    case 8: strided(std::type_identity<std::uint64_t>{}); break;
    default:
      for (std::int64_t i = 0; i < count; ++i, src += stride, dst += item) std::memcpy(dst, src, item);
  }
}

std::string bytes_text(double bytes) {
  char buf[32];
  if (bytes >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  else if (bytes >= 1e6) std::snprintf(buf, sizeof buf, "%.2f MB", bytes / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

std::string out_of_bounds(std::int64_t index, std::size_t axis, std::int64_t size) {
  return "index " + std::to_string(index) + " is out of bounds for axis " + std::to_string(axis) + " with size " +
         std::to_string(size);
}

// A mask with at most this many true elements becomes a list of their offsets when the
// selection is made (512 KiB of them): the list's ways of reading then apply, the
// one-pass stash of a few columns included. Larger masks are streamed. The tests set
// OOC_MASK_LIST_TRUES (to 0: stream every mask) to take the streamed way on small files.
std::int64_t mask_list_trues() {
  if (const char* text = std::getenv("OOC_MASK_LIST_TRUES")) {
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text, text + std::strlen(text), value);
    if (ec == std::errc() && *end == '\0' && value >= 0) return value;
  }
  return std::int64_t{1} << 16;
}

// The loop of a mask over source axes [first, first + its dimensions), whose lengths it
// must have (numpy's IndexError text otherwise).
template <class Fail>
Loop mask_loop(const BoolMask& mask, const Shape& shape, const Shape& stride, std::size_t first, Fail&& fail) {
  const Shape& covers = mask.shape();
  for (std::size_t j = 0; j < covers.size(); ++j)
    if (covers[j] != shape[first + j])
      fail("boolean index did not match indexed array along dimension " + std::to_string(first + j) +
           "; dimension is " + std::to_string(shape[first + j]) + " but corresponding boolean dimension is " +
           std::to_string(covers[j]));
  MaskAxes axes;
  axes.sizes.assign(covers.begin(), covers.end());
  axes.strides.assign(stride.begin() + static_cast<std::ptrdiff_t>(first),
                      stride.begin() + static_cast<std::ptrdiff_t>(first + covers.size()));
  axes.linear = true;
  for (std::size_t j = 0; j + 1 < covers.size(); ++j)
    if (axes.strides[j] != axes.strides[j + 1] * axes.sizes[j + 1]) axes.linear = false;
  Loop loop;
  loop.count = mask.count();
  const std::shared_ptr<const detail::MaskIndex>& index = detail::MaskAccess::index(mask);
  if (loop.count > mask_list_trues()) {
    loop.mask = index;
    loop.mask_axes = std::move(axes);
    return loop;
  }
  loop.offsets.reserve(static_cast<std::size_t>(loop.count));
  if (loop.count > 0) {
    detail::MaskIndex::Cursor walk(*index);
    walk.seek(0);
    for (std::int64_t i = 0; i < loop.count; ++i) {
      loop.offsets.push_back(axes.offset(walk.position()));
      walk.next();
    }
  }
  index->check_intact();
  return loop;
}

// numpy's placement and memory order of source[selection]'s result.
Layout resolve(const ArrayInfo& source, const Selection& selection, const std::string& path) {
  const Shape& shape = source.shape;
  const std::size_t ndim = shape.size();
  const auto& items = selection.items();
  auto fail = [&](const std::string& problem) -> void {
    throw UsageError(path, "selection " + selection.text() + ": " + problem);
  };
  auto fail_index = [&](const std::string& problem) -> void {  // where numpy raises IndexError
    throw IndexError(path, "selection " + selection.text() + ": " + problem, problem);
  };
  // A mask covers as many axes as it has dimensions, any other item one.
  auto axes_of = [](const Selection::Item& item) {
    const auto* mask = std::get_if<BoolMask>(&item);
    return mask ? mask->shape().size() : std::size_t{1};
  };
  std::size_t indexed = 0;
  for (const Selection::Item& item : items) indexed += axes_of(item);
  if (indexed > ndim)
    fail_index("too many indices for array: array is " + std::to_string(ndim) + "-dimensional, but " +
               std::to_string(indexed) + " were indexed");
  // Elements between neighbours along each source axis, in the source's memory order.
  const Shape stride = element_strides(shape, source.order);

  Layout layout;
  std::vector<Loop> dims;                 // the result's axes, in result order
  std::optional<std::size_t> list_at;     // where the list's (or mask's) loop is in dims
  std::vector<std::size_t> advanced;      // source axes of the list (or mask) and (with one) the single indices
  std::size_t slices_before_advanced = 0;
  for (std::size_t i = 0, next_axis = 0; next_axis < ndim; ++i) {
    const Selection::Item item = i < items.size() ? items[i] : Selection::Item{Slice{}};
    const std::size_t k = next_axis;  // the first source axis the item covers
    next_axis += axes_of(item);
    const std::int64_t n = shape[k];
    if (const auto* slice = std::get_if<Slice>(&item)) {
      // Python's slice.indices(n).
      const std::int64_t step = slice->step.value_or(1);
      if (step == 0) fail("slice step cannot be zero");
      auto clamp = [&](std::optional<std::int64_t> v, std::int64_t fallback) {
        if (!v) return fallback;
        std::int64_t x = *v < 0 ? *v + n : *v;
        if (step > 0) return std::clamp<std::int64_t>(x, 0, n);
        return std::clamp<std::int64_t>(x, -1, n - 1);
      };
      const std::int64_t start = clamp(slice->start, step > 0 ? 0 : n - 1);
      const std::int64_t stop = clamp(slice->stop, step > 0 ? n : -1);
      // The slice's length (PySlice_AdjustIndices) for any int64 step: start and stop lie
      // in [-1, n], so their difference fits; the step's size is taken unsigned, as
      // -INT64_MIN does not fit (Python clamps that step to -INT64_MAX: the same length).
      const std::uint64_t step_size = step > 0 ? static_cast<std::uint64_t>(step) : 0 - static_cast<std::uint64_t>(step);
      std::int64_t count = 0;
      if (step > 0 && stop > start)
        count = static_cast<std::int64_t>(static_cast<std::uint64_t>(stop - start - 1) / step_size + 1);
      if (step < 0 && start > stop)
        count = static_cast<std::int64_t>(static_cast<std::uint64_t>(start - stop - 1) / step_size + 1);
      if (count > 0) layout.base += start * stride[k];
      Loop loop;
      loop.count = count;
      // With two or more elements |step| < n, so step * stride fits; one element or none
      // needs no stride (a step near 2**63 would overflow): that of a step of 1.
      loop.stride = count > 1 ? step * stride[k] : stride[k];
      dims.push_back(std::move(loop));
      if (advanced.empty()) ++slices_before_advanced;
    } else if (const auto* index = std::get_if<std::int64_t>(&item)) {
      if (*index < -n || *index >= n) fail_index(out_of_bounds(*index, k, n));
      layout.base += (*index < 0 ? *index + n : *index) * stride[k];
      advanced.push_back(k);
    } else if (const auto* list = std::get_if<std::vector<std::int64_t>>(&item)) {
      Loop loop;
      loop.count = static_cast<std::int64_t>(list->size());
      loop.offsets.reserve(list->size());
      for (std::int64_t index : *list) {
        if (index < -n || index >= n) fail_index(out_of_bounds(index, k, n));
        loop.offsets.push_back((index < 0 ? index + n : index) * stride[k]);
      }
      list_at = dims.size();
      advanced.push_back(k);
      dims.push_back(std::move(loop));
    } else {
      const BoolMask& mask = std::get<BoolMask>(item);
      list_at = dims.size();
      for (std::size_t j = 0; j < mask.shape().size(); ++j) advanced.push_back(k + j);
      dims.push_back(mask_loop(mask, shape, stride, k, fail_index));
    }
  }

  // Without a list, single indices only drop their axes (basic indexing) and the result
  // is a view iterated in the source's order. With a list, numpy's result holds the
  // list's axis outermost and the others in the source's order; it sits where the
  // advanced indices were when they are adjacent, else first.
  std::vector<std::size_t> memory;  // result axes, outermost first
  const std::size_t r = dims.size();
  layout.order = source.order;
  if (list_at) {
    const bool adjacent = advanced.back() - advanced.front() + 1 == advanced.size();
    const std::size_t place = adjacent ? slices_before_advanced : 0;
    // dims holds the list's loop among the slices in source order; move it to `place`.
    Loop list_loop = std::move(dims[*list_at]);
    dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(*list_at));
    dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(place), std::move(list_loop));
    memory.push_back(place);
    std::vector<std::size_t> others;
    for (std::size_t d = 0; d < r; ++d)
      if (d != place) others.push_back(d);
    if (source.order == Order::fortran) std::reverse(others.begin(), others.end());
    memory.insert(memory.end(), others.begin(), others.end());
    std::vector<std::size_t> c_order(r);
    std::iota(c_order.begin(), c_order.end(), 0);
    std::vector<std::size_t> f_order(c_order.rbegin(), c_order.rend());
    // Axes of length 1 take no part in the order (numpy's contiguity flags ignore them):
    // a (3000, 4, 1) result laid out list axis first is F-contiguous.
    auto longer_than_one = [&](std::vector<std::size_t> axes) {
      std::erase_if(axes, [&](std::size_t d) { return dims[d].count == 1; });
      return axes;
    };
    memory = longer_than_one(memory);
    // numpy's result is C- or F-contiguous in every case but a list in a middle axis of a
    // result of 3 or more axes longer than 1; ooc then keeps the source's order
    // (docs/decisions/2026-11-30-selection-numpy-order.md).
    if (memory == longer_than_one(c_order)) layout.order = Order::c;
    else if (memory == longer_than_one(f_order)) layout.order = Order::fortran;
  }

  for (const Loop& d : dims) layout.shape.push_back(d.count);
  layout.size = element_count(layout.shape).value_or(0);
  if (layout.size == 0) layout.order = Order::c;  // numpy's flags: both; np.save writes C
  if (layout.order == Order::c) layout.loops.assign(dims.rbegin(), dims.rend());
  else layout.loops = std::move(dims);
  if (layout.loops.empty()) layout.loops.push_back(Loop{});  // a 0-d result: one element at base
  return layout;
}

// A selection whose outermost loop takes a few elements from each "row" of the inner
// loops is read in one pass over the rows. x[::5, [0, 9, 18, 27, 36]] of a C array is
// numpy's F-ordered result, column after column (docs/decisions/2026-11-30-selection-numpy-order.md), so its tiles
// come column by column and each column would be a pass over all of the source's rows:
// from the disk again when the file is larger than memory, page faults again when it is
// cached. Instead, a tile of the first column (block 0) gathers the same rows of every
// column: its own into the tile, the others into the stash, from which the later
// columns' tiles are copied. Holds (blocks - 1) blocks of elements.
class Stash {
 public:
  Stash(std::int64_t blocks, std::int64_t block_elements, std::size_t item)
      : block_elements_(block_elements), item_(item),
        // Not zeroed: pages are touched only as gathers fill them.
        data_(new std::byte[static_cast<std::size_t>((blocks - 1) * block_elements) * item]) {}

  // Where element `i` of block `j` (j >= 1) is kept.
  std::byte* at(std::int64_t j, std::int64_t i) const {
    return data_.get() + static_cast<std::size_t>((j - 1) * block_elements_ + i) * item_;
  }

  // Rows [lo, hi) of every block are in the stash (called once a gather is done).
  void gathered(std::int64_t lo, std::int64_t hi) {
    std::lock_guard lock(mutex_);
    ranges_.push_back({lo, hi});
    std::sort(ranges_.begin(), ranges_.end());
    std::vector<std::pair<std::int64_t, std::int64_t>> merged;
    for (const auto& r : ranges_)
      if (!merged.empty() && r.first <= merged.back().second) merged.back().second = std::max(merged.back().second, r.second);
      else merged.push_back(r);
    ranges_ = std::move(merged);
  }

  // True once rows [lo, hi) have been gathered. A tile of a later block whose rows are
  // not (its gather still in flight on another thread, or an MPI rank's share that
  // starts past block 0) reads them from the source instead.
  bool has(std::int64_t lo, std::int64_t hi) const {
    std::lock_guard lock(mutex_);
    for (const auto& r : ranges_)
      if (r.first <= lo && hi <= r.second) return true;
    return false;
  }

 private:
  std::int64_t block_elements_;
  std::size_t item_;
  std::unique_ptr<std::byte[]> data_;
  mutable std::mutex mutex_;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges_;  // merged, sorted
};

// True if the outermost loop's elements of any one inner position lie closer together
// than the inner loops' neighbours, so that gathering them together reads each source
// row once: its offsets span less than the smallest stride of an inner loop.
bool outer_loop_interleaves(const Layout& layout) {
  if (layout.loops.size() < 2 || layout.size == 0) return false;
  const Loop& outer = layout.loops.back();
  // A streamed mask's offsets are walked, not listed: its blocks are not gathered.
  if (outer.count < 2 || outer.mask) return false;
  std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = std::numeric_limits<std::int64_t>::min();
  for (std::int64_t j = 0; j < outer.count; ++j) {
    lo = std::min(lo, outer.offset(j));
    hi = std::max(hi, outer.offset(j));
  }
  std::int64_t inner_stride = std::numeric_limits<std::int64_t>::max();
  bool inner_has_more_than_one = false;
  for (std::size_t d = 0; d + 1 < layout.loops.size(); ++d) {
    const Loop& loop = layout.loops[d];
    if (loop.count < 2) continue;
    if (!loop.offsets.empty() || loop.mask) return false;  // the list (or mask) is inner: nothing to gather
    inner_has_more_than_one = true;
    inner_stride = std::min(inner_stride, std::abs(loop.stride));
  }
  return inner_has_more_than_one && hi - lo < inner_stride;
}

// Calls f(block, lo, hi, at) for the parts of selection elements [begin, end) within
// each block of `block_elements`: elements [lo, hi) of block `block`, which are
// elements [at, at + hi - lo) of the selection.
template <class F>
void for_each_block_part(std::int64_t begin, std::int64_t end, std::int64_t block_elements, F&& f) {
  for (std::int64_t at = begin; at < end;) {
    const std::int64_t block = at / block_elements, lo = at % block_elements;
    const std::int64_t hi = std::min(block_elements, lo + (end - at));
    f(block, lo, hi, at);
    at += hi - lo;
  }
}

// kSelectionGapBytes, or OOC_SELECTION_GAP_BYTES where set (how bench/selection_gap.py
// measures the choice).
std::int64_t gap_bytes() {
  if (const char* text = std::getenv("OOC_SELECTION_GAP_BYTES")) {
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text, text + std::strlen(text), value);
    if (ec == std::errc() && *end == '\0' && value >= 0) return value;
  }
  return kSelectionGapBytes;
}

// Reads the selected elements of a tile from the source: from its mapping, or through
// its own reader one span at a time.
class SelectionReader final : public detail::TileReader {
 public:
  SelectionReader(MappedArray source, Layout layout, std::string text)
      : source_(std::move(source)), layout_(std::move(layout)), text_(std::move(text)),
        item_(static_cast<std::size_t>(source_.dtype().itemsize())),
        gap_(std::max<std::int64_t>(0, gap_bytes() / static_cast<std::int64_t>(item_))) {
    for (const Loop& loop : layout_.loops)
      if (loop.mask) masks_.push_back(loop.mask);
    plan_one_pass();
    summarise();
    // Pieces of a tile that span about 4 MiB of the source, and at least a block of
    // elements: a piece's page release (one madvise over its covering range) then costs
    // little beside its copy even where the elements lie far apart.
    constexpr double kPieceSourceBytes = 4 << 20;
    constexpr std::int64_t kLeastPiece = 8192;
    piece_elements_ =
        std::max(kLeastPiece, static_cast<std::int64_t>(kPieceSourceBytes / (spread_ * static_cast<double>(item_))));
  }

  const std::byte* read(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) override {
    buffer.ensure(static_cast<std::size_t>(end - begin) * item_);
    std::byte* out = buffer.data();
    if (source_.mapped() && !direct_) {
      // A piece at a time, each letting go of the source pages it read: a tile spans more
      // of the source than its own size (x[:, 2] of an (N, 8) array: 8 times), and pages
      // kept until the tile's commit would add up to the span of every tile in flight,
      // whatever the caller's tile size (docs/decisions/2026-12-04-boolean-masks.md).
      for (std::int64_t from = begin; from < end; from += piece_elements_)
        read_piece(from, std::min(end, from + piece_elements_), out + static_cast<std::size_t>(from - begin) * item_);
      source_.check_intact();
      check_masks_intact();
      return out;
    }
    auto place = [&](const Run& run) { return out + static_cast<std::size_t>(run.at - begin) * item_; };
    detail::TileReader& reader = direct_ ? *direct_ : *detail::MappedArrayAccess::reader(source_);
    // Direct reads run on the kernel threads, each into its own thread's span buffer; a
    // source's own reader (HDF5) is called from the serial stage only.
    static thread_local detail::AlignedBuffer direct_span_buffer;
    detail::AlignedBuffer& span_buffer = direct_ ? direct_span_buffer : span_buffer_;
    // Direct reads take 4 MiB of the source at most: each kernel thread keeps its buffer,
    // and whole 16 MiB spans took a masked sum in a 96 MiB cgroup past its limit.
    SpanBuilder spans(gap_, SpanBuilder::Runs::kept,
                      direct_ ? kDirectSpanBytes / static_cast<std::int64_t>(item_)
                              : std::numeric_limits<std::int64_t>::max());
    auto flush = [&](const Span& span, const std::vector<Run>& runs) {
      const std::byte* data = reader.read(span.lo, span.hi + 1, span_buffer);
      for (const Run& run : runs)
        copy_run(place(run), data + static_cast<std::ptrdiff_t>(run.first - span.lo) * static_cast<std::ptrdiff_t>(item_),
                 run.count, run.step, item_);
    };
    for_each_run(layout_, begin, end, [&](const Run& run) { spans.add(run, flush); });
    spans.finish(flush);
    if (direct_) source_.check_intact();
    check_masks_intact();
    return out;
  }

  static constexpr std::int64_t kDirectSpanBytes = std::int64_t{4} << 20;

  void read_directly(std::optional<os::UniqueFd> direct) {
    direct_.reset();
    if (direct && source_.mapped() && !stash_)
      direct_ = std::make_unique<os::DirectReader>(std::move(*direct), source_.info().data_offset,
                                                   static_cast<int>(item_), source_.path());
  }

  // Mapped sources are copied from on the kernel threads; a source with its own reader
  // (an HDF5 dataset) is read in the serial stage, as it would be alone.
  bool concurrent() const override { return source_.mapped(); }

  void will_need(std::int64_t begin, std::int64_t end) override {
    if (!source_.mapped() || direct_) return;
    SpanBuilder spans(gap_, SpanBuilder::Runs::dropped);
    auto advise = [&](const Span& span, const std::vector<Run>&) {
      detail::MappedArrayAccess::advise(source_, span.lo, span.hi + 1, os::Advice::will_need);
    };
    // With a stash, only the first block's tiles read the source.
    const std::int64_t last = stash_ ? std::min(end, block_elements_) : end;
    for_each_run(layout_, begin, last, [&](const Run& run) { spans.add(run, advise); });
    spans.finish(advise);
  }

  const MappedArray& source() const { return source_; }
  const std::string& summary() const { return summary_; }
  // Source elements the selection's covering range holds per selected element.
  double spread() const { return spread_; }

 private:
  // Decides whether the selection is read in one pass over the rows (Stash): where the
  // outermost loop interleaves with the inner ones (its blocks then cover the same
  // source range), the source is mapped and the stash fits in a quarter of this
  // process's memory. Otherwise each block is a pass of its own.
  void plan_one_pass() {
    if (!outer_loop_interleaves(layout_)) return;
    const std::int64_t blocks = layout_.loops.back().count;
    block_elements_ = layout_.size / blocks;
    stash_bytes_ = static_cast<double>(blocks - 1) * static_cast<double>(block_elements_) * static_cast<double>(item_);
    if (!source_.mapped() || stash_bytes_ > static_cast<double>(os::memory_limit()) / 4) return;
    stash_ = std::make_unique<Stash>(blocks, block_elements_, item_);
  }

  // Elements [lo, hi) of block 0 into `out`, and the same elements of every other block
  // into the stash, a few hundred rows at a time so that each source row is in the CPU's
  // cache for all of its blocks.
  // `cover` grows by the source elements read.
  void gather(const std::byte* data, std::int64_t lo, std::int64_t hi, std::byte* out, Cover& cover) {
    constexpr std::int64_t kRowsAtOnce = 512;
    const Loop& outer = layout_.loops.back();
    const std::ptrdiff_t item = static_cast<std::ptrdiff_t>(item_);
    for_each_run(layout_, lo, hi, [&](const Run& run) {
      for (std::int64_t i = 0; i < run.count; i += kRowsAtOnce) {
        const std::int64_t n = std::min(kRowsAtOnce, run.count - i);
        const std::int64_t first = run.first + i * run.step;
        copy_run(out + static_cast<std::size_t>(run.at - lo + i) * item_, data + first * item, n, run.step, item_);
        cover.add(first, n, run.step);
        for (std::int64_t j = 1; j < outer.count; ++j) {
          const std::int64_t other = first + outer.offset(j) - outer.offset(0);
          copy_run(stash_->at(j, run.at + i), data + other * item, n, run.step, item_);
          cover.add(other, n, run.step);
        }
      }
    });
    stash_->gathered(lo, hi);
  }

  // Selection elements [begin, end) from the mapped source into `out`; then the source
  // pages they were read from leave the resident set (those on the edges too: a tile on
  // another thread that shares one faults it in again from the page cache).
  void read_piece(std::int64_t begin, std::int64_t end, std::byte* out) {
    const std::byte* data = source_.bytes().data();
    Cover cover;
    auto copy_from_source = [&](std::int64_t from, std::int64_t to) {
      for_each_run(layout_, from, to, [&](const Run& run) {
        copy_run(out + static_cast<std::size_t>(run.at - begin) * item_,
                 data + static_cast<std::ptrdiff_t>(run.first) * static_cast<std::ptrdiff_t>(item_), run.count, run.step,
                 item_);
        cover.add(run.first, run.count, run.step);
      });
    };
    if (!stash_) {
      copy_from_source(begin, end);
    } else {
      for_each_block_part(begin, end, block_elements_, [&](std::int64_t block, std::int64_t lo, std::int64_t hi,
                                                           std::int64_t at) {
        std::byte* dst = out + static_cast<std::size_t>(at - begin) * item_;
        if (block == 0) gather(data, lo, hi, dst, cover);
        else if (stash_->has(lo, hi)) std::memcpy(dst, stash_->at(block, lo), static_cast<std::size_t>(hi - lo) * item_);
        else copy_from_source(at, at + (hi - lo));
      });
    }
    if (cover.hi >= cover.lo)
      detail::drop_pages_holding(data + static_cast<std::ptrdiff_t>(cover.lo) * static_cast<std::ptrdiff_t>(item_),
                                 data + static_cast<std::ptrdiff_t>(cover.hi + 1) * static_cast<std::ptrdiff_t>(item_));
  }

  void check_masks_intact() const {
    for (const auto& mask : masks_) mask->check_intact();
  }

  // Counts the runs and spans (of the first elements of a large selection), picks the
  // source's page advice by how much of the covering range the spans touch, and says so.
  void summarise() {
    constexpr std::int64_t kSampled = std::int64_t{1} << 22;
    const std::int64_t sampled = std::min(layout_.size, kSampled);
    std::int64_t runs = 0, spans = 0, touched = 0;
    std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = -1;
    SpanBuilder builder(gap_, SpanBuilder::Runs::dropped);
    auto count = [&](const Span& span, const std::vector<Run>&) {
      ++spans;
      touched += span.hi - span.lo + 1;
      lo = std::min(lo, span.lo);
      hi = std::max(hi, span.hi);
    };
    for_each_run(layout_, 0, sampled, [&](const Run& run) {
      ++runs;
      builder.add(run, count);
    });
    builder.finish(count);
    const double scale = sampled > 0 ? static_cast<double>(layout_.size) / static_cast<double>(sampled) : 0;
    const double covering = hi >= lo ? static_cast<double>(hi - lo + 1) : 0;
    const double density = covering > 0 ? static_cast<double>(touched) / covering : 1;
    // Dense: the spans cover most of the range, so read it as a stream with readahead.
    // Sparse: no readahead, only the spans' pages (advised one tile ahead) are read.
    const bool sequential = density >= 0.5;
    // Where the blocks interleave, each block's elements cover the whole range (and with
    // a stash a tile of block 0 reads the rows of every block): a tile's span of the
    // source is that of one block's elements.
    const double per_tile = static_cast<double>(block_elements_ > 0 ? std::min(sampled, block_elements_) : sampled);
    spread_ = sampled > 0 ? std::max(1.0, covering / per_tile) : 1.0;
    if (source_.mapped() && hi >= lo) {
      detail::MappedArrayAccess::advise(source_, lo, hi + 1, sequential ? os::Advice::sequential : os::Advice::random);
    }
    std::ostringstream out;
    out << "selection " << text_ << " of " << source_.path() << ": " << layout_.size << " elements ("
        << bytes_text(static_cast<double>(layout_.size) * static_cast<double>(item_)) << ") in "
        << static_cast<std::int64_t>(static_cast<double>(runs) * scale) << " runs, read as "
        << static_cast<std::int64_t>(static_cast<double>(spans) * scale) << " spans touching "
        << bytes_text(static_cast<double>(touched) * scale * static_cast<double>(item_)) << " of a "
        << bytes_text(covering * scale * static_cast<double>(item_)) << " covering range (gaps up to "
        << bytes_text(static_cast<double>(gap_ * static_cast<std::int64_t>(item_))) << " read through); "
        << (source_.mapped() ? (sequential ? "dense: sequential readahead" : "sparse: random access, spans advised ahead")
                             : "read span by span through the dataset's reader");
    if (sampled < layout_.size) out << " (estimated from the first " << sampled << " elements)";
    for (const auto& mask : masks_)
      out << "; mask " << mask->path() << ": " << mask->count() << " of " << mask->elements()
          << " true, streamed beside the data";
    const std::int64_t blocks = layout_.loops.back().count;
    if (stash_)
      out << "; one pass over the rows: " << blocks << " blocks of " << block_elements_
          << " elements, the first's tiles gathering the others' (" << bytes_text(stash_bytes_) << " kept)";
    else if (block_elements_ > 0 && source_.mapped())
      out << "; " << blocks << " passes over the rows: keeping the other blocks' elements for one pass would take "
          << bytes_text(stash_bytes_) << ", over a quarter of this process's memory";
    summary_ = out.str();
  }

  MappedArray source_;
  Layout layout_;
  std::string text_;
  std::unique_ptr<os::DirectReader> direct_;  // set per run by read_selection_directly
  std::size_t item_;
  std::int64_t gap_;  // in elements
  double spread_ = 1;
  std::int64_t piece_elements_ = 0;  // a tile of a mapped source is read and let go of in pieces of this many
  std::vector<std::shared_ptr<const detail::MaskIndex>> masks_;  // streamed masks: checked after each read
  std::unique_ptr<Stash> stash_;     // set when read in one pass over the rows
  std::int64_t block_elements_ = 0;  // elements per block of an interleaving outermost loop, else 0
  double stash_bytes_ = 0;           // what the stash holds (or would hold)
  detail::AlignedBuffer span_buffer_;  // serial use only: a reader source is read in the serial stage
  std::string summary_;
};

}  // namespace

Selection Selection::parse(std::string_view text, const std::string& path) {
  Selection selection;
  const std::string_view trimmed = trim(text);
  selection.text_ = "[" + std::string(trimmed) + "]";
  if (trimmed.empty()) return selection;
  Parser parser(trimmed, path);
  std::vector<std::string_view> parts = split_top_level(trimmed);
  if (parts.size() > 1 && parts.back().empty()) parts.pop_back();  // "1," is the tuple (1,)
  int lists = 0;
  for (std::string_view part : parts) {
    selection.items_.push_back(parser.item(part));
    if (std::holds_alternative<std::vector<std::int64_t>>(selection.items_.back()) ||
        std::holds_alternative<BoolMask>(selection.items_.back()))
      ++lists;
  }
  if (lists > 1) parser.fail("only one index list, index array or mask per selection is supported");
  return selection;
}

std::optional<std::pair<std::string, std::string>> split_selection(const std::string& spec) {
  if (spec.empty() || spec.back() != ']') return std::nullopt;
  int depth = 0;
  for (std::size_t i = spec.size(); i-- > 0;) {
    if (spec[i] == ']') ++depth;
    else if (spec[i] == '[' && --depth == 0) {
      if (i == 0) return std::nullopt;
      return std::make_pair(spec.substr(0, i), spec.substr(i + 1, spec.size() - i - 2));
    }
  }
  return std::nullopt;
}

namespace detail {

const MappedArray* selection_source(TileReader* reader) {
  auto* selection = dynamic_cast<SelectionReader*>(reader);
  return selection != nullptr && selection->source().mapped() ? &selection->source() : nullptr;
}

void read_selection_directly(TileReader* reader, std::optional<os::UniqueFd> direct) {
  if (auto* selection = dynamic_cast<SelectionReader*>(reader)) selection->read_directly(std::move(direct));
}

}  // namespace detail

MappedArray select(MappedArray source, const Selection& selection) {
  Layout layout = resolve(source.info(), selection, source.path());
  ArrayInfo info = source.info();
  info.shape = layout.shape;
  info.order = layout.order;
  info.data_offset = 0;
  const std::string path = source.path() + selection.text();
  // The same open file as the source's: a lock taken through one holds for both.
  const auto [source_path, source_fd] = detail::MappedArrayAccess::source(source);
  os::UniqueFd fd(::dup(source_fd));
  return detail::MappedArrayAccess::read_by(
      path, std::move(info), source_path, std::move(fd),
      std::make_unique<SelectionReader>(std::move(source), std::move(layout), selection.text()));
}

MappedArray MappedArray::select(std::string_view text) && {
  Selection selection = Selection::parse(text, path());
  return ooc::select(std::move(*this), selection);
}

MappedArray MappedArray::select(std::string_view text) const& {
  Selection selection = Selection::parse(text, path());
  return ooc::select(detail::MappedArrayAccess::share(*this), selection);
}

std::string selection_summary(const MappedArray& array) {
  if (array.mapped()) return "";
  const auto* reader = dynamic_cast<const SelectionReader*>(detail::MappedArrayAccess::reader(array));
  return reader ? reader->summary() : "";
}

std::uint64_t tile_bytes_spanning(const MappedArray& array, std::uint64_t tile_bytes) {
  if (array.mapped()) return tile_bytes;
  const detail::TileReader* any = detail::MappedArrayAccess::reader(array);
  const auto* reader = dynamic_cast<const SelectionReader*>(any);
  if (reader == nullptr) {  // another reader (HDF5) may ask for smaller tiles
    const std::uint64_t cap = any != nullptr ? any->tile_bytes_cap() : 0;
    return cap > 0 ? std::min(tile_bytes, cap) : tile_bytes;
  }
  // Cold or warm, a tile spans --tile-bytes of the source, so memory stays bounded as for
  // a whole-array read (issue 15: cold tiles of selected bytes read x[:, 0] of a 1 GiB
  // file at 1.08 GB resident). Tiles of selected bytes read a cold sparse selection
  // faster (0.88x numpy against 0.52-0.63x), but a tile of x[::1000] then spans 16 GB.
  const auto spanning = static_cast<std::uint64_t>(static_cast<double>(tile_bytes) / reader->spread());
  return std::max<std::uint64_t>(spanning, static_cast<std::uint64_t>(array.dtype().itemsize()));
}

ArrayInfo detail::selection_info(const ArrayInfo& source, const Selection& selection, const std::string& path) {
  const Layout layout = resolve(source, selection, path);
  ArrayInfo info = source;
  info.shape = layout.shape;
  info.order = layout.order;
  info.data_offset = 0;
  return info;
}

}  // namespace ooc
