// The ephemeral port range and the hint a failed bind gets when its port lies inside it.
#include "control/ports.h"

#include <gtest/gtest.h>

namespace omnirt::control {
namespace {

TEST(PortRange, ParsesTheProcFileAndRejectsMalformedText) {
    auto range = parse_port_range("32768\t60999\n");
    ASSERT_TRUE(range.has_value());
    EXPECT_EQ(range->first, 32768);
    EXPECT_EQ(range->last, 60999);
    for (const char* bad : {"", "32768", "x 60999", "60999 32768", "0 100", "1 70000",
                            "32768 60999 7", "-5 10", "99999999999999999999 1"}) {
        EXPECT_FALSE(parse_port_range(bad).has_value()) << bad;
    }
}

TEST(PortRange, ThisHostHasOne) {
    // Linux always has the file; the range it gives is well formed.
    auto range = ephemeral_port_range();
    ASSERT_TRUE(range.has_value());
    EXPECT_LE(range->first, range->last);
}

TEST(PortRange, AHintOnlyForATcpPortInsideTheRange) {
    const PortRange range{32768, 60999};
    const std::string hint = ephemeral_port_hint("tcp://127.0.0.1:40000", range);
    EXPECT_NE(hint.find("port 40000 lies in this host's ephemeral range 32768-60999"),
              std::string::npos)
        << hint;
    EXPECT_NE(hint.find("endpoints.base_port below 32768"), std::string::npos) << hint;
    EXPECT_NE(ephemeral_port_hint("tcp://[::1]:32768", range), "");
    EXPECT_NE(ephemeral_port_hint("tcp://h:60999", range), "");
    for (const char* quiet : {"tcp://127.0.0.1:17000", "tcp://127.0.0.1:61000", "tcp://127.0.0.1:*",
                              "tcp://127.0.0.1:", "tcp://127.0.0.1:4x000", "tcp://nohostport",
                              "ipc:///run/x:40000", "tcp://:40000x"}) {
        EXPECT_EQ(ephemeral_port_hint(quiet, range), "") << quiet;
    }
    EXPECT_EQ(ephemeral_port_hint("tcp://127.0.0.1:40000", std::nullopt), "");
}

}  // namespace
}  // namespace omnirt::control
