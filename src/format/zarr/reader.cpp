// The Zarr reader: any run of elements of an array whose chunks are files of their own.
// The serial stage only names the chunks a tile needs (and asks the kernel for their
// pages ahead); each chunk is read and decoded on a kernel thread, straight into the
// tile where the tile holds it whole, with no lock: chunks share no file.

#include "format/zarr.hpp"
#include "format/zarr/chunk_codec.hpp"
#include "format/zarr/grid.hpp"
#include "ooc/error.hpp"
#include "os/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace ooc::zarr {
namespace {

// An open chunk file, closed on every way out.
struct ChunkFile {
  int fd = -1;
  ~ChunkFile() {
    if (fd >= 0) ::close(fd);
  }
};

class ArrayReader final : public detail::TileReader {
 public:
  ArrayReader(const std::string& directory, const Metadata& metadata, const std::string& shown)
      : directory_(directory), label_(shown), m_(metadata), grid_(metadata),
        item_(static_cast<std::size_t>(metadata.dtype.itemsize())) {
    row_bytes_ = item_ * grid_.row_elements();
    plain_ = !m_.compressor && m_.filters.empty();
    if (!m_.fill.empty()) fill_ = m_.fill;
    else fill_.assign(item_, std::byte{0});  // no fill value: what zarr-python leaves is unset; zeros here
    fill_zero_ = std::all_of(fill_.begin(), fill_.end(), [](std::byte b) { return b == std::byte{0}; });
    metadata_stamp_ = stamp();
  }

  bool concurrent() const override { return false; }
  bool staged() const override { return true; }
  // As a compressed HDF5 dataset's: a row of chunks, at least 2 MiB, so that the kernel
  // reads a tile while it is still in the cache that decoding it filled.
  std::uint64_t tile_bytes_cap() const override {
    if (row_bytes_ > (std::size_t{256} << 20)) return 0;
    return std::max<std::uint64_t>(std::uint64_t{2} << 20, row_bytes_);
  }

  const std::byte* read(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) override {
    std::unique_ptr<detail::Fetched> chunks = fetch(begin, end, nullptr, buffer);
    return decode(begin, end, *chunks, buffer);
  }

  // Serial: which chunks the tile needs, and which of them it shares with its neighbours.
  std::unique_ptr<detail::Fetched> fetch(std::int64_t begin, std::int64_t end, std::unique_ptr<detail::Fetched> reuse,
                                         detail::AlignedBuffer&) override {
    std::unique_ptr<detail::Fetched> owner = reuse ? std::move(reuse) : std::make_unique<Chunks>();
    auto& chunks = static_cast<Chunks&>(*owner);
    chunks.list.clear();
    if (end <= begin) return owner;
    grid_.chunks_of_run(begin, end, chunks.indices);
    for (std::uint64_t index : chunks.indices) chunks.list.push_back({index, nullptr});
    share_cut_chunks(begin, end, chunks);
    return owner;
  }

