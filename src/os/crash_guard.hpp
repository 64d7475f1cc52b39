#pragma once
// A crash inside a foreign library (the HDF5 C library) reading a damaged file, turned
// into oocrun's usual one line and exit 1.
//
// The HDF5 library trusts the addresses a file holds: a damaged file can make it read
// wild pointers and die by SIGSEGV (or abort). ooc promises one line naming the file and
// exit 1. oocrun installs fatal-signal handlers (contain_library_crashes) that, when the
// faulting thread is inside the library (an InLibrary marks it; the HDF5 session holds
// one for every call), write "PREFIX FILE: damaged HDF5 file (...)" with write(2) and
// _exit(1). A fault anywhere else goes on to the handler installed before (the shrink
// watch's SIGBUS handler, a sanitizer's) or to the default action, as if these were not
// there. The handlers run on an alternate stack (sigaltstack), so a stack overflow in
// the library is caught too.
//
// A process that must not exit (the Python module) uses a probe in a child process
// instead (hdf5::set_probe_in_child).

#include "os/layer.hpp"

#include <string_view>

namespace ooc::os {

/// Installs the handlers, once per process; `prefix` (e.g. "oocrun: ") starts the line.
/// Call it early, from the main thread.
void contain_library_crashes(const char* prefix);

/// True once contain_library_crashes ran.
bool library_crashes_contained();

/// While it lives, the calling thread is inside the library working on `file` (empty:
/// not known). One thread at a time: the caller holds the library's lock. Costs nothing
/// unless contain_library_crashes ran.
class InLibrary {
 public:
  explicit InLibrary(std::string_view file);
  ~InLibrary();
  InLibrary(const InLibrary&) = delete;
  InLibrary& operator=(const InLibrary&) = delete;

 private:
  bool marked_ = false;
};

}  // namespace ooc::os
