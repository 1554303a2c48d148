// A guard around yaml-cpp 0.7 (Debian 12's), which never ends on some malformed
// documents: a ',' where a block node is expected (",", "[a]\n,", "\"x\" ,",
// found by tests/fuzz/agent_config_fuzz) makes Parser::HandleNextDocument emit
// events without end, building nodes until memory runs out. A config file or web
// config file like that would take the agent (and check-config) down with it.
//
// RunawayYamlMark() first runs yaml-cpp's event parser alone, counting events:
// a document that ends has a bounded number of them per byte (every token takes
// at least one byte, and gives at most a few events), so a count beyond that
// bound means the parser stopped making progress, and the mark of the last event
// says where. Only when it ends is the text handed to YAML::Load / LoadAll.
// Exceptions from the parser (ordinary syntax errors) are left to that second
// parse, which reports them as before.
//
// Thread safety: pure; any thread.
#ifndef KVWATCH_CONFIG_YAML_GUARD_H_
#define KVWATCH_CONFIG_YAML_GUARD_H_

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <optional>
#include <sstream>
#include <string>

namespace kvwatch::config::internal {

// Where the parser stopped making progress, or nullopt when it ends (or fails
// with an ordinary exception).
inline std::optional<YAML::Mark> RunawayYamlMark(const std::string& text) {
  class Counter : public YAML::EventHandler {
   public:
    explicit Counter(std::size_t limit) : limit_(limit) {}
    void OnDocumentStart(const YAML::Mark& mark) override { Count(mark); }
    void OnDocumentEnd() override { Count(last_); }
    void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
    void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
    void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override {
      Count(mark);
    }
    void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {
      Count(mark);
    }
    void OnSequenceEnd() override { Count(last_); }
    void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
      Count(mark);
    }
    void OnMapEnd() override { Count(last_); }

    bool runaway = false;
    YAML::Mark last_ = YAML::Mark::null_mark();

   private:
    struct Stop {};
    void Count(const YAML::Mark& mark) {
      last_ = mark;
      if (++events_ > limit_) {
        runaway = true;
        throw Stop{};
      }
    }
    std::size_t limit_;
    std::size_t events_ = 0;
  };
  // Generous: a few events per byte at most for any document that ends.
  Counter counter(8 * text.size() + 64);
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(counter)) {
    }
  } catch (...) {
    // Counter::Stop, or a syntax error that the real parse reports.
  }
  if (counter.runaway) return counter.last_;
  return std::nullopt;
}

}  // namespace kvwatch::config::internal

#endif  // KVWATCH_CONFIG_YAML_GUARD_H_
