// oocrun import / ooc::import_text: a text file to an array. The serial read stage reads
// the file in chunks cut at line ends; the parallel stage parses a chunk's fields
// (fast_float, integers by std::from_chars); the serial commit stage appends the values
// to the output in order. The row count is known only at the end: a .npy output reserves
// its header (np.save's header for (0, k) has the same length as for (n, k): numpy pads
// the growth axis to 21 digits) and writes it when the count is known, before the fsync
// and the rename.

#include "ooc/text.hpp"

#include "format/hdf5.hpp"
#include "format/npy.hpp"
#include "format/zarr.hpp"
#include "ooc/zarr.hpp"
#include "core/mapped_array_access.hpp"
#include "ooc/error.hpp"
#include "ooc/mapped_array.hpp"
#include "os/file.hpp"
#include "core/stream_pipeline.hpp"
#include "core/append_file.hpp"
#include "format/text_parse.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace ooc {

namespace {

// An allocator that leaves new elements uninitialized: a chunk's buffer is resized to
// the bytes wanted and then read(2) into, and value-initializing it first (a memset of
// every chunk) was 2% of an import's CPU.
template <class T> struct UninitializedAllocator : std::allocator<T> {
  template <class U> struct rebind { using other = UninitializedAllocator<U>; };
  UninitializedAllocator() = default;
  template <class U> UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U> void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
  template <class U, class... A> void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
using Bytes = std::vector<char, UninitializedAllocator<char>>;

// The input, read front to back with read(2): a regular file or a pipe.
class TextInput {
 public:
  explicit TextInput(const std::string& path) : path_(path) {
    if (path == "-") {
      fd_ = STDIN_FILENO;
    } else {
      owned_ = os::open_existing(path, false);
      fd_ = owned_.get();
    }
    struct stat st {};
    if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) size_ = static_cast<std::uint64_t>(st.st_size);
    if (fd_ != STDIN_FILENO) ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  }

  std::uint64_t size() const { return size_; }
  std::uint64_t consumed() const { return consumed_; }

  // The next line, '\n' included (not at the end of the file), or nothing at the end.
  std::optional<std::string> line() {
    std::size_t scanned = head_;
    while (true) {
      // (memchr of a null pointer is undefined even for 0 bytes: an empty vector's data())
      const void* nl =
          pending_.size() > scanned ? std::memchr(pending_.data() + scanned, '\n', pending_.size() - scanned) : nullptr;
      // A '\r' not followed by '\n' ends a line too, as in parse_chunk; one last in what is
      // read so far waits for the next byte.
      const std::size_t limit =
          nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - pending_.data()) : pending_.size();
      const void* cr = limit > head_ ? std::memchr(pending_.data() + head_, '\r', limit - head_) : nullptr;
      std::size_t cr_end = 0;
      if (cr != nullptr) {
        const auto i = static_cast<std::size_t>(static_cast<const char*>(cr) - pending_.data());
        if (i + 1 < pending_.size() ? pending_[i + 1] != '\n' : eof_) cr_end = i + 1;
      }
      if (cr_end != 0 || nl != nullptr || eof_) {
        const std::size_t end =
            cr_end != 0 ? cr_end
            : nl        ? static_cast<std::size_t>(static_cast<const char*>(nl) - pending_.data()) + 1
                        : pending_.size();
        if (end == head_) return std::nullopt;
        std::string out(pending_.data() + head_, end - head_);
        consumed_ += end - head_;
        head_ = end;
        return out;
      }
      scanned = pending_.size();
      if (head_ > 0) {  // keep the unread part only
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(head_));
        scanned -= head_;
        head_ = 0;
      }
      fill(pending_, pending_.size() + kLineStep);
    }
  }

  // The next whole lines, about `target` bytes of them (more when one line is longer);
  // empty at the end.
  // `out`'s buffer is reused: its pages are mapped already.
  void chunk(std::size_t target, Bytes& out) {
    out.assign(pending_.begin() + static_cast<std::ptrdiff_t>(head_), pending_.end());
    pending_.clear();
    head_ = 0;
    fill(out, target);
    std::size_t scanned = 0;
    while (true) {
      const char* last = out.size() > scanned
                             ? static_cast<const char*>(::memrchr(out.data() + scanned, '\n', out.size() - scanned))
                             : nullptr;
      if (eof_) break;  // the last line may lack its '\n'
      if (last != nullptr) {
        const auto cut = static_cast<std::size_t>(last - out.data()) + 1;
        pending_.assign(out.begin() + static_cast<std::ptrdiff_t>(cut), out.end());
        out.resize(cut);
        break;
      }
      // One line longer than the chunk so far: read on until it ends.
      scanned = out.size();
      fill(out, out.size() + std::max<std::size_t>(target, kLineStep));
    }
    consumed_ += out.size();
  }

  // A regular file shorter at its end than when it was opened was cut while being read:
  // what was read may end in the middle of a line.
  void check_not_shrunk() const {
    if (size_ > 0 && read_ < size_)
      throw Error(path_, "file shrank while being read (" + std::to_string(size_) + " bytes when opened, " +
                             std::to_string(read_) + " at the end)");
  }

 private:
  static constexpr std::size_t kLineStep = 1 << 16;

  // Appends to `buf` until it holds `want` bytes or the input ends.
  void fill(Bytes& buf, std::size_t want) {
    while (!eof_ && buf.size() < want) {
      const std::size_t have = buf.size();
      buf.resize(want);
      const ssize_t n = ::read(fd_, buf.data() + have, want - have);
      if (n < 0) {
        buf.resize(have);
        if (errno == EINTR) continue;
        throw Error(path_, "cannot read: " + os::errno_text(errno), kind_of_errno(errno));
      }
      buf.resize(have + static_cast<std::size_t>(n));
      read_ += static_cast<std::uint64_t>(n);
      if (n == 0) eof_ = true;
    }
  }

  std::string path_;
  os::UniqueFd owned_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t read_ = 0;
  std::uint64_t consumed_ = 0;
  bool eof_ = false;
  Bytes pending_;  // read, not yet handed out, from head_ on
  std::size_t head_ = 0;
};

