#include "server/stats.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace braid::server {

std::string StatsJson(const batching::EngineStats& s) {
  return absl::StrCat(
      "{\"requests\": ", s.requests, ", \"waiting\": ", s.waiting,
      ", \"waiting_tokens\": ", s.waiting_tokens, ", \"running\": ", s.running,
      ", \"queue_io\": ", s.queue_sizes[0],
      ", \"queue_reasoning\": ", s.queue_sizes[1],
      ", \"queue_prompt\": ", s.queue_sizes[2],
      ", \"kv_blocks_total\": ", s.kv_blocks_total,
      ", \"kv_blocks_free\": ", s.kv_blocks_free,
      ", \"kv_blocks_cached\": ", s.kv_blocks_cached, ", \"steps\": ", s.steps,
      ", \"preemptions\": ", s.preemptions,
      ", \"computed_tokens\": ", s.computed_tokens,
      ", \"prefix_hit_tokens\": ", s.prefix_hit_tokens,
      ", \"completed\": ", s.completed, ", \"cancelled\": ", s.cancelled,
      ", \"failed\": ", s.failed, ", \"sessions\": ", s.sessions,
      ", \"kept_sessions\": ", s.kept_sessions, "}");
}

metrics::EngineGauges ToGauges(const batching::EngineStats& s) {
  metrics::EngineGauges g;
  for (int q = 0; q < batching::kNumQueues; ++q) {
    g.running[q] = s.queue_running[q];
    g.waiting[q] = s.queue_sizes[q] - s.queue_running[q];
  }
  g.kv_blocks_total = s.kv_blocks_total;
  g.kv_blocks_free = s.kv_blocks_free;
  g.prefix_hit_tokens = s.prefix_hit_tokens;
  g.computed_tokens = s.computed_tokens;
  return g;
}

void WriteStatsFile(const std::string& path,
                    const batching::EngineStats& stats) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  const std::string json = StatsJson(stats) + "\n";
  std::fwrite(json.data(), 1, json.size(), f);
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

int64_t ResidentBytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  const bool ok = std::fscanf(f, "%ld %ld", &pages, &resident) == 2;
  std::fclose(f);
  return ok ? int64_t{resident} * sysconf(_SC_PAGESIZE) : 0;
}

}  // namespace braid::server
