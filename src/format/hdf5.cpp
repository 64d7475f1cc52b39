#include "format/hdf5.hpp"
#include "format/hdf5_filters.hpp"
#include "format/hdf5_rollback.hpp"

#include "ooc/error.hpp"
#include "os/crash_guard.hpp"
#include "os/mapping.hpp"
#include "os/memory.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace ooc::hdf5 {
namespace {

std::mutex& library_lock() {
  static std::mutex lock;
  return lock;
}

// Holds the library lock and silences HDF5's own error printing (we report errors). The
// printing is set per thread in a thread-safe build of the library, as Debian's is, so each
// thread that calls HDF5 (any TBB worker may read a tile) silences it once. It also marks
// the thread as inside the library, working on `file`: should the library crash on a
// damaged file, oocrun's handler names it (os/crash_guard.hpp).
class Session {
 public:
  explicit Session(std::string_view file = {}) : guard_(library_lock()), inside_(file) {
    // The library's own exit handler closes what is still open and flushes it; after a
    // failed write it crashed doing so (SIGSEGV after the run had reported its error).
    // ooc closes what it opens, and a transaction's file refuses writes once it ended.
    static const bool no_exit_handler = (H5dont_atexit(), true);
    (void)no_exit_handler;
    thread_local bool silenced = false;
    if (!silenced) {
      H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
      silenced = true;
    }
  }

 private:
  std::lock_guard<std::mutex> guard_;
  os::InLibrary inside_;  // after guard_: unmarked before the lock is let go
};

// One owner for an HDF5 identifier, closed with the matching H5?close.
class Id {
 public:
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Id(Id&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)), close_(other.close_) {}
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  /// Closes now, throwing what `label` names if that fails: closing a file written to is
  /// its last write (the library flushes its metadata then).
  void close(const std::string& label, const std::string& problem) {
    const hid_t id = std::exchange(id_, H5I_INVALID_HID);
    if (id >= 0 && close_(id) < 0) throw Error(label, problem);
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

std::string where(const std::string& file, const std::string& dataset) { return file + ":" + dataset; }

// The readers holding a dataset open (and with it its file, read-only): HDF5 opens a file
// for writing only when nothing in the process holds it read-only, so a write into a file
// being read (a new dataset beside a chunked input, or in the file an external link leads
// to) first asks them to let go. Each opens its dataset again at its next read. Guarded by
// the library lock.
class Holder {
 public:
  virtual void let_go() = 0;

 protected:
  ~Holder() = default;
};

std::vector<Holder*>& holders() {
  static std::vector<Holder*> all;
  return all;
}

Id open_file(const std::string& file, bool writable) {
  recover_if_interrupted(file);  // an earlier run stopped while writing into it: put it back first
  auto attempt = [&] { return Id(H5Fopen(file.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, file_access()), H5Fclose); };
  if (Id f = attempt(); f.valid()) return f;
  if (writable && !holders().empty()) {
    for (Holder* h : holders()) h->let_go();
    if (Id f = attempt(); f.valid()) return f;
  }
  if (::access(file.c_str(), R_OK) != 0) throw Error(file, "no such file, or it cannot be read", kind_of_errno(errno));
  if (writable) throw Error(file, "cannot open the HDF5 file for writing");
  throw Error(file, "not an HDF5 file, or it is damaged", ErrorKind::corrupt);
}

// True if every component of `path` exists as a link (H5Lexists needs each parent).
bool link_exists(hid_t file, const std::string& path) {
  std::size_t at = 1;
  while (at <= path.size()) {
    const std::size_t next = path.find('/', at);
    const std::string prefix = path.substr(0, next == std::string::npos ? path.size() : next);
    if (prefix.size() > 1 && H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (next == std::string::npos) break;
    at = next + 1;
  }
  return true;
}

// The library's number for the file an object (or a file) lies in: links may lead out of
// the file that was opened (external links), and then the object's bytes are in another.
unsigned long file_number(hid_t object) {
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info{};
  if (H5Oget_info3(object, &info, H5O_INFO_BASIC) < 0) return 0;
#else
  H5O_info_t info{};
  if (H5Oget_info2(object, &info, H5O_INFO_BASIC) < 0) return 0;
#endif
  return info.fileno;
}

// "other.h5:/data": where an object that lies in another file than `file` is, else "".
std::string elsewhere(hid_t file, hid_t object) {
  if (file_number(object) == file_number(file)) return "";
  std::string name(static_cast<std::size_t>(std::max<ssize_t>(0, H5Fget_name(object, nullptr, 0))), '\0');
  H5Fget_name(object, name.data(), name.size() + 1);
  std::string path(static_cast<std::size_t>(std::max<ssize_t>(0, H5Iget_name(object, nullptr, 0))), '\0');
  H5Iget_name(object, path.data(), path.size() + 1);
  return (name.empty() ? std::string("another file") : name) + (path.empty() ? "" : ":" + path);
}

struct TypeAnswer {
  std::optional<DType> dtype;
  std::string text;
};

ByteOrder order_of(hid_t type) { return H5Tget_order(type) == H5T_ORDER_BE ? ByteOrder::big : ByteOrder::little; }

TypeAnswer classify(hid_t type) {
  const std::size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: {
      const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
      if ((size == 1 || size == 2 || size == 4 || size == 8) && H5Tget_precision(type) == size * 8 &&
          H5Tget_offset(type) == 0) {
        const DType d(is_signed ? Kind::signed_int : Kind::unsigned_int, static_cast<int>(size), order_of(type));
        return {d, d.name()};
      }
      return {std::nullopt, std::to_string(H5Tget_precision(type)) + "-bit integer"};
    }
    case H5T_FLOAT: {
      std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
      const std::size_t bias = H5Tget_ebias(type);
      const bool ieee = (size == 2 && spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && bias == 15) ||
                        (size == 4 && spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23 && bias == 127) ||
                        (size == 8 && spos == 63 && epos == 52 && esize == 11 && mpos == 0 && msize == 52 && bias == 1023);
      if (ieee) {
        const DType d(Kind::floating, static_cast<int>(size), order_of(type));
        return {d, d.name()};
      }
      return {std::nullopt, std::to_string(size * 8) + "-bit non-IEEE float"};
    }
    case H5T_ENUM: {
      // h5py stores numpy bools as an int8 enum {FALSE: 0, TRUE: 1}.
      if (size == 1 && H5Tget_nmembers(type) == 2) {
        char* first = H5Tget_member_name(type, 0);
        char* second = H5Tget_member_name(type, 1);
        const bool is_bool = first && second && std::string(first) == "FALSE" && std::string(second) == "TRUE";
        H5free_memory(first);
        H5free_memory(second);
        if (is_bool) return {DType(Kind::boolean, 1), "bool"};
      }
      return {std::nullopt, "enum"};
    }
    case H5T_STRING: return {std::nullopt, "string"};
    case H5T_COMPOUND: return {std::nullopt, "compound"};
    case H5T_VLEN: return {std::nullopt, "variable-length"};
    case H5T_REFERENCE: return {std::nullopt, "reference"};
    case H5T_ARRAY: return {std::nullopt, "array"};
    case H5T_OPAQUE: return {std::nullopt, "opaque"};
    case H5T_BITFIELD: return {std::nullopt, "bitfield"};
    default: return {std::nullopt, "unknown"};
  }
}

Id make_type(DType dtype) {
  const bool big = dtype.byte_order() == ByteOrder::big;
  if (dtype.kind() == Kind::boolean) {
    Id type(H5Tenum_create(H5T_NATIVE_INT8), H5Tclose);
    const std::int8_t no = 0, yes = 1;
    H5Tenum_insert(type.get(), "FALSE", &no);
    H5Tenum_insert(type.get(), "TRUE", &yes);
    return type;
  }
  if (dtype.kind() == Kind::floating) {
    if (dtype.itemsize() == 2) {  // as h5py builds float16
      Id type(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
      H5Tset_fields(type.get(), 15, 10, 5, 0, 10);
      H5Tset_size(type.get(), 2);
      H5Tset_ebias(type.get(), 15);
      H5Tset_order(type.get(), big ? H5T_ORDER_BE : H5T_ORDER_LE);
      return type;
    }
    const hid_t base = dtype.itemsize() == 4 ? (big ? H5T_IEEE_F32BE : H5T_IEEE_F32LE)
                                             : (big ? H5T_IEEE_F64BE : H5T_IEEE_F64LE);
    return Id(H5Tcopy(base), H5Tclose);
  }
  const bool is_signed = dtype.kind() == Kind::signed_int;
  hid_t base;
  switch (dtype.itemsize()) {
    case 1: base = is_signed ? H5T_STD_I8LE : H5T_STD_U8LE; break;
    case 2: base = is_signed ? H5T_STD_I16LE : H5T_STD_U16LE; break;
    case 4: base = is_signed ? H5T_STD_I32LE : H5T_STD_U32LE; break;
    default: base = is_signed ? H5T_STD_I64LE : H5T_STD_U64LE; break;
  }
  Id type(H5Tcopy(base), H5Tclose);
  H5Tset_order(type.get(), big ? H5T_ORDER_BE : H5T_ORDER_LE);
  return type;
}

DatasetInfo describe_open(hid_t file, hid_t dset, const std::string& name) {
  DatasetInfo info;
  info.name = name;
  info.elsewhere = elsewhere(file, dset);
  Id type(H5Dget_type(dset), H5Tclose);
  const TypeAnswer t = classify(type.get());
  info.dtype = t.dtype;
  info.type_text = t.text;

  Id space(H5Dget_space(dset), H5Sclose);
  const H5S_class_t space_class = H5Sget_simple_extent_type(space.get());
  bool null_space = space_class == H5S_NULL;
  if (space_class == H5S_SIMPLE) {
    const int ndims = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(0, ndims)));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    for (hsize_t d : dims) info.shape.push_back(static_cast<std::int64_t>(d));
  }

  Id dcpl(H5Dget_create_plist(dset), H5Pclose);
  switch (H5Pget_layout(dcpl.get())) {
    case H5D_CONTIGUOUS: info.layout = "contiguous"; break;
    case H5D_CHUNKED: info.layout = "chunked"; break;
    case H5D_COMPACT: info.layout = "compact"; break;
    case H5D_VIRTUAL: info.layout = "virtual"; break;
    default: info.layout = "unknown"; break;
  }
  const int nfilters = H5Pget_nfilters(dcpl.get());
  std::string missing_filter;
  for (int i = 0; i < nfilters; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t nelements = 0;
    char filter_name[64] = {};
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nelements, nullptr,
                                           sizeof filter_name, filter_name, &config);
    const char* ours = filters::name_of(static_cast<unsigned>(id));
    info.filters.push_back(ours[0] ? std::string(ours) : filter_name[0] ? filter_name : "filter " + std::to_string(id));
    if (H5Zfilter_avail(id) <= 0 && !filters::decodable(static_cast<unsigned>(id)) && missing_filter.empty())
      missing_filter = "it is compressed with filter " + std::to_string(id) + " (" + info.filters.back() +
                       "), which this HDF5 library cannot decode" +
                       (id == 32000 ? " (LZF lives in h5py; rewrite the dataset with gzip)" : "");
  }
  if (info.layout == "chunked" && !info.shape.empty()) {
    std::vector<hsize_t> chunk(info.shape.size());
    H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    for (hsize_t c : chunk) info.chunks.push_back(static_cast<std::int64_t>(c));
  }
  info.stored_bytes = H5Dget_storage_size(dset);
  H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
  H5Dget_space_status(dset, &status);
  info.allocated = status == H5D_SPACE_STATUS_ALLOCATED;
  const haddr_t offset = H5Dget_offset(dset);  // in the dataset's own file, user block included
  if (offset != HADDR_UNDEF && info.elsewhere.empty()) info.offset = static_cast<std::uint64_t>(offset);
  const bool empty = element_count(info.shape).value_or(0) == 0 && !null_space;

