// The Zarr writer: a new array's chunks compressed and written as files by the kernel
// threads, in a hidden directory beside the array's name that is renamed (or exchanged
// with the array it replaces) once everything in it is durable.

#include "format/zarr.hpp"
#include "format/zarr/chunk_codec.hpp"
#include "format/zarr/zarray.hpp"
#include "ooc/error.hpp"
#include "os/file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>

namespace ooc::zarr {
namespace {

// A new file in the output's directory, written whole; its writeback starts at once (the
// output is synced when complete, and finds little left to do then).
void write_new_file(const std::filesystem::path& path, std::span<const std::byte> bytes, const std::string& shown) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    throw Error(shown, "cannot create " + path.filename().string() + ": " + os::errno_text(err),
                err == ENOSPC || err == EDQUOT ? ErrorKind::no_space : ErrorKind::other);
  }
  os::UniqueFd owner(fd);
  os::write_at(fd, bytes.data(), bytes.size(), 0, shown);
  os::start_writeback(fd, 0, bytes.size());
}

void sync_existing(const std::filesystem::path& path, const std::string& shown) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(shown, "cannot reopen " + path.filename().string() + " to sync it: " + os::errno_text(errno));
  os::UniqueFd owner(fd);
  os::sync_data(fd, shown);
}

// Chunks of whole rows (of the first axis, in the writer's C order: the last axis of a
// Fortran-order array), so a chunk is a run of the elements a tile holds. A chunk a tile
// boundary cuts is gathered in pending_ and written in the serial stage (one per tile at most).
class ArrayWriter final : public detail::TileWriter {
 public:
  ArrayWriter(const std::filesystem::path& directory, const std::string& shown, DType dtype, const Shape& shape,
              Order order, const Compression& how)
      : directory_(directory), label_(shown), dtype_(dtype), shape_(shape), order_(order),
        item_(static_cast<std::size_t>(dtype.itemsize())), how_(how) {
    Shape dims = shape;
    if (order == Order::fortran) std::reverse(dims.begin(), dims.end());
    if (dims.empty()) dims = {1};
    total_ = element_count(shape).value_or(0);
    std::int64_t row = 1;
    for (std::size_t k = 1; k < dims.size(); ++k) row *= std::max<std::int64_t>(1, dims[k]);
    std::int64_t rows = how.chunk_rows;
    if (rows <= 0) rows = std::max<std::int64_t>(1, (std::int64_t{1} << 20) / (row * static_cast<std::int64_t>(item_)));
    rows = std::max<std::int64_t>(1, std::min(rows, dims[0]));
    chunk_elements_ = rows * row;
    if (static_cast<std::uint64_t>(chunk_elements_) * item_ >= (std::uint64_t{1} << 31) - 64)
      throw UsageError(label_, "chunks of " + std::to_string(rows) + " rows would exceed 2 GiB a chunk (blosc's "
                               "limit, and zarr-python's): ask for fewer rows", "chunks");
    // The chunk shape in the array's axis order: `rows` on the first axis (C) or the last (F).
    chunks_.assign(dims.begin(), dims.end());
    for (std::int64_t& n : chunks_) n = std::max<std::int64_t>(1, n);
    chunks_[0] = rows;
    if (order == Order::fortran) std::reverse(chunks_.begin(), chunks_.end());
    if (shape.empty()) chunks_.clear();
    count_ = total_ == 0 ? 0 : (total_ + chunk_elements_ - 1) / chunk_elements_;
    // The codecs as the .zarray will name them.
    if (how.codec == "blosc") {
      compressor_ = Codec{"blosc", how.level < 0 ? 5 : how.level, how.blosc_codec, how.shuffle ? 1 : 0, 0};
    } else if (how.codec == "lz4") {
      compressor_ = Codec{"lz4", 1, "", 0, 0};
    } else if (how.codec == "zlib" || how.codec == "gzip" || how.codec == "zstd") {
      compressor_ = Codec{how.codec, how.level < 0 ? 1 : how.level, "", 0, 0};
    } else if (!how.codec.empty() && how.codec != "none") {
      throw UsageError(label_, "compression " + how.codec + " is not a Zarr compressor (blosc, zlib, gzip, zstd, lz4, none)");
    }
    if (how.shuffle && how.codec != "blosc") filters_.push_back(Codec{"shuffle", -1, "", 0, item_});
  }

  std::uint64_t tile_bytes_cap() const override {
    return detail::output_tile_cap(static_cast<std::uint64_t>(chunk_elements_) * item_);
  }

  std::unique_ptr<detail::Fetched> encode(std::int64_t begin, std::int64_t end, const std::byte* tile,
                                          std::unique_ptr<detail::Fetched>) override {
    for (std::int64_t k = (begin + chunk_elements_ - 1) / chunk_elements_;; ++k) {
      const std::int64_t lo = k * chunk_elements_, hi = std::min(lo + chunk_elements_, total_);
      if (lo >= total_ || hi > end) break;
      put(k, tile + static_cast<std::size_t>(lo - begin) * item_, hi - lo);
    }
    return nullptr;
  }

