// mma_sp_layout.cu - reads the register layout of int8 mma.sp m16n8k64 off
// the GPU and compares it with what gemm_sp.cuh assumes (needs a GPU; built
// there with nvcc, no LLVM: scripts/gpu_bundle.sh's run.sh does it).
//
//   nvcc -std=c++17 -arch=sm_90 -I. test/e2e/mma_sp_layout.cu -o mma_sp_layout
//
// The PTX ISA gives the sparse operand A's fragment as formulas but the
// dense operand B and the metadata of m16n8k64 .s8 only as figures; the
// first GPU run (docs/GPU_NOTES.md) found gemm_i8_sp wrong while gemm_f16_sp
// (m16n8k32) was right. This probe trusts only A's documented formula and
// the accumulator layout (both as m16n8k32 .s8's), then finds:
//  1. B: for each (lane, byte) of the four B registers, the (k, n) it is,
//     by one-hot B against A whose compressed column c holds c + 1, under a
//     uniform metadata (every group keeps 0,1; then 2,3), so the metadata
//     layout does not matter yet;
//  2. the metadata: for each (lane, nibble), the (row, group) it selects, by
//     changing that one nibble from (0,1) to (2,3) against a B whose
//     group-g values are weighted by (k % 4) in column g % 8 (x9 for g >= 8).
// Prints the layouts found, the lanes that disagree with sparse_fragment.h
// and the B assignment in gemm_sp.cuh, and exits 1 on any disagreement.
#include "codegen/kernels/sparse_fragment.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t err_ = (x);                                                    \
    if (err_ != cudaSuccess) {                                                 \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(err_));          \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

typedef unsigned int u32;

struct Probe {
  u32 a[32][4], b[32][4], e[32];
};
struct Result {
  int d[32][4];
};

__global__ void probe(const Probe *p, Result *r) {
  const Probe &q = p[blockIdx.x];
  const int lane = threadIdx.x;
  int d[4] = {0, 0, 0, 0};
  asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col."
               "s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(q.a[lane][0]), "r"(q.a[lane][1]), "r"(q.a[lane][2]),
                 "r"(q.a[lane][3]), "r"(q.b[lane][0]), "r"(q.b[lane][1]),
                 "r"(q.b[lane][2]), "r"(q.b[lane][3]), "r"(q.e[lane]));
  for (int i = 0; i < 4; ++i)
    r[blockIdx.x].d[lane][i] = d[i];
}

static std::vector<Result> runAll(const std::vector<Probe> &ps) {
  Probe *dp;
  Result *dr;
  CHECK(cudaMalloc(&dp, ps.size() * sizeof(Probe)));
  CHECK(cudaMalloc(&dr, ps.size() * sizeof(Result)));
  CHECK(cudaMemcpy(dp, ps.data(), ps.size() * sizeof(Probe),
                   cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dr, 0x7f, ps.size() * sizeof(Result))); // poison
  probe<<<(unsigned)ps.size(), 32>>>(dp, dr);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<Result> rs(ps.size());
  CHECK(cudaMemcpy(rs.data(), dr, rs.size() * sizeof(Result),
                   cudaMemcpyDeviceToHost));
  CHECK(cudaFree(dp));
  CHECK(cudaFree(dr));
  return rs;
}

// D[m][n] from the accumulators (m16n8 .s32: c0, c1 row g, columns 2t,
// 2t+1; c2, c3 row g+8).
static void dense(const Result &r, int D[16][8]) {
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i)
      D[lane / 4 + 8 * (i / 2)][2 * (lane % 4) + i % 2] = r.d[lane][i];
}

// A (trusted, as m16n8k32 .s8's A): register r of lane holds row
// g + 8 (r & 1), compressed columns 4t + 16 (r >> 1) + byte.
static void setA(Probe &p, int (*value)(int row, int c)) {
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r) {
      u32 w = 0;
      for (int j = 0; j < 4; ++j) {
        int row = lane / 4 + 8 * (r & 1), c = 4 * (lane % 4) + 16 * (r >> 1) + j;
        w |= (u32)(unsigned char)(signed char)value(row, c) << (8 * j);
      }
      p.a[lane][r] = w;
    }
}

