//===- StudyGroup.cpp - One group of prompts under each study policy ------===//
//
// The rows of Study.cpp's file comment as lanes of one decoder::Batch per
// policy: the dense reference run greedy (answer and natural rows) and
// keeps its tokens and first logits; every other policy is teacher-forced
// on them, forks a greedy lane where a QA answer first diverges, and is
// scored on the real continuation of natural text. The batch pads every
// step to three rows so each row's logits are those it would get alone.
//
//===----------------------------------------------------------------------===//
#include "StudyParts.h"

#include "condensate/Model/Tokenizer.h"
#include "condensate/Runtime/Reference.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>

namespace condensate::study {

using namespace condensate::decoder;

namespace {

using Clock = std::chrono::steady_clock;

/// What a lane of the batch is for.
enum class RowKind {
  Answer,  ///< QA prompt: dense greedy, or teacher-forced on its answer
  Natural, ///< natural text: dense greedy, or teacher-forced on it
  Real,    ///< natural text: teacher-forced on the real continuation
  Greedy,  ///< the policy's own answer after it diverged
};

struct RowInfo {
  RowKind kind;
  size_t prompt;
  bool diverged = false;
};

/// The dense tokens to feed a teacher-forced lane, or a greedy lane's
/// limits.
Lane forcedLane(const std::vector<int32_t> &tokens) {
  Lane l;
  l.feed = Lane::Feed::Forced;
  l.tokens = tokens;
  l.limit = int64_t(tokens.size()) - 1; // the last one is only predicted
  return l;
}

/// The fewest positions an oracle that knows the exact scores must attend
/// so that the softmax mass it leaves out is <= tau: the positions in
/// decreasing probability until the rest sums to <= tau (float64, over the
/// f32 cache of one query head of a sequence; `kRows` [n] point at the
/// keys).
int64_t oracleTokens(const float *q, const std::vector<const float *> &kRows,
                     int64_t d, double scale, double tau) {
  const size_t n = kRows.size();
  std::vector<double> p(n);
  double mx = -INFINITY;
  for (size_t t = 0; t < n; ++t) {
    double dot = 0.0;
    for (int64_t c = 0; c < d; ++c)
      dot += double(q[c]) * double(kRows[t][c]);
    p[t] = dot * scale;
    mx = std::max(mx, p[t]);
  }
  double z = 0.0;
  for (double &v : p)
    z += (v = std::exp(v - mx));
  std::sort(p.begin(), p.end(), std::greater<double>());
  // Omitted mass after keeping m positions: the tail sum, from the small end.
  int64_t m = int64_t(n);
  double tail = 0.0;
  while (m > 0 && (tail + p[size_t(m - 1)]) / z <= tau)
    tail += p[size_t(--m)];
  return m;
}

Lane greedyLane(std::vector<int32_t> tokens, int64_t limit, bool stopAtEos) {
  Lane l;
  l.tokens = std::move(tokens);
  l.limit = limit;
  l.stopAtEos = stopAtEos;
  return l;
}

} // namespace

GroupRunner::GroupRunner(const StudyOptions &o, const model::Tokenizer &tok,
                         Decoder &dec,
                         const std::vector<const PromptRecord *> &prompts,
                         const std::vector<std::vector<int32_t>> &promptIds)
    : o_(o), tok_(tok), dec_(dec), prompts_(prompts), ids_(promptIds),
      V_(dec.config().vocab) {}

Status GroupRunner::prefill() {
  for (size_t p = 0; p < prompts_.size(); ++p) {
    int64_t s = dec_.newSequence();
    std::vector<float> logits(static_cast<size_t>(V_));
    CONDENSATE_RETURN_IF_ERROR(
        dec_.prefill(s, ids_[p].data(), int64_t(ids_[p].size()), logits.data())
            .withContext("prefill " + prompts_[p]->id));
    bases_.push_back(s);
    prefillLogits_.push_back(std::move(logits));
  }
  // Pads: a short sequence, forked per pad row.
  std::vector<int32_t> pad = tok_.encode("The quick brown fox jumps over");
  padBase_ = dec_.newSequence();
  return dec_.prefill(padBase_, pad.data(), int64_t(pad.size()), nullptr);
}

Status GroupRunner::releaseBases() {
  for (int64_t s : bases_)
    CONDENSATE_RETURN_IF_ERROR(dec_.release(s));
  bases_.clear();
  if (padBase_ >= 0)
    CONDENSATE_RETURN_IF_ERROR(dec_.release(padBase_));
  padBase_ = -1;
  return Status::success();
}


void GroupRunner::sampleOmittedMass(const PolicyDef &policy, int64_t b,
                                    int64_t batch, int64_t seq,
                                    const std::vector<Acc *> &accs) const {
  const ModelShape &s = dec_.shape();
  const int64_t L = s.numLayers, Hq = s.qHeads, Hkv = s.kvHeads,
                D = s.headDim, G = s.group();
  const std::vector<int32_t> &pages = dec_.pages(seq);
  const std::vector<int32_t> &tokens = dec_.tokens(seq);
  const int32_t len = int32_t(tokens.size());
  const double rep =
      repetitionScore(tokens.data(), len, dec_.options().repetitionSpan);
  const std::vector<float> &q = dec_.lastQueries();
  const std::vector<float> &stats = dec_.stats();
  constexpr int64_t F = Decoder::kStatFields;
  for (int64_t l = 0; l < L; ++l) {
    // A model's local layers keep their window whatever the study's policy
    // says (withModelRoles): that window is the model's own attention (the
    // baseline of bytes read), so they omit nothing and are not sampled.
    // Every other layer ran the study's policy.
    if (dec_.config().localLayer(l))
      continue;
    std::vector<Policy> kv;
    bool anySparse = false;
    for (int64_t g = 0; g < Hkv; ++g) {
      kv.push_back(policy.schedule.policyFor(l, g));
      anySparse |= !kv.back().dense;
    }
    if (!anySparse)
      continue;
    const int32_t window = int32_t(policy.schedule.policyFor(l, 0).windowFor(rep));
    Decoder::CacheView c = dec_.cache(l);
    reference::Inputs in = reference::inputsFor(s);
    in.batch = 1;
    in.maxPages = int64_t(pages.size());
    in.q = q.data() + (l * batch + b) * Hq * D;
    in.k = static_cast<const float *>(c.k);
    in.v = static_cast<const float *>(c.v);
    in.pageTable = pages.data();
    in.lens = &len;
    in.windows = &window;
    in.summaries = c.summaries;
    in.numPages = c.numPages;
    const float *st = stats.data() + (l * batch + b) * Hq * F;
    std::vector<reference::Decision> decisions(static_cast<size_t>(Hkv));
    for (int64_t g = 0; g < Hkv; ++g) {
      decisions[size_t(g)].extra = int64_t(st[g * G * F + 2]);
      decisions[size_t(g)].fallback = st[g * G * F + 3] != 0.0f;
    }
    reference::Output out = reference::attend(in, kv, &decisions);
    // The oracle of each certified head, over the key rows of the sequence;
    // a group's set serves all its heads, so its worst head bounds any set
    // one read of the group's K/V rows could use.
    std::vector<int64_t> oracle(size_t(Hq), 0), groupOracle(size_t(Hkv), 0);
    std::vector<const float *> kRows;
    for (int64_t g = 0; g < Hkv; ++g) {
      const Policy &p = kv[size_t(g)];
      if (!p.certified())
        continue;
      kRows.clear();
      for (int32_t t = 0; t < len; ++t)
        kRows.push_back(
            in.k +
            ((int64_t(pages[size_t(t / s.pageSize)]) * Hkv + g) * s.pageSize +
             t % s.pageSize) *
                D);
      for (int64_t h = g * G; h < (g + 1) * G; ++h) {
        oracle[size_t(h)] =
            oracleTokens(in.q + h * D, kRows, D, in.scale, p.tau);
        groupOracle[size_t(g)] =
            std::max(groupOracle[size_t(g)], oracle[size_t(h)]);
      }
    }
    for (int64_t h = 0; h < Hq; ++h) {
      const Policy &p = kv[size_t(h / G)];
      if (p.dense)
        continue;
      if (p.certified()) {
        const bool fellBack = st[h * F + 3] != 0.0f;
        const double read = fellBack ? double(len) : double(st[h * F + 1]);
        for (Acc *a : accs) {
          a->oracleFraction += double(oracle[size_t(h)]) / double(len);
          a->groupOracleFraction +=
              double(groupOracle[size_t(h / G)]) / double(len);
          a->certifiedFraction += read / double(len);
          ++a->oracleSamples;
        }
      }
      const double eps = out.heads[size_t(h)].epsTrue;
      for (Acc *a : accs) {
        a->epsTrue.push_back(eps);
        a->epsAboveUlp += eps > 5.9604644775390625e-08;
        if (p.certified() && !std::isnan(st[h * F])) {
          ++a->epsChecked;
          const double hat = st[h * F];
          a->epsViolations += eps > hat;
          if (hat > 0)
            a->worstEpsRatio = std::max(a->worstEpsRatio, eps / hat);
        }
      }
    }
  }
}

Status GroupRunner::run(const PolicyDef &policy,
                        std::shared_ptr<const AttentionProgram> program,
                        const std::vector<Acc *> &accs) {
  const bool reference = !haveReference_;
  if (policy.threads > 0)
    openblas_set_num_threads(policy.threads);
  const Clock::time_point start = Clock::now();

  if (reference)
    refs_.assign(prompts_.size(), Reference());
  const StopTokens stop(tok_);
  BatchOptions bopts;
  bopts.stop = &stop;
  bopts.minRows = 3;
  bopts.padFrom = padBase_;
  for (Acc *a : accs)
    bopts.stats.push_back(&*a->attention);
  Batch batch(dec_, std::move(program), bopts);
  std::deque<RowInfo> rows; ///< per lane (stable while lanes are added)
  auto add = [&](Lane lane, int64_t from, RowInfo info) -> Result<size_t> {
    Result<size_t> i = batch.start(std::move(lane), from);
    if (i)
      rows.push_back(info);
    return i;
  };

  std::vector<CaseRecord> records(prompts_.size());
  std::vector<size_t> mainLane(prompts_.size());
  for (size_t p = 0; p < prompts_.size(); ++p) {
    const PromptRecord &pr = *prompts_[p];
    CaseRecord &rec = records[p];
    rec.prompt = pr.id;
    rec.task = pr.task;
    rec.context = pr.context;
    rec.depth = pr.depth;
    // Every policy shares the dense prefill, hence the first token.
    Lane lane = reference
                    ? greedyLane({argmax(prefillLogits_[p].data(), V_)},
                                 isQA(p) ? o_.answerTokens : o_.naturalTokens,
                                 /*stopAtEos=*/isQA(p))
                    : forcedLane(refs_[p].gen);
    Result<size_t> i = add(std::move(lane), bases_[p],
                           {isQA(p) ? RowKind::Answer : RowKind::Natural, p});
    if (!i)
      return i.status();
    mainLane[p] = *i;
    if (!isQA(p)) {
      // The first real token's NLL comes from the shared prefill logits.
      rec.nll = nll(prefillLogits_[p].data(), V_, pr.continuation[0]);
      rec.nllTokens = 1;
      Result<size_t> r =
          add(forcedLane(pr.continuation), bases_[p], {RowKind::Real, p});
      if (!r)
        return r.status();
    }
  }

  auto observe = [&](Lane &lane, const Batch::Row &row) -> Status {
    RowInfo &info = rows[row.lane];
    CaseRecord &rec = records[info.prompt];
    const float *lg = row.logits;
    switch (info.kind) {
    case RowKind::Answer:
    case RowKind::Natural: {
      const bool answer = info.kind == RowKind::Answer;
      Reference &ref = refs_[info.prompt];
      const bool metric = answer || row.step < o_.metricSteps;
      if (reference) {
        if (metric)
          ref.logits.insert(ref.logits.end(), lg, lg + V_);
        // How near a tie each of dense's greedy choices is.
        float best = -INFINITY, second = -INFINITY;
        for (int64_t v = 0; v < V_; ++v)
          if (lg[v] > best) {
            second = best;
            best = lg[v];
          } else if (lg[v] > second) {
            second = lg[v];
          }
        if (ref.gap.size() <= size_t(row.step))
          ref.gap.resize(size_t(row.step) + 1, NAN);
        ref.gap[size_t(row.step)] = best - second;
        break;
      }
      if (metric) {
        const TokenComparison c =
            compareLogits(ref.logits.data() + row.step * V_, lg, V_);
        for (Acc *a : accs)
          a->tf.add(c);
      }
      if (row.argmax != ref.gen[size_t(row.step + 1)] && !info.diverged) {
        info.diverged = true;
        rec.divergence = row.step + 1;
        if (size_t(row.step) < ref.gap.size())
          rec.denseGap = ref.gap[size_t(row.step)];
        rec.policyGap = lg[row.argmax] - lg[ref.gen[size_t(row.step + 1)]];
        if (answer) {
          // The policy's own answer continues greedily from here.
          std::vector<int32_t> own(ref.gen.begin(),
                                   ref.gen.begin() + row.step + 1);
          own.push_back(row.argmax);
          Result<size_t> g =
              add(greedyLane(std::move(own), o_.answerTokens, true), lane.seq,
                  {RowKind::Greedy, info.prompt});
          if (!g)
            return g.status();
          if (batch.lane(*g).done)
            rec.answer = tok_.decode(batch.lane(*g).tokens, false);
        }
      }
      if (!answer && (info.diverged || !policy.survival) &&
          lane.steps >= o_.metricSteps)
        lane.done = true;
      break;
    }
    case RowKind::Real:
      rec.nll += nll(lg, V_, lane.tokens[size_t(row.step + 1)]);
      ++rec.nllTokens;
      if (!reference && row.step == 0)
        sampleOmittedMass(policy, row.index, row.rows, lane.seq, accs);
      break;
    case RowKind::Greedy:
      if (lane.done)
        rec.answer = tok_.decode(lane.tokens, false);
      break;
    }
    return Status::success();
  };
  dec_.resetProfile();
  Status ran = batch.run(observe);
  CONDENSATE_RETURN_IF_ERROR(ran.withContext(policy.name));
  CONDENSATE_RETURN_IF_ERROR(batch.finish());
  if (policy.threads > 0)
    openblas_set_num_threads(o_.threads);

  // Case outcomes.
  for (size_t p = 0; p < prompts_.size(); ++p) {
    if (reference)
      refs_[p].gen = batch.lane(mainLane[p]).tokens;
    CaseRecord &rec = records[p];
    const Reference &ref = refs_[p];
    rec.compared = int64_t(ref.gen.size());
    if (isQA(p)) {
      if (rec.divergence < 0)
        rec.answer = tok_.decode(ref.gen, false);
      rec.correct = scoreAnswer(rec.task, prompts_[p]->answer, rec.answer);
    }
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  const StepProfile &prof = dec_.profile();
  for (Acc *a : accs) {
    a->cases.insert(a->cases.end(), records.begin(), records.end());
    a->seconds += seconds;
    a->stepSeconds += prof.total;
    a->attentionSeconds += prof.attention;
    a->steps += batch.steps();
    a->rowSteps += batch.rowSteps();
  }
  haveReference_ = true;
  return Status::success();
}

Result<bool> checkBatchInvariance(Decoder &dec,
                                  const model::Tokenizer &tok) {
  std::vector<int32_t> ids = tok.encode(
      "Batch invariance: a row's logits must not depend on its neighbours.");
  const int64_t base = dec.newSequence();
  CONDENSATE_RETURN_IF_ERROR(
      dec.prefill(base, ids.data(), int64_t(ids.size()), nullptr));
  const int64_t V = dec.config().vocab;
  // One step of a batch of forks of `base`, row i fed feed[i].
  auto runBatch = [&](const std::vector<int32_t> &feed)
      -> Result<std::vector<float>> {
    Batch batch(dec, nullptr);
    for (int32_t t : feed) {
      Lane lane;
      lane.feed = Lane::Feed::Forced;
      lane.tokens = {t};
      lane.limit = 1;
      Result<size_t> i = batch.start(std::move(lane), base);
      if (!i)
        return i.status();
    }
    std::vector<float> logits(feed.size() * size_t(V));
    CONDENSATE_RETURN_IF_ERROR(batch.step([&](Lane &, const Batch::Row &row) {
      std::copy(row.logits, row.logits + V, logits.begin() + row.index * V);
      return Status::success();
    }));
    CONDENSATE_RETURN_IF_ERROR(batch.finish());
    return logits;
  };
  Result<std::vector<float>> big = runBatch({100, 200, 300, 400, 500, 600, 700});
  Result<std::vector<float>> small = runBatch({600, 300, 100});
  CONDENSATE_RETURN_IF_ERROR(dec.release(base));
  if (!big)
    return big.status();
  if (!small)
    return small.status();
  auto same = [&](int64_t bigRow, int64_t smallRow) {
    return std::memcmp(big->data() + bigRow * V, small->data() + smallRow * V,
                       size_t(V) * sizeof(float)) == 0;
  };
  return same(5, 0) && same(2, 1) && same(0, 2);
}

} // namespace condensate::study
