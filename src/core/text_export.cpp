// oocrun export / ooc::export_text: an array to text, as np.savetxt writes it. Tiles of
// the array are formatted in parallel (std::to_chars, or snprintf for a %-format) and
// appended to the output in order by the commit stage.

#include "ooc/text.hpp"

#include "ooc/error.hpp"
#include "ooc/internal/pipeline.hpp"
#include "ooc/journal.hpp"
#include "ooc/mapped_array.hpp"
#include "ooc/tile_plan.hpp"
#include "core/append_file.hpp"

#include <Eigen/Core>  // ooc::half (ooc/dtype.hpp only declares it)

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>

namespace ooc {

namespace {

// One printf conversion, checked, with the text around it: what Python's `fmt % value`
// does for a number, for the conversions that mean the same in C.
struct Format {
  bool shortest = true;
  std::string prefix, flags_width, precision, suffix;  // around the conversion
  char conversion = 'g';
  bool integer() const { return conversion == 'd'; }

  static Format parse(const std::string& fmt) {
    Format f;
    if (fmt == "shortest" || fmt.empty()) return f;
    f.shortest = false;
    int found = 0;
    std::string* literal = &f.prefix;
    for (std::size_t i = 0; i < fmt.size(); ++i) {
      if (fmt[i] != '%') {
        *literal += fmt[i];
        continue;
      }
      if (i + 1 < fmt.size() && fmt[i + 1] == '%') {
        *literal += "%%";
        ++i;
        continue;
      }
      std::size_t j = i + 1;
      std::string fw;
      while (j < fmt.size() && std::string_view("-+ #0").find(fmt[j]) != std::string_view::npos) fw += fmt[j++];
      while (j < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[j]))) fw += fmt[j++];
      std::string precision;
      if (j < fmt.size() && fmt[j] == '.') {
        precision = ".";
        ++j;
        while (j < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[j]))) precision += fmt[j++];
      }
      if (j >= fmt.size() || std::string_view("eEfFgGdiu").find(fmt[j]) == std::string_view::npos)
        throw UsageError(std::string(),
                         "fmt '" + fmt + "': expected one conversion among %e %E %f %F %g %G %d %i (with flags, "
                                         "width and precision), or 'shortest'",
                         "fmt");
      if (fw.size() > 8 || precision.size() > 4)
        throw UsageError(std::string(), "fmt '" + fmt + "': width or precision too large", "fmt");
      f.flags_width = fw;
      f.precision = precision;
      f.conversion = fmt[j] == 'i' || fmt[j] == 'u' ? 'd' : fmt[j];
      ++found;
      literal = &f.suffix;
      i = j;
    }
    if (found != 1)
      throw UsageError(std::string(),
                       "fmt '" + fmt + "': expected exactly one conversion (as '%.6g'), found " + std::to_string(found),
                       "fmt");
    return f;
  }
};

template <class T> void put_shortest(std::string& out, T v) {
  char buf[64];
  std::to_chars_result r;
  if constexpr (std::is_same_v<T, half>)
    r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>)
    r = std::to_chars(buf, buf + sizeof buf, static_cast<int>(v));
  else
    r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

template <class... A> void put_printf(std::string& out, const std::string& spec, A... args) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof buf, spec.c_str(), args...);
  if (n < 0) throw Error("formatting failed");
  if (static_cast<std::size_t>(n) < sizeof buf) {
    out.append(buf, static_cast<std::size_t>(n));
    return;
  }
  std::string big(static_cast<std::size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), spec.c_str(), args...);
  out.append(big.data(), static_cast<std::size_t>(n));
}

// The printf specs a Format uses, made once.
struct Specs {
  std::string floating, signed_int, unsigned_int, big_float;
  // Python's `%` pads inf and nan with zeros after the sign for the 0 flag ('%012.4f' % inf
  // is '000000000inf'); C pads them with spaces. With that flag (and no '-'), they are
  // formatted without the width (nonfinite) and padded to zero_width here.
  std::string nonfinite, around;
  std::size_t zero_width = 0;
  explicit Specs(const Format& f) {
    const std::string head = f.prefix + "%" + f.flags_width;
    floating = head + f.precision + f.conversion + f.suffix;
    signed_int = head + f.precision + "lld" + f.suffix;
    unsigned_int = head + f.precision + "llu" + f.suffix;
    big_float = head + ".0f" + f.suffix;  // %d of a float beyond 64 bits: its integer digits
    const std::string flags = f.flags_width.substr(0, f.flags_width.find_first_not_of("-+ #0"));
    const std::string width = f.flags_width.substr(flags.size());
    if (flags.find('0') != std::string::npos && flags.find('-') == std::string::npos && !width.empty()) {
      std::string kept;
      for (char c : flags)
        if (c != '0') kept += c;
      nonfinite = "%" + kept + f.precision + f.conversion;
      around = f.prefix + "%s" + f.suffix;
      zero_width = static_cast<std::size_t>(std::stoi(width));
    }
  }
};