  void write(std::int64_t begin, std::int64_t end, const std::byte* tile, detail::Fetched*) override {
    for (std::int64_t k = begin / chunk_elements_; k * chunk_elements_ < end; ++k) {
      const std::int64_t lo = k * chunk_elements_, hi = std::min(lo + chunk_elements_, total_);
      if (lo >= begin && hi <= end) continue;  // whole in the tile: encode() wrote it
      const std::int64_t from = std::max(lo, begin), to = std::min(hi, end);
      if (pending_filled_ == 0) pending_index_ = k;
      if (pending_index_ != k || pending_filled_ != from - lo) throw std::logic_error("zarr writer: tiles out of order");
      pending_.resize(static_cast<std::size_t>(chunk_elements_) * item_);
      std::memcpy(pending_.data() + static_cast<std::size_t>(from - lo) * item_,
                  tile + static_cast<std::size_t>(from - begin) * item_, static_cast<std::size_t>(to - from) * item_);
      pending_filled_ = to - lo;
      if (to == hi) {
        put(k, pending_.data(), hi - lo);
        pending_filled_ = 0;
      }
    }
  }

  // Every chunk durable, then the .zarray that makes the directory an array (the
  // directory's own entries are synced by the output's commit).
  void finish() override {
    if (finished_) return;
    if (pending_filled_ != 0) throw std::logic_error("zarr writer: a chunk was left unwritten");
    std::mutex failed;
    std::optional<Error> error;
    tbb::parallel_for(std::int64_t{0}, count_, [&](std::int64_t k) {
      try {
        sync_existing(directory_ / key(k), label_);
      } catch (const Error& e) {
        std::lock_guard<std::mutex> one(failed);
        if (!error) error = e;
      }
    });
    if (error) throw *error;
    const std::string text = array_json(dtype_, shape_, chunks_, order_, how_);
    write_new_file(directory_ / ".zarray", std::as_bytes(std::span(text)), label_);
    sync_existing(directory_ / ".zarray", label_);
    finished_ = true;
  }

 private:
  // Chunk k (of rows along the writer's first axis) of `n` elements: padded to a whole
  // chunk with zeros (zarr's chunks are all of one size), encoded, written.
  void put(std::int64_t k, const std::byte* data, std::int64_t n) const {
    const std::size_t bytes = static_cast<std::size_t>(chunk_elements_) * item_;
    thread_local std::vector<std::byte> padded;
    thread_local ChunkScratch scratch;
    std::span<const std::byte> elements(data, bytes);
    if (n < chunk_elements_) {
      padded.assign(bytes, std::byte{0});
      std::memcpy(padded.data(), data, static_cast<std::size_t>(n) * item_);
      elements = std::span<const std::byte>(padded.data(), bytes);
    }
    std::span<const std::byte> stored;
    try {
      stored = encode_chunk(elements, compressor_, filters_, item_, scratch);
    } catch (const codecs::CodecError& e) {
      throw Error(label_, std::string("chunk ") + key(k) + ": " + e.what());
    }
    write_new_file(directory_ / key(k), stored, label_);
  }

  std::string key(std::int64_t k) const {
    if (shape_.empty()) return "0";
    std::vector<std::int64_t> at(shape_.size(), 0);
    (order_ == Order::fortran ? at.back() : at.front()) = k;
    return chunk_key(at, '.');
  }

  std::filesystem::path directory_;
  std::string label_;
  DType dtype_;
  Shape shape_;
  Order order_;
  std::size_t item_;
  Compression how_;
  std::optional<Codec> compressor_;
  std::vector<Codec> filters_;
  std::vector<std::int64_t> chunks_;
  std::int64_t total_ = 0, chunk_elements_ = 1, count_ = 0;
  std::vector<std::byte> pending_;
  std::int64_t pending_index_ = 0, pending_filled_ = 0;
  bool finished_ = false;
};

std::filesystem::path without_trailing_slash(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p;
}

std::filesystem::path parent_of(const std::filesystem::path& p) {
  return p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
}

}  // namespace

Compression default_compression() {
  Compression how;
  how.codec = "blosc";
  how.blosc_codec = "lz4";
  how.level = 5;
  how.shuffle = true;
  return how;
}

std::unique_ptr<detail::TileWriter> create_writer(const std::filesystem::path& directory, const std::string& shown,
                                                  DType dtype, const Shape& shape, Order order, const Compression& how) {
  return std::make_unique<ArrayWriter>(directory, shown, dtype, shape, order, how);
}

