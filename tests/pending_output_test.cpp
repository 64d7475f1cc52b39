// src/pending_output: an output is published under its final name, or leaves no trace.

#include "core/pending_output.hpp"

#include "format/hdf5.hpp"
#include "format/hdf5/rollback.hpp"
#include "ooc/error.hpp"
#include "os/file.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

using ooc::detail::PendingOutput;
using ooc::testing::ScratchDir;

namespace {

std::filesystem::path new_temp(const ScratchDir& dir, const std::string& final_name, const std::string& text) {
  std::filesystem::path temp;
  const auto fd = ooc::os::create_temp_beside(dir.file(final_name), temp);
  ooc::os::write_at(fd.get(), text.data(), text.size(), 0, final_name);
  return temp;
}

std::string contents(const std::string& path) {
  std::ostringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("a new file is renamed over its final name on publish, and then left alone") {
  ScratchDir dir;
  std::ofstream(dir.file("out.npy")) << "old";
  const auto temp = new_temp(dir, "out.npy", "new");
  {
    PendingOutput pending = PendingOutput::new_file(temp, dir.file("out.npy"));
    CHECK(pending);
    CHECK(pending.temp_file() == temp);
    CHECK(contents(dir.file("out.npy")) == "old");  // untouched until published
    pending.publish();
    CHECK_FALSE(pending);
    pending.publish();  // nothing left to do
  }
  CHECK(contents(dir.file("out.npy")) == "new");
  CHECK(dir.entries() == 1);
}

TEST_CASE("an output never published is removed when its owner goes, once, and not by a moved-from owner") {
  ScratchDir dir;
  const auto temp = new_temp(dir, "out.npy", "new");
  {
    PendingOutput first = PendingOutput::new_file(temp, dir.file("out.npy"));
    PendingOutput second = std::move(first);
    CHECK_FALSE(first);  // NOLINT(bugprone-use-after-move): a moved-from owner owns nothing
    first = PendingOutput();
    CHECK(std::filesystem::exists(temp));
    CHECK(second);
  }
  CHECK(dir.entries() == 0);
}

TEST_CASE("assigning over a pending output discards it; a failed publish leaves it pending") {
  ScratchDir dir;
  const auto a = new_temp(dir, "a.npy", "a");
  const auto b = new_temp(dir, "b.npy", "b");
  PendingOutput pending = PendingOutput::new_file(a, dir.file("a.npy"));
  pending = PendingOutput::new_file(b, dir.file("no/such/dir/b.npy"));
  CHECK_FALSE(std::filesystem::exists(a));
  CHECK_THROWS_AS(pending.publish(), ooc::Error);
  CHECK(pending);
  pending.discard();
  CHECK_FALSE(pending);
  CHECK(dir.entries() == 0);
}

namespace {
std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
}  // namespace

TEST_CASE("a hidden HDF5 dataset is moved to its name on publish, or the file rolled back on discard") {
  ScratchDir dir;
  const std::string file = dir.file("run.h5");
  ooc::hdf5::create_dataset(file, "/old", ooc::dtype_of<double>, {4});
  {
    auto transaction = ooc::hdf5::Rollback::begin(file);
    ooc::hdf5::create_dataset(file, "/.ooc-kept", ooc::dtype_of<double>, {4});
    PendingOutput::hidden_dataset(file, "/.ooc-kept", "/x", false, transaction).publish();
  }
  CHECK(ooc::hdf5::existing_kind(file, "/x") == "dataset");
  CHECK(ooc::hdf5::existing_kind(file, "/.ooc-kept").empty());
  CHECK_FALSE(std::filesystem::exists(ooc::hdf5::rollback_journal_path(file)));
  const std::string before = bytes_of(file);
  {
    auto transaction = ooc::hdf5::Rollback::begin(file);
    CHECK(std::filesystem::exists(ooc::hdf5::rollback_journal_path(file)));
    ooc::hdf5::create_dataset(file, "/.ooc-dropped", ooc::dtype_of<double>, {1000});
    PendingOutput dropped = PendingOutput::hidden_dataset(file, "/.ooc-dropped", "/y", false, transaction);
  }
  CHECK(bytes_of(file) == before);  // every byte as it was, the file's size too
  CHECK_FALSE(std::filesystem::exists(ooc::hdf5::rollback_journal_path(file)));
  CHECK(ooc::hdf5::existing_kind(file, "/y").empty());
}

TEST_CASE("a write into an existing HDF5 file stopped by a crash is rolled back at the next open") {
  ScratchDir dir;
  const std::string file = dir.file("run.h5");
  ooc::hdf5::create_dataset(file, "/old", ooc::dtype_of<double>, {4});
  const std::string before = bytes_of(file);
  const pid_t child = ::fork();
  if (child == 0) {  // writes, publishes the move, and dies before the commit
    auto transaction = ooc::hdf5::Rollback::begin(file);
    ooc::hdf5::create_dataset(file, "/.ooc-t", ooc::dtype_of<double>, {1000});
    ooc::hdf5::move_dataset(file, "/.ooc-t", "/old", true);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(bytes_of(file) != before);
  CHECK(std::filesystem::exists(ooc::hdf5::rollback_journal_path(file)));
  CHECK(ooc::hdf5::existing_kind(file, "/old") == "dataset");  // any open rolls back first
  CHECK(bytes_of(file) == before);
  CHECK_FALSE(std::filesystem::exists(ooc::hdf5::rollback_journal_path(file)));
}
