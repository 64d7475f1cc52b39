"""The library builds and installs alone, and a project outside the tree builds against it.

Configures a second tree of the library only, as the README's "Build and install with
CMake" shows it: -DOOC_BUILD_CLI=OFF -DOOC_BUILD_PYTHON=OFF -DOOC_BUILD_TESTS=OFF, with
CLI11, pybind11, Python and doctest made unfindable (CMAKE_DISABLE_FIND_PACKAGE_<name>),
so that it needs only Boost, TBB, Eigen, HDF5 and the chunk codecs. It builds that tree,
installs it into a temporary prefix, configures and builds tests/consumer
(find_package(ooc) + target_link_libraries(app ooc::ooc)) against that prefix alone,
runs the consumer on numpy-written files and checks that its sums are numpy's. Also
checks that a library-only tree with the tests on configures, and that the full tree
(OOC_BUILD_DIR) installs a working oocrun.

The library-only tree is LIBRARY_BUILD below OOC_BUILD_DIR, kept between runs so that a
rerun rebuilds only what changed. It is configured with the full tree's build type and
flags, and each object the full tree compiled with the same command (the same rule in
the target's build.make and flags.make, the build directory aside) from sources and
headers no newer than the object is copied in before the build (reuse_objects): the
library-only build then compiles only what differs and archives, in seconds instead of
the 3-6 CPU-minutes of compiling the library a second time (docs/decisions/2026-12-04-ci-time.md).
Examples and bench are off there: they add compile time and no dependency. Needs
OOC_BUILD_DIR (set by ctest), cmake and numpy; the rest is written under one temporary
directory.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

BUILD_DIR = os.environ.get("OOC_BUILD_DIR")
SOURCE_DIR = Path(os.environ.get("OOC_SOURCE_DIR") or Path(__file__).resolve().parents[2])
LIBRARY_BUILD = Path(BUILD_DIR or ".") / "tests" / "library-only"
# The README's library-only configuration, with what it must not need made unfindable.
LIBRARY_ONLY = ["-DOOC_BUILD_CLI=OFF", "-DOOC_BUILD_PYTHON=OFF", "-DOOC_BUILD_TESTS=OFF"]
WITHOUT = ["CLI11", "pybind11", "Python", "doctest"]


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900, **kwargs)


def excerpt(result, chars=6000):
    """The start of a failed command's errors: the first compiler error is the one that matters."""
    return (result.stderr.strip() or result.stdout)[:chars]


def compile_rules(target_dir, build_dir):
    """A target's compile commands and flags (build.make's commands, flags.make), with its
    build directory's path made a placeholder: equal for two trees that compile the
    target's objects with the same commands."""
    lines = []
    for name in ("flags.make", "build.make"):
        path = target_dir / name
        if not path.is_file():
            return None
        for line in path.read_text().splitlines():
            if line.startswith(("CXX_", "C_")) or (line.startswith("\t") and " -c " in line):
                lines.append(line.replace(str(Path(build_dir).resolve()), "<build>").replace(str(build_dir), "<build>"))
    return lines


def up_to_date(obj):
    """True if `obj` is newer than every file its compiler's dependency file (.o.d) names."""
    depfile = obj.with_name(obj.name + ".d")
    if not depfile.is_file():
        return False
    text = depfile.read_text().replace("\\\n", " ")
    built = obj.stat().st_mtime
    for dependency in text.split(":", 1)[1].split():
        path = Path(BUILD_DIR) / dependency  # relative: to the build directory the compiler ran in
        if not path.exists() or path.stat().st_mtime > built:
            return False
    return True


def reuse_objects(library_build):
    """Copies into `library_build` the objects of the full tree (BUILD_DIR) that its
    targets compile with the same commands, where the full tree's are up to date. A copy
    gets the current time, so make takes it as built after this configure; anything else
    make compiles as usual. Returns how many were copied."""
    full = Path(BUILD_DIR)
    copied = 0
    for target in sorted((Path(library_build) / "CMakeFiles").glob("ooc*.dir")):
        theirs = full / "CMakeFiles" / target.name
        rules = compile_rules(target, library_build)
        if not rules or rules != compile_rules(theirs, full):
            continue
        for obj in theirs.rglob("*.o"):
            ours = target / obj.relative_to(theirs)
            if not up_to_date(obj):
                continue
            ours.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(obj, ours)
            shutil.copyfile(obj.with_name(obj.name + ".d"), ours.with_name(ours.name + ".d"))
            copied += 1
    return copied


