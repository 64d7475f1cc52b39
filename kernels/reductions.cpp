#include "ooc/kernels/reductions.hpp"

#include "ooc/error.hpp"
#include "ooc/kernel.hpp"

namespace ooc::kernels {

ReduceOp ReduceOp::parse(std::string_view name) {
  ReduceOp op;
  op.name_ = std::string(name);
  if (name == "sum") op.code_ = Code::sum;
  else if (name == "mean") op.code_ = Code::mean;
  else if (name == "min") op.code_ = Code::min;
  else if (name == "max") op.code_ = Code::max;
  else throw UsageError("", "unknown reduction '" + op.name_ + "' (known: sum, mean, min, max)");
  return op;
}

Scalar ReduceOp::run(const MappedArray& in, const PipelineOptions& options) const {
  return visit([&](const auto& kernel) { return reduce(in, kernel, options); });
}

}  // namespace ooc::kernels
