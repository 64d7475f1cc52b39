// src/os: file descriptors, temporaries, pre-allocation, syncing, mappings, and madvise.

#include "ooc/error.hpp"
#include "os/direct_io.hpp"
#include "os/file.hpp"
#include "os/mapping.hpp"
#include "os/memory.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

using ooc::testing::ScratchDir;

TEST_CASE("a UniqueFd closes its descriptor once, and a moved one not at all") {
  int raw = ::open("/dev/null", O_RDONLY);
  REQUIRE(raw >= 0);
  {
    ooc::os::UniqueFd a(raw);
    ooc::os::UniqueFd b = std::move(a);
    CHECK_FALSE(a);
    CHECK(b.get() == raw);
  }
  CHECK(::fcntl(raw, F_GETFD) == -1);  // closed
}

TEST_CASE("open_existing refuses what is not a regular file, without blocking on a FIFO") {
  ScratchDir dir;
  CHECK_THROWS_WITH_AS(ooc::os::open_existing(dir.file("none"), false), doctest::Contains("no such file"), ooc::Error);
  CHECK_THROWS_WITH_AS(ooc::os::open_existing(dir.path().string(), false), doctest::Contains("is a directory"), ooc::Error);
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(ooc::os::open_existing(dir.file("fifo"), false), doctest::Contains("not a regular file"), ooc::Error);
  std::ofstream(dir.file("f")) << "abc";
  const auto fd = ooc::os::open_existing(dir.file("f"), false);
  CHECK((::fcntl(fd.get(), F_GETFL) & O_NONBLOCK) == 0);  // normal blocking reads afterwards
  CHECK(ooc::os::file_size(fd.get(), "f") == 3);
}

TEST_CASE("read_at returns what is there and write_at writes all of it") {
  ScratchDir dir;
  std::filesystem::path temp;
  const auto fd = ooc::os::create_temp_beside(dir.file("x.npy"), temp);
  ooc::os::write_at(fd.get(), "hello", 5, 2, "x.npy");
  char buf[16] = {};
  CHECK(ooc::os::read_at(fd.get(), buf, sizeof buf, 0, "x.npy") == 7);
  CHECK(std::string(buf + 2, 5) == "hello");
}

