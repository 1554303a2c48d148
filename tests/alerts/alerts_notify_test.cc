// Tests for alerts/notify.h: the Alertmanager v2 re-send schedule (endsAt = now +
// 4 * resend interval while firing; resolved alerts re-sent with endsAt = resolve
// time until the retention passes) and the JSON payload.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "alerts/format.h"
#include "alerts/notify.h"
#include "base/json_writer.h"

namespace kvwatch::alerts {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

TimePoint At(int s) { return TimePoint{} + seconds(1'700'000'000 + s); }

AlertStatus Firing(int fired_at) {
  AlertStatus alert;
  alert.labels = {{"alertname", "KVWatchKneeShift"}, {"severity", "warning"}};
  alert.annotations = {{"summary", "knee grew"}};
  alert.state = AlertState::kFiring;
  alert.active_since = At(fired_at - 900);
  alert.fired_at = At(fired_at);
  return alert;
}

// Simulates the agent: calls DueForSending every `step` seconds from `from` to `to`
// and records the sends, as Alerter::TakeDue does.
std::vector<std::pair<int, PostableAlert>> Drive(AlertStatus& alert, const NotifyOptions& options, int from, int to,
                                                 int step) {
  std::vector<std::pair<int, PostableAlert>> sent;
  for (int t = from; t <= to; t += step) {
    if (auto item = DueForSending(At(t), alert, options)) {
      alert.last_sent_at = At(t);
      if (alert.state == AlertState::kResolved) alert.resolution_sent = true;
      sent.emplace_back(t, *item);
    }
  }
  return sent;
}

TEST(NotifyTest, FiringIsResentEveryIntervalWithEndsAtFourIntervalsAhead) {
  NotifyOptions options;  // 60 s
  AlertStatus alert = Firing(1000);
  auto sent = Drive(alert, options, 1000, 1600, 15);
  ASSERT_EQ(sent.size(), 11u);  // at 1000, 1060, ..., 1600
  for (std::size_t i = 0; i < sent.size(); ++i) {
    const auto& [t, item] = sent[i];
    EXPECT_EQ(t, 1000 + 60 * static_cast<int>(i));
    EXPECT_EQ(item.ends_at, At(t) + minutes(4));
    EXPECT_EQ(item.starts_at, At(1000));  // stable startsAt
    EXPECT_EQ(item.labels, alert.labels);
    EXPECT_EQ(item.annotations.at("summary"), "knee grew");
  }
}

TEST(NotifyTest, EndsAtFollowsTheConfiguredInterval) {
  NotifyOptions options;
  options.resend_interval = seconds(30);
  AlertStatus alert = Firing(0);
  auto item = DueForSending(At(10), alert, options);
  ASSERT_TRUE(item.has_value());
  EXPECT_EQ(item->ends_at, At(10 + 120));
  EXPECT_EQ(FiringEndsAt(At(10), options), At(130));
}

TEST(NotifyTest, PendingAndInactiveAreNeverSent) {
  NotifyOptions options;
  AlertStatus alert;
  alert.state = AlertState::kPending;
  alert.active_since = At(0);
  EXPECT_FALSE(DueForSending(At(100), alert, options).has_value());
  alert.state = AlertState::kInactive;
  EXPECT_FALSE(DueForSending(At(100), alert, options).has_value());
}

TEST(NotifyTest, ResolvedIsSentAtOnceThenRepeatedUntilRetention) {
  NotifyOptions options;
  options.resolved_retention = minutes(10);
  AlertStatus alert = Firing(0);
  Drive(alert, options, 0, 590, 10);  // last firing send at 540
  alert.state = AlertState::kResolved;
  alert.resolved_at = At(600);
  // Due at once although the last (firing) send was only 10 s earlier.
  alert.last_sent_at = At(590);
  auto sent = Drive(alert, options, 600, 3000, 10);
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(sent.front().first, 600);
  for (const auto& [t, item] : sent) {
    EXPECT_EQ(item.ends_at, At(600));  // endsAt = resolve time
    EXPECT_EQ(item.starts_at, At(0));
    EXPECT_LE(t, 600 + 600);  // stops after the retention
  }
  EXPECT_EQ(sent.size(), 11u);  // 600, 660, ..., 1200
  EXPECT_EQ(sent.back().first, 1200);
}

TEST(NotifyTest, DefaultRetentionIsAtLeastFiveMinutes) {
  NotifyOptions options;
  EXPECT_GE(options.resolved_retention, minutes(5));
  EXPECT_TRUE(options.Validate("notify").ok());
  options.resolved_retention = minutes(4);
  base::Status status = options.Validate("notify");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().find("notify.resolved_retention"), std::string::npos);
  options = NotifyOptions();
  options.resend_interval = seconds(0);
  EXPECT_FALSE(options.Validate("notify").ok());
}

TEST(NotifyTest, EncodesThePostableAlertsArray) {
  PostableAlert alert;
  alert.labels = {{"alertname", "KVWatchKneeShift"}, {"replica", "r1"}};
  alert.annotations = {{"summary", "knee 1000 -> 1400"}};
  alert.starts_at = At(0);
  alert.ends_at = At(240) + std::chrono::milliseconds(5);
  alert.generator_url = "http://agent:9470/alerts";
  const std::vector<PostableAlert> alerts = {alert};
  EXPECT_EQ(EncodeAlertmanagerPayload(alerts),
            "[{\"labels\":{\"alertname\":\"KVWatchKneeShift\",\"replica\":\"r1\"},"
            "\"annotations\":{\"summary\":\"knee 1000 -> 1400\"},"
            "\"startsAt\":\"2023-11-14T22:13:20.000Z\",\"endsAt\":\"2023-11-14T22:17:20.005Z\","
            "\"generatorURL\":\"http://agent:9470/alerts\"}]");
  alert.generator_url.clear();
  const std::vector<PostableAlert> two = {alert, alert};
  const std::string body = EncodeAlertmanagerPayload(two);
  EXPECT_EQ(body.find("generatorURL"), std::string::npos);
  EXPECT_EQ(body.front(), '[');
  EXPECT_NE(body.find("},{"), std::string::npos);
  EXPECT_EQ(EncodeAlertmanagerPayload({}), "[]");
}

TEST(NotifyTest, JsonQuoteEscapes) {
  EXPECT_EQ(base::JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(base::JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(base::JsonQuote("l1\nl2\tx\r"), "\"l1\\nl2\\tx\\r\"");
  EXPECT_EQ(base::JsonQuote(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(base::JsonQuote(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
  // Valid UTF-8 is kept; invalid bytes become U+FFFD.
  EXPECT_EQ(base::JsonQuote("1.5 GiB \xE2\x86\x92 2 GiB"), "\"1.5 GiB \xE2\x86\x92 2 GiB\"");
  EXPECT_EQ(base::JsonQuote("bad \xFF byte"), "\"bad \xEF\xBF\xBD byte\"");
  EXPECT_EQ(base::JsonQuote("cut \xE2\x86"), "\"cut \xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_EQ(base::JsonQuote("overlong \xC0\xAF"), "\"overlong \xEF\xBF\xBD\xEF\xBF\xBD\"");
}

}  // namespace
}  // namespace kvwatch::alerts