  if (!info.dtype) info.why_not_mappable = "its type (" + t.text + ") is not a number type ooc handles";
  else if (null_space) info.why_not_mappable = "it has a null dataspace (no elements, not even a shape)";
  else if (!missing_filter.empty()) info.why_not_mappable = missing_filter;
  else if (!info.elsewhere.empty())
    info.why_not_mappable = "it lies in another file, " + info.elsewhere + " (an external link)";
  else if (info.layout != "contiguous") info.why_not_mappable = "its layout is " + info.layout;
  else if (nfilters > 0) info.why_not_mappable = "it has filters";
  else if (H5Pget_external_count(dcpl.get()) > 0) info.why_not_mappable = "its data lives in external files";
  else if (!empty && !info.offset) info.why_not_mappable = "its storage is not allocated (never written)";
  info.readable = info.dtype.has_value() && !null_space && missing_filter.empty();
  info.mappable = info.why_not_mappable.empty();
  return info;
}

Id open_dataset(hid_t file, const std::string& file_name, const std::string& dataset) {
  if (!link_exists(file, dataset)) throw Error(where(file_name, dataset), "no such dataset", ErrorKind::not_found);
  Id object(H5Oopen(file, dataset.c_str(), H5P_DEFAULT), H5Oclose);
  if (!object.valid()) throw Error(where(file_name, dataset), "cannot open this object");
  if (H5Iget_type(object.get()) == H5I_GROUP)
    throw Error(where(file_name, dataset), "is a group, not a dataset");
  if (H5Iget_type(object.get()) != H5I_DATASET) throw Error(where(file_name, dataset), "is not a dataset");
  return Id(H5Dopen2(file, dataset.c_str(), H5P_DEFAULT), H5Dclose);
}

Id intermediate_groups() {
  Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  return lcpl;
}

herr_t collect(hid_t object, const char* name, const H5O_info_t* info, void* data) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  auto* found = static_cast<std::vector<DatasetInfo>*>(data);
  Id dset(H5Dopen2(object, name, H5P_DEFAULT), H5Dclose);
  if (dset.valid()) found->push_back(describe_open(object, dset.get(), std::string("/") + name));
  return 0;
}

// H5Ovisit walks hard links only: a dataset reached through an external link is found here.
herr_t collect_external(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  if (info->type != H5L_TYPE_EXTERNAL) return 0;
  Id object(H5Oopen(group, name, H5P_DEFAULT), H5Oclose);  // fails for a dangling link
  if (!object.valid() || H5Iget_type(object.get()) != H5I_DATASET) return 0;
  auto* found = static_cast<std::vector<DatasetInfo>*>(data);
  Id dset(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  if (dset.valid()) found->push_back(describe_open(group, dset.get(), std::string("/") + name));
  return 0;
}

bool has_hdf5_extension(std::string_view file) {
  for (std::string_view ext : {".h5", ".hdf5", ".hdf", ".he5"})
    if (file.size() > ext.size() && file.substr(file.size() - ext.size()) == ext) return true;
  return false;
}

// A box of a dataspace: per axis, first index and count.
struct Box {
  std::vector<hsize_t> offset, count;
};

// The elements [begin, end) (flat, C order) of a dataspace of `dims`, as boxes in that
// order: a partial first slab, whole slabs, a partial last slab, recursively (at most
// 2 * ndim - 1 boxes).
void boxes_of_run(const std::vector<hsize_t>& dims, std::size_t axis, std::vector<hsize_t>& prefix,
                  std::int64_t begin, std::int64_t end, std::vector<Box>& out) {
  if (begin >= end) return;
  std::int64_t inner = 1;
  for (std::size_t k = axis + 1; k < dims.size(); ++k) inner *= static_cast<std::int64_t>(dims[k]);
  auto whole = [&](std::int64_t lo, std::int64_t hi) {  // slabs [lo, hi) of `axis`, complete
    Box box{prefix, std::vector<hsize_t>(dims.size(), 1)};
    box.offset.resize(dims.size(), 0);
    box.offset[axis] = static_cast<hsize_t>(lo);
    box.count[axis] = static_cast<hsize_t>(hi - lo);
    for (std::size_t k = axis + 1; k < dims.size(); ++k) box.count[k] = dims[k];
    out.push_back(std::move(box));
  };
  auto partial = [&](std::int64_t slab, std::int64_t from, std::int64_t to) {
    prefix.push_back(static_cast<hsize_t>(slab));
    boxes_of_run(dims, axis + 1, prefix, from, to, out);
    prefix.pop_back();
  };
  if (inner == 1) return whole(begin, end);
  const std::int64_t lo = begin / inner, hi = end / inner;
  if (lo == hi) return partial(lo, begin - lo * inner, end - lo * inner);
  std::int64_t whole_from = lo;
  if (begin % inner != 0) {
    partial(lo, begin % inner, inner);
    whole_from = lo + 1;
  }
  if (hi > whole_from) whole(whole_from, hi);
  if (end % inner != 0) partial(hi, 0, end % inner);
}

// The probe in a child process (set_probe_in_child): whether the library survives
// opening `file` and describing `dataset` (every chunk's place included), or, for an
// empty `dataset`, walking the whole catalogue as list() does. The caller holds the
// library lock, so the child's copy of the library is in a consistent state: no other
// thread is inside it. Each version of a file (device, inode, size, modification time)
// is probed once per dataset; the verdict is kept.
std::atomic<bool> g_probe_in_child{false};

void probe_in_child(const std::string& file, const std::string& dataset) {
  if (!g_probe_in_child.load(std::memory_order_relaxed)) return;
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;  // the open itself says what is wrong
  using Key = std::tuple<dev_t, ino_t, off_t, std::int64_t, std::int64_t, std::string>;
  static std::map<Key, bool> crashed;  // guarded by the library lock
  const Key key{st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, dataset};
  auto damaged = [&] {
    return Error(file, "damaged HDF5 file (the HDF5 library crashed reading it)", ErrorKind::corrupt);
  };
  if (const auto found = crashed.find(key); found != crashed.end()) {
    if (found->second) throw damaged();
    return;
  }
  const pid_t child = ::fork();
  if (child < 0) return;  // no probe: opened in this process, as without one
  if (child == 0) {
    // The library's crash is the answer: no handler of the parent's (Python's
    // faulthandler), no core file, no message (glibc's on a corrupted heap).
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
    const struct rlimit no_core {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) {
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
    }
    // The file and dataset are left open: the child writes nothing, not even by closing
    // an object it shares with the parent's open of the same file.
    try {
      const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      if (f >= 0 && dataset.empty()) {
        std::vector<DatasetInfo> found;
        H5Ovisit(f, H5_INDEX_NAME, H5_ITER_INC, collect, &found);
        H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, collect_external, &found);
      } else if (f >= 0 && link_exists(f, dataset)) {
        const hid_t dset = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
        if (dset >= 0) {
          describe_open(f, dset, dataset);
#if H5_VERSION_GE(1, 10, 5)
          hsize_t chunks = 0;  // walks the chunk index, where reading looks chunks up
          H5Dget_num_chunks(dset, H5S_ALL, &chunks);
#endif
        }
      }
    } catch (...) {  // errors are the parent's to meet and report
    }
    ::_exit(0);
  }
  // Waited for with a timeout: a child stuck (a lock some other thread held at the fork,
  // a file on a hung mount) is killed, and the file opened here, as without a probe.
  // The child's end is awaited on a pidfd (poll wakes the moment it exits); without one
  // (Linux < 5.3), by polling waitpid.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
#ifdef SYS_pidfd_open
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
#else
  const int pidfd = -1;
#endif
  auto pause = std::chrono::microseconds(100);
  int status = 0;
  bool verdict = true;
  while (true) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) {  // reaped by someone else: no verdict
      verdict = false;
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(child, SIGKILL);
      while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      verdict = false;
      break;
    }
    if (pidfd >= 0) {
      struct pollfd exited {pidfd, POLLIN, 0};
      ::poll(&exited, 1, static_cast<int>(std::min<std::int64_t>(left.count() + 1, 1000)));
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(2 * pause, std::chrono::milliseconds(10));
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  if (!verdict) return;
  if (crashed.size() >= 4096) crashed.clear();
  const bool crash = WIFSIGNALED(status);
  crashed.emplace(key, crash);
  if (crash) throw damaged();
}