TEST_CASE("temporaries are hidden, unique, beside the final name, and made with the umask") {
  ScratchDir dir;
  const mode_t old = ::umask(022);
  std::filesystem::path a, b;
  const auto fa = ooc::os::create_temp_beside(dir.file("out.npy"), a);
  const auto fb = ooc::os::create_temp_beside(dir.file("out.npy"), b);
  ::umask(old);
  CHECK(a != b);
  CHECK(a.parent_path() == dir.path());
  CHECK(a.filename().string().rfind(".out.npy.ooc-", 0) == 0);
  struct stat st {};
  REQUIRE(::stat(a.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  CHECK_THROWS_WITH_AS(ooc::os::create_temp_beside(dir.file("no/such/dir/out.npy"), a),
                       doctest::Contains("cannot create output"), ooc::Error);
}

TEST_CASE("a new temporary removes those of dead runs of the same output, never a live one") {
  ScratchDir dir;
  std::filesystem::path live, dead, next;
  const auto held = ooc::os::create_temp_beside(dir.file("out.npy"), live);
  { const auto gone = ooc::os::create_temp_beside(dir.file("out.npy"), dead); }  // its run died
  std::ofstream(dir.file(".out.npy.ooc-notours")) << "x";                        // not a name of ours
  std::ofstream(dir.file(".other.npy.ooc-0123456789abcdef")) << "x";             // another output's
  const auto made = ooc::os::create_temp_beside(dir.file("out.npy"), next);
  CHECK(std::filesystem::exists(live));
  CHECK_FALSE(std::filesystem::exists(dead));
  CHECK(std::filesystem::exists(next));
  CHECK(std::filesystem::exists(dir.file(".out.npy.ooc-notours")));
  CHECK(std::filesystem::exists(dir.file(".other.npy.ooc-0123456789abcdef")));
}

TEST_CASE("preallocate reserves the size, and an impossible size is an error naming both sizes") {
  ScratchDir dir;
  std::filesystem::path temp;
  const auto fd = ooc::os::create_temp_beside(dir.file("out.npy"), temp);
  ooc::os::preallocate(fd.get(), 1 << 20, "out.npy");
  CHECK(ooc::os::file_size(fd.get(), "out.npy") == (1u << 20));
  CHECK_THROWS_WITH_AS(ooc::os::preallocate(fd.get(), 1ull << 62, "out.npy"), doctest::Contains("out.npy: "), ooc::Error);
}

TEST_CASE("rename and sync put a finished file in place") {
  ScratchDir dir;
  std::filesystem::path temp;
  {
    const auto fd = ooc::os::create_temp_beside(dir.file("out.npy"), temp);
    ooc::os::write_at(fd.get(), "x", 1, 0, "out.npy");
    ooc::os::sync_file(fd.get(), "out.npy");
  }
  ooc::os::rename_file(temp, dir.file("out.npy"));
  ooc::os::sync_directory(dir.path());
  CHECK(std::filesystem::exists(dir.file("out.npy")));
  CHECK_FALSE(std::filesystem::exists(temp));
  CHECK_THROWS_AS(ooc::os::rename_file(temp, dir.file("again.npy")), ooc::Error);
}

TEST_CASE("publish_file puts a file in place, over an old one, and leaves no hidden name behind") {
  ScratchDir dir;
  const std::string out = dir.file("out.npy");
  auto finished = [&](const char* text) {
    std::filesystem::path temp;
    const auto fd = ooc::os::create_temp_beside(out, temp);
    ooc::os::write_at(fd.get(), text, std::strlen(text), 0, "out.npy");
    ooc::os::sync_file(fd.get(), "out.npy");
    return temp;
  };
  ooc::os::publish_file(finished("new"), out, "out.npy");
  CHECK(dir.entries() == 1);
  // Over an existing file (kept under a hidden link until the new entry is durable): the
  // old file's other names keep its bytes, and the hidden link is gone.
  std::filesystem::create_hard_link(out, dir.file("old.npy"));
  ooc::os::publish_file(finished("newer"), out, "out.npy");
  CHECK(dir.entries() == 2);
  std::ifstream in(out), old(dir.file("old.npy"));
  std::string text, old_text;
  in >> text;
  old >> old_text;
  CHECK(text == "newer");
  CHECK(old_text == "new");
  CHECK_THROWS_WITH_AS(ooc::os::publish_file(dir.file("gone"), out, "out.npy"), doctest::Contains("out.npy: "),
                       ooc::Error);
  CHECK(ooc::os::try_sync_directory_of(out).empty());
  CHECK_THROWS_WITH_AS(ooc::os::sync_directory_of(dir.file("no/such/x.npy"), "x.npy"),
                       doctest::Contains("x.npy: cannot sync its directory (cannot open it: no such file"), ooc::Error);
}

TEST_CASE("a Mapping maps the file its descriptor is open on, even once its name is another file's or gone") {
  ScratchDir dir;
  const std::string path = dir.file("a.bin");
  std::ofstream(path) << "0123456789";
  const auto fd = ooc::os::open_existing(path, false);
  // Another process puts a different file under the name, then removes it.
  std::ofstream(dir.file("b.bin")) << "abcdefghij";
  ooc::os::rename_file(dir.file("b.bin"), path);
  {
    const auto m = ooc::os::Mapping::map(fd.get(), 3, 5, false, path);
    CHECK(std::string(reinterpret_cast<const char*>(m.data()), m.size()) == "34567");
    CHECK_FALSE(m.writable());
  }
  ooc::os::remove_file(path);
  const auto m = ooc::os::Mapping::map(fd.get(), 0, 2, false, path);
  CHECK(std::string(reinterpret_cast<const char*>(m.data()), m.size()) == "01");
}

TEST_CASE("a writable Mapping writes through to the file, and needs a descriptor open for writing") {
  ScratchDir dir;
  const std::string path = dir.file("a.bin");
  std::ofstream(path) << "0123456789";
  {
    const auto read_only = ooc::os::open_existing(path, false);
    CHECK_THROWS_WITH_AS(ooc::os::Mapping::map(read_only.get(), 0, 4, true, path),
                         doctest::Contains("a.bin: cannot map the data for writing: the file is open read-only"),
                         ooc::Error);
  }
  const auto fd = ooc::os::open_existing(path, true);
  auto m = ooc::os::Mapping::map(fd.get(), 2, 3, true, path);
  CHECK(m.writable());
  std::memcpy(m.data(), "xyz", 3);
  m.flush(path);
  char back[11] = {};
  CHECK(ooc::os::read_at(fd.get(), back, 10, 0, path) == 10);
  CHECK(std::string(back) == "01xyz56789");
}

TEST_CASE("zero bytes map nothing, and a moved Mapping keeps its bytes and its watch") {
  ScratchDir dir;
  const std::size_t page = ooc::os::page_size();
  const std::string path = dir.file("a.bin");
  std::ofstream(path) << std::string(4 * page, 'a');
  const auto fd = ooc::os::open_existing(path, false);
  const auto none = ooc::os::Mapping::map(fd.get(), 0, 0, false, path);
  CHECK(none.data() == nullptr);
  CHECK(none.size() == 0);
  CHECK(none.cached_fraction() == 1.0);
  auto m = ooc::os::Mapping::map(fd.get(), 0, 4 * page, false, path);
  const std::byte* address = m.data();
  REQUIRE(::truncate(path.c_str(), static_cast<off_t>(page)) == 0);
  ooc::os::Mapping moved = std::move(m);
  CHECK(m.data() == nullptr);  // NOLINT(bugprone-use-after-move): moved-from maps nothing
  CHECK(moved.data() == address);
  CHECK(static_cast<const volatile std::byte*>(moved.data())[3 * page] == std::byte{0});  // no SIGBUS
  CHECK(moved.shrank());
  CHECK_FALSE(m.shrank());
  moved = ooc::os::Mapping();
  CHECK(moved.data() == nullptr);
  CHECK_FALSE(moved.shrank());
}

TEST_CASE("dont_need drops only whole pages inside the range; will_need keeps the data") {
  const std::size_t page = ooc::os::page_size();
  CHECK(page >= 4096);
  void* p = ::mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  auto* bytes = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < 4 * page; ++i) bytes[i] = 1;
  // From the middle of page 0 to the middle of page 3: only pages 1 and 2 are whole.
  ooc::os::advise(bytes + page / 2, 3 * page, ooc::os::Advice::dont_need);
  CHECK(bytes[0] == 1);                 // page 0 kept
  CHECK(bytes[page] == 0);              // page 1 dropped (private anonymous: reads as zero)
  CHECK(bytes[2 * page + 5] == 0);      // page 2 dropped
  CHECK(bytes[3 * page + 1] == 1);      // page 3 kept
  ooc::os::advise(bytes, 4 * page, ooc::os::Advice::will_need);
  ooc::os::advise(bytes, 0, ooc::os::Advice::dont_need);  // empty range: nothing
  CHECK(bytes[0] == 1);
  ::munmap(p, 4 * page);
}

TEST_CASE("a direct writer writes tiles whose bytes start anywhere, keeping the bytes before them") {
  ScratchDir dir;
  const std::string path = dir.file("d.bin");
  const std::uint64_t header = 100, items = 5000;  // 8-byte items: 40100 bytes in all
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(header, 'H');
  }
  const auto plain = ooc::os::open_existing(path, true);
  ooc::os::preallocate(plain.get(), header + 8 * items, path);
  auto direct = ooc::os::reopen_direct(plain.get(), true);
  if (!direct) {
    MESSAGE("this file system refuses O_DIRECT; nothing to test here");
    return;
  }
  ooc::os::DirectWriter writer(std::move(*direct), plain.get(), header, 8, path);
  ooc::detail::AlignedBuffer buffers[2];
  std::uint64_t tickets[2] = {0, 0};  // each buffer's last write, which must be done before it is reused
  const std::int64_t bounds[] = {0, 1000, 1001, 3333, 5000};  // tiles of odd sizes
  for (int t = 0; t < 4; ++t) {
    writer.wait(tickets[t % 2]);
    // The data starts after a header of any length: elements need not be 8-byte aligned.
    std::byte* place = writer.place(bounds[t], bounds[t + 1], buffers[t % 2]);
    for (std::int64_t i = bounds[t]; i < bounds[t + 1]; ++i) {
      const std::uint64_t value = static_cast<std::uint64_t>(i) * 3;
      std::memcpy(place + (i - bounds[t]) * 8, &value, sizeof value);
    }
    tickets[t % 2] = writer.write(bounds[t], bounds[t + 1], buffers[t % 2]);
  }
  CHECK(tickets[0] == 3);  // one ticket per write, in order
  CHECK(tickets[1] == 4);
  writer.finish();
  std::vector<char> back(header + 8 * items);
  REQUIRE(ooc::os::read_at(plain.get(), back.data(), back.size(), 0, path) == back.size());
  CHECK(std::string(back.data(), header) == std::string(header, 'H'));
  for (std::uint64_t i = 0; i < items; ++i) {
    std::uint64_t v;
    std::memcpy(&v, back.data() + header + 8 * i, 8);
    if (v != i * 3) FAIL("element " << i << " is " << v);
  }
  CHECK_THROWS_AS(writer.write(0, 10, buffers[0]), std::logic_error);  // out of order
}

