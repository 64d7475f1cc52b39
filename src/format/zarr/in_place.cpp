// An uncompressed Zarr array rewritten in place, chunk by chunk, as zarr-python writes a
// chunk: the chunk's new bytes go to a hidden file beside it, are made durable, and the
// file is renamed over the chunk's. A chunk's file is always whole, the old bytes or the
// new; the in-place journal (core/journal.cpp) tells a replaced chunk from one not yet
// replaced by its file's identity, so a stopped run is finished exactly once per chunk.

#include "format/zarr.hpp"
#include "format/zarr/grid.hpp"
#include "ooc/error.hpp"
#include "os/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tbb/task_group.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

namespace ooc::zarr {
namespace {

constexpr const char* kNewSuffix = ".ooc-new";

// The hidden file a chunk's new bytes are written to before they are renamed over it.
std::filesystem::path new_file_of(const std::filesystem::path& chunk) {
  return chunk.parent_path() / ("." + chunk.filename().string() + kNewSuffix);
}

class Replacer final : public ChunkReplacer {
 public:
  Replacer(const std::string& directory, const Metadata& metadata, const std::string& shown)
      : directory_(directory), label_(shown), m_(metadata), grid_(metadata),
        item_(static_cast<std::size_t>(metadata.dtype.itemsize())), done_(grid_.count(), false) {
    if (m_.compressor || !m_.filters.empty())
      throw std::logic_error("zarr: only an uncompressed array is rewritten in place");
    fill_ = m_.fill.empty() ? std::vector<std::byte>(item_, std::byte{0}) : m_.fill;
  }

  ~Replacer() noexcept override {
    try {
      tasks_.wait();  // a run that failed: its replacements finish (each whole) before the array goes
    } catch (...) {
    }
  }

  std::uint64_t chunks() const override { return grid_.count(); }

  std::vector<std::uint64_t> identities() const override {
    std::vector<std::uint64_t> ids(grid_.count(), 0);
    for (std::uint64_t k = 0; k < ids.size(); ++k) {
      struct stat st {};
      const std::string path = directory_ + "/" + grid_.key_of(k);
      if (::stat(path.c_str(), &st) == 0) ids[k] = static_cast<std::uint64_t>(st.st_ino);
      else if (errno != ENOENT) throw Error(path, "cannot read chunk " + grid_.key_of(k) + ": " + os::errno_text(errno));
    }
    return ids;
  }

  void start(std::vector<bool> done) override {
    if (!done.empty() && done.size() != done_.size()) throw std::logic_error("zarr: start() with another grid");
    if (!done.empty()) done_ = std::move(done);
    remove_leftovers();
  }

  bool replaced() const override { return replaced_.load(); }

  // Concurrent: every chunk the tile holds whole is replaced by this thread.
  std::unique_ptr<detail::Fetched> encode(std::int64_t begin, std::int64_t end, const std::byte* tile,
                                          std::unique_ptr<detail::Fetched>) override {
    thread_local std::vector<std::uint64_t> indices;
    std::vector<std::int64_t> origin(grid_.axes());
    grid_.chunks_of_run(begin, end, indices);
    for (std::uint64_t index : indices) {
      if (done_[index]) continue;
      grid_.origin_of(index, origin);
      const auto [first, last] = grid_.span_of(origin);
      if (first >= begin && last < end) replace(index, tile, begin, end);
    }
    return nullptr;
  }

  // Serial, in tile order: the parts of chunks that tile boundaries cut are gathered; a
  // chunk complete is replaced on another thread (its sync would hold up the stage).
  void write(std::int64_t begin, std::int64_t end, const std::byte* tile, detail::Fetched*) override {
    rethrow();
    std::vector<std::uint64_t> indices;
    std::vector<std::int64_t> origin(grid_.axes()), extent(grid_.axes());
    grid_.chunks_of_run(begin, end, indices);
    for (std::uint64_t index : indices) {
      if (done_[index]) continue;
      grid_.origin_of(index, origin);
      const auto [first, last] = grid_.span_of(origin);
      if (first >= begin && last < end) continue;  // replaced by encode()
      grid_.extent_of(origin, extent);
      auto found = cut_.find(index);
      if (found == cut_.end()) {
        Gathering g;
        g.bytes.resize(grid_.chunk_elements() * item_);
        if (grid_.partial(extent)) load(index, g.bytes.data());  // its bytes outside the array stay
        g.needed = 1;
        for (std::int64_t n : extent) g.needed *= n;
        found = cut_.emplace(index, std::move(g)).first;
      }
      Gathering& g = found->second;
      grid_.for_each_segment(origin, extent, begin, end, [&](std::int64_t to, std::int64_t from, std::int64_t n) {
        std::memcpy(g.bytes.data() + static_cast<std::size_t>(from) * item_, tile + static_cast<std::size_t>(to) * item_,
                    static_cast<std::size_t>(n) * item_);
        g.filled += n;
      });
      if (g.filled < g.needed) continue;
      auto bytes = std::make_shared<std::vector<std::byte>>(std::move(g.bytes));
      cut_.erase(found);
      tasks_.run([this, index, bytes] {
        try {
          put(index, bytes->data());
        } catch (...) {
          std::lock_guard<std::mutex> one(m_failed_);
          if (!failure_) failure_ = std::current_exception();
        }
      });
    }
  }

  // Every replacement durable: the renames, by a sync of each directory they were made in.
  void finish() override {
    if (finished_) return;
    tasks_.wait();
    rethrow();
    if (!cut_.empty()) throw std::logic_error("zarr in place: a chunk was left partly written");
    for (const std::string& directory : directories_) os::sync_directory(directory);
    finished_ = true;
  }

