// The collector registry: live collectors created from the specs config/ parsed
// (config::CollectorSettings, collectors/collector_options.h). Parsing, defaults
// and the config's errors ("SOURCE:LINE: KEY: message") are config/'s; here are
// the checks each collector's Create() makes (ValidateCollector, for `kvwatch
// check-config`) and the creation itself. A new kind of collector is one
// alternative of collectors::CollectorOptions, one parser in
// config/collectors_section.cc and one case in each function below.
//
// Thread safety: pure functions, except that MakeCollector() and
// BuildCollectors() create collectors; any thread.
#ifndef KVWATCH_AGENT_RUNTIME_COLLECTOR_REGISTRY_H_
#define KVWATCH_AGENT_RUNTIME_COLLECTOR_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "collectors/collector.h"
#include "collectors/collector_options.h"

namespace kvwatch::agent {

using collectors::CollectorSpec;

// The checks the collector's Create() makes on spec's options, creating nothing
// (no socket, thread, descriptor or file): what `kvwatch check-config` runs.
// Whether a ZeroMQ endpoint can be bound or reached, a URL answers or a file
// exists are facts of the run, not of the config, and are not checked.
base::Status ValidateCollector(const CollectorSpec& spec);

// Creates (does not start) the collector of spec; errors are the collector's.
base::Result<std::unique_ptr<collectors::Collector>> MakeCollector(CollectorSpec spec,
                                                                   const collectors::CollectorLog& log);

// MakeCollector for each spec, in order; an error names the item
// ("collectors.kv_events[1]: ...").
base::Result<std::vector<std::unique_ptr<collectors::Collector>>> BuildCollectors(std::vector<CollectorSpec> specs,
                                                                                  const collectors::CollectorLog& log);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_COLLECTOR_REGISTRY_H_
