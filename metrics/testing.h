// Test helper: reads a metric's value back from a registry.
#ifndef BRAID_METRICS_TESTING_H_
#define BRAID_METRICS_TESTING_H_

#include <string>
#include <utility>
#include <vector>

#include "prometheus/registry.h"

namespace braid::metrics::testing {

// The value of the series `name` whose labels include every pair of
// `labels`: a counter's or gauge's value, a histogram's sample count.
// -1 when there is no such series.
inline double Value(
    const prometheus::Registry& registry, const std::string& name,
    const std::vector<std::pair<std::string, std::string>>& labels = {}) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      bool match = true;
      for (const auto& [k, v] : labels) {
        bool found = false;
        for (const prometheus::ClientMetric::Label& l : m.label) {
          found |= l.name == k && l.value == v;
        }
        match &= found;
      }
      if (!match) continue;
      switch (f.type) {
        case prometheus::MetricType::Counter:
          return m.counter.value;
        case prometheus::MetricType::Gauge:
          return m.gauge.value;
        case prometheus::MetricType::Histogram:
          return static_cast<double>(m.histogram.sample_count);
        default:
          return -1;
      }
    }
  }
  return -1;
}

}  // namespace braid::metrics::testing

#endif  // BRAID_METRICS_TESTING_H_
