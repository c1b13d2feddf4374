//===- SpeculativeTest.cpp - KV rollback, speculative sampling, lookup ----===//
#include "runtime/core/KvCache.h"
#include "runtime/cpu/KvAttention.h"
#include "runtime/generate/Speculative.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace qcc::rt;
using nlohmann::json;

namespace {

KvCacheConfig config(const std::string &layout, const std::string &dtype,
                     int64_t Hkv, int64_t D) {
  json c = {{"layout", layout}, {"block_tokens", 4}, {"layers", 2},
            {"kv_heads", Hkv},  {"head_dim", D},     {"dtype", dtype}};
  if (dtype == "i8") {
    c["k_scales"] = std::vector<std::vector<float>>(2, std::vector<float>(Hkv, 0.03f));
    c["v_scales"] = std::vector<std::vector<float>>(2, std::vector<float>(Hkv, 0.02f));
  } else if (dtype == "kivi") { // V scales per token, stored beside the rows
    c["dtype"] = "i8";
    c["scales"] = "kivi";
    c["k_scales"] =
        std::vector<std::vector<float>>(2, std::vector<float>(Hkv * D, 0.03f));
  }
  return KvCacheConfig::fromJson(c);
}

/// What a sequence's cache holds: its live positions' bytes, all layers.
std::vector<char> contents(KvCache &c, int64_t seq) {
  const KvCacheConfig &cfg = c.config();
  std::vector<char> out;
  size_t row = (size_t)cfg.headDim * cfg.elementBytes();
  for (int64_t l = 0; l < cfg.layers; ++l)
    for (int64_t h = 0; h < cfg.kvHeads; ++h)
      for (int64_t p = 0; p < c.length(seq); ++p)
        for (int kv = 0; kv < 2; ++kv) {
          const char *src =
              cfg.isInt8()
                  ? (const char *)(kv ? c.valueI8(seq, l, h, p)
                                      : c.keyI8(seq, l, h, p))
                  : (const char *)(kv ? c.value(seq, l, h, p)
                                      : c.key(seq, l, h, p));
          out.insert(out.end(), src, src + row);
          if (kv && cfg.valueScalePerToken()) {
            const char *scale = (const char *)c.valueScales(seq, l, h, p);
            out.insert(out.end(), scale, scale + sizeof(float));
          }
        }
  return out;
}

} // namespace

// A verify step (S new tokens after a non-empty cache) then a rollback to the
// old length leaves the cache as if the tokens had never been appended: the
// same length, block table and free list, the same bytes in the live
// positions, and the next decode step's output bit for bit. Two rows of one
// batch verify different counts (ragged), one rolls back fully and one keeps
// some tokens.
TEST(KvRollback, VerifyThenRollbackIsBitIdentical) {
  const int64_t H = 4, Hkv = 2, D = 8;
  for (std::string layout : {"paged", "contiguous"})
    for (std::string dtype : {"f32", "i8", "kivi"}) {
      KvCacheOptions opts{/*maxSequences=*/2, /*maxTokens=*/32,
                          /*numBlocks=*/16};
      KvCache a(config(layout, dtype, Hkv, D), opts),
          b(config(layout, dtype, Hkv, D), opts);
      std::mt19937 rng(5);
      std::normal_distribution<float> nd;
      auto rnd = [&](Shape s) {
        Tensor t(DType::F32, s);
        for (int64_t i = 0; i < t.numel(); ++i)
          t.data<float>()[i] = nd(rng);
        return t;
      };
      // One call (both layers) of rows [seqs] with `valid` tokens each.
      auto call = [&](KvCache &c, std::vector<int64_t> valid,
                      std::vector<std::array<Tensor, 3>> &qkv) {
        std::vector<int64_t> seqs = {0, 1};
        KvBatch kv{&c, seqs, valid};
        for (size_t r = 0; r < 2; ++r)
          c.reserve(seqs[r], c.length(seqs[r]) + valid[r]);
        std::vector<Tensor> outs;
        for (int64_t l = 0; l < 2; ++l) {
          json attrs = {{"layer", l}, {"num_heads", H}, {"num_kv_heads", Hkv},
                        {"scale", 0.35}};
          auto &[q, k, v] = qkv[l];
          outs.push_back(kvAttention(Attrs(attrs), {&q, &k, &v}, kv));
        }
        for (size_t r = 0; r < 2; ++r)
          c.advance(seqs[r], valid[r]);
        return outs;
      };
      auto inputs = [&](int64_t S) {
        std::vector<std::array<Tensor, 3>> x;
        for (int l = 0; l < 2; ++l)
          x.push_back({rnd({2, S, H * D}), rnd({2, S, Hkv * D}),
                       rnd({2, S, Hkv * D})});
        return x;
      };
      for (KvCache *c : {&a, &b}) {
        c->addSequence();
        c->addSequence();
      }
      auto prompt = inputs(6);
      call(a, {6, 3}, prompt);
      call(b, {6, 3}, prompt);
      // The extra token row 1 keeps from its verify step.
      auto kept = inputs(1);
      call(b, {0, 1}, kept);
      // Verify on a: row 0 drafts 5 (rejects all), row 1 drafts 3 (keeps 1,
      // whose values equal `kept`'s).
      auto verify = inputs(5);
      for (int l = 0; l < 2; ++l) // row 1, token 0 := kept
          for (int i = 0; i < 3; ++i) {
            Tensor &dst = verify[l][i], &src = kept[l][i];
            int64_t w = dst.dim(2);
            std::memcpy(dst.data<float>() + (1 * 5 + 0) * w,
                        src.data<float>() + (1 * 1 + 0) * w, w * sizeof(float));
          }
      call(a, {5, 3}, verify);
      // Rolled back in the reverse of the reserve order (the session
      // reserves rows in order), the free list is restored exactly.
      a.truncate(1, 4);
      a.truncate(0, 6);
      for (int64_t s : {0, 1}) {
        EXPECT_EQ(a.length(s), b.length(s)) << layout << " " << dtype;
        EXPECT_EQ(contents(a, s), contents(b, s)) << layout << " " << dtype;
        if (a.paged()) {
          EXPECT_EQ(a.blockTable(s), b.blockTable(s));
        }
      }
      EXPECT_EQ(a.freeBlocks(), b.freeBlocks());
      // The next decode step: the same outputs, bit for bit.
      auto step = inputs(1);
      auto oa = call(a, {1, 1}, step), ob = call(b, {1, 1}, step);
      for (int l = 0; l < 2; ++l)
        EXPECT_EQ(std::memcmp(oa[l].data<float>(), ob[l].data<float>(),
                              oa[l].numel() * sizeof(float)),
                  0)
            << layout << " " << dtype << " layer " << l;
      EXPECT_EQ(contents(a, 0), contents(b, 0));
      EXPECT_EQ(contents(a, 1), contents(b, 1));
    }
}