template <class T> void put_value(std::string& out, T v, const Format& f, const Specs& specs) {
  if (f.shortest) return put_shortest(out, v);
  if (!f.integer()) {
    double x = static_cast<double>(v);
    if (std::isnan(x)) x = std::numeric_limits<double>::quiet_NaN();  // Python never prints -nan
    if (specs.zero_width > 0 && !std::isfinite(x)) {
      std::string core;
      put_printf(core, specs.nonfinite, x);
      const std::size_t at = !core.empty() && (core[0] == '+' || core[0] == '-' || core[0] == ' ') ? 1 : 0;
      if (core.size() < specs.zero_width) core.insert(at, specs.zero_width - core.size(), '0');
      return put_printf(out, specs.around, core.c_str());
    }
    return put_printf(out, specs.floating, x);
  }
  if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_unsigned_v<T>)
      put_printf(out, specs.unsigned_int, static_cast<unsigned long long>(v));
    else
      put_printf(out, specs.signed_int, static_cast<long long>(v));
  } else {
    const double x = static_cast<double>(v);
    if (std::isnan(x)) throw Error(std::string(), "fmt %d: cannot convert float NaN to integer", ErrorKind::value, "fmt");
    if (std::isinf(x))
      throw Error(std::string(), "fmt %d: cannot convert float infinity to integer", ErrorKind::value, "fmt");
    const double t = std::trunc(x) + 0.0;  // int(x): toward zero, no -0
    if (std::fabs(t) < 9.2e18)
      put_printf(out, specs.signed_int, static_cast<long long>(t));
    else
      put_printf(out, specs.big_float, t);
  }
}

}  // namespace

