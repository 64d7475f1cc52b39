// src/os/shrink_watch: a mapped file that shrinks raises no SIGBUS in a watched range.
// src/os/crash_guard: a crash inside the HDF5 library is one line and exit 1; any other
// fault goes on to the handler before (the shrink watch's, a sanitizer's, the default).

#include "os/crash_guard.hpp"
#include "os/file.hpp"
#include "os/memory.hpp"
#include "os/shrink_watch.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

using ooc::testing::ScratchDir;

namespace {

// A file of `pages` pages of 'a', mapped shared.
struct MappedFile {
  MappedFile(const std::string& path, std::size_t pages, bool writable)
      : path(path), size(pages * ooc::os::page_size()) {
    std::ofstream(path) << std::string(size, 'a');
    fd = ooc::os::open_existing(path, writable);
    address = ::mmap(nullptr, size, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd.get(), 0);
    REQUIRE(address != MAP_FAILED);
  }
  ~MappedFile() { ::munmap(address, size); }
  const volatile char* bytes() const { return static_cast<const volatile char*>(address); }
  // As another process would: by name, not through our descriptor.
  void cut_to(std::size_t bytes) const { REQUIRE(::truncate(path.c_str(), static_cast<off_t>(bytes)) == 0); }

  std::string path;
  std::size_t size;
  ooc::os::UniqueFd fd;
  void* address;
};

}  // namespace

TEST_CASE("reading a watched mapping past where its file was cut reads zeros and flags the watch") {
  ScratchDir dir;
  const std::size_t page = ooc::os::page_size();
  MappedFile file(dir.file("f"), 8, false);
  ooc::os::ShrinkWatch watch(file.address, file.size, false);
  CHECK_FALSE(watch.shrank());
  CHECK(file.bytes()[5 * page] == 'a');
  file.cut_to(2 * page);
  CHECK(file.bytes()[page] == 'a');      // still in the file
  CHECK_FALSE(watch.shrank());
  CHECK(file.bytes()[5 * page] == 0);    // cut off: SIGBUS caught, zeros instead
  CHECK(watch.shrank());
  CHECK(file.bytes()[7 * page + 9] == 0);  // the rest of the range reads zeros too
  CHECK(file.bytes()[0] == 'a');           // the part before the fault is still the file
}

TEST_CASE("a writable watched mapping takes writes past the cut without a crash") {
  ScratchDir dir;
  const std::size_t page = ooc::os::page_size();
  MappedFile file(dir.file("f"), 4, true);
  ooc::os::ShrinkWatch watch(file.address, file.size, true);
  file.cut_to(0);
  static_cast<volatile char*>(file.address)[3 * page] = 'z';
  CHECK(watch.shrank());
  CHECK(ooc::os::file_size(file.fd.get(), "f") == 0);  // nothing reached the file
}

TEST_CASE("each watch has its own flag, and a moved watch keeps it") {
  ScratchDir dir;
  const std::size_t page = ooc::os::page_size();
  MappedFile cut(dir.file("cut"), 2, false);
  MappedFile kept(dir.file("kept"), 2, false);
  ooc::os::ShrinkWatch cut_watch(cut.address, cut.size, false);
  ooc::os::ShrinkWatch kept_watch(kept.address, kept.size, false);
  cut.cut_to(0);
  CHECK(cut.bytes()[page] == 0);
  CHECK(kept.bytes()[page] == 'a');
  CHECK(cut_watch.shrank());
  CHECK_FALSE(kept_watch.shrank());
  ooc::os::ShrinkWatch moved = std::move(cut_watch);
  CHECK(moved.shrank());
  CHECK_FALSE(cut_watch.shrank());  // NOLINT(bugprone-use-after-move): a moved-from watch watches nothing
}

TEST_CASE("a SIGBUS outside every watched range goes to the handler before ours, by default a crash") {
  ScratchDir dir;
  MappedFile watched(dir.file("watched"), 1, false);
  ooc::os::ShrinkWatch watch(watched.address, watched.size, false);  // installs the handler
  MappedFile unwatched(dir.file("unwatched"), 2, false);
  unwatched.cut_to(0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const char c = unwatched.bytes()[ooc::os::page_size()];
    ::_exit(c == 0 ? 3 : 4);  // reached only if the fault was swallowed
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  // The handler that was there before ours decides: the default kills with SIGBUS;
  // AddressSanitizer's (in the OOC_SANITIZE build) reports the fault and exits 1.
  CHECK_FALSE((WIFEXITED(status) && (WEXITSTATUS(status) == 3 || WEXITSTATUS(status) == 4)));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGBUS);
  CHECK_FALSE(watch.shrank());
}

namespace {

// Runs `body` in a child process with its stderr in a pipe; returns the wait status and
// fills `err` with what it wrote.
template <class Body>
int in_child(Body body, std::string& err) {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    body();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  char buffer[512];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) err.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  return status;
}

int null_read() {
  volatile std::uintptr_t where = 16;  // an address no compiler can see through: a fault, not a warning
  return *reinterpret_cast<volatile int*>(where);
}

}  // namespace

TEST_CASE("a crash inside the library is one line naming the file and exit 1, on any thread, a stack overflow too") {
  const std::string line = "t: x.h5: damaged HDF5 file (the HDF5 library crashed reading it)\n";
  std::string err;
  int status = in_child([] {
    ooc::os::contain_library_crashes("t: ");
    ooc::os::InLibrary inside("x.h5");
    ::_exit(null_read() == 0 ? 3 : 4);
  }, err);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 1));
  CHECK(err == line);
  err.clear();
  status = in_child([] {
    ooc::os::contain_library_crashes("t: ");
    std::thread([] {
      ooc::os::InLibrary inside("x.h5");
      ::abort();
    }).join();
  }, err);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 1));
  CHECK(err == line);
}

TEST_CASE("outside the library a fault goes on: a shrunk mapping to the shrink watch, a crash to the default") {
  ScratchDir dir;
  MappedFile mapped(dir.file("cut"), 2, false);
  std::string err;
  int status = in_child([&] {
    ooc::os::ShrinkWatch watch(mapped.address, mapped.size, false);  // its handler first, ours over it
    ooc::os::contain_library_crashes("t: ");
    ooc::os::InLibrary inside("x.h5");  // on this thread, yet the watched fault is the watch's
    mapped.cut_to(0);
    const char c = mapped.bytes()[ooc::os::page_size()];
    ::_exit(c == 0 && watch.shrank() ? 5 : 6);
  }, err);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 5));
  CHECK(err.empty());
  err.clear();
  status = in_child([] {
    ooc::os::contain_library_crashes("t: ");
    { ooc::os::InLibrary inside("x.h5"); }
    ::_exit(null_read() == 0 ? 3 : 4);
  }, err);
  // The default kills with SIGSEGV; AddressSanitizer's handler (the OOC_SANITIZE build)
  // reports the fault and exits 1. Never our line.
  CHECK_FALSE((WIFEXITED(status) && (WEXITSTATUS(status) == 3 || WEXITSTATUS(status) == 4)));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGSEGV);
  CHECK(err.find("damaged HDF5 file") == std::string::npos);
}
