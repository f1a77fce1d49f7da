// The Prometheus registry of the process and the HTTP exposer that serves it
// at /metrics on its own port (prometheus-cpp's pull exposer, civetweb).
//
// Owned by main(); the registry outlives every metric object built on it.
// Thread-safe (prometheus-cpp's registry and exposer are).
#ifndef BRAID_METRICS_EXPORTER_H_
#define BRAID_METRICS_EXPORTER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace braid::metrics {

class Exporter {
 public:
  // A registry with no exposer (metrics are recorded but not served).
  Exporter();
  ~Exporter();

  // Serves the registry at http://`listen`/metrics. `listen` is host:port;
  // port 0 picks a free port (see port()). UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<Exporter>> Serve(
      const std::string& listen);

  prometheus::Registry& registry() { return *registry_; }
  // The bound port; 0 when not serving.
  int port() const { return port_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace braid::metrics

#endif  // BRAID_METRICS_EXPORTER_H_
