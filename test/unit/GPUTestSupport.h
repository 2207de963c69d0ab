//===- GPUTestSupport.h - skipping GPU tests without a GPU ------*- C++ -*-===//
//
// REQUIRE_GPU(): the first line of every GPU test. Skips, saying why, when
// no CUDA driver or no device is present, so the suites pass on CI.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_TEST_GPUTESTSUPPORT_H
#define CONDENSATE_TEST_GPUTESTSUPPORT_H

#include "condensate/Cuda/Driver.h"

#include <gtest/gtest.h>

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    auto requireGpuDriver = ::condensate::cuda::Driver::get();                 \
    if (!requireGpuDriver.ok())                                                \
      GTEST_SKIP() << "no CUDA driver: " << requireGpuDriver.message();       \
    if ((*requireGpuDriver)->deviceCount() == 0)                               \
      GTEST_SKIP() << "no CUDA device";                                        \
  } while (0)

#endif // CONDENSATE_TEST_GPUTESTSUPPORT_H
