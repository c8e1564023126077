#pragma once
// UCX settings omnirt changes from UCX's own defaults, unless the user set them: first thing in
// main(), as environment variables (UCX reads its configuration from the environment when a
// relay creates its context; stage processes inherit them).
//
// UCX_TCP_TX_SEG_SIZE / UCX_TCP_RX_SEG_SIZE = 1M (UCX: 8K / 64K): the ucx relay's get between
// two hosts without RDMA moves its data over TCP in segments of this size. A 3-stage pipeline of
// 4 MiB tensors across two network namespaces moved 1.6x the requests with 1 MiB segments
// (docs/benchmarks.md "Two nodes over ucx/tcp"). It costs about 1 MiB of buffers per segment
// kept for a TCP connection.
namespace omnirt::cli {

void choose_ucx_defaults();

}  // namespace omnirt::cli