TEST_CASE("a direct writer's failed write is reported by the next wait, naming the file; one dropped early stops") {
  ScratchDir dir;
  const std::string path = dir.file("d.bin");
  { std::ofstream out(path, std::ios::binary); }
  const auto plain = ooc::os::open_existing(path, true);
  ooc::os::preallocate(plain.get(), 1 << 20, path);
  auto writable = ooc::os::reopen_direct(plain.get(), true);
  auto read_only = ooc::os::reopen_direct(plain.get(), false);
  if (!writable || !read_only) {
    MESSAGE("this file system refuses O_DIRECT; nothing to test here");
    return;
  }
  ooc::detail::AlignedBuffer buffer;
  {  // writes go to a descriptor open for reading: each fails, on the writer's thread
    ooc::os::DirectWriter writer(std::move(*read_only), plain.get(), 0, 8, path);
    writer.place(0, 4096, buffer);
    const std::uint64_t ticket = writer.write(0, 4096, buffer);
    CHECK_THROWS_WITH_AS(writer.wait(ticket), doctest::Contains(path.c_str()), ooc::Error);
    CHECK_THROWS_AS(writer.finish(), ooc::Error);
  }
  {  // dropped with writes queued (a cancelled run): no crash, no wait for them all
    ooc::os::DirectWriter writer(std::move(*writable), plain.get(), 0, 8, path);
    for (std::int64_t t = 0; t < 8; ++t) {
      writer.place(t * 8192, (t + 1) * 8192, buffer);
      writer.write(t * 8192, (t + 1) * 8192, buffer);
    }
  }
}

