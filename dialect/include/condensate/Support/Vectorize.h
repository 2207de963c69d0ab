//===- Vectorize.h - AVX2 clones of hot CPU loops ---------------*- C++ -*-===//
//
// CONDENSATE_AVX2_CLONES marks a function whose loops the compiler
// vectorises: besides the baseline x86-64 (SSE2) build, GCC and Clang emit
// an AVX2 clone and pick one when the library loads (function
// multi-versioning through an ifunc), so a portable build runs 8-wide on
// the CPUs that allow it. No FMA in the clone: it rounds exactly as the
// baseline does. Elsewhere (other ISAs, other compilers) it is empty.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_SUPPORT_VECTORIZE_H
#define CONDENSATE_SUPPORT_VECTORIZE_H

#if defined(__x86_64__) && defined(__ELF__) &&                                \
    (defined(__GNUC__) || defined(__clang__))
#define CONDENSATE_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CONDENSATE_AVX2_CLONES
#endif

#endif // CONDENSATE_SUPPORT_VECTORIZE_H