  // Concurrent: each chunk read and decoded on this thread, and its elements in
  // [begin, end) put in the tile; a chunk the tile holds whole, in order, is decoded there.
  const std::byte* decode(std::int64_t begin, std::int64_t end, detail::Fetched& fetched,
                          detail::AlignedBuffer& buffer) override {
    auto& chunks = static_cast<Chunks&>(fetched);
    buffer.ensure(static_cast<std::size_t>(std::max<std::int64_t>(1, end - begin)) * item_);
    std::byte* dst = buffer.data();
    const std::size_t chunk_bytes = grid_.chunk_elements() * item_;
    thread_local ChunkScratch scratch;
    thread_local std::vector<std::byte> stored, whole;
    std::vector<std::int64_t> origin(grid_.axes()), extent(grid_.axes());
    for (const Chunk& c : chunks.list) {
      grid_.origin_of(c.index, origin);
      grid_.extent_of(origin, extent);
      const std::int64_t first = origin[0] * grid_.stride0();
      const bool in_place = grid_.merge_axis() == 0 && extent[0] == grid_.chunk_rows() && first >= begin &&
                            first + static_cast<std::int64_t>(grid_.chunk_elements()) <= end;
      std::byte* const place = in_place ? dst + static_cast<std::size_t>(first - begin) * item_ : nullptr;
      const std::byte* decoded = nullptr;
      bool missing = false;
      auto load = [&](std::byte* into) {  // the chunk, decoded into `into`; false when it has no file
        const std::string key = grid_.key_of(c.index);
        ChunkFile file;
        file.fd = ::open((directory_ + "/" + key).c_str(), O_RDONLY | O_CLOEXEC);
        if (file.fd < 0) {
          if (errno == ENOENT) return false;  // never written: the fill value, as zarr-python reads it
          throw Error(directory_ + "/" + key, "cannot open chunk " + key + " of Zarr array " + label_ + ": " +
                                                  os::errno_text(errno));
        }
        struct stat st {};
        if (::fstat(file.fd, &st) != 0)
          throw Error(directory_ + "/" + key, "cannot read chunk " + key + ": " + os::errno_text(errno));
        const auto size = static_cast<std::size_t>(st.st_size);
        if (plain_) {
          if (size != chunk_bytes) bad_chunk(key, "uncompressed chunk of " + std::to_string(size) + " bytes, not the " +
                                                      std::to_string(chunk_bytes) + " of a chunk (truncated or corrupt)");
          read_all(file.fd, into, size, key);
          return true;
        }
        if (stored.size() < size) stored.resize(size);
        read_all(file.fd, stored.data(), size, key);
        try {
          decode_chunk(std::span<const std::byte>(stored.data(), size), m_, chunk_bytes, into, scratch);
        } catch (const codecs::CodecError& e) {
          bad_chunk(key, e.what());
        }
        return true;
      };
      if (c.shared) {  // cut by a tile boundary: decoded once, by whichever tile comes first
        std::lock_guard<std::mutex> once(c.shared->lock);
        if (!c.shared->done) {
          c.shared->bytes.resize(chunk_bytes);
          c.shared->missing = !load(c.shared->bytes.data());
          c.shared->done = true;
        }
        missing = c.shared->missing;
        decoded = c.shared->bytes.data();
      } else if (place) {
        missing = !load(place);
        decoded = place;
      } else {
        if (whole.size() < chunk_bytes) whole.resize(chunk_bytes);
        missing = !load(whole.data());
        decoded = whole.data();
      }
      if (missing) {
        grid_.for_each_segment(origin, extent, begin, end, [&](std::int64_t to, std::int64_t, std::int64_t n) {
          fill(dst + static_cast<std::size_t>(to) * item_, static_cast<std::size_t>(n));
        });
        continue;
      }
      if (decoded == place) continue;
      grid_.for_each_segment(origin, extent, begin, end, [&](std::int64_t to, std::int64_t from, std::int64_t n) {
        std::memcpy(dst + static_cast<std::size_t>(to) * item_, decoded + static_cast<std::size_t>(from) * item_,
                    static_cast<std::size_t>(n) * item_);
      });
    }
    return dst;
  }

  // In the commit stage, once a tile is done: an array rewritten meanwhile (its .zarray
  // replaced or changed, as zarr.open(mode="w") does) fails the run before it commits,
  // rather than hand on a mix of two arrays.
  void release(std::int64_t, std::int64_t) override {
    if (stamp() != metadata_stamp_)
      throw Error(label_, "changed while being read (its .zarray was rewritten by another process); run again");
  }

  // Ahead of the tile, in the serial stage: the kernel reads its chunk files in.
  void will_need(std::int64_t begin, std::int64_t end) override {
    if (end <= begin) return;
    std::vector<std::uint64_t> indices;
    grid_.chunks_of_run(begin, end, indices);
    for (std::uint64_t index : indices) {
      ChunkFile file;
      file.fd = ::open((directory_ + "/" + grid_.key_of(index)).c_str(), O_RDONLY | O_CLOEXEC);
      if (file.fd >= 0) ::posix_fadvise(file.fd, 0, 0, POSIX_FADV_WILLNEED);  // a hint: errors come at the read
    }
  }

