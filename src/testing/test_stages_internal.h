#pragma once
// Private to src/testing: the pipeline names the test stage sources use.
#include "pipeline/simple_scheduler.h"
#include "pipeline/stage_args.h"
#include "pipeline/stage_factory.h"
#include "testing/test_stages.h"

namespace omnirt::testing {

using pipeline::bool_arg;
using pipeline::Emitter;
using pipeline::int_arg;
using pipeline::make_simple_scheduler;
using pipeline::number_arg;
using pipeline::Scheduler;
using pipeline::StageContext;
using pipeline::StageFactory;
using pipeline::string_arg;

}  // namespace omnirt::testing
