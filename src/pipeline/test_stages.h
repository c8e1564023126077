#pragma once
// Built-in test stages and request-aware test functions: small, deterministic building blocks
// for pipeline tests and examples (configs name them like any other factory).
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
//                          arg always is true; else identity (for supervision tests)
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
#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/error.h"
#include "core/registry.h"
#include "core/tensor.h"
#include "pipeline/simple_scheduler.h"
#include "pipeline/stage_factory.h"

namespace omnirt::pipeline {

// Registers every test stage and function. Idempotent: names already registered are kept.
// Thread-safe.
[[nodiscard]] Status register_test_stages(Registry& registry = Registry::global());

// A contiguous 1-D tensor of `bytes` bytes (bytes must be a multiple of the element size) whose
// element i holds (i % 251) converted to `dtype` (bool: i % 2; float16 / bfloat16: the byte
// pattern (k * 7 + 3) & 0xff of byte k). The test stages' payload pattern; tests compare with it.
[[nodiscard]] Result<Tensor> make_pattern_tensor(std::size_t bytes, DType dtype);

// Typed reads of a stage's args; a missing key gives `fallback`; a wrong type gives
// invalid_argument naming the stage and the arg.
[[nodiscard]] Result<std::int64_t> int_arg(const StageContext& context, std::string_view key,
                                           std::int64_t fallback);
[[nodiscard]] Result<double> number_arg(const StageContext& context, std::string_view key,
                                        double fallback);
[[nodiscard]] Result<bool> bool_arg(const StageContext& context, std::string_view key,
                                    bool fallback);
[[nodiscard]] Result<std::string> string_arg(const StageContext& context, std::string_view key,
                                             std::string fallback);

namespace test_stages_detail {
// The parts of register_test_stages, one per source file.
[[nodiscard]] Status register_basic_stages(Registry& registry);
[[nodiscard]] Status register_stream_stages(Registry& registry);
[[nodiscard]] Status register_functions(Registry& registry);
// Registry::add that keeps an existing entry of the same name.
[[nodiscard]] Status add_if_absent(Registry& registry, FunctionKind kind, std::string name,
                                   RegistryEntry entry);
// A SimpleScheduler for `context` (stage name, tracer, arg worker_threads, default
// `default_workers`, arg inline_compute: SimpleSchedulerOptions::inline_when_idle, default false)
// running `compute`.
[[nodiscard]] Result<std::unique_ptr<Scheduler>> make_simple_scheduler(
    const StageContext& context, ComputeFn compute, std::int64_t default_workers = 1);
}  // namespace test_stages_detail

}  // namespace omnirt::pipeline
