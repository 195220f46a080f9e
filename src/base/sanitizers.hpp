#pragma once
// Whether this translation unit is built with AddressSanitizer or ThreadSanitizer: GCC defines
// __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__, Clang answers __has_feature. Each is 1 or 0.
#if defined(__SANITIZE_ADDRESS__)
#define DCALIGN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DCALIGN_ASAN 1
#endif
#endif
#ifndef DCALIGN_ASAN
#define DCALIGN_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define DCALIGN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DCALIGN_TSAN 1
#endif
#endif
#ifndef DCALIGN_TSAN
#define DCALIGN_TSAN 0
#endif
