#pragma once
// Inside src/format/hdf5/: the HDF5 library's setup shared by the catalogue, the chunk
// reader and the chunk writer: the one lock every call holds (Session), identifiers closed
// with their H5?close (Id), the readers that let go of a file so it can be opened for
// writing (Holder), the file open that rolls back an interrupted write first, the types.

#include "format/layer.hpp"

#include "format/hdf5.hpp"
#include "ooc/error.hpp"
#include "os/crash_guard.hpp"

#include <hdf5.h>

#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ooc::hdf5 {

std::mutex& library_lock();


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
    // Its result is not checked: H5dont_atexit fails only when called a second time, and
    // this static calls it once.
    static const bool no_exit_handler = (H5dont_atexit(), true);
    (void)no_exit_handler;
    thread_local bool silenced = false;
    if (!silenced) {
      // Not checked either: it fails only for an invalid error stack, and H5E_DEFAULT is
      // always valid; refusing the call over it would fail a run for words on stderr.
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
  // A destructor cannot throw, so its close's result is ignored: it runs on error paths,
  // after reads, and for objects only in memory (types, dataspaces, property lists), whose
  // close writes nothing. A dataset or file written to is closed with close() first.
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


inline std::string where(const std::string& file, const std::string& dataset) { return file + ":" + dataset; }


/// Every HDF5 call's result is checked. The library says a call failed with a negative
/// result: an herr_t, an htri_t, H5I_INVALID_HID, a negative count or size, an enum's
/// error value (H5T_NO_CLASS, H5D_LAYOUT_ERROR, ...). Passes `result` on, or throws
/// Error(label, problem, kind).
template <class T>
T check(T result, const std::string& label, const char* problem, ErrorKind kind = ErrorKind::other) {
  if (result < 0) throw Error(label, problem, kind);
  return result;
}


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

std::vector<Holder*>& holders();

/// Opens `file` through ooc's file driver (hdf5/rollback.hpp), rolling back an interrupted
/// write into it first; throws ooc::Error naming the file.
Id open_file(const std::string& file, bool writable);
/// Opens `file` to write a new dataset into: the HDF5 file there, for writing, or a new
/// one made in its place.
Id open_or_create(const std::string& file);

/// The probe in a child process (set_probe_in_child); the caller holds the library lock.
void probe_in_child(const std::string& file, const std::string& dataset);

// The catalogue (catalogue.cpp). `file_name` and `label`: what errors name.
bool link_exists(hid_t file, const std::string& path, const std::string& file_name);
std::string elsewhere(hid_t file, hid_t object, const std::string& label);
DatasetInfo describe_open(hid_t file, hid_t dset, const std::string& file_name, const std::string& name);
Id open_dataset(hid_t file, const std::string& file_name, const std::string& dataset);
Id intermediate_groups(const std::string& label);
/// Every dataset of the open `file`, reached by hard links or through external links.
std::vector<DatasetInfo> walk(hid_t file, const std::string& file_name);

// Types (types.cpp).

struct TypeAnswer {
  std::optional<DType> dtype;
  std::string text;
};
TypeAnswer classify(hid_t type, const std::string& label);
Id make_type(DType dtype, const std::string& label);

}  // namespace ooc::hdf5