TEST(KvRollback, PagedFreesBlocksInReserveOrder) {
  KvCache c(config("paged", "f32", 1, 4), {1, 0, 6});
  int64_t s = c.addSequence();
  c.reserve(s, 5); // blocks 0, 1
  c.advance(s, 5);
  int64_t freeBefore = c.freeBlocks();
  c.reserve(s, 14); // + blocks 2, 3
  c.advance(s, 9);
  EXPECT_EQ(c.blockTable(s), (std::vector<int64_t>{0, 1, 2, 3}));
  c.truncate(s, 5);
  EXPECT_EQ(c.blockTable(s), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(c.freeBlocks(), freeBefore);
  c.reserve(s, 14); // the same blocks again, in the same order
  EXPECT_EQ(c.blockTable(s), (std::vector<int64_t>{0, 1, 2, 3}));
  c.truncate(s, 0);
  EXPECT_TRUE(c.blockTable(s).empty());
  EXPECT_EQ(c.freeBlocks(), 6);
  try {
    c.truncate(s, 1);
    FAIL() << "no error";
  } catch (const std::exception &e) {
    EXPECT_STREQ(e.what(),
                 "KV cache: sequence 0: cannot roll back to 1 tokens (length 0)");
  }
}

// Greedy (one-hot) rows: drafts are kept while they are the target's argmax,
// and the first mismatch is replaced by the target's token; no randomness.
TEST(SpeculativeSampling, GreedyKeepsTheTargetsArgmax) {
  auto hot = [](int64_t v) {
    std::vector<double> p(5, 0.0);
    p[v] = 1;
    return p;
  };
  std::mt19937_64 rng(1);
  std::vector<int64_t> d = {2, 3, 4};
  // Target argmaxes 2, 3, 1, 0: two kept, then 1.
  Verdict v = verifyDrafts(d, {hot(2), hot(3), hot(1), hot(0)},
                           {hot(2), hot(3), hot(4)}, rng);
  EXPECT_EQ(v.accepted, 2);
  EXPECT_EQ(v.next, 1);
  // All kept: the bonus token.
  v = verifyDrafts(d, {hot(2), hot(3), hot(4), hot(0)}, {}, rng);
  EXPECT_EQ(v.accepted, 3);
  EXPECT_EQ(v.next, 0);
  // Deterministic drafts (lookup): the first rejected.
  v = verifyDrafts(d, {hot(1), hot(3), hot(4), hot(0)}, {}, rng);
  EXPECT_EQ(v.accepted, 0);
  EXPECT_EQ(v.next, 1);
  std::mt19937_64 fresh(1);
  EXPECT_EQ(rng(), fresh()); // greedy drew nothing
}

// The tokens speculative sampling emits follow the target distribution.
// Vocabulary of 6, K = 2 drafts from a proposal q unlike the target p (with
// tokens q gives no mass to and q favours). Over N = 40000 trials per case,
// the first emitted token (the first draft if kept, else the correction) and
// the second (given the first was a kept draft: the next draft or the
// correction/bonus) are tallied; a chi-square goodness-of-fit test against p
// (resp. p's second row) with 5 degrees of freedom must stay below 20.52,
// the 0.001 significance level: with fixed seeds the test is deterministic,
// and a correct sampler fails it for 1 seed in 1000. Deterministic drafts
// (prompt lookup: a point mass) are tested the same way.
TEST(SpeculativeSampling, ChiSquareFollowsTheTarget) {
  const int64_t V = 6, N = 40000;
  const double critical = 20.52; // chi-square, 5 dof, p = 0.001
  std::vector<double> p0 = {0.05, 0.30, 0.10, 0.25, 0.20, 0.10};
  std::vector<double> p1 = {0.40, 0.05, 0.05, 0.20, 0.10, 0.20};
  std::vector<double> p2 = {0.10, 0.10, 0.50, 0.10, 0.10, 0.10};
  std::vector<double> q0 = {0.50, 0.00, 0.10, 0.05, 0.30, 0.05};
  std::vector<double> q1 = {0.05, 0.60, 0.05, 0.10, 0.10, 0.10};
  auto chi2 = [&](const std::vector<int64_t> &count, int64_t total,
                  const std::vector<double> &p) {
    double x = 0;
    for (int64_t v = 0; v < V; ++v) {
      double e = total * p[v];
      x += (count[v] - e) * (count[v] - e) / e;
    }
    return x;
  };
  for (bool pointMass : {false, true}) {
    std::mt19937_64 rng(pointMass ? 11 : 7), draw(99);
    std::vector<int64_t> first(V, 0), second(V, 0);
    int64_t secondTotal = 0;
    // The second token is conditioned on the first: only trials whose first
    // token is a kept draft 4 count (p1 is the target's row after token 4).
    for (int64_t n = 0; n < N; ++n) {
      std::vector<int64_t> d(2);
      std::vector<std::vector<double>> prop;
      if (pointMass) {
        d = {(int64_t)(draw() % V), 1}; // varied first guess, then 1
      } else {
        d[0] = drawFrom(q0, uniform01(draw));
        d[1] = drawFrom(q1, uniform01(draw));
        prop = {q0, q1};
      }
      // Target rows: after nothing p0; after d[0] p1 if it is 4, else p2.
      std::vector<double> after = d[0] == 4 ? p1 : p2;
      Verdict v = verifyDrafts(d, {p0, after, p2}, prop, rng);
      int64_t t0 = v.accepted >= 1 ? d[0] : v.next;
      ++first[t0];
      if (v.accepted >= 1 && d[0] == 4) {
        ++second[v.accepted >= 2 ? d[1] : v.next];
        ++secondTotal;
      }
    }
    EXPECT_LT(chi2(first, N, p0), critical) << "point mass " << pointMass;
    ASSERT_GT(secondTotal, 1000);
    EXPECT_LT(chi2(second, secondTotal, p1), critical)
        << "point mass " << pointMass;
  }
}

TEST(SpeculativeSampling, BadShapes) {
  std::mt19937_64 rng(1);
  std::vector<int64_t> d = {1};
  EXPECT_THROW(verifyDrafts(d, {{1.0}}, {}, rng), std::runtime_error);
  EXPECT_THROW(verifyDrafts(d, {{0.5, 0.5}, {1, 0}}, {{1, 0}, {1, 0}}, rng),
               std::runtime_error);
  std::vector<int64_t> out = {7};
  EXPECT_THROW(verifyDrafts(out, {{0.5, 0.5}, {1, 0}}, {}, rng),
               std::runtime_error);
}

TEST(PromptLookup, ProposesWhatFollowedTheLastNgram) {
  std::vector<int64_t> h = {1, 2, 3, 4, 5, 9, 2, 3};
  // "2 3" occurred at 1: 4 5 9 follow.
  EXPECT_EQ(lookupDrafts(h, {}, 2, 3), (std::vector<int64_t>{4, 5, 9}));
  EXPECT_EQ(lookupDrafts(h, {}, 2, 10),
            (std::vector<int64_t>{4, 5, 9, 2, 3}));
  // The most recent match wins; the continuation may run into the key.
  std::vector<int64_t> rep = {7, 8, 7, 8, 7};
  EXPECT_EQ(lookupDrafts(rep, {}, 1, 4), (std::vector<int64_t>{8, 7}));
  // No match of 3 or 2 tokens in the history: the reference, longest first.
  std::vector<int64_t> g = {6, 6, 5, 1};
  std::vector<int64_t> ref = {0, 5, 1, 2, 3, 4};
  EXPECT_EQ(lookupDrafts(g, ref, 3, 2), (std::vector<int64_t>{2, 3}));
  // Nothing.
  EXPECT_TRUE(lookupDrafts(g, {}, 3, 4).empty());
  EXPECT_TRUE(lookupDrafts(h, {}, 2, 0).empty());
  EXPECT_TRUE(lookupDrafts(std::vector<int64_t>{3}, {}, 2, 4).empty());
}