std::filesystem::path prepare_output(const std::string& path) {
  std::filesystem::path p = without_trailing_slash(path);
  std::error_code ec;
  // Through symbolic links to the array they name, as np.save writes through them.
  for (int hops = 0; std::filesystem::is_symlink(p, ec); ++hops) {
    if (hops == 40) throw Error(path, "too many levels of symbolic links");
    const std::filesystem::path to = std::filesystem::read_symlink(p, ec);
    p = to.is_absolute() ? to : parent_of(p) / to;
  }
  if (std::filesystem::exists(p, ec) && !is_array(p.string()))
    throw UsageError(path, std::string("exists and is not a Zarr array (") +
                               (is_group(p.string()) ? "a Zarr group" : std::filesystem::is_directory(p, ec) ? "a directory" : "a file") +
                               "): ooc replaces only a Zarr array; name a new one");
  // The groups on the way, from the first one missing: made inside a store (a directory
  // named *.zarr, or a group), else the name's directory must exist, as for any output.
  std::vector<std::filesystem::path> missing;
  std::filesystem::path up = parent_of(p);
  while (!std::filesystem::exists(up, ec)) {
    missing.push_back(up);
    if (!up.has_parent_path() || up == up.parent_path()) break;
    up = parent_of(up);
  }
  if (is_array(up.string()))
    throw UsageError(path, up.string() + " is a Zarr array: an array holds chunks, not other arrays");
  if (!missing.empty()) {
    bool in_store = is_group(up.string());
    for (const auto& dir : missing)
      if (dir.filename().string().ends_with(".zarr")) in_store = true;
    if (!in_store) throw Error(path, "directory " + missing.back().string() + " does not exist", ErrorKind::not_found);
    static constexpr std::string_view kGroup = "{\n    \"zarr_format\": 2\n}\n";
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      if (::mkdir(it->c_str(), 0777) != 0 && errno != EEXIST)
        throw Error(path, "cannot create the group " + it->string() + ": " + os::errno_text(errno));
      write_new_file(*it / ".zgroup", std::as_bytes(std::span(kGroup)), path);
      sync_existing(*it / ".zgroup", path);
      os::sync_directory(*it);
      os::sync_directory(parent_of(*it));
    }
  }
  return p;
}

namespace {

// The directory open and locked (flock: a directory opens read-only, where OFD record
// locks need a writable descriptor); not locked when another holds it.
os::UniqueFd lock_directory(const std::filesystem::path& dir, bool& locked) {
  os::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  locked = fd && ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0;
  return fd;
}

// Hidden directories beside `final_path` that no live run holds: what a killed run left.
void remove_stale_directories(const std::filesystem::path& final_path, const std::filesystem::path& ours) {
  const std::string prefix = "." + final_path.filename().string() + ".ooc-";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(parent_of(final_path), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() != prefix.size() + 16 || name.compare(0, prefix.size(), prefix) != 0 || it->path() == ours) continue;
    if (name.find_first_not_of("0123456789abcdef", prefix.size()) != std::string::npos) continue;
    bool locked = false;
    const os::UniqueFd fd = lock_directory(it->path(), locked);
    if (locked) remove_tree(it->path());
  }
}

}  // namespace

os::UniqueFd create_temp_directory(const std::filesystem::path& final_path, std::filesystem::path& temp) {
  std::random_device seed;
  std::mt19937_64 rng(seed());
  for (int attempt = 0; attempt < 100; ++attempt) {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(rng()));
    temp = parent_of(final_path) / ("." + final_path.filename().string() + ".ooc-" + suffix);
    if (::mkdir(temp.c_str(), 0777) == 0) {
      bool locked = false;
      os::UniqueFd fd = lock_directory(temp, locked);
      if (!fd) {
        const int err = errno;
        remove_tree(temp);
        throw Error(final_path.string(), "cannot open the output's directory: " + os::errno_text(err));
      }
      if (locked) remove_stale_directories(final_path, temp);  // else no locks here: leave them
      return fd;
    }
    if (errno != EEXIST) {
      const int err = errno;
      throw Error(final_path.string(), "cannot create output: " + os::errno_text(err),
                  err == ENOSPC || err == EDQUOT ? ErrorKind::no_space
                  : err == EACCES || err == EPERM || err == EROFS ? ErrorKind::permission
                                                                  : ErrorKind::other);
    }
  }
  throw Error(final_path.string(), "cannot create output: no free temporary name");
}

void publish_directory(const std::filesystem::path& temp, const std::filesystem::path& final_path,
                       const std::string& shown) {
  const std::filesystem::path parent = parent_of(final_path);
  std::error_code ec;
  const bool replaces = std::filesystem::exists(final_path, ec);
  // An array already there is exchanged with the new one in one step (no moment without
  // an array under the name); the old one, now under the hidden name, is removed after.
  if (replaces) {
    if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) != 0)
      throw Error(shown, "cannot move the finished output into place: " + os::errno_text(errno) +
                             "; nothing was written");
  } else if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) != 0) {
    throw Error(shown, "cannot move the finished output into place: " + os::errno_text(errno) + "; nothing was written");
  }
  try {
    os::sync_directory(parent);
  } catch (const Error& e) {
    // Undone, so that the failure changes nothing.
    const bool undone = replaces ? ::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0
                                 : ::rename(final_path.c_str(), temp.c_str()) == 0;
    os::try_sync_directory_of(final_path);
    throw Error(shown, "cannot sync its directory (" + e.problem() + ")" +
                           (undone ? "; nothing was written"
                                   : "; the new output is in place but may not survive a power cut: run the same command again"));
  }
  if (replaces) remove_tree(temp);
  update_consolidated(final_path, shown);
}

void remove_tree(const std::filesystem::path& path) noexcept {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace ooc::zarr
