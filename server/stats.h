// The engine's counters as the daemon reports them: one line of JSON (the
// drain log, --stats_file) and the metrics' gauges. Stateless; thread-safe.
#ifndef BRAID_SERVER_STATS_H_
#define BRAID_SERVER_STATS_H_

#include <string>

#include "batching/engine.h"
#include "metrics/engine_metrics.h"

namespace braid::server {

// One line of JSON with every counter of `stats`.
std::string StatsJson(const batching::EngineStats& stats);

// The gauges' view of `stats`: per queue, requests holding KV blocks
// (running) and the rest (waiting).
metrics::EngineGauges ToGauges(const batching::EngineStats& stats);

// This process's resident memory in bytes (/proc/self/statm; 0 if unread).
int64_t ResidentBytes();

// Writes StatsJson atomically (temp file + rename); errors are ignored.
void WriteStatsFile(const std::string& path,
                    const batching::EngineStats& stats);

}  // namespace braid::server

#endif  // BRAID_SERVER_STATS_H_