class DatasetReader final : public detail::TileReader, public Holder {
 public:
  DatasetReader(const std::string& file, const std::string& dataset)
      : label_(where(file, dataset)), file_name_(file), dataset_name_(dataset), identity_(identity(file)) {
    Session session(file_name_);
    probe_in_child(file, dataset);
    {
      Id f = open_file(file, false);
      Id probe = open_dataset(f.get(), file, dataset);
      Id dcpl(H5Dget_create_plist(probe.get()), H5Pclose);
      Id type(H5Dget_type(probe.get()), H5Tclose);
      item_ = H5Tget_size(type.get());
      Id space(H5Dget_space(probe.get()), H5Sclose);
      const int ndims = H5Sget_simple_extent_ndims(space.get());
      dims_.resize(static_cast<std::size_t>(std::max(0, ndims)));
      H5Sget_simple_extent_dims(space.get(), dims_.data(), nullptr);
      // A filtered (compressed) dataset gets a chunk cache that holds a whole row of chunks
      // (the chunks a tile boundary may cut), so consecutive reads never decompress a
      // chunk twice; bounded at 1 GiB. An unfiltered one keeps HDF5's small default, under
      // which a chunk a read covers whole goes straight into ooc's buffer: through a
      // 64 MiB cache, a warm 1 GiB dataset of 4 MiB chunks took 0.48 s against 0.19-0.29 s.
      // An unfiltered one is staged too. Where it can, a staged dataset reads its chunks
      // from a mapping of the file on the kernel threads (plan_mapped): decoded, or for
      // unfiltered chunks copied or used in place.
      if (H5Pget_layout(dcpl.get()) == H5D_CHUNKED && !dims_.empty()) {
        std::vector<hsize_t> chunk(dims_.size());
        H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
        std::size_t row_bytes = item_ * chunk[0];
        for (std::size_t k = 1; k < dims_.size(); ++k)
          row_bytes *= static_cast<std::size_t>((dims_[k] + chunk[k] - 1) / chunk[k] * chunk[k]);
        if (H5Pget_nfilters(dcpl.get()) > 0)
          cache_bytes_ = std::clamp<std::size_t>(2 * row_bytes, std::size_t{64} << 20, std::size_t{1} << 30);
        plan_staged(dcpl.get(), type.get(), chunk, row_bytes);
        if (staged_) plan_mapped(f.get(), probe.get());
      }
    }
    hold();
    holders().push_back(this);
  }

  ~DatasetReader() override {
    Session session(file_name_);  // identifiers are closed under the lock too
    std::erase(holders(), static_cast<Holder*>(this));
    let_go();
  }

  void let_go() override {
    dataset_.reset();
    type_.reset();
    file_.reset();
  }

  bool concurrent() const override { return false; }  // HDF5 runs one call at a time

  // A compressed dataset's tiles are a row of chunks, at least 2 MiB: the kernel then
  // reads what decoding just wrote from the cache. Warm sums of 256 MiB of int16 in
  // chunks of 2 MiB, CPU seconds (medians of 3, a loaded 2-core VM), tiles of 16 MiB
  // against 2 MiB: blosc zstd 0.353 against 0.316, lz4 0.234 against 0.180, gzip 0.410
  // against 0.380.
  std::uint64_t tile_bytes_cap() const override {
    return staged_ && !pipeline_.empty() ? std::max<std::uint64_t>(std::uint64_t{2} << 20, row_bytes_) : 0;
  }
  bool staged() const override { return staged_; }
  bool shrank() const override { return mapping_.shrank(); }

  const std::byte* read(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) override {
    if (staged_) {
      std::unique_ptr<detail::Fetched> raw = fetch(begin, end, nullptr, buffer);
      return decode(begin, end, *raw, buffer);
    }
    Session session(file_name_);
    return read_locked(begin, end, buffer);
  }

  // Serial: the raw chunks that elements [begin, end) lie in, as stored (H5Dread_chunk),
  // or the tile itself through H5Dread when a chunk skipped a filter (its filter mask).
  std::unique_ptr<detail::Fetched> fetch(std::int64_t begin, std::int64_t end, std::unique_ptr<detail::Fetched> reuse,
                                         detail::AlignedBuffer& buffer) override {
    std::unique_ptr<detail::Fetched> owner = reuse ? std::move(reuse) : std::make_unique<RawChunks>();
    auto& raw = static_cast<RawChunks&>(*owner);
    raw.chunks.clear();
    raw.ready = nullptr;
    if (end <= begin) return owner;
    if (map_ != nullptr) {  // mapped: only where each chunk lies
      chunks_of_run(begin, end, raw.indices);
      look_up(raw.indices);
      for (std::uint64_t index : raw.indices) {
        const Where& w = where_[index];
        if (w.address == kFill) {
          raw.chunks.push_back({index, 0, 0, true, 0, nullptr});
          continue;
        }
        if (w.mask != 0 && library_decodes_) {  // stored without some filter: through H5Dread, as before
          raw.chunks.clear();
          Session session(file_name_);
          raw.ready = read_locked(begin, end, buffer);
          return owner;
        }
        raw.chunks.push_back({index, static_cast<std::size_t>(w.address), w.size, false, w.mask, nullptr});
      }
      if (!pipeline_.empty()) share_cut_chunks(begin, end, raw);
      return owner;
    }
    Session session(file_name_);
    hold();
    chunks_of_run(begin, end, raw.indices);
    std::size_t total = 0;
    std::vector<hsize_t> origin(dims_.size());
    for (std::uint64_t index : raw.indices) {
      const auto [mask, address, size] = stored_chunk(index, origin);
      if (address == HADDR_UNDEF) {  // never written: the fill value
        raw.chunks.push_back({index, 0, 0, true, 0, nullptr});
        continue;
      }
      if (mask != 0 && library_decodes_) {  // stored without some filter: through H5Dread, as before
        raw.chunks.clear();
        raw.ready = read_locked(begin, end, buffer);
        return owner;
      }
      raw.chunks.push_back({index, total, static_cast<std::size_t>(size), false, mask, nullptr});
      total += static_cast<std::size_t>(size);
    }
    raw.bytes.ensure(std::max<std::size_t>(1, total));
    for (const RawChunk& c : raw.chunks) {
      if (c.fill) continue;
      origin_of(c.index, origin);
      std::uint32_t mask = 0;
      if (H5Dread_chunk(dataset_->get(), H5P_DEFAULT, origin.data(), &mask, raw.bytes.data() + c.offset) < 0)
        throw Error(label_, "cannot read chunk " + chunk_text(c.index) + " (truncated or damaged file)",
                    ErrorKind::corrupt);
    }
    share_cut_chunks(begin, end, raw);
    return owner;
  }

