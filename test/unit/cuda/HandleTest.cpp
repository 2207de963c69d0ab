//===- HandleTest.cpp - Tests of the RAII driver handle template ----------===//
//
// Handle<Traits> over a fake resource that counts its destructions, and the
// moved-from state of real driver classes that need no driver to build.
//
//===----------------------------------------------------------------------===//
#include "condensate/Cuda/Handle.h"
#include "condensate/Cuda/Driver.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

using namespace condensate::cuda;

namespace {

/// A fake resource: ids, with 0 the empty value; destroying records the id.
std::vector<int> destroyedIds;
void destroyFake(int raw) noexcept { destroyedIds.push_back(raw); }
using FakeHandle = Handle<int, destroyFake>;

class HandleTest : public ::testing::Test {
protected:
  void SetUp() override { destroyedIds.clear(); }
  const std::vector<int> &destroyed() { return destroyedIds; }
};

TEST_F(HandleTest, DestroysOnceWhatItOwns) {
  {
    FakeHandle empty;
    EXPECT_TRUE(empty.empty());
    FakeHandle one(1);
    EXPECT_FALSE(one.empty());
    EXPECT_EQ(one.get(), 1);
  }
  EXPECT_EQ(destroyed(), std::vector<int>{1}); // the empty one: nothing
}

TEST_F(HandleTest, MovesTransferOwnership) {
  {
    FakeHandle a(1);
    FakeHandle b(std::move(a));
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(b.get(), 1);
    FakeHandle c(2);
    c = std::move(b); // destroys 2, takes 1
    EXPECT_TRUE(b.empty());
    EXPECT_EQ(destroyed(), std::vector<int>{2});
    c = std::move(c); // self-assignment keeps it
    EXPECT_EQ(c.get(), 1);
  }
  EXPECT_EQ(destroyed(), (std::vector<int>{2, 1}));
}

TEST_F(HandleTest, ResetReleaseAndOut) {
  FakeHandle h;
  *h.out() = 3; // as a creating driver call writes its result
  EXPECT_EQ(h.get(), 3);
  h.reset(4);
  EXPECT_EQ(destroyed(), std::vector<int>{3});
  EXPECT_EQ(h.release(), 4);
  EXPECT_TRUE(h.empty());
  h.reset();
  EXPECT_EQ(destroyed(), std::vector<int>{3}); // released: not destroyed
}

TEST(HostCudaTest, MovedFromObjectsAreEmpty) {
  // A borrowed stream is never destroyed, so this needs no driver.
  Stream borrowed = Stream::borrow(nullptr, 3);
  EXPECT_TRUE(borrowed.valid());
  EXPECT_EQ(borrowed.device(), 3);
  Stream taken = std::move(borrowed);
  EXPECT_TRUE(taken.valid());
  EXPECT_EQ(taken.device(), 3);
  EXPECT_FALSE(borrowed.valid());
  EXPECT_EQ(borrowed.device(), -1);

  DeviceBuffer buffer;
  EXPECT_EQ(buffer.size(), 0u);
  EXPECT_EQ(buffer.address(), 0u);
  Context context;
  EXPECT_FALSE(context.valid());
  EXPECT_EQ(context.device(), -1);
}

} // namespace
