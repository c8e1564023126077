// Black-box tests of `omnirt run`: one request through a pipeline of child processes, output as
// JSON lines, errors, and a clean shutdown on SIGTERM in the middle of a request.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pipeline_harness.h"
#include "runner/builtins.h"
#include "support/command.h"

namespace omnirt::testing {
namespace {

std::vector<nlohmann::json> json_lines(const std::string& text) {
    std::vector<nlohmann::json> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    }
    return out;
}

// configs/test_pipeline.yaml is made of test stages: without the opt-in, the run names it.
TEST(RunCommandOptIn, TestStagesNeedTheOptIn) {
    ASSERT_EQ(::unsetenv(runner::kTestStagesEnv), 0);
    auto result = run_command({omnirt_binary(), "run", "--config",
                               source_path("configs/test_pipeline.yaml"), "--input", "{}"});
    EXPECT_NE(result.exit_code, 0);
    EXPECT_NE(result.err.find("unknown factory 'test."), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("OMNIRT_TEST_STAGES=1"), std::string::npos) << result.err;
}

// The other tests opt in; `omnirt run` and its stage processes inherit the environment.
class RunCommand : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_TRUE(runner::enable_test_stages().has_value()); }
};

TEST_F(RunCommand, StreamsChunksThenPrintsTheResult) {
    auto result =
        run_command({omnirt_binary(), "run", "--config", source_path("configs/test_pipeline.yaml"),
                     "--input", R"({"prompt": "hi"})", "--stream"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    auto lines = json_lines(result.out);
    ASSERT_EQ(lines.size(), 9u) << result.out;
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(lines[i]["stage"], "stream");
        EXPECT_EQ(lines[i]["chunk_index"], i);
        EXPECT_EQ(lines[i]["chunk"]["token"], i);
    }
    EXPECT_EQ(lines[8]["request_id"], "run-1");
    EXPECT_EQ(lines[8]["data"]["count"], 8);
}

TEST_F(RunCommand, RejectsBadInputAndReportsFailures) {
    auto bad_json = run_command({omnirt_binary(), "run", "--config",
                                 source_path("configs/test_pipeline.yaml"), "--input", "{oops"});
    EXPECT_EQ(bad_json.exit_code, 2);
    EXPECT_NE(bad_json.err.find("--input"), std::string::npos) << bad_json.err;
    auto bad_params = run_command({omnirt_binary(), "run", "--config",
                                   source_path("configs/test_pipeline.yaml"), "--params", "[1]"});
    EXPECT_EQ(bad_params.exit_code, 2);
    EXPECT_NE(bad_params.err.find("JSON object"), std::string::npos) << bad_params.err;
    auto failing =
        run_command({omnirt_binary(), "run", "--config", source_path("configs/test_pipeline.yaml"),
                     "--params", R"({"payload_bytes": -5})"});
    EXPECT_EQ(failing.exit_code, 1);
    EXPECT_NE(failing.err.find("stage 'produce'"), std::string::npos) << failing.err;
    EXPECT_NE(failing.err.find("payload_bytes"), std::string::npos) << failing.err;
}

// Starts `argv` with stdout on a pipe; returns the pid and the pipe's read end.
std::pair<pid_t, int> spawn_with_stdout(const std::vector<std::string>& argv) {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(fds[1], 1);
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    ::close(fds[1]);
    return {pid, fds[0]};
}

std::string read_line(int fd) {
    std::string line;
    char c = 0;
    while (::read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
    return line;
}

bool any_process_mentions(const std::string& text) {
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        std::ifstream in(entry.path() / "cmdline");
        std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (cmdline.find(text) != std::string::npos) return true;
    }
    return false;
}

TEST_F(RunCommand, SigtermInTheMiddleOfARequestShutsEverythingDown) {
    char base_template[] = "/tmp/omnirt-run-test-XXXXXX";
    ASSERT_NE(::mkdtemp(base_template), nullptr);
    std::string base = base_template;
    std::string config = base + "/pipeline.yaml";
    std::ofstream(config) << R"(
name: interrupted
model_path: none
endpoints: {base_path: ")" << base
                          << R"("}
stages:
  - {name: streamer, process: a, factory: test.token_streamer, factory_args: {tokens: 2},
     next: slow}
  - {name: slow, process: b, factory: test.sleep, factory_args: {ms: 600000}, terminal: true}
)";
    auto [pid, out] = spawn_with_stdout(
        {omnirt_binary(), "run", "--config", config, "--stream", "--request-id", "sigterm-1"});
    // The first chunk proves every process is up and the request is inside the pipeline.
    auto first = nlohmann::json::parse(read_line(out));
    EXPECT_EQ(first["stage"], "streamer");
    std::string runtime_dir;
    for (const auto& entry : std::filesystem::directory_iterator(base)) {
        if (entry.is_directory()) runtime_dir = entry.path();
    }
    ASSERT_FALSE(runtime_dir.empty());
    ASSERT_TRUE(any_process_mentions(runtime_dir));
    ASSERT_EQ(::kill(pid, SIGTERM), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ::close(out);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
    EXPECT_FALSE(std::filesystem::exists(runtime_dir));
    EXPECT_EQ(count_instance_segments(runtime_dir), 0);
    EXPECT_TRUE(eventually([&] { return !any_process_mentions(runtime_dir); }));
    std::filesystem::remove_all(base);
}

}  // namespace
}  // namespace omnirt::testing