  // Concurrent: each chunk decoded (on this thread) and its elements in [begin, end)
  // copied to the tile; a chunk the tile holds whole, in order, is decoded in place.
  const std::byte* decode(std::int64_t begin, std::int64_t end, detail::Fetched& fetched,
                          detail::AlignedBuffer& buffer) override {
    auto& raw = static_cast<RawChunks&>(fetched);
    if (raw.ready) return raw.ready;
    const bool plain = map_ != nullptr && pipeline_.empty();  // chunks are the elements, in the mapping
    if (plain) {
      if (const std::byte* in_file = mapped_run(begin, raw)) {
        // Its page table filled in one call, not a fault every 16 pages.
        os::advise(in_file, static_cast<std::size_t>(end - begin) * item_, os::Advice::populate_read);
        return in_file;
      }
    }
    buffer.ensure(static_cast<std::size_t>(std::max<std::int64_t>(1, end - begin)) * item_);
    std::byte* dst = buffer.data();
    thread_local filters::Scratch scratch;
    std::vector<hsize_t> origin(dims_.size()), extent(dims_.size());
    for (const RawChunk& c : raw.chunks) {
      origin_of(c.index, origin);
      for (std::size_t k = 0; k < dims_.size(); ++k) extent[k] = std::min(chunk_[k], dims_[k] - origin[k]);
      // Whole and in order in the tile: every axis after the first is whole in a chunk.
      const std::int64_t first = static_cast<std::int64_t>(origin[0] * strides_[0]);
      const std::int64_t last = first + static_cast<std::int64_t>(chunk_elements_);
      const bool in_place = merge_axis_ == 0 && extent[0] == chunk_[0] && first >= begin && last <= end;
      if (c.fill) {
        for_each_segment(origin, extent, begin, end, [&](std::int64_t to, std::int64_t, std::int64_t n) {
          fill(dst + static_cast<std::size_t>(to) * item_, static_cast<std::size_t>(n));
        });
        continue;
      }
      const std::byte* decoded;
      // The stored chunk: in the mapped file (c.offset is its address) or in the fetched bytes.
      const std::span<const std::byte> stored(map_ != nullptr ? map_ + c.offset : raw.bytes.data() + c.offset, c.size);
      if (plain) {
        decoded = stored.data();
      } else if (c.shared) try {  // cut by a tile boundary: decoded once, by whichever tile comes first
        std::lock_guard<std::mutex> once(c.shared->lock);
        if (!c.shared->done) {
          c.shared->bytes.resize(chunk_elements_ * item_);
          filters::decode(stored, pipeline_, item_, chunk_elements_ * item_, scratch, c.shared->bytes.data(), c.mask);
          c.shared->done = true;
        }
        decoded = c.shared->bytes.data();
      } catch (const filters::FilterError& e) {
        throw_chunk_error(c.index, e);
      } else try {
        decoded = filters::decode(stored, pipeline_, item_, chunk_elements_ * item_, scratch,
                                  in_place ? dst + static_cast<std::size_t>(first - begin) * item_ : nullptr, c.mask);
      } catch (const filters::FilterError& e) {
        throw_chunk_error(c.index, e);
      }
      if (in_place && !plain) continue;
      for_each_segment(origin, extent, begin, end, [&](std::int64_t to, std::int64_t from, std::int64_t n) {
        std::memcpy(dst + static_cast<std::size_t>(to) * item_, decoded + static_cast<std::size_t>(from) * item_,
                    static_cast<std::size_t>(n) * item_);
      });
    }
    return dst;
  }

  // Ahead of fetch(begin, end), in the serial stage: the chunks of a mapped dataset are
  // looked up and their pages asked for.
  void will_need(std::int64_t begin, std::int64_t end) override {
    if (map_ == nullptr || end <= begin) return;
    std::vector<std::uint64_t> indices;
    chunks_of_run(begin, end, indices);
    look_up(indices);
    for (std::uint64_t index : indices)
      if (where_[index].address != kFill) os::advise(map_ + where_[index].address, where_[index].size, os::Advice::will_need);
  }

  // In the commit stage: the pages of the mapped chunks no later tile reads are let go.
  void release(std::int64_t begin, std::int64_t end) override {
    if (map_ == nullptr || end <= begin) return;
    std::vector<std::uint64_t> indices;
    chunks_of_run(begin, end, indices);
    std::vector<hsize_t> origin(dims_.size());
    for (std::uint64_t index : indices) {
      const Where& w = where_[index];
      if (w.address == kFill || w.address == kUnknown) continue;
      origin_of(index, origin);
      std::int64_t last = 0;  // the chunk's last element, flat
      for (std::size_t k = 0; k < dims_.size(); ++k)
        last += static_cast<std::int64_t>((std::min(origin[k] + chunk_[k], dims_[k]) - 1) * strides_[k]);
      if (last < end) os::advise(map_ + w.address, w.size, os::Advice::dont_need);
    }
  }

 private:
  static constexpr std::uint64_t kUnknown = ~std::uint64_t{0}, kFill = ~std::uint64_t{0} - 1;
  // Where a chunk lies in the mapped file: its address (kUnknown until looked up; kFill:
  // never written), stored size and filter mask.
  struct Where {
    std::uint64_t address = kUnknown;
    std::uint32_t size = 0, mask = 0;
  };

  // A mapped dataset's tile that lies in the file as it is (whole-row chunks, stored one
  // after another in order): where its first element is in the mapping; else null.
  const std::byte* mapped_run(std::int64_t begin, const detail::Fetched& fetched) const {
    const auto& raw = static_cast<const RawChunks&>(fetched);
    if (merge_axis_ != 0 || raw.chunks.empty()) return nullptr;
    const std::size_t bytes = chunk_elements_ * item_;
    for (std::size_t i = 0; i < raw.chunks.size(); ++i) {
      const RawChunk& c = raw.chunks[i];
      if (c.fill) return nullptr;
      if (i > 0 && (c.index != raw.chunks[i - 1].index + 1 || c.offset != raw.chunks[i - 1].offset + bytes)) return nullptr;
    }
    const std::int64_t first = static_cast<std::int64_t>(raw.chunks[0].index * chunk_elements_);
    return map_ + raw.chunks[0].offset + static_cast<std::size_t>(begin - first) * item_;
  }

  // Serial, in tile order: a chunk the tile holds only part of shares its decoding with
  // the other tiles that hold parts of it (the one before, kept in cut_, and the ones
  // after). What cut_ keeps is bounded (kSharedBytes of decoded chunks); past that a cut
  // chunk is decoded by each tile that needs it, into the thread's scratch, as before.
  // Live shared chunks: those of cut_ and of the tiles in flight, about two rows of
  // chunks within that bound.
  void share_cut_chunks(std::int64_t begin, std::int64_t end, detail::Fetched& fetched) {
    auto& raw = static_cast<RawChunks&>(fetched);
    static constexpr std::size_t kSharedBytes = std::size_t{64} << 20;
    const std::size_t keep = std::max<std::size_t>(1, kSharedBytes / std::max<std::size_t>(1, chunk_elements_ * item_));
    std::vector<hsize_t> origin(dims_.size());
    std::unordered_map<std::uint64_t, std::shared_ptr<Decoded>> next;
    for (RawChunk& c : raw.chunks) {
      if (c.fill) continue;
      origin_of(c.index, origin);
      std::int64_t first = 0, last = 0;  // the chunk's first and last elements, flat
      for (std::size_t k = 0; k < dims_.size(); ++k) {
        first += static_cast<std::int64_t>(origin[k] * strides_[k]);
        last += static_cast<std::int64_t>((std::min(origin[k] + chunk_[k], dims_[k]) - 1) * strides_[k]);
      }
      if (first >= begin && last < end) continue;  // whole in this tile
      // Shared with the tile before, or kept for the tiles after (within the bound); else
      // decoded in the thread's scratch, as a chunk the tile holds whole.
      const auto found = cut_.find(c.index);
      const bool kept = last >= end && next.size() < keep;  // a later tile holds the rest
      if (found != cut_.end()) c.shared = found->second;
      else if (kept) c.shared = std::make_shared<Decoded>();
      if (kept) next.emplace(c.index, c.shared);
    }
    cut_ = std::move(next);
  }