// Moves `bytes` bytes at `from` to `to` in the file (overlapping ranges allowed).
void move_bytes(int fd, std::uint64_t from, std::uint64_t to, std::uint64_t bytes, const std::string& shown) {
  if (from == to || bytes == 0) return;
  std::vector<char> buf(std::min<std::uint64_t>(bytes, 8 << 20));
  auto step = [&](std::uint64_t at, std::uint64_t n) {
    if (os::read_at(fd, buf.data(), n, from + at, shown) != n) throw Error(shown, "output shorter than written");
    os::write_at(fd, buf.data(), n, to + at, shown);
  };
  if (to < from) {
    for (std::uint64_t at = 0; at < bytes; at += buf.size()) step(at, std::min<std::uint64_t>(buf.size(), bytes - at));
  } else {
    for (std::uint64_t left = bytes; left > 0;) {
      const std::uint64_t n = std::min<std::uint64_t>(buf.size(), left);
      left -= n;
      step(left, n);
    }
  }
}

// The shape np.loadtxt gives rows x columns with `ndmin`.
Shape loadtxt_shape(std::int64_t rows, std::int64_t columns, bool columns_known, int ndmin) {
  Shape shape = columns_known ? Shape{rows, columns} : Shape{rows};
  if (static_cast<int>(shape.size()) > ndmin) {  // np.squeeze
    Shape squeezed;
    for (std::int64_t d : shape)
      if (d != 1) squeezed.push_back(d);
    shape = squeezed;
  }
  if (static_cast<int>(shape.size()) < ndmin) {
    if (ndmin == 1) shape = Shape{1};  // atleast_1d of a 0-d array
    else if (shape.empty()) shape = Shape{1, 1};
    else shape = Shape{shape[0], 1};  // atleast_2d(a).T
  }
  return shape;
}

// A chunk's text and values. Chunks are kept in a pool and reused, buffers and all: a
// fresh 4 MiB buffer per chunk cost a page fault per 4 KiB (a third of the import's
// system time).
struct Chunk {
  Bytes text;
  text::ChunkResult result;
  std::vector<std::byte> scratch;
};

class ChunkPool {
 public:
  std::shared_ptr<Chunk> get() {
    std::unique_ptr<Chunk> c;
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        c = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (!c) c = std::make_unique<Chunk>();
    return std::shared_ptr<Chunk>(c.release(), [this](Chunk* p) {
      std::lock_guard lock(mutex_);
      free_.emplace_back(p);
    });
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<Chunk>> free_;
};

}  // namespace