int main() {
  int failures = 0;
  // 1. B's layout.
  int bK[32][16], bN[32][16]; // lane, byte (4 r + j) -> k, n
  std::memset(bK, -1, sizeof bK);
  std::memset(bN, -1, sizeof bN);
  for (int kept = 0; kept < 2; ++kept) {
    std::vector<Probe> ps;
    for (int lane = 0; lane < 32; ++lane)
      for (int byte = 0; byte < 16; ++byte) {
        Probe p;
        std::memset(&p, 0, sizeof p);
        setA(p, [](int, int c) { return c + 1; });
        for (int l = 0; l < 32; ++l)
          p.e[l] = kept ? 0xEEEEEEEEu : 0x44444444u;
        p.b[lane][byte / 4] = 1u << (8 * (byte % 4));
        ps.push_back(p);
      }
    std::vector<Result> rs = runAll(ps);
    for (int lane = 0; lane < 32; ++lane)
      for (int byte = 0; byte < 16; ++byte) {
        int D[16][8];
        dense(rs[lane * 16 + byte], D);
        for (int n = 0; n < 8; ++n)
          if (D[0][n] != 0) {
            int c = D[0][n] - 1;
            bK[lane][byte] = 4 * (c / 2) + 2 * kept + c % 2;
            bN[lane][byte] = n;
          }
      }
  }
  std::printf("B (lane: reg.byte -> k,n), lanes 0-7:\n");
  for (int lane = 0; lane < 8; ++lane) {
    std::printf("  lane %2d:", lane);
    for (int byte = 0; byte < 16; ++byte)
      std::printf(" %d.%d->%d,%d", byte / 4, byte % 4, bK[lane][byte],
                  bN[lane][byte]);
    std::printf("\n");
  }
  int bMismatch = 0;
  for (int lane = 0; lane < 32; ++lane)
    for (int byte = 0; byte < 16; ++byte) {
      // gemm_sp.cuh: b[r] byte j = x[token g][k = 4t + 16 r + j].
      int k = 4 * (lane % 4) + 16 * (byte / 4) + byte % 4, n = lane / 4;
      if (bK[lane][byte] != k || bN[lane][byte] != n)
        ++bMismatch;
    }
  std::printf("B: %d of 512 (lane, byte) differ from gemm_sp.cuh's\n",
              bMismatch);
  failures += bMismatch != 0;

  // 2. The metadata's layout, with B built from what step 1 found.
  auto setB = [&](Probe &p, int (*value)(int k, int n)) {
    for (int lane = 0; lane < 32; ++lane)
      for (int r = 0; r < 4; ++r) {
        u32 w = 0;
        for (int j = 0; j < 4; ++j) {
          int k = bK[lane][4 * r + j], n = bN[lane][4 * r + j];
          if (k >= 0)
            w |= (u32)(unsigned char)(signed char)value(k, n) << (8 * j);
        }
        p.b[lane][r] = w;
      }
  };
  auto bValue = [](int k, int n) {
    int g = k / 4;
    return g % 8 == n ? (g >= 8 ? 9 : 1) * (k % 4) : 0;
  };
  std::vector<Probe> ps;
  Probe base;
  std::memset(&base, 0, sizeof base);
  setA(base, [](int, int) { return 1; });
  setB(base, bValue);
  for (int l = 0; l < 32; ++l)
    base.e[l] = 0x44444444u;
  ps.push_back(base);
  for (int lane = 0; lane < 32; ++lane)
    for (int nib = 0; nib < 8; ++nib) {
      Probe p = base;
      p.e[lane] = (p.e[lane] & ~(0xFu << (4 * nib))) | (0xEu << (4 * nib));
      ps.push_back(p);
    }
  std::vector<Result> rs = runAll(ps);
  int D0[16][8];
  dense(rs[0], D0);
  int eMismatch = 0, ignored = 0;
  std::printf("metadata (lane: nibble -> row,group), lanes 0-7:\n");
  for (int lane = 0; lane < 32; ++lane) {
    if (lane < 8)
      std::printf("  lane %2d:", lane);
    for (int nib = 0; nib < 8; ++nib) {
      int D[16][8];
      dense(rs[1 + lane * 8 + nib], D);
      int row = -1, group = -1, changes = 0;
      for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n)
          if (D[m][n] != D0[m][n]) {
            ++changes;
            row = m;
            group = n + (D[m][n] - D0[m][n] == 36 ? 8 : 0);
          }
      if (changes != 1) {
        row = group = -1;
        ++ignored;
      }
      if (lane < 8)
        std::printf(" %d->%d,%d", nib, row, group);
      // Where sparse_fragment.h's register takes this nibble from: mark
      // one nibble of one word of rows g / g+8 at a time.
      int expRow = -2, expGroup = -2;
      for (int src = 0; src < 2; ++src)
        for (int w = 0; w < 2; ++w)
          for (int q = 0; q < 8; ++q) {
            u32 rows[2][2] = {{0x11111111u, 0x11111111u},
                              {0x11111111u, 0x11111111u}};
            rows[src][w] = (rows[src][w] & ~(0xFu << (4 * q))) | (0x2u << (4 * q));
            u32 reg =
                qcc::sparse_fragment::metaRegister<2>(rows[0], rows[1], 0, lane);
            if (((reg >> (4 * nib)) & 0xF) == 0x2) {
              expRow = lane / 4 + 8 * src;
              expGroup = 8 * w + q;
            }
          }
      if (row != expRow || group != expGroup)
        ++eMismatch;
    }
    if (lane < 8)
      std::printf("\n");
  }
  std::printf("metadata: %d of 256 (lane, nibble) differ from "
              "sparse_fragment.h's (%d had no single effect)\n",
              eMismatch, ignored);
  failures += eMismatch != 0;
  std::printf("mma.sp m16n8k64 s8 layout: %s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
