#include "engine/workspace.h"

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Workspace, LookupsFallThroughToTheParent) {
  Workspace root(nullptr, "root");
  root.SetTensor("a", Tensor::Scalar<int64_t>(1));
  Workspace child(&root, "child");
  EXPECT_TRUE(child.HasBlob("a"));
  EXPECT_EQ(child.GetBlob("a"), root.GetBlob("a"));
  EXPECT_EQ(child.GetBlob("missing"), nullptr);
}

TEST(Workspace, CreateBlobOfAParentNameWritesThrough) {
  Workspace root(nullptr, "root");
  Blob* parent_blob = root.CreateBlob("total");
  Workspace child(&root, "child");
  EXPECT_EQ(child.CreateBlob("total"), parent_blob);
  child.SetTensor("total", Tensor::Scalar<int64_t>(145));
  EXPECT_EQ(root.GetTensor("total").value()->scalar<int64_t>(), 145);
  EXPECT_THAT(child.LocalBlobNames(), ElementsAre());
}

TEST(Workspace, CreateBlobsIsCreateBlobOfEachName) {
  Workspace root(nullptr, "root");
  Blob* inherited = root.CreateBlob("total");
  Workspace child(&root, "child");
  Blob* existing = child.CreateLocalBlob("x");
  const std::vector<absl::string_view> names = {"y", "total", "x", "z", "y"};
  const std::vector<Blob*> blobs = child.CreateBlobs(names);
  ASSERT_EQ(blobs.size(), 5u);
  EXPECT_EQ(blobs[0], child.GetBlob("y"));
  EXPECT_EQ(blobs[1], inherited);
  EXPECT_EQ(blobs[2], existing);
  EXPECT_EQ(blobs[3], child.GetBlob("z"));
  EXPECT_EQ(blobs[4], blobs[0]);  // one blob for a name given twice
  EXPECT_NE(blobs[0], blobs[3]);
  EXPECT_THAT(child.LocalBlobNames(), ElementsAre("x", "y", "z"));
  EXPECT_THAT(root.LocalBlobNames(), ElementsAre("total"));
}

TEST(Workspace, ChildBlobsVanishWithTheChild) {
  Workspace root(nullptr, "root");
  {
    Workspace child(&root, "child");
    child.SetTensor("tmp", Tensor::Scalar<int64_t>(1));
    EXPECT_TRUE(child.HasBlob("tmp"));
  }
  EXPECT_FALSE(root.HasBlob("tmp"));
}

TEST(Workspace, CreateLocalBlobShadowsTheParent) {
  Workspace root(nullptr, "root");
  root.SetTensor("x", Tensor::Scalar<int64_t>(1));
  Workspace child(&root, "child");
  Blob* local = child.CreateLocalBlob("x");
  EXPECT_NE(local, root.GetBlob("x"));
  EXPECT_EQ(child.GetBlob("x"), local);
  EXPECT_FALSE(local->IsInitialized());
}

TEST(Workspace, ListingsAreSortedAndLocalListingIsLocalOnly) {
  Workspace root(nullptr, "root");
  root.CreateBlob("b");
  root.CreateBlob("a");
  Workspace child(&root, "child");
  child.CreateBlob("c");
  child.CreateLocalBlob("a");
  EXPECT_THAT(root.LocalBlobNames(), ElementsAre("a", "b"));
  EXPECT_THAT(child.LocalBlobNames(), ElementsAre("a", "c"));
  EXPECT_THAT(child.BlobNames(), ElementsAre("a", "b", "c"));
}

TEST(Workspace, RemoveBlobIsLocalOnly) {
  Workspace root(nullptr, "root");
  root.CreateBlob("a");
  Workspace child(&root, "child");
  EXPECT_FALSE(child.RemoveBlob("a"));
  EXPECT_TRUE(root.HasBlob("a"));
  EXPECT_TRUE(root.RemoveBlob("a"));
  EXPECT_FALSE(root.HasBlob("a"));
}

TEST(Workspace, GetTensorErrorsNameTheBlobAndWorkspace) {
  Workspace root(nullptr, "trainer_0");
  auto missing = root.GetTensor("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("blob 'nope' does not exist in workspace 'trainer_0'"));
  root.CreateBlob("empty");
  auto uninit = root.GetTensor("empty");
  EXPECT_EQ(uninit.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(uninit.status().message(), HasSubstr("holds uninitialized"));
}

TEST(Workspace, ConcurrentCreatesAndReadsOfDifferentBlobs) {
  Workspace root(nullptr, "root");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&root, t] {
      for (int i = 0; i < 500; ++i) {
        const std::string name = absl::StrCat("t", t, "_", i);
        root.SetTensor(name, Tensor::Scalar<int64_t>(i));
        ASSERT_EQ(root.GetTensor(name).value()->scalar<int64_t>(), i);
        root.LocalBlobNames();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(root.LocalBlobNames().size(), 2000u);
}

}  // namespace
}  // namespace jobgraph
