#include "metrics/exporter.h"

#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace braid::metrics {

Exporter::Exporter() : registry_(std::make_shared<prometheus::Registry>()) {}

Exporter::~Exporter() = default;

absl::StatusOr<std::unique_ptr<Exporter>> Exporter::Serve(
    const std::string& listen) {
  auto exporter = std::make_unique<Exporter>();
  // prometheus-cpp reports a failed bind by throwing (civetweb); this is the
  // one place its exceptions are turned into a Status.
  try {
    exporter->exposer_ = std::make_unique<prometheus::Exposer>(listen, 2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  std::vector<int> ports = exporter->exposer_->GetListeningPorts();
  if (ports.empty() || ports[0] <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, ": no port bound"));
  }
  exporter->port_ = ports[0];
  exporter->exposer_->RegisterCollectable(exporter->registry_);
  return exporter;
}

}  // namespace braid::metrics