  // Fills where_ for the chunks of `indices` not yet looked up (serial stages only).
  void look_up(const std::vector<std::uint64_t>& indices) {
    bool all = true;
    for (std::uint64_t index : indices) all = all && where_[index].address != kUnknown;
    if (all) return;
    Session session(file_name_);
    hold();
    std::vector<hsize_t> origin(dims_.size());
    const std::size_t bytes = chunk_elements_ * item_;
    for (std::uint64_t index : indices) {
      if (where_[index].address != kUnknown) continue;
      const auto [mask, address, size] = stored_chunk(index, origin);
      if (address == HADDR_UNDEF) {
        where_[index].address = kFill;
        continue;
      }
      if (pipeline_.empty() ? size != bytes : size > std::numeric_limits<std::uint32_t>::max())
        throw Error(label_, "chunk " + chunk_text(index) + " is stored in " + std::to_string(size) +
                                " bytes, not the " + std::to_string(bytes) + " of an unfiltered chunk (damaged file)",
                    ErrorKind::corrupt);
      if (address > map_size_ || map_size_ - address < size) {
        if (cut_short()) throw_shrank();
        throw Error(label_, "chunk " + chunk_text(index) + " lies past the end of the file (truncated file)",
                    ErrorKind::corrupt);
      }
      where_[index] = {static_cast<std::uint64_t>(address), static_cast<std::uint32_t>(size), mask};
    }
  }

  // A staged dataset in the file named (not behind an external link), with no user block
  // (chunk addresses are then file offsets), of at most 1M chunks: mapped, so the kernel
  // threads decode its chunks from the file (or copy unfiltered ones, or use them in
  // place) with no HDF5 call, and the serial stage only looks chunks up.
  void plan_mapped(hid_t file, hid_t dset) {
    if (!elsewhere(file, dset).empty()) return;
    Id fcpl(H5Fget_create_plist(file), H5Pclose);
    hsize_t user_block = 1;
    if (!fcpl.valid() || H5Pget_userblock(fcpl.get(), &user_block) < 0 || user_block != 0) return;
    std::uint64_t count = 1;
    for (hsize_t g : grid_) {
      if (g == 0 || count > (std::uint64_t{1} << 20) / g) return;
      count *= g;
    }
    const int fd = ::open(file_name_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    // Watched as a mapped .npy is (os::Mapping): should another process truncate the file
    // while it is read, the decoder reads zeros instead of dying by SIGBUS, and shrank()
    // fails the run before anything is committed.
    try {
      if (::fstat(fd, &st) == 0 && st.st_size > 0 && std::pair<dev_t, ino_t>{st.st_dev, st.st_ino} == identity_)
        mapping_ = os::Mapping::map(fd, 0, static_cast<std::size_t>(st.st_size), false, file_name_);
    } catch (const Error&) {  // not mapped: read through the library instead
    }
    ::close(fd);
    if (mapping_.data() == nullptr) return;
    map_ = mapping_.data();
    map_size_ = mapping_.size();
    where_.assign(static_cast<std::size_t>(count), Where{});
  }

  // A chunk that tile boundaries cut, decoded once for the tiles that share it: the first
  // to take the lock decodes it (an error leaves it undone: the next tile meets it too).
  struct Decoded {
    std::mutex lock;
    bool done = false;
    std::vector<std::byte> bytes;
  };
  struct RawChunk {
    std::uint64_t index;  // in the grid of chunks, C order
    std::size_t offset, size;  // in the fetched bytes; in the file, for a mapped dataset
    bool fill;
    std::uint32_t mask;  // filters the chunk was stored without
    std::shared_ptr<Decoded> shared;  // set for a chunk the tile holds only part of
  };
  struct RawChunks final : detail::Fetched {
    std::vector<std::uint64_t> indices;
    std::vector<RawChunk> chunks;
    detail::AlignedBuffer bytes;
    const std::byte* ready = nullptr;  // the tile, when fetch() read it through H5Dread
  };

  // Whether this dataset is read staged, and what that needs: every filter one ooc
  // decodes, fill values it can reproduce, and rows of chunks of reasonable size (a tile
  // decodes every chunk it touches; tiles are rows of elements).
  void plan_staged(hid_t dcpl, hid_t type, const std::vector<hsize_t>& chunk, std::size_t row_bytes) {
    if (row_bytes > (std::size_t{256} << 20)) return;
    unsigned options = 0;
    if (H5Pget_chunk_opts(dcpl, &options) < 0 || (options & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS)) return;
    H5D_fill_value_t defined = H5D_FILL_VALUE_ERROR;
    H5D_fill_time_t when = H5D_FILL_TIME_ERROR;
    if (H5Pfill_value_defined(dcpl, &defined) < 0 || defined == H5D_FILL_VALUE_UNDEFINED ||
        defined == H5D_FILL_VALUE_ERROR)
      return;
    if (H5Pget_fill_time(dcpl, &when) < 0 || when == H5D_FILL_TIME_NEVER) return;
    std::vector<filters::Filter> pipeline;
    const int n = H5Pget_nfilters(dcpl);
    for (int i = 0; i < n; ++i) {
      unsigned flags = 0, config = 0;
      std::size_t count = 32;
      std::vector<unsigned> values(count);
      const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &count, values.data(), 0, nullptr,
                                             &config);
      if (id < 0 || !filters::decodable(static_cast<unsigned>(id))) return;
      if (H5Zfilter_avail(id) <= 0) library_decodes_ = false;
      values.resize(std::min<std::size_t>(count, 32));
      pipeline.push_back({static_cast<unsigned>(id), std::move(values)});
    }
    fill_.assign(item_, std::byte{0});
    if (H5Pget_fill_value(dcpl, type, fill_.data()) < 0) return;
    fill_zero_ = std::all_of(fill_.begin(), fill_.end(), [](std::byte b) { return b == std::byte{0}; });
    chunk_ = chunk;
    row_bytes_ = row_bytes;
    pipeline_ = std::move(pipeline);
    grid_.resize(dims_.size());
    strides_.assign(dims_.size(), 1);
    chunk_strides_.assign(dims_.size(), 1);
    chunk_elements_ = 1;
    for (std::size_t k = dims_.size(); k-- > 0;) {
      grid_[k] = (dims_[k] + chunk_[k] - 1) / chunk_[k];
      if (k + 1 < dims_.size()) {
        strides_[k] = strides_[k + 1] * dims_[k + 1];
        chunk_strides_[k] = chunk_strides_[k + 1] * chunk_[k + 1];
      }
      chunk_elements_ *= chunk_[k];
    }
    merge_axis_ = dims_.size() - 1;
    while (merge_axis_ > 0 && chunk_[merge_axis_] == dims_[merge_axis_]) --merge_axis_;
    staged_ = true;
  }

  // A chunk that did not decode: the file shrank under its mapping (the decoder met the
  // zeros that stand past the new end), or the chunk is damaged.
  [[noreturn]] void throw_chunk_error(std::uint64_t index, const filters::FilterError& e) const {
    if (cut_short()) throw_shrank();  // the flag, or the file's size: another thread's fault may be setting it
    throw Error(label_, "chunk " + chunk_text(index) + ": " + e.what(), ErrorKind::corrupt);
  }
  // The words a mapped .npy that shrank fails with (MappedArray::check_intact).
  [[noreturn]] void throw_shrank() const {
    throw Error(label_, "file shrank while being read (truncated by another process)");
  }
  // True if the mapped file is shorter than when it was mapped, or a read found it so.
  bool cut_short() const {
    if (mapping_.shrank()) return true;
    struct stat st {};
    return mapping_.size() > 0 && ::stat(file_name_.c_str(), &st) == 0 &&
           static_cast<std::uint64_t>(st.st_size) < mapping_.size();
  }

  // The element coordinates a chunk starts at, from its index in the grid.
  struct StoredChunk {
    unsigned mask = 0;              // filters skipped for this chunk
    haddr_t address = HADDR_UNDEF;  // HADDR_UNDEF: never written (the fill value)
    hsize_t size = 0;               // stored bytes
  };
  // Where chunk `index` lies in the file (the caller holds the HDF5 session); `origin` is
  // scratch for its coordinates.
  StoredChunk stored_chunk(std::uint64_t index, std::vector<hsize_t>& origin) const {
    origin_of(index, origin);
    StoredChunk chunk;
    if (H5Dget_chunk_info_by_coord(dataset_->get(), origin.data(), &chunk.mask, &chunk.address, &chunk.size) < 0) {
      if (cut_short()) throw_shrank();  // the library read zeros where its index was
      throw Error(label_, "cannot look up chunk " + chunk_text(index));
    }
    return chunk;
  }

  void origin_of(std::uint64_t index, std::vector<hsize_t>& origin) const {
    for (std::size_t k = dims_.size(); k-- > 0;) {
      origin[k] = (index % grid_[k]) * chunk_[k];
      index /= grid_[k];
    }
  }