void export_text(const std::string& array_path, const std::string& text_path, const TextExportOptions& opt,
                 const PipelineOptions& options) {
  const Format format = Format::parse(opt.fmt);
  const Specs specs(format);
  if (opt.delimiter == '\n' || opt.delimiter == '\r') throw UsageError(text_path, "the delimiter cannot be a line end");
  const MappedArray a = map_file(array_path);
  check_not_in_place(a);
  {
    std::error_code ec;
    if (std::filesystem::equivalent(a.path(), text_path, ec))
      throw UsageError(text_path, "the output is the input file");
  }
  if (a.ndim() > 2)
    throw UsageError(array_path, "has " + std::to_string(a.ndim()) + " dimensions; text holds 1-d and 2-d arrays "
                                 "(as np.savetxt: 'Expected 1D or 2D array')");
  // A 2-d Fortran-order array is written as np.savetxt writes it: rows of the logical
  // array. Its memory order is column by column, so each tile (a run of elements in C
  // order) gathers its values from the mapping, one from each column in turn.
  const bool gather = a.ndim() == 2 && a.order() == Order::fortran && a.shape()[0] > 1 && a.shape()[1] > 1;
  if (gather && !a.mapped()) throw UsageError(array_path, "a Fortran-order array that is not mapped");
  const std::int64_t width = a.ndim() == 2 ? a.shape()[1] : 1;
  const char delimiter = opt.delimiter == 0 ? ' ' : opt.delimiter;

  text::AppendFile out(text_path, text_path);
  if (!opt.header.empty()) {
    const std::string line = opt.header + "\n";
    out.append(line.data(), line.size());
  }
  if (width == 0) {  // rows of no values: empty lines, as np.savetxt writes them
    const std::string lines(static_cast<std::size_t>(a.shape()[0]), '\n');
    out.append(lines.data(), lines.size());
    out.publish();
    return;
  }
  const DType native = a.dtype().native();
  // Tiles of an eighth of --tile-bytes: a tile's text is up to ~3x its float64 values
  // (24 characters of 8 bytes), and threads x 2 tiles are in flight.
  const std::uint64_t tile_bytes = std::max<std::uint64_t>(64 << 10, options.tile_bytes / 8);
  const TilePlan plan =
      gather ? TilePlan::contiguous(a.size(), a.dtype().itemsize(), tile_bytes) : TilePlan::for_array(a, tile_bytes);
  detail::Streams streams(plan, options);
  if (!gather) streams.add_input(a);
  // Buffers reused from tile to tile (a fresh one per tile cost a page fault per 4 KiB).
  struct Buffers {
    std::string text;
    std::vector<std::byte> values;
    std::vector<std::byte> gathered;  // a Fortran-order tile's values in C order
  };
  std::mutex pool_mutex;
  std::vector<std::unique_ptr<Buffers>> pool;
  auto take = [&] {
    std::lock_guard lock(pool_mutex);
    if (pool.empty()) return std::make_unique<Buffers>();
    std::unique_ptr<Buffers> b = std::move(pool.back());
    pool.pop_back();
    return b;
  };
  auto give_back = [&](std::unique_ptr<Buffers> b) {
    std::lock_guard lock(pool_mutex);
    pool.push_back(std::move(b));
  };
  auto format_tile = [&](const Tile& tile) {
    std::unique_ptr<Buffers> b = take();
    const std::int64_t n = tile.end - tile.begin;
    const std::byte* in = nullptr;
    if (gather) {
      const auto itemsize = static_cast<std::size_t>(a.dtype().itemsize());
      const std::int64_t rows = a.shape()[0];
      const std::byte* base = a.bytes().data();
      b->gathered.resize(static_cast<std::size_t>(n) * itemsize);
      std::int64_t r = tile.begin / width, c = tile.begin % width;
      for (std::int64_t i = 0; i < n; ++i) {
        std::memcpy(b->gathered.data() + static_cast<std::size_t>(i) * itemsize,
                    base + static_cast<std::size_t>(c * rows + r) * itemsize, itemsize);
        if (++c == width) {
          c = 0;
          ++r;
        }
      }
      in = b->gathered.data();
    } else {
      in = streams.input(a, tile);
    }
    const std::byte* native_values = in;
    if (!a.dtype().is_native() || reinterpret_cast<std::uintptr_t>(in) % static_cast<std::uintptr_t>(native.itemsize()) != 0) {
      b->values.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(native.itemsize()));
      convert(a.dtype(), in, native, b->values.data(), n);
      native_values = b->values.data();
    }
    std::string& text = b->text;
    text.clear();
    visit_dtype(native, [&]<class T>(std::type_identity<T>) {
      const T* v = reinterpret_cast<const T*>(native_values);
      std::int64_t column = tile.begin % width;
      if (format.shortest) {
        // Written in place: at most 40 characters a value (to_chars of a double: 24),
        // the buffer grown as the text needs (never to the worst case: its pages would
        // all be touched).
        constexpr std::size_t kMaxChars = 41;
        text.resize(text.capacity());
        std::size_t at = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          if (text.size() - at < kMaxChars) text.resize(std::max<std::size_t>(2 * text.size(), at + (64 << 10)));
          char* p = text.data() + at;
          char* const end = text.data() + text.size();
          if constexpr (std::is_same_v<T, half>)
            p = std::to_chars(p, end, static_cast<float>(v[i])).ptr;
          else if constexpr (std::is_same_v<T, bool>)
            *p++ = v[i] ? '1' : '0';
          else
            p = std::to_chars(p, end, v[i]).ptr;
          if (++column == width) {
            *p++ = '\n';
            column = 0;
          } else {
            *p++ = delimiter;
          }
          at = static_cast<std::size_t>(p - text.data());
        }
        text.resize(at);
        return;
      }
      for (std::int64_t i = 0; i < n; ++i) {
        put_value(text, v[i], format, specs);
        if (++column == width) {
          text += '\n';
          column = 0;
        } else {
          text += delimiter;
        }
      }
    });
    return std::shared_ptr<Buffers>(b.release(), [&](Buffers* p) { give_back(std::unique_ptr<Buffers>(p)); });
  };
  try {
    run_pipeline(plan, streams, options, format_tile, [&](const Tile&, std::shared_ptr<Buffers>&& b) {
      out.append(b->text.data(), b->text.size());
    });
  } catch (const UsageError&) {
    throw;
  } catch (const Cancelled&) {
    throw;
  } catch (const Error& e) {  // a value the format cannot format: name the array
    if (!e.path().empty()) throw;
    throw Error(array_path, e.problem(), e.kind(), e.option());
  }
  out.publish();
}

}  // namespace ooc
