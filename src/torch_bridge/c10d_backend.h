#pragma once
// The class a c10d process-group implementation (ProcessGroupGloo, ProcessGroupNCCL) derives
// from, and so the type that holds one: c10d::ProcessGroup in libtorch 1.x (Debian 12's 1.13),
// c10d::Backend from libtorch 2.0 on (where ProcessGroup became a dispatcher over Backends).
// Both have the same send / recv / broadcast / allreduce / allgather members.
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace omnirt::torch_bridge {

#if TORCH_VERSION_MAJOR >= 2
using C10dBackend = c10d::Backend;
#else
using C10dBackend = c10d::ProcessGroup;
#endif

}  // namespace omnirt::torch_bridge