TEST_CASE("a direct reader returns any run of elements, and a short file is an error") {
  ScratchDir dir;
  const std::string path = dir.file("r.bin");
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(77, 'x');
    for (std::uint32_t i = 0; i < 10000; ++i) out.write(reinterpret_cast<const char*>(&i), 4);
  }
  const auto plain = ooc::os::open_existing(path, false);
  auto direct = ooc::os::reopen_direct(plain.get(), false);
  if (!direct) {
    MESSAGE("this file system refuses O_DIRECT; nothing to test here");
    return;
  }
  ooc::os::DirectReader reader(std::move(*direct), 77, 4, path);
  CHECK(reader.concurrent());
  ooc::detail::AlignedBuffer buffer;
  for (auto [b, e] : {std::pair{0, 10000}, {1, 2}, {1023, 4097}, {9999, 10000}}) {
    const std::byte* got = reader.read(b, e, buffer);
    for (int i = b; i < e; ++i) {
      std::uint32_t v;
      std::memcpy(&v, got + 4 * (i - b), 4);
      if (static_cast<int>(v) != i) FAIL("element " << i << " is " << v);
    }
  }
  CHECK_THROWS_WITH_AS(reader.read(0, 20000, buffer), doctest::Contains("shrank"), ooc::Error);
}

