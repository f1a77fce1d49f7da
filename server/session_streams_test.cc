#include "frontend/session_streams.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/convert.h"

namespace braid::server {
namespace {

using ::braid::frontend::BindModelStreams;
using ::braid::frontend::ModelStreams;
using ::braid::frontend::ModelStreamsOf;
using ::testing::HasSubstr;

ModelStreams FourStreams() {
  ModelStreams m;
  m.count = 4;
  m.roles = {"system", "User", "reasoning", "output"};
  m.layout = "aligned";
  return m;
}

v1::StreamSpec Spec(const std::string& id, v1::StreamRole role,
                    v1::StreamKind kind) {
  v1::StreamSpec s;
  s.set_stream_id(id);
  s.set_role(role);
  s.set_kind(kind);
  return s;
}

// `open`'s streams as BuildSession leaves them (outputs see all).
batching::SessionOptions Options(const v1::SessionOpen& open) {
  batching::SessionOptions o;
  for (const v1::StreamSpec& s : open.streams()) {
    batching::SessionStreamOptions so;
    so.name = s.stream_id();
    so.output = s.kind() != v1::STREAM_KIND_INPUT;
    so.visibility = s.visibility() == v1::VISIBILITY_BRANCH
                        ? batching::StreamVisibility::kBranch
                        : batching::StreamVisibility::kAll;
    o.streams.push_back(so);
  }
  return o;
}

TEST(ModelStreamsTest, FromConfig) {
  model::ModelInfo c;
  ModelStreams single = ModelStreamsOf(c);
  EXPECT_EQ(single.count, 1);
  EXPECT_FALSE(single.multi());
  EXPECT_EQ(single.layout, "");
  c.n_streams = 3;
  c.stream_roles = {"a", "b", "c"};
  c.stream_layout = model::StreamLayout::kRows;
  c.silence_token_id = 7;
  ModelStreams rows = ModelStreamsOf(c);
  EXPECT_TRUE(rows.multi());
  EXPECT_EQ(rows.roles, c.stream_roles);
  EXPECT_EQ(rows.layout, "rows");
  EXPECT_EQ(rows.silence_token_id, 7);
}

TEST(BindModelStreamsTest, SingleStreamModelKeepsTheLinearLayout) {
  v1::SessionOpen open;
  *open.add_streams() =
      Spec("user", v1::STREAM_ROLE_USER, v1::STREAM_KIND_INPUT);
  *open.add_streams() =
      Spec("out", v1::STREAM_ROLE_OUTPUT, v1::STREAM_KIND_OUTPUT);
  batching::SessionOptions o = Options(open);
  ASSERT_TRUE(BindModelStreams(FromProto(open), ModelStreams{}, &o).ok());
  EXPECT_FALSE(o.aligned);
  EXPECT_EQ(o.model_streams, 0);
}

TEST(BindModelStreamsTest, ByRoleCaseInsensitiveAndByOrder) {
  v1::SessionOpen open;
  *open.add_streams() =
      Spec("out", v1::STREAM_ROLE_OUTPUT, v1::STREAM_KIND_OUTPUT);
  *open.add_streams() =
      Spec("user", v1::STREAM_ROLE_USER, v1::STREAM_KIND_INPUT);
  // No role: by order, open.streams[2] <-> model stream 2.
  *open.add_streams() =
      Spec("think", v1::STREAM_ROLE_UNSPECIFIED, v1::STREAM_KIND_REASONING);
  batching::SessionOptions o = Options(open);
  ASSERT_TRUE(BindModelStreams(FromProto(open), FourStreams(), &o).ok());
  EXPECT_TRUE(o.aligned);
  EXPECT_EQ(o.model_streams, 4);
  EXPECT_EQ(o.streams[0].model_stream, 3);
  EXPECT_EQ(o.streams[1].model_stream, 1);
  EXPECT_EQ(o.streams[2].model_stream, 2);
  EXPECT_FALSE(o.rows);
}

TEST(BindModelStreamsTest, RowsLayoutAndBranchesAreServed) {
  v1::SessionOpen open;
  *open.add_streams() =
      Spec("user", v1::STREAM_ROLE_USER, v1::STREAM_KIND_INPUT);
  v1::StreamSpec branch =
      Spec("out", v1::STREAM_ROLE_OUTPUT, v1::STREAM_KIND_OUTPUT);
  branch.set_visibility(v1::VISIBILITY_BRANCH);
  *open.add_streams() = branch;
  ModelStreams rows = FourStreams();
  rows.layout = "rows";
  rows.silence_token_id = 3;
  batching::SessionOptions o = Options(open);
  ASSERT_TRUE(BindModelStreams(FromProto(open), rows, &o).ok());
  EXPECT_TRUE(o.aligned);
  EXPECT_TRUE(o.rows);
  EXPECT_EQ(o.silence_token_id, 3);
  EXPECT_EQ(o.model_streams, 4);
  EXPECT_EQ(o.streams[1].model_stream, 3);
  EXPECT_EQ(o.streams[1].visibility, batching::StreamVisibility::kBranch);
}

TEST(BindModelStreamsTest, ErrorsNameTheField) {
  struct Case {
    const char* name;
    std::vector<v1::StreamSpec> streams;
    ModelStreams model;
    absl::StatusCode code;
    const char* error;
  };
  ModelStreams unnamed = FourStreams();
  unnamed.roles.clear();
  const v1::StreamSpec in =
      Spec("in", v1::STREAM_ROLE_UNSPECIFIED, v1::STREAM_KIND_INPUT);
  const Case cases[] = {
      {"too many streams",
       {in, in, in, in, in},
       FourStreams(),
       absl::StatusCode::kInvalidArgument,
       "open.streams: 5 streams, but the model has 4"},
      {"unknown role",
       {Spec("tool", v1::STREAM_ROLE_TOOL, v1::STREAM_KIND_INPUT)},
       FourStreams(),
       absl::StatusCode::kInvalidArgument,
       "open.streams[0].role: the model has no \"tool\" stream"},
      {"roles on a model without roles",
       {Spec("user", v1::STREAM_ROLE_USER, v1::STREAM_KIND_INPUT)},
       unnamed,
       absl::StatusCode::kInvalidArgument,
       "open.streams[0].role: the model has no \"user\" stream (no roles)"},
      {"two on one",
       {Spec("a", v1::STREAM_ROLE_UNSPECIFIED, v1::STREAM_KIND_INPUT),
        Spec("b", v1::STREAM_ROLE_SYSTEM, v1::STREAM_KIND_INPUT)},
       FourStreams(),
       absl::StatusCode::kInvalidArgument,
       "open.streams[1]: model stream 0 (\"system\") is already bound to "
       "open.streams[0]"},
  };
  for (const Case& c : cases) {
    v1::SessionOpen open;
    for (const v1::StreamSpec& s : c.streams) *open.add_streams() = s;
    batching::SessionOptions o = Options(open);
    const absl::Status s = BindModelStreams(FromProto(open), c.model, &o);
    EXPECT_EQ(s.code(), c.code) << c.name << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.error)) << c.name;
  }
}

}  // namespace
}  // namespace braid::server