TextImportResult import_text(const std::string& text_path, const std::string& out_path, const TextImportOptions& opt,
                             const PipelineOptions& options) {
  // Values are parsed in native order; the file keeps the byte order asked for, as
  // np.save(np.loadtxt(f, dtype='>f8')) does (the parse stage swaps each chunk).
  const DType dtype = opt.dtype.native();
  const DType file_dtype = opt.dtype;
  if (dtype.kind() == Kind::boolean) throw UsageError(text_path, "import reads numbers: dtype bool is not supported", "dtype");
  if (opt.ndmin < 0 || opt.ndmin > 2) throw UsageError(text_path, "ndmin must be 0, 1 or 2");
  if (opt.skip_rows < 0) throw UsageError(text_path, "skip_rows must not be negative", "skip_rows");
  if (opt.delimiter == '\n' || opt.delimiter == '\r' || (opt.delimiter != 0 && opt.comment.size() == 1 && opt.delimiter == opt.comment[0]))
    throw UsageError(text_path, "the delimiter cannot be a line end or the comment character");
  {
    std::error_code ec;
    if (text_path != "-" && std::filesystem::equivalent(text_path, out_path, ec))
      throw UsageError(out_path, "the output is the input file");
  }
  const auto dataset = hdf5::split(out_path);
  if (dataset && std::filesystem::exists(dataset->file) && hdf5::is_hdf5_file(dataset->file) && !opt.overwrite &&
      !hdf5::existing_kind(dataset->file, dataset->dataset).empty())
    throw UsageError(out_path, "dataset already exists (overwrite replaces it)", "overwrite");

  std::optional<std::vector<std::byte>> missing;
  if (opt.missing) {
    missing.emplace(static_cast<std::size_t>(dtype.itemsize()));
    const std::string problem = text::parse_value(*opt.missing, dtype, missing->data());
    if (!problem.empty()) throw UsageError(text_path, "missing: " + problem, "missing");
  }

  TextInput input(text_path);
  text::Dialect dialect{opt.delimiter, opt.comment};
  TextImportResult result;
  result.dtype = file_dtype;

  // The lines before the data, one at a time: --skip-rows, a UTF-8 byte order mark,
  // blank and comment lines, the --header line; then the first data row, whose fields
  // give the column count.
  std::int64_t line_no = 0;  // lines consumed so far
  std::optional<std::string> first;
  bool header_left = opt.header;
  std::vector<std::pair<std::size_t, std::size_t>> fields;
  while (auto line = input.line()) {
    if (line_no == 0 && line->compare(0, 3, "\xEF\xBB\xBF") == 0) line->erase(0, 3);
    ++line_no;
    if (line_no <= opt.skip_rows) continue;
    const std::string_view content = text::line_content(*line, dialect);
    if (text::blank(content, dialect)) continue;
    if (header_left) {
      header_left = false;
      continue;
    }
    first = std::move(line);
    --line_no;  // the first data line is parsed with the chunks
    break;
  }

  text::Layout layout;
  const bool columns_known = first.has_value() || !opt.columns.empty();
  if (first) {
    text::split_fields(text::line_content(*first, dialect), dialect, fields);
    layout.fields = static_cast<int>(fields.size());
    layout.columns = opt.columns;
    for (int c : opt.columns)
      if (c >= layout.fields || c < -layout.fields)
        throw Error(text_path + ":" + std::to_string(line_no + 1), "column " + std::to_string(c) + " is not in a row of " +
                                                                      std::to_string(layout.fields) +
                                                                      (layout.fields == 1 ? " field" : " fields"));
  } else {
    layout.fields = static_cast<int>(opt.columns.size());
  }
  const std::int64_t kept = first ? layout.kept() : static_cast<std::int64_t>(opt.columns.size());

  // The output: a .npy with its header reserved, or for HDF5 a hidden raw file copied
  // into the dataset once its shape is known.
  // A Zarr output: its store's groups made and its name checked now, its chunks written
  // from a raw file as HDF5's dataset is.
  const bool zarr = is_zarr(out_path);
  if (zarr) zarr::prepare_output(out_path);
  const bool raw = dataset || zarr;
  const std::string header0 =
      raw ? std::string() : npy::make_header(file_dtype, loadtxt_shape(2, kept, columns_known, opt.ndmin), Order::c);
  text::AppendFile out(dataset ? dataset->file : out_path, out_path);
  out.skip_to(header0.size());

  const std::uint64_t chunk_bytes = std::max<std::uint64_t>(64 << 10, options.tile_bytes / 4);
  std::int64_t lines_before = line_no;  // lines before the chunk being committed
  std::int64_t rows = 0;
  bool first_pending = first.has_value();
  ChunkPool pool;  // outlives the pipeline, whose slots hand chunks back to it
  detail::run_stream_erased(
      options,
      [&]() -> std::shared_ptr<void> {
        std::shared_ptr<Chunk> chunk = pool.get();
        input.chunk(static_cast<std::size_t>(chunk_bytes), chunk->text);
        if (first_pending) {  // the first data row, read by the lines before
          first_pending = false;
          chunk->text.insert(chunk->text.begin(), first->begin(), first->end());
        }
        if (chunk->text.empty()) {
          input.check_not_shrunk();
          return nullptr;
        }
        return chunk;
      },
      [&](void* state) {
        auto& c = *static_cast<Chunk*>(state);
        text::parse_chunk(std::string_view(c.text.data(), c.text.size()), dialect, layout, dtype, missing, c.result,
                          c.scratch);
        if (file_dtype != dtype && !c.result.values.empty())
          convert(dtype, c.result.values.data(), file_dtype, c.result.values.data(),
                  static_cast<std::int64_t>(c.result.values.size() / static_cast<std::size_t>(dtype.itemsize())));
      },
      [&](void* state) {
        auto& c = *static_cast<Chunk*>(state);
        if (c.result.error)
          throw Error(text_path + ":" + std::to_string(lines_before + c.result.error->line + 1) + ":" +
                          std::to_string(c.result.error->column),
                      c.result.error->problem, ErrorKind::corrupt, c.result.error->option);
        out.append(c.result.values.data(), c.result.values.size());
        rows += c.result.rows;
        lines_before += c.result.lines;
        if (opt.on_bytes) opt.on_bytes(input.consumed(), input.size());
      });
  input.check_not_shrunk();

  result.rows = rows;
  result.lines = lines_before;
  result.bytes = input.consumed();
  result.empty_input = rows == 0;
  result.shape = loadtxt_shape(rows, kept, columns_known, opt.ndmin);
  const std::uint64_t data_bytes = static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(kept) *
                                   static_cast<std::uint64_t>(dtype.itemsize());

  if (zarr) {  // the chunks compressed and written in order, from the raw file
    MappedArray array = create_zarr(out_path, file_dtype, result.shape);
    detail::TileWriter& writer = *detail::MappedArrayAccess::writer(array);
    const std::int64_t total = array.size();
    const auto item = static_cast<std::uint64_t>(file_dtype.itemsize());
    const std::int64_t step = std::max<std::int64_t>(1, static_cast<std::int64_t>((std::uint64_t{8} << 20) / item));
    std::vector<std::byte> buf(static_cast<std::size_t>(std::min<std::int64_t>(std::max<std::int64_t>(total, 1), step)) * item);
    for (std::int64_t at = 0; at < total; at += step) {
      const std::int64_t end = std::min(total, at + step);
      const std::size_t n = static_cast<std::size_t>(end - at) * item;
      if (os::read_at(out.fd(), buf.data(), n, static_cast<std::uint64_t>(at) * item, out_path) != n)
        throw Error(out_path, "temporary file shorter than written");
      std::unique_ptr<detail::Fetched> encoded = writer.encode(at, end, buf.data(), nullptr);
      writer.write(at, end, buf.data(), encoded.get());
    }
    array.commit();
    return result;
  }
  if (!dataset) {
    const std::string header = npy::make_header(file_dtype, result.shape, Order::c);
    if (header.size() != header0.size()) {  // a 0-d result, a 1-row one: move the data
      move_bytes(out.fd(), header0.size(), header.size(), data_bytes, out_path);
      out.truncate(header.size() + data_bytes);
    }
    os::write_at(out.fd(), header.data(), header.size(), 0, out_path);
    out.publish();
    return result;
  }
  // HDF5: the dataset is made now that its shape is known, and the values copied in.
  MappedArray array = create_hdf5(out_path, file_dtype, result.shape, opt.overwrite);
  const int fd = detail::MappedArrayAccess::fd(array);
  std::vector<char> buf(std::min<std::uint64_t>(std::max<std::uint64_t>(data_bytes, 1), 8 << 20));
  for (std::uint64_t at = 0; at < data_bytes; at += buf.size()) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), data_bytes - at));
    if (os::read_at(out.fd(), buf.data(), n, at, out_path) != n) throw Error(out_path, "temporary file shorter than written");
    os::write_at(fd, buf.data(), n, array.info().data_offset + at, out_path);
  }
  array.commit();
  return result;
}

}  // namespace ooc
