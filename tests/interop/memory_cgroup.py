"""The one cgroup v1 memory-group harness, shared by the tests and the bench.

A memory group caps what its processes may use, page cache included, so a run inside
one proves a memory bound for real. Used by tests/interop/test_memory_bound.py (oocrun),
python/tests/test_memory_bound.py (the Python module) and bench/bench.py (the --large
row); the last two import it by path.

Needs root and a writable cgroup v1 memory hierarchy at /sys/fs/cgroup/memory. Where
there is none, MemoryGroup() raises Unavailable, whose text says why: the tests skip
with it, the bench notes it.
"""
import errno
import os
import subprocess
import sys
import time

ROOT = "/sys/fs/cgroup/memory"


class Unavailable(Exception):
    """No memory group can be made here; the message says why."""


def group_base():
    """The directory new groups go in: under this process's own memory cgroup where we
    may (a run then stays inside whatever limits the caller set), else the hierarchy's
    root. Raises Unavailable."""
    if not os.path.isfile(os.path.join(ROOT, "memory.limit_in_bytes")):
        raise Unavailable(f"no cgroup v1 memory hierarchy at {ROOT} (cgroup v2 only, or not mounted)")
    if os.geteuid() != 0:
        raise Unavailable("creating a memory cgroup needs root")
    candidates = []
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "memory" in controllers.split(","):
                    candidates.append(os.path.normpath(ROOT + path))
    except OSError:
        pass
    candidates.append(ROOT)
    for base in candidates:
        probe = os.path.join(base, f"ooc-probe-{os.getpid()}")
        try:
            os.mkdir(probe)
        except OSError:
            continue
        os.rmdir(probe)
        return base
    raise Unavailable(f"{ROOT} is not writable here (read-only cgroup mount, "
                      "or no permission to create a memory cgroup)")


def drop_from_page_cache(path, all_caches=False):
    """Writes the file back and drops its pages, so the next reader is charged for them.
    all_caches: drop every clean page of the machine too (drop_caches, root only; a
    refusal is ignored)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if all_caches:
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1\n")
        except OSError:
            pass


def run_cold_in_group(limit, command, cold, name="ooc-bench"):
    """Runs `command` (a list) inside a fresh memory group of `limit` bytes, `cold`'s pages
    (and the machine's clean ones) dropped first. Returns (seconds, CompletedProcess with
    text output, peak RSS in KiB from GNU time, the group's peak in bytes); GNU time's line
    is taken off the process's stderr."""
    drop_from_page_cache(cold, all_caches=True)
    with MemoryGroup(limit, name) as group:
        def enter():
            with open(group.procs, "w") as f:
                f.write(f"{os.getpid()}\n")
        start = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", *command], capture_output=True, text=True,
                              preexec_fn=enter)
        seconds = time.perf_counter() - start
        lines = done.stderr.rstrip("\n").splitlines()
        rss_kib = int(lines[-1]) if lines and lines[-1].isdigit() else 0
        done.stderr = "\n".join(lines[:-1]) + ("\n" if len(lines) > 1 else "")
        return seconds, done, rss_kib, group.peak()


class MemoryGroup:
    """A memory group limited to `limit` bytes (memory and memory+swap, so swapping is
    no way out either). Remove it with remove(), or use it as a context manager."""

    def __init__(self, limit, name="ooc"):
        self.limit = limit
        self.path = os.path.join(group_base(), f"{name}-{os.getpid()}")
        try:
            os.mkdir(self.path)
        except OSError as e:
            raise Unavailable(f"cannot create the memory cgroup {self.path} ({e})") from e
        try:
            self.write("memory.limit_in_bytes", limit)
            if os.path.exists(os.path.join(self.path, "memory.memsw.limit_in_bytes")):
                self.write("memory.memsw.limit_in_bytes", limit)
        except OSError as e:
            self.remove()
            raise Unavailable(f"cannot limit the memory cgroup {self.path} ({e})") from e
        if self.read("memory.limit_in_bytes") != limit:
            self.remove()
            raise Unavailable(f"the memory cgroup {self.path} did not take the limit {limit}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()

    @property
    def procs(self):
        """The group's cgroup.procs: a process that writes its pid there joins the group."""
        return os.path.join(self.path, "cgroup.procs")

    def write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(f"{value}\n")

    def read(self, name):
        """An integer file of the group (the first number of it)."""
        with open(os.path.join(self.path, name)) as f:
            return int(f.read().split()[0])

    def peak(self):
        """The group's peak usage, page cache included, since creation or reset_peak()."""
        return self.read("memory.max_usage_in_bytes")

    def reset_peak(self):
        self.write("memory.max_usage_in_bytes", 0)

    def stat(self):
        """memory.stat as a dict (empty if unreadable)."""
        stat = {}
        try:
            with open(os.path.join(self.path, "memory.stat")) as f:
                for line in f:
                    key, value = line.split()
                    stat[key] = int(value)
        except (OSError, ValueError):
            pass
        return stat

    def oom_kills(self):
        try:
            with open(os.path.join(self.path, "memory.oom_control")) as f:
                for line in f:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def wrap(self, cmd):
        """cmd run inside the group (a shell joins it, then execs cmd), with the peak reset."""
        self.reset_peak()
        return ["sh", "-c", f'echo $$ > "{self.procs}" && exec "$@"', "sh", *cmd]

    def remove(self):
        """Moves what is left in the group (only processes put there by its user) to the
        parent, and removes the group; warns if it cannot."""
        parent_procs = os.path.join(os.path.dirname(self.path), "cgroup.procs")
        for _ in range(100):
            try:
                with open(self.procs) as f:
                    pids = f.read().split()
            except FileNotFoundError:
                return
            for pid in pids:
                try:
                    with open(parent_procs, "w") as f:
                        f.write(pid)
                except OSError:
                    pass
            try:
                os.rmdir(self.path)
                return
            except OSError as e:
                if e.errno == errno.ENOENT:
                    return
                time.sleep(0.05)
        sys.stderr.write(f"\nwarning: could not remove cgroup {self.path}\n")