TEST_CASE("the memory limit is at most the physical memory, and cached_fraction sees resident pages") {
  CHECK(ooc::os::memory_limit() > 0);
  CHECK(ooc::os::memory_limit() <= static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) * ooc::os::page_size());
  std::vector<char> touched(1 << 20, 1);
  CHECK(ooc::os::cached_fraction(touched.data(), touched.size()) == doctest::Approx(1.0));
}

TEST_CASE("an exclusive lock keeps out every other holder, and closing the descriptor frees it") {
  ScratchDir dir;
  std::ofstream(dir.file("f")) << "abc";
  // Exclusive locks need descriptors open for writing.
  auto first = ooc::os::open_existing(dir.file("f"), true);
  const auto second = ooc::os::open_existing(dir.file("f"), true);
  CHECK(ooc::os::try_lock(first.get(), true, "f"));
  CHECK_FALSE(ooc::os::try_lock(second.get(), false, "f"));
  CHECK_FALSE(ooc::os::try_lock(second.get(), true, "f"));
  first = ooc::os::UniqueFd();
  CHECK(ooc::os::try_lock(second.get(), false, "f"));
  const auto third = ooc::os::open_existing(dir.file("f"), true);
  CHECK(ooc::os::try_lock(third.get(), false, "f"));        // shared locks share
  CHECK_FALSE(ooc::os::try_lock(third.get(), true, "f"));   // but keep out an exclusive one
}

TEST_CASE("our locks and HDF5's flock() locks do not meet") {
  ScratchDir dir;
  std::ofstream(dir.file("f")) << "abc";
  const auto ours = ooc::os::open_existing(dir.file("f"), false);
  CHECK(ooc::os::try_lock(ours.get(), false, "f"));
  const auto theirs = ooc::os::open_existing(dir.file("f"), true);
  CHECK(::flock(theirs.get(), LOCK_EX | LOCK_NB) == 0);
}

TEST_CASE("file_id tells two files apart and knows a hard link for the same file") {
  ScratchDir dir;
  std::ofstream(dir.file("a")) << "a";
  std::ofstream(dir.file("b")) << "b";
  std::filesystem::create_hard_link(dir.file("a"), dir.file("a2"));
  const auto a = ooc::os::open_existing(dir.file("a"), false);
  const auto a2 = ooc::os::open_existing(dir.file("a2"), false);
  const auto b = ooc::os::open_existing(dir.file("b"), false);
  CHECK(ooc::os::file_id(a.get(), "a") == ooc::os::file_id(a2.get(), "a2"));
  CHECK_FALSE(ooc::os::file_id(a.get(), "a") == ooc::os::file_id(b.get(), "b"));
}

TEST_CASE("remove_file removes, and a file already gone is no error") {
  ScratchDir dir;
  std::ofstream(dir.file("f")) << "x";
  ooc::os::remove_file(dir.file("f"));
  CHECK_FALSE(std::filesystem::exists(dir.file("f")));
  ooc::os::remove_file(dir.file("f"));
  CHECK_THROWS_AS(ooc::os::remove_file(dir.path()), ooc::Error);  // a directory is not unlinked
}

