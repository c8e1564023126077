// Request-aware test functions (merge, route, wait_for, stream_done, terminal_stages,
// projection) driven by request params.
#include <utility>

#include "testing/test_stages_internal.h"

namespace omnirt::testing {
namespace {

// request.params[key] as a list of strings; nullopt when absent.
Result<std::optional<std::vector<std::string>>> string_list_param(const OmniRequest& request,
                                                                  std::string_view function,
                                                                  std::string_view key) {
    const Value* value = request.params.find(key);
    if (value == nullptr) return std::optional<std::vector<std::string>>();
    const Error wrong{ErrorCode::invalid_argument, std::string(function) + ": request param '" +
                                                       std::string(key) +
                                                       "' must be a list of stage names"};
    const List* list = value->if_list();
    if (list == nullptr) return fail(wrong);
    std::vector<std::string> names;
    names.reserve(list->size());
    for (const Value& item : *list) {
        if (!item.is_string()) return fail(wrong);
        names.push_back(item.as_string());
    }
    return std::optional(std::move(names));
}

// Like string_list_param, but absence is an error.
Result<std::vector<std::string>> required_string_list(const OmniRequest& request,
                                                      std::string_view function,
                                                      std::string_view key) {
    OMNI_TRY(auto names, string_list_param(request, function, key));
    if (!names) {
        return fail(ErrorCode::invalid_argument, std::string(function) + ": request param '" +
                                                     std::string(key) + "' is missing");
    }
    return std::move(*names);
}

Result<StagePayload> merge(
    const std::string& request_id,
    const std::map<std::string, std::shared_ptr<const StagePayload>>& inputs) {
    const StagePayload* any_input = nullptr;
    Map data;
    for (const auto& [source, payload] : inputs) {
        if (payload == nullptr) {
            return fail(ErrorCode::invalid_argument,
                        "test.merge: the input from '" + source + "' is null");
        }
        if (any_input == nullptr) any_input = payload.get();
        data.emplace(source, payload->data);
    }
    if (any_input == nullptr) return fail(ErrorCode::invalid_argument, "test.merge: no inputs");
    return StagePayload{
        .request_id = request_id, .request = any_input->request, .data = Value(std::move(data))};
}

Result<std::vector<std::string>> route_from_params(const std::string&, const StagePayload& output) {
    return required_string_list(output.request, "test.route_from_params", "route");
}

Result<std::optional<std::vector<std::string>>> wait_for_from_params(const std::string&,
                                                                     const std::string&,
                                                                     const StagePayload& payload) {
    return string_list_param(payload.request, "test.wait_for_from_params", "wait_for");
}

Result<std::vector<std::string>> stream_done_from_params(const std::string&,
                                                         const StagePayload& output) {
    return required_string_list(output.request, "test.stream_done_from_params", "stream_done_to");
}

Result<std::optional<std::vector<std::string>>> terminal_from_params(const OmniRequest& request) {
    return string_list_param(request, "test.terminal_from_params", "terminal_stages");
}

Result<StagePayload> project_tag(const std::string& target, const StagePayload& output) {
    StagePayload projected = output;
    projected.data = Value(Map{{"projected_for", Value(target)}, {"data", output.data}});
    return projected;
}

}  // namespace

namespace test_stages_detail {

Status register_functions(Registry& registry) {
    auto add = [&](FunctionKind kind, const char* name, std::any callable,
                   const char* description) {
        return registry.add_if_absent(
            kind, name, RegistryEntry{.callable = std::move(callable), .description = description});
    };
    OMNI_RETURN_IF_ERROR(add(FunctionKind::merge, "test.merge", MergeFn(merge),
                             "data = {source stage: that source's data}"));
    OMNI_RETURN_IF_ERROR(add(FunctionKind::route, "test.route_from_params",
                             RouteFn(route_from_params), "targets = request.params.route"));
    OMNI_RETURN_IF_ERROR(add(FunctionKind::wait_for, "test.wait_for_from_params",
                             WaitForFn(wait_for_from_params),
                             "sources = request.params.wait_for when present, else keep waiting"));
    OMNI_RETURN_IF_ERROR(add(FunctionKind::stream_done, "test.stream_done_from_params",
                             StreamDoneFn(stream_done_from_params),
                             "targets = request.params.stream_done_to"));
    OMNI_RETURN_IF_ERROR(add(FunctionKind::terminal_stages, "test.terminal_from_params",
                             TerminalStagesFn(terminal_from_params),
                             "terminals = request.params.terminal_stages, else the static ones"));
    return add(FunctionKind::projection, "test.project_tag", ProjectionFn(project_tag),
               "data = {projected_for: target, data: old data}");
}

}  // namespace test_stages_detail

}  // namespace omnirt::testing