  std::string chunk_text(std::uint64_t index) const {
    std::vector<hsize_t> origin(dims_.size());
    origin_of(index, origin);
    std::string text = "(";
    for (std::size_t k = 0; k < origin.size(); ++k) text += (k ? ", " : "") + std::to_string(origin[k] / chunk_[k]);
    text += origin.size() == 1 ? ",)" : ")";
    text += " at element (";
    for (std::size_t k = 0; k < origin.size(); ++k) text += (k ? ", " : "") + std::to_string(origin[k]);
    return text + (origin.size() == 1 ? ",)" : ")");
  }

  // The chunks elements [begin, end) lie in, by index in C order, each once.
  void chunks_of_run(std::int64_t begin, std::int64_t end, std::vector<std::uint64_t>& out) const {
    out.clear();
    std::vector<Box> boxes;
    std::vector<hsize_t> prefix;
    boxes_of_run(dims_, 0, prefix, begin, end, boxes);
    const std::size_t n = dims_.size();
    std::vector<hsize_t> lo(n), hi(n), at(n);
    for (const Box& box : boxes) {
      for (std::size_t k = 0; k < n; ++k) {
        lo[k] = box.offset[k] / chunk_[k];
        hi[k] = (box.offset[k] + box.count[k] - 1) / chunk_[k];
      }
      at = lo;
      while (true) {
        std::uint64_t index = 0;
        for (std::size_t k = 0; k < n; ++k) index = index * grid_[k] + at[k];
        out.push_back(index);
        std::size_t k = n;
        while (k-- > 0) {
          if (at[k] < hi[k]) {
            ++at[k];
            break;
          }
          at[k] = lo[k];
        }
        if (k == static_cast<std::size_t>(-1)) break;
      }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }

  // Calls fn(position in the tile, position in the decoded chunk, count) for each run of
  // elements of the chunk at `origin` (of `extent`, clipped to the dataset) that lies in
  // [begin, end); runs are as long as the axes after merge_axis_ allow.
  template <class Fn>
  void for_each_segment(const std::vector<hsize_t>& origin, const std::vector<hsize_t>& extent, std::int64_t begin,
                        std::int64_t end, Fn&& fn) const {
    const std::size_t m = merge_axis_;
    const std::int64_t length = static_cast<std::int64_t>(extent[m] * strides_[m]);
    std::vector<hsize_t> at(m, 0);  // position within the chunk along axes before m
    while (true) {
      std::int64_t position = static_cast<std::int64_t>(origin[m] * strides_[m]);
      std::int64_t local = 0;
      for (std::size_t k = 0; k < m; ++k) {
        position += static_cast<std::int64_t>((origin[k] + at[k]) * strides_[k]);
        local += static_cast<std::int64_t>(at[k] * chunk_strides_[k]);
      }
      const std::int64_t lo = std::max(position, begin), hi = std::min(position + length, end);
      if (lo < hi) fn(lo - begin, local + (lo - position), hi - lo);
      if (position >= end) return;  // later runs lie further on
      std::size_t k = m;
      while (k-- > 0) {
        if (at[k] + 1 < extent[k]) {
          ++at[k];
          break;
        }
        at[k] = 0;
      }
      if (k == static_cast<std::size_t>(-1)) return;
    }
  }

  void fill(std::byte* at, std::size_t count) const {
    if (fill_zero_) {
      std::memset(at, 0, count * item_);
      return;
    }
    for (std::size_t i = 0; i < count; ++i) std::memcpy(at + i * item_, fill_.data(), item_);
  }

  // Elements [begin, end) through H5Dread; the caller holds the library lock.
  const std::byte* read_locked(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) {
    buffer.ensure(static_cast<std::size_t>(std::max<std::int64_t>(1, end - begin)) * item_);
    std::byte* dst = buffer.data();
    if (end <= begin) return dst;
    hold();
    std::vector<Box> boxes;
    if (dims_.empty()) {
      boxes.push_back({});
    } else {
      std::vector<hsize_t> prefix;
      boxes_of_run(dims_, 0, prefix, begin, end, boxes);
    }
    // One read per box, the memory space shaped as the box: HDF5 maps chunks to memory
    // quickly only when both selections have the same shape (else it goes element by
    // element). The file's own type as memory type: raw bytes, converted later by ooc.
    std::byte* at = dst;
    for (const Box& box : boxes) {
      Id file_space(H5Dget_space(dataset_->get()), H5Sclose);
      Id memory_space(box.count.empty() ? H5Screate(H5S_SCALAR)
                                        : H5Screate_simple(static_cast<int>(box.count.size()), box.count.data(), nullptr),
                      H5Sclose);
      if (!box.count.empty())
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, box.offset.data(), nullptr, box.count.data(), nullptr);
      if (H5Dread(dataset_->get(), type_->get(), memory_space.get(), file_space.get(), H5P_DEFAULT, at) < 0)
        throw Error(label_, "reading elements " + std::to_string(begin) + ".." + std::to_string(end) + " failed");
      hsize_t elements = 1;
      for (hsize_t c : box.count) elements *= c;
      at += elements * item_;
    }
    return dst;
  }

  // (device, inode) of a file by name, to tell that a name still means the file it did.
  static std::pair<dev_t, ino_t> identity(const std::string& file) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) return {0, 0};
    return {st.st_dev, st.st_ino};
  }

  // Opens the dataset, again after let_go(): the same file, or an error.
  void hold() {
    if (dataset_) return;
    if (identity(file_name_) != identity_) throw Error(file_name_, "was replaced while being read");
    file_ = std::make_unique<Id>(open_file(file_name_, false));
    Id dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
    if (cache_bytes_ > 0) H5Pset_chunk_cache(dapl.get(), 100003, cache_bytes_, 1.0);
    dataset_ = std::make_unique<Id>(H5Dopen2(file_->get(), dataset_name_.c_str(), dapl.get()), H5Dclose);
    if (!dataset_->valid()) throw Error(label_, "cannot open the dataset for reading");
    type_ = std::make_unique<Id>(H5Dget_type(dataset_->get()), H5Tclose);
  }

  std::string label_, file_name_, dataset_name_;
  std::pair<dev_t, ino_t> identity_;
  std::unique_ptr<Id> file_, type_, dataset_;
  std::vector<hsize_t> dims_;
  std::size_t item_ = 1;
  std::size_t cache_bytes_ = 0;  // 0: HDF5's default chunk cache
  // Staged reading (plan_staged).
  bool staged_ = false;
  std::vector<filters::Filter> pipeline_;
  std::vector<hsize_t> chunk_, grid_, strides_, chunk_strides_;
  std::size_t chunk_elements_ = 1;
  std::size_t row_bytes_ = 0;  // a row of chunks (along the first axis), decoded
  std::size_t merge_axis_ = 0;  // axes after it are whole in every chunk
  std::vector<std::byte> fill_;
  bool fill_zero_ = true;
  // The library has every filter too: a chunk stored without some of its filters (its
  // filter mask) is read through H5Dread; else ooc decodes it, skipping those filters.
  bool library_decodes_ = true;
  // A staged dataset read from a mapping of its file (plan_mapped): the mapping, and where
  // each chunk lies once looked up. Entries are written in the serial stages, read after,
  // by the tiles that fetched them.
  // Chunks the last tile fetched holds only part of, and their shared decoding.
  std::unordered_map<std::uint64_t, std::shared_ptr<Decoded>> cut_;
  os::Mapping mapping_;
  const std::byte* map_ = nullptr;  // mapping_.data(), or null when not mapped
  std::size_t map_size_ = 0;
  std::vector<Where> where_;
};

