//===- X86Intrinsics.h - <immintrin.h> for the AVX-512 kernels -*- C++ -*-===//
//
// gcc 12 reports _mm512_undefined_ps's self-initialized register
// (`__m512 __Y = __Y;`) as used uninitialized wherever an intrinsic with an
// undefined pass-through is inlined (GCC bug 105593, fixed in gcc 13). It
// reports it at the header's line, so ignoring it over the include silences
// only that, not the kernels' own code.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_X86INTRINSICS_H
#define QCC_RUNTIME_X86INTRINSICS_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#endif // QCC_RUNTIME_X86INTRINSICS_H