 private:
  struct Gathering {
    std::vector<std::byte> bytes;
    std::int64_t filled = 0, needed = 0;
  };

  // Chunk `index`, whose elements in the array lie in the tile [begin, end) at `tile`.
  void replace(std::uint64_t index, const std::byte* tile, std::int64_t begin, std::int64_t end) {
    std::vector<std::int64_t> origin(grid_.axes()), extent(grid_.axes());
    grid_.origin_of(index, origin);
    grid_.extent_of(origin, extent);
    const auto first = grid_.span_of(origin).first;
    if (grid_.merge_axis() == 0 && !grid_.partial(extent))  // a run of the tile's bytes, as stored
      return put(index, tile + static_cast<std::size_t>(first - begin) * item_);
    thread_local std::vector<std::byte> gathered;
    gathered.resize(grid_.chunk_elements() * item_);
    if (grid_.partial(extent)) load(index, gathered.data());
    grid_.for_each_segment(origin, extent, begin, end, [&](std::int64_t to, std::int64_t from, std::int64_t n) {
      std::memcpy(gathered.data() + static_cast<std::size_t>(from) * item_, tile + static_cast<std::size_t>(to) * item_,
                  static_cast<std::size_t>(n) * item_);
    });
    put(index, gathered.data());
  }

  // An edge chunk's bytes as stored (the fill value where it has no file), so that the
  // part of it outside the array is kept as it was.
  void load(std::uint64_t index, std::byte* into) const {
    const std::size_t bytes = grid_.chunk_elements() * item_;
    const std::string key = grid_.key_of(index);
    const std::string path = directory_ + "/" + key;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
      for (std::size_t i = 0; i < grid_.chunk_elements(); ++i) std::memcpy(into + i * item_, fill_.data(), item_);
      return;
    }
    if (fd < 0) throw Error(path, "cannot open chunk " + key + " of Zarr array " + label_ + ": " + os::errno_text(errno));
    os::UniqueFd owner(fd);
    if (os::file_size(fd, path) != bytes || os::read_at(fd, into, bytes, 0, path) != bytes)
      throw Error(path, "chunk " + key + " of Zarr array " + label_ + ": uncompressed chunk of " +
                            std::to_string(os::file_size(fd, path)) + " bytes, not the " + std::to_string(bytes) +
                            " of a chunk (truncated or corrupt)",
                  ErrorKind::corrupt);
  }

  // Writes a whole chunk's bytes beside its file, durably, and renames them over it.
  void put(std::uint64_t index, const std::byte* bytes) {
    const std::string key = grid_.key_of(index);
    const std::filesystem::path chunk = std::filesystem::path(directory_) / key;
    const std::filesystem::path temp = new_file_of(chunk);
    if (m_.separator == '/' && chunk.parent_path() != std::filesystem::path(directory_)) make_directories(chunk.parent_path());
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
      const int err = errno;
      throw Error(chunk.string(), "cannot write chunk " + key + " of Zarr array " + label_ + ": " + os::errno_text(err),
                  kind_of_errno(err));
    }
    try {
      os::UniqueFd owner(fd);
      os::write_at(fd, bytes, grid_.chunk_elements() * item_, 0, chunk.string());
      os::sync_data(fd, chunk.string());
    } catch (...) {
      ::unlink(temp.c_str());
      throw;
    }
    if (::rename(temp.c_str(), chunk.c_str()) != 0) {
      const int err = errno;
      ::unlink(temp.c_str());
      throw Error(chunk.string(), "cannot replace chunk " + key + " of Zarr array " + label_ + ": " + os::errno_text(err),
                  kind_of_errno(err));
    }
    replaced_ = true;
    std::lock_guard<std::mutex> one(m_directories_);
    directories_.insert(chunk.parent_path().string());
  }

  // A chunk's missing directories ('/' keys), each recorded for its parent's sync.
  void make_directories(const std::filesystem::path& directory) {
    std::lock_guard<std::mutex> one(m_directories_);
    std::vector<std::filesystem::path> missing;
    for (std::filesystem::path p = directory; p != std::filesystem::path(directory_) && !std::filesystem::exists(p);
         p = p.parent_path())
      missing.push_back(p);
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      if (::mkdir(it->c_str(), 0777) != 0 && errno != EEXIST)
        throw Error(it->string(), "cannot create a directory of Zarr array " + label_ + ": " + os::errno_text(errno),
                    kind_of_errno(errno));
      directories_.insert(it->parent_path().string());
    }
  }

  // Hidden files a stopped run left: never renamed, so never part of the array.
  void remove_leftovers() const {
    std::error_code ec;
    std::vector<std::filesystem::path> found;
    for (auto it = std::filesystem::recursive_directory_iterator(directory_, ec); !ec && it != decltype(it)();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.starts_with(".") && name.ends_with(kNewSuffix)) found.push_back(it->path());
    }
    for (const auto& path : found) std::filesystem::remove(path, ec);
  }

  void rethrow() {
    std::lock_guard<std::mutex> one(m_failed_);
    if (failure_) std::rethrow_exception(failure_);
  }

  std::string directory_, label_;
  Metadata m_;
  ChunkGrid grid_;
  std::size_t item_;
  std::vector<std::byte> fill_;
  std::vector<bool> done_;
  std::map<std::uint64_t, Gathering> cut_;  // serial stage only
  tbb::task_group tasks_;
  std::mutex m_failed_, m_directories_;
  std::exception_ptr failure_;
  std::set<std::string> directories_;
  std::atomic<bool> replaced_{false};
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<ChunkReplacer> open_replacer(const std::string& array, const Metadata& metadata,
                                             const std::string& shown) {
  return std::make_unique<Replacer>(array, metadata, shown);
}

}  // namespace ooc::zarr