// Chunks of whole rows (every axis but the first whole), compressed on the kernel
// threads; written in order in the commit stage. A chunk that a tile boundary cuts is
// gathered in `pending_` and compressed there (serially: one chunk per tile at most).
class ChunkWriter final : public detail::TileWriter {
 public:
  // `shown`: what errors name (the output as the user named it, not its hidden dataset).
  ChunkWriter(const std::string& file, const std::string& dataset, DType dtype, const Shape& shape,
              const Compression& how, const std::string& shown)
      : label_(shown), item_(static_cast<std::size_t>(dtype.itemsize())) {
    if (shape.empty())
      throw UsageError(label_, "a scalar cannot be stored in chunks (drop chunks/compression)", "chunks/compression");
    total_ = element_count(shape).value_or(0);
    std::int64_t row = 1;
    for (std::size_t k = 1; k < shape.size(); ++k) row *= shape[k];
    if (total_ == 0 || row == 0)
      throw UsageError(label_, "an empty array cannot be stored in chunks (drop chunks/compression)",
                       "chunks/compression");
    std::int64_t rows = how.chunk_rows;
    if (rows <= 0) rows = std::max<std::int64_t>(1, (std::int64_t{1} << 20) / (row * static_cast<std::int64_t>(item_)));
    rows = std::min(rows, shape[0]);
    rows_ = rows;
    chunk_elements_ = rows * row;
    if (static_cast<std::uint64_t>(chunk_elements_) * item_ >= (std::uint64_t{1} << 32))
      throw UsageError(label_, "chunks of " + std::to_string(rows) + " rows would exceed HDF5's 4 GiB a chunk");
    Session session(file);
    const bool existing = is_hdf5_file(file);
    file_ = std::make_unique<Id>(existing ? open_file(file, true)
                                          : Id(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, file_access()), H5Fclose));
    if (!file_->valid()) throw Error(file, "cannot create the HDF5 file");
    Id type = make_type(dtype);
    std::vector<hsize_t> dims(shape.begin(), shape.end()), chunk(dims);
    chunk[0] = static_cast<hsize_t>(rows);
    Id space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
    Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    const bool blosc = how.codec == "blosc";
    if (how.shuffle && !blosc) {
      H5Pset_shuffle(dcpl.get());
      pipeline_.push_back({filters::kShuffle, {static_cast<unsigned>(item_)}});
    }
    auto plugin = [&](unsigned id, const char* what) {
      if (H5Zfilter_avail(static_cast<H5Z_filter_t>(id)) <= 0)
        throw Error(label_, std::string("this HDF5 library has no ") + what + " filter (" + std::to_string(id) +
                                "; Debian: hdf5-filter-plugin" + (id == filters::kBlosc ? "-blosc-serial" : "") +
                                "), so h5py could not read the dataset either");
    };
    if (how.codec == "gzip") {
      const unsigned level = static_cast<unsigned>(how.level < 0 ? 4 : how.level);
      H5Pset_deflate(dcpl.get(), level);
      pipeline_.push_back({filters::kDeflate, {level}});
    } else if (how.codec == "lz4") {
      plugin(filters::kLz4, "lz4");
      const unsigned values[1] = {0};
      H5Pset_filter(dcpl.get(), filters::kLz4, H5Z_FLAG_MANDATORY, 1, values);
      pipeline_.push_back({filters::kLz4, {0}});
    } else if (blosc) {
      plugin(filters::kBlosc, "blosc");
      const std::vector<unsigned> values{2, 2, static_cast<unsigned>(item_),
                                         static_cast<unsigned>(chunk_elements_ * static_cast<std::int64_t>(item_)),
                                         static_cast<unsigned>(how.level < 0 ? 5 : how.level), how.shuffle ? 1u : 0u,
                                         static_cast<unsigned>(filters::blosc_codec_number(how.blosc_codec.c_str()))};
      H5Pset_filter(dcpl.get(), filters::kBlosc, H5Z_FLAG_MANDATORY, values.size(), values.data());
      pipeline_.push_back({filters::kBlosc, values});
    }
    Id lcpl = intermediate_groups();
    dataset_ = std::make_unique<Id>(
        H5Dcreate2(file_->get(), dataset.c_str(), type.get(), space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT), H5Dclose);
    if (!dataset_->valid()) throw Error(label_, "cannot create the dataset");
  }

  ~ChunkWriter() override {
    Session session(label_);
    dataset_.reset();
    file_.reset();
  }

  std::unique_ptr<detail::Fetched> encode(std::int64_t begin, std::int64_t end, const std::byte* tile,
                                          std::unique_ptr<detail::Fetched> reuse) override {
    std::unique_ptr<detail::Fetched> owner = reuse ? std::move(reuse) : std::make_unique<Encoded>();
    auto& e = static_cast<Encoded&>(*owner);
    e.count = 0;
    thread_local filters::Scratch scratch;
    thread_local std::vector<std::byte> padded;
    for (std::int64_t k = (begin + chunk_elements_ - 1) / chunk_elements_;; ++k) {
      const std::int64_t lo = k * chunk_elements_, hi = std::min(lo + chunk_elements_, total_);
      if (lo >= total_ || hi > end) break;
      if (e.chunks.size() <= e.count) e.chunks.emplace_back();
      encode_chunk(tile + static_cast<std::size_t>(lo - begin) * item_, hi - lo, scratch, padded, e.chunks[e.count]);
      ++e.count;
    }
    return owner;
  }

  void write(std::int64_t begin, std::int64_t end, const std::byte* tile, detail::Fetched* encoded) override {
    auto* e = static_cast<Encoded*>(encoded);
    std::size_t next = 0;  // of e's chunks
    for (std::int64_t k = begin / chunk_elements_; k * chunk_elements_ < end; ++k) {
      const std::int64_t lo = k * chunk_elements_, hi = std::min(lo + chunk_elements_, total_);
      if (lo >= begin && hi <= end) {  // encoded on a kernel thread
        if (e == nullptr || next >= e->count) throw std::logic_error("chunk writer: a whole chunk was not encoded");
        put(k, e->chunks[next++]);
        continue;
      }
      const std::int64_t from = std::max(lo, begin), to = std::min(hi, end);
      if (pending_filled_ == 0) pending_index_ = k;
      if (pending_index_ != k || pending_filled_ != from - lo) throw std::logic_error("chunk writer: tiles out of order");
      pending_.resize(static_cast<std::size_t>(hi - lo) * item_);
      std::memcpy(pending_.data() + static_cast<std::size_t>(from - lo) * item_,
                  tile + static_cast<std::size_t>(from - begin) * item_, static_cast<std::size_t>(to - from) * item_);
      pending_filled_ = to - lo;
      if (to == hi) {  // complete: compressed here, in the serial stage
        thread_local filters::Scratch scratch;
        thread_local std::vector<std::byte> padded;
        std::vector<std::byte> bytes;
        encode_chunk(pending_.data(), hi - lo, scratch, padded, bytes);
        put(k, bytes);
        pending_filled_ = 0;
      }
    }
  }

  void finish() override {
    Session session(label_);
    if (!dataset_) return;
    if (pending_filled_ != 0) throw std::logic_error("chunk writer: a chunk was left unwritten");
    space_.reset();
    dataset_->close(label_, "cannot close the dataset (disk full?)");
    dataset_.reset();
    if (H5Fflush(file_->get(), H5F_SCOPE_GLOBAL) < 0) throw Error(label_, "cannot flush the HDF5 file");
    file_->close(label_, "cannot close the HDF5 file (disk full?)");
    file_.reset();
  }

 private:
  struct Encoded final : detail::Fetched {
    std::vector<std::vector<std::byte>> chunks;
    std::size_t count = 0;
  };

  // A chunk of `n` elements (the last one may be short: padded with zeros to a whole chunk,
  // which HDF5 stores and h5py reads only in part).
  void encode_chunk(const std::byte* data, std::int64_t n, filters::Scratch& scratch, std::vector<std::byte>& padded,
                    std::vector<std::byte>& out) const {
    const std::size_t bytes = static_cast<std::size_t>(chunk_elements_) * item_;
    std::span<const std::byte> elements(data, bytes);
    if (n < chunk_elements_) {
      padded.assign(bytes, std::byte{0});
      std::memcpy(padded.data(), data, static_cast<std::size_t>(n) * item_);
      elements = std::span<const std::byte>(padded.data(), bytes);
    }
    try {
      filters::encode(elements, pipeline_, item_, scratch, out);
    } catch (const filters::FilterError& err) {
      throw Error(label_, err.what());
    }
  }

  void put(std::int64_t k, const std::vector<std::byte>& bytes) {
    Session session(label_);
    std::vector<hsize_t> offset(static_cast<std::size_t>(std::max(1, H5Sget_simple_extent_ndims(space()))), 0);
    offset[0] = static_cast<hsize_t>(k * rows_);
    if (H5Dwrite_chunk(dataset_->get(), H5P_DEFAULT, 0, offset.data(), bytes.size(), bytes.data()) < 0)
      throw Error(label_, "writing chunk " + std::to_string(k) + " failed (disk full?)");
    start_writeback(bytes.size());
  }

  // The output is fsynced once, when it is committed; without a push the kernel writes
  // nothing back until then, and that fsync waits for every byte (a quarter of a run that
  // compresses on two cores). So every kWriteback bytes the file's dirty pages are sent
  // to the disk, without waiting (sync_file_range's WRITE), while compression goes on.
  static constexpr std::size_t kWriteback = std::size_t{8} << 20;
  void start_writeback(std::size_t bytes) {
    unsent_ += bytes;
    if (unsent_ < kWriteback) return;
    unsent_ = 0;
    void* handle = nullptr;
    if (H5Fget_vfd_handle(file_->get(), H5P_DEFAULT, &handle) < 0 || handle == nullptr) return;  // not sec2: skip
    ::sync_file_range(*static_cast<int*>(handle), 0, 0, SYNC_FILE_RANGE_WRITE);  // a hint: errors come at fsync
  }

  hid_t space() {
    if (!space_) space_ = std::make_unique<Id>(H5Dget_space(dataset_->get()), H5Sclose);
    return space_->get();
  }

  std::string label_;
  std::size_t item_;
  std::int64_t total_ = 0, rows_ = 1, chunk_elements_ = 1;
  std::vector<filters::Filter> pipeline_;
  std::unique_ptr<Id> file_, dataset_, space_;
  std::vector<std::byte> pending_;
  std::int64_t pending_index_ = 0, pending_filled_ = 0;
  std::size_t unsent_ = 0;  // bytes written since the last writeback push
};

}  // namespace

