#pragma once
/// Process-wide settings for programs built on ooc that must outlive a damaged input.

namespace ooc {

/// A program that may end on any fatal error (oocrun): installs handlers so that a crash
/// of the HDF5 library on a damaged file prints one line, `prefix` then "FILE: damaged
/// HDF5 file (...)", and exits with status 1. Once per process, early, from the main thread.
void contain_library_crashes(const char* prefix);

/// A process that must not exit (an interpreter): each HDF5 file is first opened in a
/// child process, once per version of the file; when the library crashes there, the call
/// throws ooc::Error naming the file instead of crashing this process. Off by default.
void probe_hdf5_files_in_child(bool on);

}  // namespace ooc
