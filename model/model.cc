#include "model/model.h"

namespace braid::model {

absl::Status Model::ForwardTop(const Batch& batch, KvCache& kv,
                               const TopRequest& req, TopLogits* out) {
  const int n_vocab = info().n_vocab;
  if (absl::Status st = CheckTopRequest(req, n_vocab); !st.ok()) return st;
  if (absl::Status st = Forward(batch, kv, &out->rows); !st.ok()) return st;
  ReduceLogits(out->rows.data(), static_cast<int>(out->rows.size() / n_vocab),
               n_vocab, req, out);
  return absl::OkStatus();
}

}  // namespace braid::model