std::unique_ptr<detail::TileWriter> create_compressed(const std::string& file, const std::string& dataset, DType dtype,
                                                      const Shape& shape, const Compression& how,
                                                      const std::string& shown) {
  return std::make_unique<ChunkWriter>(file, dataset, dtype, shape, how, shown);
}

}  // namespace ooc::hdf5

namespace ooc {

void Compression::parse_codec(const std::string& text) {
  Compression& into = *this;
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t colon = text.find(':', at);
    parts.push_back(text.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  auto level = [&](const std::string& t) {
    if (t.size() != 1 || t[0] < '0' || t[0] > '9')
      throw UsageError("compression " + text + ": the level is a digit, 0 to 9");
    return t[0] - '0';
  };
  into.codec = parts[0];
  if (parts[0] == "gzip" && parts.size() <= 2) {
    if (parts.size() == 2) into.level = level(parts[1]);
  } else if (parts[0] == "lz4" && parts.size() == 1) {
  } else if (parts[0] == "blosc" && parts.size() <= 3) {
    if (parts.size() >= 2) into.blosc_codec = parts[1];
    if (hdf5::filters::blosc_codec_number(into.blosc_codec.c_str()) < 0)
      throw UsageError("compression " + text + ": blosc's codecs are blosclz, lz4, lz4hc, zlib, zstd");
    if (parts.size() == 3) into.level = level(parts[2]);
  } else {
    throw UsageError("compression " + text + ": give gzip[:LEVEL], lz4 or blosc[:CODEC[:LEVEL]]");
  }
}

}  // namespace ooc

namespace ooc::hdf5 {

std::unique_ptr<detail::TileReader> open_reader(const std::string& file, const std::string& dataset) {
  return std::make_unique<DatasetReader>(file, dataset);
}

std::optional<DatasetPath> split(std::string_view text) {
  for (std::size_t at = text.find(":/"); at != std::string_view::npos; at = text.find(":/", at + 1)) {
    const std::string file(text.substr(0, at));
    std::error_code ec;  // exists(), not an open: opening a FIFO would wait for a writer
    if (has_hdf5_extension(file) || std::filesystem::exists(file, ec))
      return DatasetPath{file, std::string(text.substr(at + 1))};
  }
  return std::nullopt;
}

bool is_hdf5_file(const std::string& path) {
  // Where the HDF5 library looks: offset 0, then 512, 1024, 2048, ... (a file may start
  // with a user block of such a size, as MATLAB v7.3 .mat files do).
  static constexpr char kSignature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  std::error_code ec;  // only a regular file is opened: a FIFO would wait for a writer
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return false;
  const std::streamoff size = in.tellg();
  for (std::streamoff at = 0; at + 8 <= size; at = at == 0 ? 512 : 2 * at) {
    char head[8] = {};
    if (!in.seekg(at) || !in.read(head, sizeof head)) return false;
    if (std::equal(head, head + 8, kSignature)) return true;
    if (at == 0 && std::string_view(head, 6) == "\x93NUMPY") return false;  // a .npy's data is not searched
  }
  return false;
}

void set_probe_in_child(bool on) { g_probe_in_child.store(on, std::memory_order_relaxed); }

DatasetInfo describe(const std::string& file, const std::string& dataset) {
  Session session(file);
  probe_in_child(file, dataset);
  Id f = open_file(file, false);
  Id dset = open_dataset(f.get(), file, dataset);
  return describe_open(f.get(), dset.get(), dataset);
}

std::vector<DatasetInfo> list(const std::string& file) {
  Session session(file);
  probe_in_child(file, "");
  Id f = open_file(file, false);
  std::vector<DatasetInfo> found;
  H5Ovisit(f.get(), H5_INDEX_NAME, H5_ITER_INC, collect, &found);
  H5Lvisit(f.get(), H5_INDEX_NAME, H5_ITER_INC, collect_external, &found);
  std::sort(found.begin(), found.end(), [](const DatasetInfo& a, const DatasetInfo& b) { return a.name < b.name; });
  return found;
}

std::string elsewhere(const std::string& file, const std::string& name) {
  Session session(file);
  probe_in_child(file, "");  // the whole walk: an output's (hidden) name is looked up anywhere
  Id f = open_file(file, false);
  // The deepest part of `name` that exists: the dataset itself, or the group it would go in.
  for (std::string part = name; !part.empty(); part = part.substr(0, std::max<std::size_t>(1, part.rfind('/')))) {
    if (part == "/" || link_exists(f.get(), part)) {
      Id object(H5Oopen(f.get(), part.c_str(), H5P_DEFAULT), H5Oclose);
      if (object.valid()) return elsewhere(f.get(), object.get());
      H5L_info_t link{};
      if (H5Lget_info(f.get(), part.c_str(), &link, H5P_DEFAULT) >= 0 && link.type == H5L_TYPE_EXTERNAL)
        return "another file (a dangling external link)";
    }
    if (part == "/") break;
  }
  return "";
}

std::string existing_kind(const std::string& file, const std::string& name) {
  Session session(file);
  probe_in_child(file, "");  // the whole walk: an output's (hidden) name is looked up anywhere
  Id f = open_file(file, false);
  auto kind = [&](const std::string& path) -> std::string {
    if (path != "/" && H5Lexists(f.get(), path.c_str(), H5P_DEFAULT) <= 0) return "";
    Id object(H5Oopen(f.get(), path.c_str(), H5P_DEFAULT), H5Oclose);
    if (!object.valid()) return "link to nothing";
    switch (H5Iget_type(object.get())) {
      case H5I_GROUP: return "group";
      case H5I_DATASET: return "dataset";
      case H5I_DATATYPE: return "named datatype";
      default: return "object";
    }
  };
  // Each parent must be a group: nothing can be made inside a dataset.
  for (std::size_t next = name.find('/', 1); next != std::string::npos; next = name.find('/', next + 1)) {
    const std::string parent = name.substr(0, next);
    const std::string k = kind(parent);
    if (k.empty()) return "";  // it and what is under it are made as needed
    if (k != "group")
      throw UsageError(where(file, name), parent + " is a " + k + ", not a group: nothing can be made inside it");
  }
  return kind(name);
}

std::uint64_t create_dataset(const std::string& file, const std::string& dataset, DType dtype, const Shape& shape) {
  Session session(file);
  const bool existing = is_hdf5_file(file);
  Id f = existing ? open_file(file, true)
                  : Id(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, file_access()), H5Fclose);
  if (!f.valid()) throw Error(file, "cannot create the HDF5 file");
  Id type = make_type(dtype);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Id space(shape.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
           H5Sclose);
  Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  // Contiguous so it can be mapped; space allocated now and never filled (we write it all).
  H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS);
  H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
  H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  Id lcpl = intermediate_groups();
  Id dset(H5Dcreate2(f.get(), dataset.c_str(), type.get(), space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT),
          H5Dclose);
  if (!dset.valid()) throw Error(where(file, dataset), "cannot create the dataset");
  const haddr_t offset = H5Dget_offset(dset.get());
  dset.close(where(file, dataset), "cannot close the new dataset (disk full?)");
  if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0) throw Error(file, "cannot flush the HDF5 file");
  f.close(file, "cannot close the HDF5 file (disk full?)");
  return offset == HADDR_UNDEF ? 0 : static_cast<std::uint64_t>(offset);
}

void move_dataset(const std::string& file, const std::string& from, const std::string& to, bool replace) {
  Session session(file);
  Id f = open_file(file, true);
  if (replace && link_exists(f.get(), to) && H5Ldelete(f.get(), to.c_str(), H5P_DEFAULT) < 0)
    throw Error(where(file, to), "cannot replace the existing dataset");
  Id lcpl = intermediate_groups();
  if (H5Lmove(f.get(), from.c_str(), f.get(), to.c_str(), lcpl.get(), H5P_DEFAULT) < 0)
    throw Error(where(file, to), "cannot give the finished dataset its name");
  if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0) throw Error(file, "cannot flush the HDF5 file");
  f.close(file, "cannot close the HDF5 file (disk full?)");
}


}  // namespace ooc::hdf5
