// Compiles and runs against @gradwire//:gradwire from outside the project:
// the public header resolves under the gradwire/ prefix and the library links.
#include "gradwire/gradwire.h"

#include <gtest/gtest.h>

#include <vector>

TEST(ConsumerTest, HostBufferDispatchesToTheCpu) {
  std::vector<float> v(16, 1.0f);
  EXPECT_EQ(gradwire::kernels::Locate(v.data()), gradwire::kernels::Location::kHost);
}