 private:
  struct Decoded {
    std::mutex lock;
    bool done = false, missing = false;
    std::vector<std::byte> bytes;
  };
  struct Chunk {
    std::uint64_t index;  // in the grid of chunks, C order (of the reader's axes)
    std::shared_ptr<Decoded> shared;  // set for a chunk the tile holds only part of
  };
  struct Chunks final : detail::Fetched {
    std::vector<std::uint64_t> indices;
    std::vector<Chunk> list;
  };

  // What tells one .zarray from another: its inode, size and modification time.
  std::array<std::int64_t, 5> stamp() const {
    struct stat st {};
    if (::stat((directory_ + "/.zarray").c_str(), &st) != 0) return {};
    return {static_cast<std::int64_t>(st.st_dev), static_cast<std::int64_t>(st.st_ino), st.st_size, st.st_mtim.tv_sec,
            st.st_mtim.tv_nsec};
  }

  [[noreturn]] void bad_chunk(const std::string& key, const std::string& problem) const {
    throw Error(directory_ + "/" + key, "chunk " + key + " of Zarr array " + label_ + ": " + problem,
                ErrorKind::corrupt);
  }

  void read_all(int fd, std::byte* into, std::size_t size, const std::string& key) const {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t got = ::pread(fd, into + done, size - done, static_cast<off_t>(done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw Error(directory_ + "/" + key, "cannot read chunk " + key + ": " + os::errno_text(errno));
      if (got == 0) bad_chunk(key, "the file shrank while being read");
      done += static_cast<std::size_t>(got);
    }
  }

  // Serial, in tile order: a chunk the tile holds only part of shares its decoding with
  // the other tiles that hold parts of it (as the HDF5 chunk reader does). What cut_
  // keeps is bounded (64 MiB of decoded chunks); past that each tile decodes its own.
  void share_cut_chunks(std::int64_t begin, std::int64_t end, Chunks& chunks) {
    static constexpr std::size_t kSharedBytes = std::size_t{64} << 20;
    const std::size_t keep = std::max<std::size_t>(1, kSharedBytes / std::max<std::size_t>(1, grid_.chunk_elements() * item_));
    std::vector<std::int64_t> origin(grid_.axes());
    std::unordered_map<std::uint64_t, std::shared_ptr<Decoded>> next;
    for (Chunk& c : chunks.list) {
      grid_.origin_of(c.index, origin);
      const auto [first, last] = grid_.span_of(origin);
      if (first >= begin && last < end) continue;  // whole in this tile
      const auto found = cut_.find(c.index);
      const bool kept = last >= end && next.size() < keep;  // a later tile holds the rest
      if (found != cut_.end()) c.shared = found->second;
      else if (kept) c.shared = std::make_shared<Decoded>();
      if (kept) next.emplace(c.index, c.shared);
    }
    cut_ = std::move(next);
  }

  void fill(std::byte* at, std::size_t count) const { chunk_walk::fill(at, count, item_, fill_zero_, fill_); }

  std::string directory_, label_;
  Metadata m_;
  ChunkGrid grid_;
  std::size_t item_;
  std::size_t row_bytes_ = 0;   // a row of chunks (along the first axis), decoded
  bool plain_ = false;          // no compressor, no filter: a chunk file is the chunk's bytes
  std::vector<std::byte> fill_;
  bool fill_zero_ = true;
  std::unordered_map<std::uint64_t, std::shared_ptr<Decoded>> cut_;
  std::array<std::int64_t, 5> metadata_stamp_{};
};

}  // namespace

std::unique_ptr<detail::TileReader> open_reader(const std::string& array, const Metadata& metadata,
                                                const std::string& shown) {
  return std::make_unique<ArrayReader>(array, metadata, shown);
}

std::uint64_t stored_bytes(const std::string& array) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(array, ec); !ec && it != decltype(it)(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_regular_file(ec) && !name.starts_with(".")) total += it->file_size(ec);
  }
  return total;
}

}  // namespace ooc::zarr