TEST_CASE("size_text gives a decimal size a person reads and the exact byte count") {
  CHECK(ooc::os::size_text(0) == "0 bytes");
  CHECK(ooc::os::size_text(999) == "999 bytes");
  CHECK(ooc::os::size_text(4194432) == "4.19 MB (4194432 bytes)");
  CHECK(ooc::os::size_text(1048576) == "1.05 MB (1048576 bytes)");
  CHECK(ooc::os::size_text(300ull << 30) == "322.12 GB (322122547200 bytes)");
}

TEST_CASE("sync_data and sync_range make written data durable without error") {
  ScratchDir dir;
  std::filesystem::path temp;
  const auto fd = ooc::os::create_temp_beside(dir.file("out.npy"), temp);
  const std::size_t page = ooc::os::page_size();
  ooc::os::preallocate(fd.get(), 3 * page, "out.npy");
  void* p = ::mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  REQUIRE(p != MAP_FAILED);
  static_cast<char*>(p)[page + 7] = 'x';
  ooc::os::sync_range(static_cast<char*>(p) + page + 3, 10, "out.npy");  // widened to its page
  ooc::os::sync_range(p, 0, "out.npy");
  char back = 0;
  CHECK(ooc::os::read_at(fd.get(), &back, 1, page + 7, "out.npy") == 1);
  CHECK(back == 'x');
  ooc::os::sync_data(fd.get(), "out.npy");
  ::munmap(p, 3 * page);
  CHECK_THROWS_WITH_AS(ooc::os::sync_data(-1, "out.npy"), doctest::Contains("out.npy: fdatasync failed"), ooc::Error);
}

TEST_CASE("a full disk names the bytes needed and the bytes free") {
  ScratchDir dir;
  std::filesystem::path temp;
  const auto fd = ooc::os::create_temp_beside(dir.file("out.npy"), temp);
  CHECK_THROWS_WITH_AS(ooc::os::preallocate(fd.get(), 1ull << 62, "out.npy"),
                       doctest::Contains("(4611686018427387904 bytes)"), ooc::Error);
}

TEST_CASE("a size the disk cannot hold is refused before any block is allocated, with the free space then") {
  ScratchDir dir;
  std::filesystem::path temp;
  const auto fd = ooc::os::create_temp_beside(dir.file("out.npy"), temp);
  struct statvfs fs {};
  REQUIRE(::fstatvfs(fd.get(), &fs) == 0);
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  REQUIRE(free_bytes > 0);
  const std::uint64_t size = free_bytes + (1ull << 30);
  std::string message;
  try {
    ooc::os::preallocate(fd.get(), size, "out.npy");
  } catch (const ooc::Error& e) {
    message = e.what();
  }
  CHECK(message.find("out.npy: not enough disk space: needs ") != std::string::npos);
  CHECK(message.find("(" + std::to_string(size) + " bytes)") != std::string::npos);
  // The free figure is what the disk had (others write meanwhile: within 1 GiB), not 0
  // as after a posix_fallocate that filled the disk.
  const auto open = message.rfind('('), close = message.rfind(" bytes) free");
  REQUIRE(open != std::string::npos);
  REQUIRE(close != std::string::npos);
  const std::uint64_t reported = std::stoull(message.substr(open + 1, close - open - 1));
  CHECK(reported + (1ull << 30) > free_bytes);
  CHECK(reported < free_bytes + (1ull << 30));
  // Nothing was allocated, nor the size changed.
  struct stat st {};
  REQUIRE(::fstat(fd.get(), &st) == 0);
  CHECK(st.st_blocks == 0);
  CHECK(st.st_size == 0);
}

TEST_CASE("a range the file already holds needs no free space for the blocks it has") {
  ScratchDir dir;
  std::filesystem::path temp;
  const auto fd = ooc::os::create_temp_beside(dir.file("out.npy"), temp);
  ooc::os::preallocate(fd.get(), 1 << 20, "out.npy");
  // Reserving it again (as a resumed run would) passes whatever the disk has free.
  ooc::os::preallocate_range(fd.get(), 0, 1 << 20, "out.npy");
  CHECK(ooc::os::file_size(fd.get(), "out.npy") == (1u << 20));
}
