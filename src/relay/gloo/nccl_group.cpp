// The nccl relay's process group. Compiled only against a libtorch built with NCCL (the
// USE_C10D_NCCL definition comes from its CMake targets); elsewhere this file is empty. Not
// built or tested by omnirt's CI, which has no CUDA libtorch.
//
// ProcessGroupNCCL creates the communicator of a pair of ranks on their first send/recv, and
// that blocks until both ranks take part. A relay posts a send before the receiver has its
// metadata, so a lazily created communicator would deadlock the first transfer; joining
// therefore creates the communicator of every pair up front, in one global pair order (no
// cycles), at the cost of world_size * (world_size - 1) / 2 communicators.
#ifdef USE_C10D_NCCL

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <ATen/ops/zeros.h>

#include <chrono>
#include <thread>

#include "relay/gloo/c10d_group.h"

namespace omnirt::relay {
namespace {

void wait_until_completed(const c10::intrusive_ptr<c10d::Work>& work,
                          std::chrono::steady_clock::time_point deadline) {
    while (!work->isCompleted()) {
        if (std::chrono::steady_clock::now() >= deadline) {
            throw std::runtime_error("timeout creating the NCCL communicator of a rank pair");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!work->isSuccess()) std::rethrow_exception(work->exception());
}

}  // namespace

Result<C10dGroup> join_nccl_group(const RelayOptions& options, const C10dOptions& c10d) {
    if (options.device.is_cpu()) {
        return fail(ErrorCode::invalid_argument,
                    "the nccl relay moves cuda tensors; its device must be cuda:N (gloo moves "
                    "host memory)");
    }
    OMNI_TRY(C10dStore opened, open_c10d_store(options, c10d));
    try {
        // The operation timeout stays at libtorch's default (a posted send may wait long for
        // its receiver); c10d.timeout bounds the store and the communicator set-up below.
        auto pg_options = c10d::ProcessGroupNCCL::Options::create();
        auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(
            opened.store, static_cast<int>(options.rank), static_cast<int>(options.world_size),
            pg_options);

        const auto deadline = std::chrono::steady_clock::now() + c10d.timeout;
        auto probe = at::zeros({1}, at::TensorOptions().dtype(at::kByte).device(
                                        at::Device(at::kCUDA, options.device.index)));
        const int rank = static_cast<int>(options.rank);
        const int world = static_cast<int>(options.world_size);
        for (int low = 0; low < world; ++low) {
            for (int high = low + 1; high < world; ++high) {
                if (rank != low && rank != high) continue;
                std::vector<at::Tensor> tensors{probe};
                auto work =
                    rank == low ? group->send(tensors, high, 0) : group->recv(tensors, low, 0);
                wait_until_completed(work, deadline);
            }
        }
        return C10dGroup{
            .process_group = std::move(group),
            .id = std::move(opened.group_id),
            .device = options.device,
            .wait_mode = C10dWaitMode::poll_completion,
            .ordered_matching = true,
            .transport_timeout = c10d.timeout,
        };
    } catch (...) {
        return fail(current_exception_error(
            ErrorCode::unavailable, "nccl relay (rank " + std::to_string(options.rank) + " of " +
                                        std::to_string(options.world_size) +
                                        ") could not connect its rank pairs"));
    }
}

}  // namespace omnirt::relay

#endif  // USE_C10D_NCCL
