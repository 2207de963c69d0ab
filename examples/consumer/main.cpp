// A minimal engine using condensate through its exported CMake package:
// compile a policy for the CPU in-process, fill a paged KV cache with the
// generated append kernel, run one decode-attention step and compare it
// with the float64 reference. Prints one line and exits 0 on success.
#include "condensate/Compiler/CPUProgram.h"
#include "condensate/Compiler/Compiler.h"
#include "condensate/Runtime/Reference.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

using namespace condensate;

int main() {
  ModelShape shape{1, 8, 2, 64, 16, KVType::F32, 0.0f};
  auto schedule = parseSchedule(
      "#condensate.policy<anchor = 1, window = 32, topk = 64, "
      "selector = block_minmax, page_size = 16>",
      1, "consumer policy");
  if (!schedule.ok()) {
    std::fprintf(stderr, "consumer: %s\n", schedule.message().c_str());
    return 1;
  }
  auto program = CPUProgram::compile(shape, *schedule);
  if (!program.ok()) {
    std::fprintf(stderr, "consumer: %s\n", program.message().c_str());
    return 1;
  }
  const int64_t n = 500, pages = 32, d = 64;
  std::vector<float> k(pages * 2 * 16 * d), v(k.size()), sum(pages * 2 * 5 * d);
  std::vector<int32_t> table(pages);
  for (int32_t i = 0; i < pages; ++i)
    table[i] = i;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (int32_t pos = 0; pos < n; ++pos) {
    std::vector<float> kn(2 * d), vn(2 * d);
    for (float &x : kn)
      x = normal(rng);
    for (float &x : vn)
      x = normal(rng);
    AppendArgs a{1, pages, pages, kn.data(), vn.data(), k.data(), v.data(),
                 table.data(), &pos, sum.data()};
    if (Status st = (*program)->append(a); !st.ok()) {
      std::fprintf(stderr, "consumer: %s\n", st.message().c_str());
      return 1;
    }
  }
  std::vector<float> q(8 * d), out(8 * d), stats(8 * kAttentionStatsWidth);
  for (float &x : q)
    x = normal(rng);
  int32_t len = n;
  AttentionArgs a{1, pages, pages, q.data(), k.data(), v.data(), table.data(),
                  &len, nullptr, sum.data(), out.data(), stats.data()};
  if (Status st = (*program)->attend(0, a); !st.ok()) {
    std::fprintf(stderr, "consumer: %s\n", st.message().c_str());
    return 1;
  }
  reference::Inputs in;
  in.batch = 1;
  in.qHeads = 8;
  in.kvHeads = 2;
  in.headDim = d;
  in.pageSize = 16;
  in.maxPages = pages;
  in.scale = shape.effectiveScale();
  in.q = q.data();
  in.k = k.data();
  in.v = v.data();
  in.pageTable = table.data();
  in.lens = &len;
  auto ref = reference::attend(in, {schedule->policyFor(0, 0),
                                    schedule->policyFor(0, 1)});
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    num += (out[i] - ref.out[i]) * (out[i] - ref.out[i]);
    den += ref.out[i] * ref.out[i];
  }
  double rel = std::sqrt(num / den);
  std::printf("consumer: generated kernels match the float64 reference, "
              "relative error %.1e (%g positions attended of %lld)\n",
              rel, stats[1], static_cast<long long>(n));
  return rel < 1e-5 ? 0 : 1;
}
