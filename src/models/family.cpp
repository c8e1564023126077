#include "models/family.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

namespace omnirt::models {
namespace {

bool claims(const ModelFamily& family, std::string_view name_or_arch) {
    return family.name == name_or_arch ||
           std::ranges::find(family.arch_ids, name_or_arch) != family.arch_ids.end();
}

}  // namespace

Status FamilyRegistry::add(ModelFamily family) {
    if (family.name.empty()) {
        return fail(ErrorCode::invalid_argument, "a model family needs a name");
    }
    std::vector<std::string> ids = family.arch_ids;
    ids.push_back(family.name);
    for (const ModelFamily& known : families_) {
        for (const std::string& id : ids) {
            if (claims(known, id)) {
                return fail(ErrorCode::already_exists, "model family '" + family.name + "': '" +
                                                           id + "' already names the family '" +
                                                           known.name + "'");
            }
        }
        if (family.serve_by_default && known.serve_by_default) {
            return fail(ErrorCode::already_exists,
                        "model family '" + family.name + "': '" + known.name +
                            "' is already the default family of omnirt serve");
        }
    }
    families_.push_back(std::move(family));
    return ok_status();
}

Result<const ModelFamily*> FamilyRegistry::find(std::string_view name_or_arch) const {
    for (const ModelFamily& family : families_) {
        if (claims(family, name_or_arch)) return &family;
    }
    return fail(ErrorCode::not_found, "unknown arch '" + std::string(name_or_arch.substr(0, 64)) +
                                          "'; known: " + describe_known());
}

Result<const ModelFamily*> FamilyRegistry::detect(const nlohmann::json& config,
                                                  const std::string& where) const {
    if (!config.is_object()) {
        return fail(ErrorCode::invalid_argument, where + ": expected a JSON object");
    }
    std::string model_type;
    if (auto it = config.find("model_type"); it != config.end() && it->is_string()) {
        model_type = it->get<std::string>();
        for (const ModelFamily& family : families_) {
            if (claims(family, model_type)) return &family;
        }
    }
    std::vector<std::string> architectures;
    if (auto it = config.find("architectures"); it != config.end() && it->is_array()) {
        for (const auto& entry : *it) {
            if (!entry.is_string()) continue;
            architectures.push_back(entry.get<std::string>());
            for (const ModelFamily& family : families_) {
                if (std::ranges::find(family.architectures, architectures.back()) !=
                    family.architectures.end()) {
                    return &family;
                }
            }
        }
    }
    std::string seen = model_type.empty() ? "no model_type" : "model_type '" + model_type + "'";
    for (const std::string& name : architectures) seen += ", architecture '" + name + "'";
    return fail(ErrorCode::not_found,
                where + ": no model family for " + seen + "; known: " + describe_known());
}

Result<const ModelFamily*> FamilyRegistry::detect_directory(
    const std::filesystem::path& directory) const {
    const std::filesystem::path path = directory / "config.json";
    std::ifstream file(path);
    if (!file) {
        return fail(ErrorCode::not_found,
                    path.string() + " cannot be read: a checkpoint directory needs config.json");
    }
    auto config = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded()) {
        return fail(ErrorCode::invalid_argument, path.string() + ": not valid JSON");
    }
    return detect(config, path.string());
}

Result<const ModelFamily*> FamilyRegistry::default_family() const {
    for (const ModelFamily& family : families_) {
        if (family.serve_by_default) return &family;
    }
    return fail(ErrorCode::not_found, "no model family is the default of omnirt serve (known: " +
                                          describe_known() + "); pass --config or --model-path");
}

std::string FamilyRegistry::describe_known() const {
    if (families_.empty()) return "none";
    std::string out;
    for (const ModelFamily& family : families_) {
        if (!out.empty()) out += ", ";
        out += family.name;
        if (!family.arch_ids.empty()) {
            out += " (";
            for (std::size_t i = 0; i < family.arch_ids.size(); ++i) {
                out += (i > 0 ? ", " : "") + family.arch_ids[i];
            }
            out += ")";
        }
    }
    return out;
}

}  // namespace omnirt::models