def cache_value(build_dir, name):
    """A variable of a CMakeCache.txt, or None."""
    cache = Path(build_dir) / "CMakeCache.txt"
    if not cache.is_file():
        return None
    match = re.search(rf"^{re.escape(name)}:[A-Z]+=(.*)$", cache.read_text(), re.MULTILINE)
    return match.group(1) if match else None


class InstalledPackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BUILD_DIR:
            raise RuntimeError("set OOC_BUILD_DIR to the build directory (ctest does)")
        cls._tmp = tempfile.TemporaryDirectory(prefix="ooc_install_")
        try:
            cls.setup_in(Path(cls._tmp.name))
        except BaseException:
            cls._tmp.cleanup()
            raise

    @staticmethod
    def configure_args(source, build, *options):
        """cmake's configure command for `build`, with the compilers of the full tree (the
        library's ABI is the one its compiler gave it)."""
        args = ["cmake", "-S", source, "-B", build, *options]
        for name in ["CMAKE_CXX_COMPILER", "CMAKE_C_COMPILER"]:
            value = cache_value(BUILD_DIR, name)
            if value:
                args.append(f"-D{name}={value}")
        return args

    @classmethod
    def library_only_options(cls):
        """The README's library-only options, nothing else findable, and the full tree's
        MPI choice (the mpi component test follows it)."""
        options = [*LIBRARY_ONLY, *(f"-DCMAKE_DISABLE_FIND_PACKAGE_{name}=ON" for name in WITHOUT),
                   "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"]
        mpi = cache_value(BUILD_DIR, "OOC_WITH_MPI")
        if mpi:
            options.append(f"-DOOC_WITH_MPI={mpi}")
        return options

    @classmethod
    def setup_in(cls, tmp):
        cls.tmp = tmp
        cls.prefix = tmp / "prefix"
        cls.consumer_build = tmp / "consumer-build"

        # The full tree's build type and flags, so that its objects can be reused.
        flags = [f"-D{name}={cache_value(BUILD_DIR, name) or ''}" for name in ("CMAKE_BUILD_TYPE", "CMAKE_CXX_FLAGS")]
        configure = cls.configure_args(SOURCE_DIR, LIBRARY_BUILD, *cls.library_only_options(),
                                       "-DOOC_BUILD_EXAMPLES=OFF", "-DOOC_BUILD_BENCH=OFF", *flags)
        cls.library_configure = run(*configure)
        if cls.library_configure.returncode != 0:
            raise AssertionError(f"configuring the library alone failed:\n{excerpt(cls.library_configure)}")
        reused = reuse_objects(LIBRARY_BUILD)
        cls.library_build = run("cmake", "--build", LIBRARY_BUILD, "-j", "2")
        compiled = cls.library_build.stdout.count("Building CXX object")
        print(f"library-only tree: {reused} objects of {BUILD_DIR} reused, {compiled} compiled", file=sys.stderr)
        if cls.library_build.returncode != 0:
            raise AssertionError(f"building the library alone failed:\n{excerpt(cls.library_build)}")
        cls.install = run("cmake", "--install", LIBRARY_BUILD, "--prefix", cls.prefix)
        if cls.install.returncode != 0:
            raise AssertionError(f"cmake --install of the library alone failed:\n{excerpt(cls.install)}")

        configure = ["cmake", "-S", SOURCE_DIR / "tests" / "consumer", "-B", cls.consumer_build,
                     f"-DCMAKE_PREFIX_PATH={cls.prefix}", "-DCMAKE_BUILD_TYPE=Release",
                     "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                     # Only the prefix may answer find_package(ooc), not ~/.cmake/packages.
                     "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"]
        compiler = cache_value(BUILD_DIR, "CMAKE_CXX_COMPILER")
        if compiler:  # the library's ABI is the one its compiler gave it
            configure.append(f"-DCMAKE_CXX_COMPILER={compiler}")
        cls.configure = run(*configure)
        if cls.configure.returncode != 0:
            raise AssertionError(f"configuring the consumer failed:\n{excerpt(cls.configure)}")

        cls.build = run("cmake", "--build", cls.consumer_build, "-j", "2")
        if cls.build.returncode != 0:
            raise AssertionError(f"building the consumer failed:\n{excerpt(cls.build)}")
        cls.app = cls.consumer_build / "app"

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def save(self, name, array):
        path = self.tmp / f"{name}.npy"
        np.save(path, array)
        return path

    def app_sum(self, path, *kernel):
        result = run(self.app, path, *kernel)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    def test_the_package_is_found_in_the_prefix_and_nowhere_else(self):
        ooc_dir = cache_value(self.consumer_build, "ooc_DIR")
        self.assertIsNotNone(ooc_dir)
        self.assertTrue(Path(ooc_dir).resolve().is_relative_to(self.prefix.resolve()), ooc_dir)
        for header in ["ooc/ooc.hpp", "ooc/kernel.hpp", "ooc/kernels/reductions.hpp", "ooc/kernels/elementwise.hpp"]:
            self.assertTrue((self.prefix / "include" / header).is_file(), header)

    def test_the_library_alone_needs_and_installs_no_program(self):
        for option in ["OOC_BUILD_CLI", "OOC_BUILD_PYTHON", "OOC_BUILD_TESTS"]:
            self.assertEqual(cache_value(LIBRARY_BUILD, option), "OFF", option)
        for package in WITHOUT:  # never looked for: a REQUIRED search would have failed
            self.assertIn(cache_value(LIBRARY_BUILD, f"{package}_DIR") or "NOTFOUND", ["NOTFOUND", f"{package}_DIR-NOTFOUND"])
        self.assertFalse((self.prefix / "bin").exists(), list((self.prefix / "bin").glob("*")))
        self.assertEqual(list(self.prefix.rglob("_ooc*")), [])  # no Python module
        self.assertTrue((self.prefix / "lib" / "cmake" / "ooc" / "oocConfig.cmake").is_file())

    def test_the_tests_configure_without_cli_and_python(self):
        # OOC_BUILD_TESTS on, CLI and Python off: the library's tests are registered, the
        # ones that run oocrun or import ooc are not (nothing is built here).
        build = self.tmp / "tests-without-cli"
        configure = run(*self.configure_args(SOURCE_DIR, build, *self.library_only_options(),
                                             "-DOOC_BUILD_TESTS=ON", "-DCMAKE_DISABLE_FIND_PACKAGE_doctest=OFF"))
        self.assertEqual(configure.returncode, 0, excerpt(configure))
        listed = run("ctest", "-N", cwd=build)
        self.assertEqual(listed.returncode, 0, excerpt(listed))
        tests = set(re.findall(r"Test\s+#\d+: (\S+)", listed.stdout))
        self.assertTrue({"dtype_test", "pipeline_test", "doc_snippets", "install_consumer"} <= tests, tests)
        self.assertFalse({"cli_errors", "cli_options_test", "python", "bench_smoke"} & tests, tests)

    def test_the_consumer_compiles_against_installed_headers_not_the_source_tree(self):
        commands = json.loads((self.consumer_build / "compile_commands.json").read_text())
        self.assertTrue(commands)
        for entry in commands:
            command = entry.get("command") or " ".join(entry.get("arguments", []))
            self.assertNotIn(str(SOURCE_DIR / "include"), command)
            self.assertNotIn(str(Path(BUILD_DIR).resolve()), command)

    def test_a_float64_sum_is_numpys_bit_for_bit(self):
        a = np.random.default_rng(7).standard_normal(100_003)  # many blocks of the pairwise sum
        self.assertEqual(self.app_sum(self.save("f8", a)), float(a.sum()))

    def test_an_int32_sum_is_exact_in_int64(self):
        a = np.arange(-50_000, 150_000, dtype=np.int32) * 3
        self.assertEqual(self.app_sum(self.save("i4", a)), int(a.sum(dtype=np.int64)))

    def test_ooc_adds_no_fwrapv_to_the_consumer_and_its_signed_overflow_traps(self):
        commands = json.loads((self.consumer_build / "compile_commands.json").read_text())
        for entry in commands:
            command = entry.get("command") or " ".join(entry.get("arguments", []))
            self.assertNotIn("-fwrapv", command)
        trapped = run(self.app, "--overflow-traps")
        self.assertLess(trapped.returncode, 0, "a signed overflow in the consumer did not trap: "
                        "the wrap-around checks below would prove nothing")

    def test_integer_sums_and_products_wrap_as_numpys_without_fwrapv(self):
        # Reduced by ooc's templates instantiated in the consumer (no -fwrapv, overflow traps):
        # numpy's int64 and uint64 sums and products wrap modulo 2**64.
        cases = {
            "i8_sum": np.array([2**62, 2**62, 2**62, -5, 2**63 - 1], dtype=np.int64),
            "i8_min": np.array([-2**63, -2**63, -1], dtype=np.int64),
            "i8_prod": np.array([3**20, 3**20, 7, -11], dtype=np.int64),
            "u8_sum": np.array([2**64 - 1, 2**63, 2**63, 3], dtype=np.uint64),
            "u8_prod": np.array([2**40, 2**30, 5], dtype=np.uint64),
            "i1": np.array([127, 127, -128, 100] * 3000, dtype=np.int8),  # numpy sums int8 in int64
            "i4_prod": np.array([2**20, 2**20, 2**20, 3], dtype=np.int32),  # int32 prod is int64's
        }
        for name, a in cases.items():
            path = self.save(name, a)
            with np.errstate(over="ignore"):
                expected_sum, expected_prod = int(a.sum()), int(a.prod())
            self.assertEqual(self.app_sum(path, "sum"), expected_sum, name)
            self.assertEqual(self.app_sum(path, "prod"), expected_prod, name)
            self.assertEqual(self.app_sum(path), expected_sum, name)

    def test_a_big_endian_float32_sum_is_numpys_float32(self):
        a = np.random.default_rng(8).standard_normal((300, 70)).astype(">f4")
        self.assertEqual(np.float32(self.app_sum(self.save("be_f4", a))), a.sum())

    def test_the_mpi_component_sums_over_ranks_as_one_process(self):
        app_mpi = self.consumer_build / "app_mpi"
        if cache_value(BUILD_DIR, "OOC_WITH_MPI") != "ON":
            self.skipTest("ooc was built without MPI")
        self.assertTrue(app_mpi.is_file(), "find_package(ooc) gave no ooc::mpi")
        self.assertTrue((self.prefix / "include" / "ooc" / "mpi.hpp").is_file())
        a = np.random.default_rng(9).standard_normal(300_001)
        flags = os.environ.get("OOC_MPIEXEC_FLAGS", "--oversubscribe --allow-run-as-root --bind-to none -q").split()
        result = run(os.environ.get("OOC_MPIEXEC", "mpirun"), *flags, "-np", "3", app_mpi, self.save("mpi", a))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout), float(a.sum()))

    def test_the_full_tree_installs_a_working_oocrun(self):
        if cache_value(BUILD_DIR, "OOC_BUILD_CLI") == "OFF":
            self.skipTest("ooc was built without the CLI")
        prefix = self.tmp / "full-prefix"
        install = run("cmake", "--install", BUILD_DIR, "--prefix", prefix)
        self.assertEqual(install.returncode, 0, excerpt(install))
        oocrun = prefix / "bin" / "oocrun"
        self.assertTrue(oocrun.is_file(), f"{oocrun} was not installed")
        self.assertTrue(os.access(oocrun, os.X_OK))
        path = self.save("info", np.asfortranarray(np.zeros((4, 6), dtype=">i2")))
        plain = run(oocrun, "info", path)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertIn("int16", plain.stdout)
        as_json = run(oocrun, "info", path, "--json")
        self.assertEqual(as_json.returncode, 0, as_json.stderr)
        info = json.loads(as_json.stdout)
        self.assertEqual(info["shape"], [4, 6])
        self.assertEqual(info["dtype"], ">i2")


if __name__ == "__main__":
    unittest.main(verbosity=2)
