#include "ooc/runtime.hpp"

#include "format/hdf5.hpp"
#include "os/crash_guard.hpp"

namespace ooc {

void contain_library_crashes(const char* prefix) { os::contain_library_crashes(prefix); }

void probe_hdf5_files_in_child(bool on) { hdf5::set_probe_in_child(on); }

}  // namespace ooc
