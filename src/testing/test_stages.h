#pragma once
// The test stages and request-aware test functions: small, deterministic building blocks for
// pipeline tests, benchmarks and examples (configs name them like any other factory). They are
// not part of the runtime: test binaries register them, and the omnirt binary only on the
// explicit opt-in OMNIRT_TEST_STAGES=1 (runner/builtins.h, docs/cli.md).
//
// Factories (FunctionKind::factory):
//   test.identity          result data = input data
//   test.arithmetic        args {scale: number = 1, offset: number = 0}: numbers and
//                          float32 / float64 tensors in data (data itself, or each value of a
//                          map) become x * scale + offset; an int stays an int when scale and
//                          offset are ints; other map values are kept
//   test.sleep             args {ms: int}, request param sleep_ms overrides: waits that long
//                          (an abort or stop ends the wait at once), then identity
//   test.fail              fails with "test.fail: <arg message | default>" when arg always is true
//                          or request.params["fail_stage"] names the stage; else identity
//   test.tensor_producer   args {bytes: int = 0, dtype: string = "uint8", reuse: bool = false},
//                          request param payload_bytes overrides bytes: data = {"tensor":
//                          pattern tensor, "input": input data}; with reuse the tensor is made
//                          once (read-only) and shared by every request (for benchmarks)
//   test.token_streamer    args {tokens: int = 8}, request param num_tokens overrides: emits
//                          {"token": i, "text": "t<i> "} to the client and to every stream_to
//                          stage, then data = {"text": concatenated texts, "tokens": n,
//                          "input": input data}
//   test.stream_collector  StreamingScheduler; args {forward: bool = false} forwards each chunk
//                          to the client; data = {"chunks": [chunk...], "count": n,
//                          "input": payload data}
//   test.crash             std::_Exit(77) when request.params["crash_stage"] names the stage or
//                          arg always is true; else identity (for supervision tests); with arg
//                          crash_at_start_if_exists: path, std::_Exit(78) while the stage is
//                          created if that file exists (a crash loop on restart)
//   test.sink              for benchmarks: drops every tensor of its input and answers data =
//                          {"tensor_bytes": total bytes of the input's tensors}, so a large
//                          payload is not sent back to the coordinator inline
//   test.rank_log          for tensor-parallel groups: every rank appends the ids of the requests
//                          its scheduler computes to "<args.dir>/<stage>.rank<r>.log", one per
//                          line, then passes the input on; tests compare the ranks' logs
// Functions:
//   merge           test.merge                 data = {source stage: that source's data}
//   route           test.route_from_params     request.params["route"] (list of stage names)
//   wait_for        test.wait_for_from_params  request.params["wait_for"] (list) when the payload
//                                              has it; nullopt (keep waiting) otherwise
//   stream_done     test.stream_done_from_params  request.params["stream_done_to"] (list)
//   terminal_stages test.terminal_from_params  request.params["terminal_stages"] (list) or
//                                              nullopt (the pipeline's static terminals)
//   projection      test.project_tag           data = {"projected_for": target, "data": old}
// Request params that the functions read must be lists of strings; other types are
// invalid_argument errors.
//
// Every factory but test.stream_collector also accepts arg worker_threads (int >= 1, default 1).
#include <cstddef>

#include "core/dtype.h"
#include "core/error.h"
#include "core/registry.h"
#include "core/tensor.h"

namespace omnirt::testing {

// Registers every test stage and function. Idempotent: names already registered are kept.
// Thread-safe.
[[nodiscard]] Status register_test_stages(Registry& registry = Registry::global());

// A contiguous 1-D tensor of `bytes` bytes (bytes must be a multiple of the element size) whose
// element i holds (i % 251) converted to `dtype` (bool: i % 2; float16 / bfloat16: the byte
// pattern (k * 7 + 3) & 0xff of byte k). The test stages' payload pattern; tests compare with it.
[[nodiscard]] Result<Tensor> make_pattern_tensor(std::size_t bytes, DType dtype);

namespace test_stages_detail {
// The parts of register_test_stages, one per source file.
[[nodiscard]] Status register_basic_stages(Registry& registry);
[[nodiscard]] Status register_stream_stages(Registry& registry);
[[nodiscard]] Status register_functions(Registry& registry);
[[nodiscard]] Status register_sink_stage(Registry& registry);      // test.sink
[[nodiscard]] Status register_rank_log_stage(Registry& registry);  // test.rank_log
}  // namespace test_stages_detail

}  // namespace omnirt::testing
