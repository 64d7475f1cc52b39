// mpirun -np N app_mpi ARRAY.npy: the sum of the array over N ranks, printed by rank 0,
// bit for bit what one process computes. Built against the installed package only.

#include <ooc/mpi.hpp>
#include <ooc/ooc.hpp>

#include <exception>
#include <iostream>

int main(int argc, char** argv) {
  ooc::mpi::Session session(argc, argv);
  const ooc::mpi::Communicator world;
  if (argc != 2) {
    if (world.rank() == 0) std::cerr << "usage: app_mpi ARRAY.npy\n";
    return 2;
  }
  try {
    ooc::PipelineOptions options;
    options.tile_bytes = 64 << 10;  // small tiles, so that a small array spreads over the ranks
    const ooc::MappedArray share = ooc::mpi::map_share(world, argv[1], ooc::Access::read_only, options);
    const ooc::Scalar sum = ooc::mpi::reduce(world, share, ooc::kernels::Sum{}, options);
    if (world.rank() == 0) std::cout << sum.to_json() << "\n";
  } catch (const std::exception& e) {
    if (world.rank() == 0) std::cerr << "app_mpi: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
