// oocrun: configures the command line and dispatches to the subcommand parsed (one file
// each: info.cpp, apply.cpp, copy.cpp, reduce.cpp, eval.cpp, text.cpp), nothing else.

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/text.hpp"
#include "ooc/runtime.hpp"

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  using namespace ooc::cli;
  // Before MPI starts its threads (under mpirun), so that they block these signals too.
  const SignalWatch& signals = SignalWatch::start();
  std::unique_ptr<Job> job;
  try {
    job = Job::start(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "oocrun: " << one_line(e.what()) << "\n";
    return kExitRuntime;
  }
  // After MPI's own handlers, which the ones here hand on to: a crash of the HDF5 library
  // on a damaged file ends the run with one line naming it and exit 1.
  ooc::contain_library_crashes("oocrun: ");
  if (!job->prints()) {
    // Under MPI every rank runs this same command; rank 0 alone speaks for them all.
    std::cout.setstate(std::ios::badbit);
    std::cerr.setstate(std::ios::badbit);
  }
  Context context(*job, signals);
  Common& common = context.common;

  CLI::App app{"oocrun: stream arrays larger than memory through kernels, tile by tile"};
  app.require_subcommand(1);
  app.add_option("--threads", common.threads, "worker threads (default: every core)")->check(CLI::Range(1, 4096));
  app.add_option("--tile-bytes", common.tile_bytes, "bytes per tile, e.g. 64M or 1G (default 16M)");
  app.add_option("--prefetch", common.prefetch, "tiles whose pages are requested ahead (default 2)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--io", common.io_mode,
                 "mmap, direct (O_DIRECT into reused buffers) or auto (default: direct for new outputs and "
                 "for cold inputs larger than memory, mmap otherwise)")
      ->check(CLI::IsMember({"auto", "mmap", "direct"}));
  app.add_flag("--progress", common.progress, "show progress on stderr");
  app.add_flag("--quiet", common.quiet, "print nothing but results and errors (and progress, if --progress asks)");
  app.add_flag("--verbose", common.verbose, "also say how each input is read (selections: runs, spans, advice)");

  InfoCommand info(app, common);
  ApplyCommand apply(app, common);
  CopyCommand copy(app, common);
  ReduceCommand reduce(app, common);
  UniqueCommand unique(app, common);
  SortCommand sort(app, common, false);
  SortCommand argsort(app, common, true);
  EvalCommand eval(app, common);
  LinalgCommand linalg(app, common);
  MatmulCommand matmul(app, common);
  TextCommands text(app);  // import, export

  std::vector<std::string> args = eval.shield_expression(app, std::vector<std::string>(argv, argv + argc));
  std::vector<char*> arg_pointers;
  for (std::string& a : args) arg_pointers.push_back(a.data());
  try {
    app.parse(argc, arg_pointers.data());
    apply.validate();
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string what = one_line(e.what());
    if (app.get_subcommands().empty()) {
      // CLI11 says only "A subcommand is required"; name the word it did not know.
      for (int i = 1; i < argc; ++i) {
        const std::string word = argv[i];
        if (word.empty() || word[0] == '-') continue;
        what = "unknown command '" + word + "' (known: info, apply, copy, reduce, unique, sort, argsort, eval, linalg, matmul, import, export)";
        break;
      }
    }
    std::cerr << "oocrun: " << what << " (see oocrun --help)\n";
    return kExitUsage;
  }

  if (!job->prints()) common.progress = false;
  try {
    if (info.parsed()) return info.run(context);
    if (apply.parsed()) return apply.run(context);
    if (copy.parsed()) return copy.run(context);
    if (reduce.parsed()) return reduce.run(context);
    if (unique.parsed()) return unique.run(context);
    if (sort.parsed()) return sort.run(context);
    if (argsort.parsed()) return argsort.run(context);
    if (eval.parsed()) return eval.run(context);
    if (linalg.parsed()) return linalg.run(context);
    if (matmul.parsed()) return matmul.run(context);
    return text.run(context);
  } catch (...) {
    return fail(context, std::current_exception());
  }
}
