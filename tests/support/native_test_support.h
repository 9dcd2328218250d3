#ifndef PROTOCOL_TESTS_NATIVE_TEST_SUPPORT_H_
#define PROTOCOL_TESTS_NATIVE_TEST_SUPPORT_H_

// Include this instead of <doctest/doctest.h> in tests that use ATen: Debian's
// libtorch is built with glog, whose CHECK/CHECK_EQ/... macros would silently
// replace doctest's (an aborting check that doctest never counts). ATen comes
// first, glog's macros are dropped, then doctest defines its own.

#include <ATen/ATen.h>

#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LE
#undef CHECK_LT
#undef CHECK_GE
#undef CHECK_GT

#include <doctest/doctest.h>

#endif  // PROTOCOL_TESTS_NATIVE_TEST_SUPPORT_H_
